"""When adaptive sampling pays: every preset on the keyed task, with and without transfer between prompts.

`python -m benchmarks.learning --regimes` runs this. The keyed toy task (`trl_ada.toy.keyed`: each item needs its own
code) is filtered like the paper's data (base pass rate in (0, 0.375] from 16 samples) and trained at three transfer
settings (0: nothing learned on one item helps another, 0.5, 1: one shared code). Every preset runs with the same
learning rate, schedule and loss, at several seeds. A probe every 2 steps measures the pass rate overall, on the
hardest third of the items by initial pass rate, pass@8 and the policy's entropy. Every step is priced in modelled
GPU seconds (`benchmarks/gpu_hours.py`, the paper's 1.5B setting). The cost model over-prices the multi-round
Seq-pos and Seq-balance steps (by 1.66x and 1.37x against the paper's Table 3), so their hours are also reported
scaled to the published step times (`TABLE_3_SCALE`): the two hour axes bracket what those methods cost.

Reported per regime, mean ± population std over seeds: the final probe; the probe at equal generated samples and at
equal modelled GPU hours (fractions of GRPO n=4's whole run, the cheapest method); generated samples, modelled hours
and steps to each pass-rate target; one figure per regime (hardest-third pass rate against modelled GPU hours).

    python -m benchmarks.learning --regimes                  # 3 regimes x 9 presets x 5 seeds x 60 steps
    python -m benchmarks.learning --regimes --smoke --out DIR  # seconds
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import format_table, mean_and_std, save_figure, seed_stats, write_json
from benchmarks.gpu_hours import StepPricer, cumulative_hours
from trl_ada.toy.experiment import MethodSpec, keyed_task, with_rounds
from trl_ada.toy.results import probe_at, probed_records
from trl_ada.toy.specs import TaskSettings

__all__ = ["REGIMES", "add_gpu_hours", "build_regime_methods", "probe_at", "regime_report"]

REGIMES = {"no transfer": 0.0, "half transfer": 0.5, "full transfer": 1.0}
PROBE = {"eval_every": 2, "eval_samples": 16}
FRACTIONS = (0.5, 1.0)
"""Equal budgets: these fractions of GRPO n=4's whole run, in generated samples and in modelled GPU hours."""
TARGETS = (0.3, 0.5)
"""Targets of the probe's overall pass rate."""
BASELINE = "GRPO n=4"
HARD = "eval_pass_rate_hard"
SHOWN = (("pass rate", "eval_pass_rate"), ("hardest third", HARD), ("pass@8", "eval_pass_at_8"))
TABLE_3_SCALE = {"Seq-pos": 228.0 / 378.0, "Seq-balance": 290.0 / 397.0}
"""Published over modelled step time at 1.5B (`docs/lab/benchmarks_cost.md`, base prompts) of the rows Table 3 has."""
AXES = {
    "cumulative_samples": "generated samples",
    "gpu_hours": "modelled GPU hours",
    "gpu_hours_table3": "GPU hours scaled to Table 3",
}


def build_regime_methods(smoke: bool = False) -> list[MethodSpec]:
    """Every preset: GRPO n=4/8/16 (TRL's trainer), DAPO, Seq-pos, Seq-balance, the paper's Est at n=8,
    Pilot-Commit at n=8 (pilot 4 of 2x candidates, commit 4), budgeted balance at 2n per prompt, and GRPO n=4 with
    pre-rollout skipping (3x candidates, one round each)."""
    m, n = (4, 2) if smoke else (8, 4)
    ada = {"trainer": "reinforce_ada"}
    candidates = (("prompt_oversampling", 3.0), ("rounds_per_prompt", 1))
    skip = (("pass_rate_memory", True), ("memory_decay", 0.5), ("skip_threshold", 0.6))
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", "GRPO n=8", num_generations=8),
        MethodSpec("grpo_n16", "GRPO n=16", num_generations=16),
        MethodSpec("dapo", "DAPO 3x", **ada, exit_rule="mixed", samples_per_round=4, max_rounds=n, options=candidates),
        replace(with_rounds(MethodSpec("pos", "", **ada, exit_rule="pos"), m, n), label="Seq-pos"),
        replace(with_rounds(MethodSpec("balance", "", **ada, exit_rule="balance"), m, n), label="Seq-balance"),
        MethodSpec("est", "Est n=8", num_generations=8, **ada, sampling="est"),
        MethodSpec("pilot_commit", "Pilot-Commit n=8", num_generations=8, **ada, sampling="pilot_commit"),
        MethodSpec("budgeted", "budgeted balance", **ada, sampling="budgeted_balance"),  # a budget of 2n = 8
        MethodSpec(
            "n4_skip", "GRPO n=4 + skip", **ada, exit_rule="mixed", samples_per_round=4, max_rounds=1,
            options=(*candidates, *skip),
        ),
    ]  # fmt: skip


