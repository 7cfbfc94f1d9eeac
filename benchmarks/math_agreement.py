r"""Agreement of `trl_ada.rewards.math_reward` with math-verify, and its time per case.

The case set, `benchmarks/data/math_cases.jsonl`, holds (gold answer, prediction, label) triples written for this
benchmark: one line each with `id`, `category`, `gold` (as a dataset stores it), `prediction` (the model's final
answer in math mode: boxed, possibly inside a sentence, `$...$`, or bare) and `label` (1 when the prediction is
right, checked by hand). Each prediction goes into a completion (a boxed one as written, any other inside
`\boxed{}`) and is scored by `math_reward`; math-verify scores the pair the way its own tests do: `parse` of gold
and prediction with `LatexExtractionConfig(boxed_match_priority=0)` and `ExprExtractionConfig()`, then `verify`
(a gold or prediction in bare LaTeX, such as `\frac12`, is given to it inside `$...$`, as it expects).

The table gives, per category, how often `math_reward` agrees with math-verify, how often each says 1 where the
other says 0, and how often each contradicts the label; then the time `math_reward` takes per case, each case
scored from cold caches (`clear_caches()` and sympy's cache cleared) and timed `--repeats` times (median).

A second table measures `extraction="final"` (`math_final_reward`): on the same boxed completions it must score as
`math_reward` does (the count of differences), and on each prediction written in prose without a box
(`as_prose`: "So the answer is ...", bare LaTeX inside `$...$`), where it reads the final number of the text, it
is compared with math-verify's own reading of that prose (`parse` of the whole text) and with the label.

    python -m benchmarks.math_agreement                 # all cases, 3 repeats
    python -m benchmarks.math_agreement --smoke         # every 10th case, 1 repeat

The script imports only `trl_ada.rewards` and `math_verify`, so it also measures another checkout of the package:
run it by path from that checkout (`cd other && python /path/to/benchmarks/math_agreement.py`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify import parser as math_verify_parser
from sympy.core.cache import clear_cache as clear_sympy_cache

import trl_ada
from trl_ada.rewards import clear_caches, math_final_reward, math_reward

CASES = Path(__file__).resolve().parent / "data" / "math_cases.jsonl"
MATH_VERIFY_TARGETS = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
BARE_NUMBER = re.compile(r"[-+]?\d[\d.,]*(?: \d{3})*%?")
MATH_MARK = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")


def load_cases(path: Path) -> list[dict]:
    """The cases of a JSONL file, in order."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def as_completion(prediction: str) -> str:
    r"""A completion ending in `prediction`: a boxed prediction as written, any other inside `\boxed{}`."""
    if "\\boxed" in prediction or "\\fbox" in prediction:
        return f"Let me work through it.\n\n{prediction}"
    for left, right in DELIMITERS:
        if prediction.startswith(left) and prediction.endswith(right) and len(prediction) > len(left) + len(right):
            prediction = prediction[len(left) : -len(right)]
            break
    return f"Let me work through it.\n\nThe final answer is $\\boxed{{{prediction}}}$."


def as_prose(prediction: str) -> str:
    """A completion that states `prediction` in a sentence, boxed only if the prediction is."""
    return f"Let me work through it.\n\nSo the answer is {in_math_mode(prediction)}."


def in_math_mode(text: str) -> str:
    """`text` as math-verify expects it: a bare number or text with math delimiters or a box as written, bare LaTeX
    (`\\frac12`, `x = 2`) inside `$...$`."""
    if BARE_NUMBER.fullmatch(text) or MATH_MARK.search(text):
        return text
    return f"${text}$"


def math_verify_score(gold: str, prediction: str) -> int:
    """math-verify's own verdict on the pair, configured as in its test suite (a prediction in prose is read
    whole)."""
    gold_parsed = parse(in_math_mode(gold), MATH_VERIFY_TARGETS)
    pred_parsed = parse(in_math_mode(prediction), MATH_VERIFY_TARGETS)
    return int(verify(gold_parsed, pred_parsed, float_rounding=6, strict=True))


def final_scores(case: dict) -> dict:
    """`math_final_reward` on the boxed completion and on the prose one, and math-verify on the prose."""
    gold, prose = case["gold"], as_prose(case["prediction"])
    return {
        "final_boxed": int(math_final_reward([as_completion(case["prediction"])], [gold])[0]),
        "final_prose": int(math_final_reward([prose], [gold])[0]),
        "math_verify_prose": math_verify_score(gold, prose),
    }


def clear_all_caches() -> None:
    """Our score and gold caches, sympy's cache and math-verify's parse caches."""
    clear_caches()
    clear_sympy_cache()
    for cached in (math_verify_parser.parse_latex_cached, math_verify_parser.parse_expr_cached):
        cached.cache_clear()
    math_verify_parser.extract_latex.cache_clear()


def timed_reward(gold: str, completion: str) -> tuple[int, float, float]:
    """(math_reward score, wall seconds, CPU seconds) of one cold-cache run."""
    clear_all_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    score = math_reward([completion], [gold])[0]
    return int(score), time.perf_counter() - wall, time.process_time() - cpu