def regime_settings(transfer: float, prompts_per_step: int) -> TaskSettings:
    """The keyed task at `transfer`, filtered to the paper's band, probed every 2 steps."""
    return keyed_task(prompts_per_step=prompts_per_step, transfer=transfer, **PROBE)


def add_gpu_hours(records: list[dict[str, Any]], spec: MethodSpec, pricer: StepPricer) -> None:
    """Add `gpu_hours` (cumulative modelled GPU hours) and `gpu_hours_table3` (the same, scaled to the paper's
    published step time where Table 3 has the method) to each step record of a run of `spec`."""
    trained = pricer.prompts_per_step * spec.num_generations
    rounds = [[r[key] for key in sorted(r) if key.startswith("samples_round_")] for r in records]
    for record, hours in zip(records, cumulative_hours(pricer, [(c, trained) for c in rounds]), strict=True):
        record["gpu_hours"] = hours
        record["gpu_hours_table3"] = hours * TABLE_3_SCALE.get(spec.label, 1.0)


def first_reaching(records: Sequence[dict[str, Any]], target: float) -> dict[str, Any]:
    """The first probe whose overall pass rate reaches `target` (empty when none does)."""
    return next((r for r in probed_records(records) if r["eval_pass_rate"] >= target), {})


def summarize(per_seed: dict[int, list[dict[str, Any]]], budgets: dict[str, dict[float, float]]) -> dict[str, Any]:
    """One method in one regime: final probe, probes at the equal budgets, and the cost to each target."""
    runs = list(per_seed.values())
    shown = (*SHOWN, ("entropy", "eval_entropy"))
    final = {name: seed_stats([probed_records(r)[-1][field] for r in runs]) for name, field in shown}

    def at(axis: str, budget: float) -> dict[str, Any]:
        probes = [probe_at(r, axis, budget) for r in runs]
        return {name: seed_stats([p.get(field, math.nan) for p in probes]) for name, field in SHOWN}

    at_budget = {axis: {str(f): at(axis, budget) for f, budget in points.items()} for axis, points in budgets.items()}
    to_target = {
        str(target): {
            key: seed_stats([first_reaching(r, target).get(field, math.nan) for r in runs])
            for key, field in (
                ("samples", "cumulative_samples"),
                *((a, a) for a in AXES if a != "cumulative_samples"),
                ("steps", "step"),
            )
        }
        for target in TARGETS
    }
    spent = {key: seed_stats([r[-1][key] for r in runs]) for key in AXES}
    return {"final": final, "at_budget": at_budget, "to_target": to_target, "spent": spent}


def baseline_budgets(per_seed: dict[int, list[dict[str, Any]]]) -> dict[str, dict[float, float]]:
    """The equal budgets: `FRACTIONS` of GRPO n=4's mean samples and modelled hours over its whole run."""
    runs = list(per_seed.values())
    return {axis: {f: f * float(np.mean([r[-1][axis] for r in runs])) for f in FRACTIONS} for axis in AXES}


def _pm(stats: dict[str, Any], digits: int) -> str:
    if math.isnan(stats["mean"]):
        return "never"
    text = f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"
    seeds = len(stats["values"])
    return text if stats["reached"] == seeds else f"{text} ({stats['reached']}/{seeds})"


def regime_tables(name: str, summaries: dict[str, dict[str, Any]], budgets: dict[str, dict[float, float]]) -> str:
    """The tables of one regime: final probe, probes at equal samples and equal hours, cost to the targets."""
    labels = list(summaries)
    final = [[label, *(_pm(summaries[label]["final"][n], 3) for n in (*dict(SHOWN), "entropy")),
              _pm(summaries[label]["spent"]["cumulative_samples"], 0), _pm(summaries[label]["spent"]["gpu_hours"], 2)]
             for label in labels]  # fmt: skip
    parts = [f"== {name}: final probe (mean ± population std over seeds)",
             format_table(["method", *dict(SHOWN), "entropy", "samples", "GPU h"], final)]  # fmt: skip
    for axis, unit in AXES.items():
        for fraction, budget in budgets[axis].items():
            rows = [[label, *(_pm(summaries[label]["at_budget"][axis][str(fraction)][n], 3) for n in dict(SHOWN))]
                    for label in labels]  # fmt: skip
            title = f"== {name}: at equal {unit}: {budget:.{0 if axis == 'cumulative_samples' else 2}f}"
            parts += [f"{title} ({fraction:g} of {BASELINE}'s run; last probe within it)",
                      format_table(["method", *dict(SHOWN)], rows)]  # fmt: skip
    for target in TARGETS:
        costs = (("samples", 0), ("gpu_hours", 2), ("gpu_hours_table3", 2), ("steps", 0))
        cost = {label: summaries[label]["to_target"][str(target)] for label in labels}
        rows = [[label, *(_pm(cost[label][k], d) for k, d in costs)] for label in labels]
        parts += [f"== {name}: to pass rate {target} (first probe reaching it; (k/n): seeds that did)",
                  format_table(["method", "samples", "GPU h", "GPU h (Table 3)", "steps"], rows)]  # fmt: skip
    return "\n".join(parts)