def percentile(values: list[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def run(cases: list[dict], repeats: int) -> list[dict]:
    """One result per case: the case plus `reward`, `math_verify`, and the median `seconds` (wall) and
    `cpu_seconds` of `repeats` timed passes over all cases, after an untimed pass that pays for lazy imports."""
    pairs = [(case["gold"], as_completion(case["prediction"])) for case in cases]
    for gold, completion in pairs:
        timed_reward(gold, completion)
    passes = [[timed_reward(gold, completion) for gold, completion in pairs] for _ in range(repeats)]
    results = []
    for index, case in enumerate(cases):
        runs = [timings[index] for timings in passes]
        results.append(
            {
                **case,
                "reward": runs[0][0],
                "math_verify": math_verify_score(case["gold"], case["prediction"]),
                **final_scores(case),
                "seconds": statistics.median(r[1] for r in runs),
                "cpu_seconds": statistics.median(r[2] for r in runs),
            }
        )
    return results


def agreement_rows(results: list[dict]) -> list[list[str]]:
    """Per category and in total: cases, agreement, one-sided 1s, and contradictions of the label."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        groups[result["category"]].append(result)
    rows = []
    for name, group in [*sorted(groups.items()), ("all", results)]:
        agree = sum(r["reward"] == r["math_verify"] for r in group)
        rows.append(
            [
                name,
                str(len(group)),
                f"{agree} ({100 * agree / len(group):.1f}%)",
                str(sum(r["reward"] > r["math_verify"] for r in group)),
                str(sum(r["reward"] < r["math_verify"] for r in group)),
                str(sum(r["reward"] != r["label"] for r in group)),
                str(sum(r["math_verify"] != r["label"] for r in group)),
                str(sum(r["reward"] > r["label"] for r in group)),
            ]
        )
    return rows


def final_rows(results: list[dict]) -> list[list[str]]:
    """Per category and in total, for `extraction="final"`: differences from `math_reward` on boxed completions;
    on prose, its 1s, agreement with math-verify, and false positives and negatives of both against the label."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        groups[result["category"]].append(result)
    rows = []
    for name, group in [*sorted(groups.items()), ("all", results)]:
        agree = sum(r["final_prose"] == r["math_verify_prose"] for r in group)
        rows.append(
            [
                name,
                str(len(group)),
                str(sum(r["final_boxed"] != r["reward"] for r in group)),
                str(sum(r["final_prose"] for r in group)),
                f"{agree} ({100 * agree / len(group):.1f}%)",
                str(sum(r["final_prose"] > r["label"] for r in group)),
                str(sum(r["final_prose"] < r["label"] for r in group)),
                str(sum(r["math_verify_prose"] > r["label"] for r in group)),
                str(sum(r["math_verify_prose"] < r["label"] for r in group)),
            ]
        )
    return rows


def time_summary(seconds: list[float]) -> str:
    """Mean, median, p99 and max, in milliseconds."""
    stats = [statistics.fmean(seconds), statistics.median(seconds), percentile(seconds, 0.99), max(seconds)]
    return ", ".join(
        f"{name} {1e3 * value:.1f}" for name, value in zip(("mean", "median", "p99", "max"), stats, strict=True)
    )


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Fixed-width text table."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def report(results: list[dict], cases_path: Path) -> str:
    """The agreement table, the timing line and the list of disagreements."""
    header = ["category", "cases", "agree with math-verify", "reward 1, mv 0", "reward 0, mv 1"]
    header += ["reward != label", "mv != label", "reward false positives"]
    seconds, cpu = [r["seconds"] for r in results], [r["cpu_seconds"] for r in results]
    lines = [
        f"math_reward ({Path(trl_ada.__file__).parent}) vs math-verify {importlib.metadata.version('math-verify')}: "
        f"{len(results)} cases from {cases_path.name}",
        "",
        format_table(header, agreement_rows(results)),
        "",
        f"wall time per case (ms): {time_summary(seconds)}",
        f"CPU time per case (ms):  {time_summary(cpu)}",
    ]
    right = [r for r in results if r["math_verify"] == r["label"]]
    agree = sum(r["reward"] == r["math_verify"] for r in right)
    lines.insert(
        4,
        f"on the {len(right)} cases math-verify gets right: {agree} agree ({100 * agree / max(1, len(right)):.1f}%); "
        f"math_reward right on {sum(r['reward'] == r['label'] for r in results)} of {len(results)}",
    )
    disagreements = [r for r in results if r["reward"] != r["math_verify"]]
    if disagreements:
        lines += ["", "disagreements (id: reward / math-verify / label | gold | prediction):"]
        lines += [
            f"  {r['id']}: {r['reward']} / {r['math_verify']} / {r['label']} | {r['gold']} | {r['prediction']!r}"
            for r in disagreements
        ]
    final_header = ["category", "cases", "boxed: != math_reward", "prose: final 1", "prose: agree with mv"]
    final_header += ["final false pos.", "final false neg.", "mv false pos.", "mv false neg."]
    lines += ["", 'extraction="final" (math_final_reward), the prediction boxed and in prose:', ""]
    lines += [format_table(final_header, final_rows(results))]
    misses = [r for r in results if r["final_prose"] != r["label"]]
    if misses:
        lines += ["", "final on prose, against the label (id: final / math-verify / label | gold | prose):"]
        lines += [
            f"  {r['id']}: {r['final_prose']} / {r['math_verify_prose']} / {r['label']} | {r['gold']} | "
            f"{as_prose(r['prediction'])!r}"
            for r in misses
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="JSONL case file (default: the shipped set).")
    parser.add_argument("--repeats", type=int, default=3, help="Timed cold-cache runs per case (median kept).")
    parser.add_argument("--smoke", action="store_true", help="Every 10th case, one repeat: a quick check.")
    parser.add_argument("--json", type=Path, help="Also write every case's result to this JSON file.")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # math-verify logs a warning per unparsable answer
    cases = load_cases(args.cases)
    if args.smoke:
        cases, args.repeats = cases[::10], 1
    results = run(cases, max(1, args.repeats))
    print(report(results, args.cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