def central_claim(summaries: dict[str, dict[str, Any]]) -> str:
    """The paper's claim on our yardstick: Seq-balance against GRPO n=4 and n=16 on the hardest third at equal GPU
    hours (GRPO n=4's whole run), modelled and scaled to Table 3: the mean per-seed difference, its spread, how many
    seeds agree, and whether the difference exceeds the spread."""
    lines = []
    for axis in ("gpu_hours", "gpu_hours_table3"):
        ours = summaries["Seq-balance"]["at_budget"][axis]["1.0"]["hardest third"]
        for other in (BASELINE, "GRPO n=16"):
            theirs = summaries[other]["at_budget"][axis]["1.0"]["hardest third"]
            diffs = [a - b for a, b in zip(ours["values"], theirs["values"], strict=True) if not math.isnan(a - b)]
            where = f"at {BASELINE}'s {AXES[axis]}"
            if not diffs:
                lines.append(f"Seq-balance vs {other} {where}: no seed probed within the budget")
                continue
            mean, std = mean_and_std(diffs)
            verdict = "larger than the spread" if abs(mean) > std else "within the spread"
            lines.append(
                f"Seq-balance - {other} on the hardest third {where}: {mean:+.3f} ± {std:.3f} "
                f"({sum(d > 0 for d in diffs)}/{len(diffs)} seeds higher; {verdict})"
            )
    return "\n".join(lines)


def plot_regime(name: str, runs: dict[str, dict[int, list[dict[str, Any]]]]) -> Any:
    """Hardest-third pass rate against modelled GPU hours, mean ± population std over seeds, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.5))
    for label, per_seed in runs.items():
        probes = [probed_records(records) for records in per_seed.values()]
        length = min(len(p) for p in probes)
        hours = np.mean([[r["gpu_hours"] for r in p[:length]] for p in probes], axis=0)
        values = np.array([[r[HARD] for r in p[:length]] for p in probes])
        mean, std = values.mean(axis=0), values.std(axis=0)
        axis.plot(hours, mean, label=label)
        axis.fill_between(hours, mean - std, mean + std, alpha=0.15)
    axis.set_xlabel("modelled GPU hours (paper's 1.5B setting)")
    axis.set_ylabel("pass rate, hardest third of items")
    axis.set_title(f"Keyed task, {name}: hardest third against modelled GPU hours")
    axis.legend(fontsize=7)
    figure.tight_layout()
    return figure


Runs = dict[str, dict[int, list[dict[str, Any]]]]


def regime_report(
    name: str, methods: Sequence[MethodSpec], runs: Runs, out: Path, pricer: StepPricer
) -> tuple[str, dict[str, Any]]:
    """Price every run, summarise every method, write the figure; the regime's text and JSON summaries."""
    for spec in methods:
        for records in runs[spec.label].values():
            add_gpu_hours(records, spec, pricer)
    budgets = baseline_budgets(runs[BASELINE])
    summaries = {spec.label: summarize(runs[spec.label], budgets) for spec in methods}
    text = regime_tables(name, summaries, budgets) + "\n" + central_claim(summaries)
    slug = name.replace(" ", "_")
    save_figure(plot_regime(name, runs), out / f"regime_{slug}.png")
    return text, {"budgets": budgets, "summaries": summaries}


def _nan_for_null(record: dict[str, Any]) -> dict[str, Any]:
    """A step record read back from JSON, where NaN was written as null."""
    return {key: math.nan if value is None else value for key, value in record.items()}


def report_from_results(results: Path, out: Path) -> str:
    """The tables, summaries and figures again from a `--regimes` run's `results.json` (no training): how the
    reporting is changed without running the trainings again. Writes `tables.txt` and the figures into `out`."""
    import json

    data = json.loads(Path(results).read_text())
    methods = build_regime_methods(data["config"]["smoke"])
    pricer = StepPricer(next(iter(data["regimes"].values()))["task"]["prompts_per_step"])
    texts = []
    for name in data["regimes"]:  # the regimes the run had (`--regime` runs one)
        runs = {label: {int(seed): [_nan_for_null(r) for r in records] for seed, records in per_seed.items()}
                for label, per_seed in data["runs"][name].items()}  # fmt: skip
        text, summary = regime_report(name, methods, runs, out, pricer)
        data["regimes"][name].update(summary)
        texts.append(text)
    text = "\n\n".join(texts)
    (out / "tables.txt").write_text(text + "\n")
    write_json(out / "results.json", data)
    return text


if __name__ == "__main__":
    import sys

    print(report_from_results(Path(sys.argv[1]), Path(sys.argv[2])))
