"""Learning speed on the demo's toy task: steps and generated samples to reach a target first-round reward.

GRPO n=4 and n=16 against Reinforce-Ada pos and balance (M=8, N=4), every method from the same weights and prompts
(`trl_ada.toy.experiment`), over several seeds; it reports the steps and samples each method needs to reach a
smoothed first-round reward of 0.5 and 0.7, relative to GRPO n=4. Setup and results: `docs/benchmarks_learning.md`.

    python -m benchmarks.learning            # 3 seeds x 60 steps x 4 methods, 2-4 min on 2 CPUs
    python -m benchmarks.learning --smoke    # 1 seed, 2 steps, 2 prompts/step, in-process: seconds
    python -m benchmarks.learning --est      # GRPO n=4/8, balance and Reinforce-Ada-Est at budgets 8 and 4, 5 seeds
    python -m benchmarks.learning --refill   # GRPO n=4/8, balance, Est, DAPO dynamic sampling and the combinations
    python -m benchmarks.learning --family keyed --transfer 0   # the main comparison on the keyed task

`--refill` measures the targets on an unbiased probe of the policy's pass rate (every distinct task prompt, every
2 steps; `trl_ada.toy.experiment.PassRateProbe`) instead of the first-round reward, which pre-rollout skipping and
candidate refill bias.

`--family keyed` runs any of these on the keyed task (`trl_ada.toy.keyed`: a secret code per item, `--transfer`
sets how many items share one) filtered to the paper's band (0, 0.375] of base pass rate (`--band LOW HIGH` for
another), probed every 2 steps; it adds a table of the probe's metrics by difficulty (hardest third, the paper's
"1-2 of 16" set, pass@k, entropy) at fixed numbers of generated samples.

Writes `results.json`, `steps.csv`, `tables.txt` and `learning.png` into `--out`
(default `benchmarks/results/learning/`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built locally; never reach for the Hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.common import (
    format_table,
    machine_description,
    make_parser,
    mean_and_std,
    save_figure,
    write_csv,
    write_json,
)
from benchmarks.gpu_hours import StepPricer
from benchmarks.learning_regimes import REGIMES, build_regime_methods, regime_report, regime_settings
from trl_ada.refill import num_candidates
from trl_ada.toy.experiment import (
    MethodSpec,
    TaskSettings,
    keyed_task,
    make_task,
    prepare_model,
    quiet_training,
    run_method,
    with_rounds,
)
from trl_ada.toy.results import (
    PASS_AT_K,
    SMOOTHING_WINDOW,
    metrics_at_milestones,
    moving_average,
    plot_curves,
    samples_to_reach,
    steps_to_reach,
    task_title,
)

BASELINE = "GRPO n=4"
TARGETS = (0.5, 0.7)
DEFAULT_OUT = Path("benchmarks/results/learning")
FULL_SIZES = {"steps": 60, "seeds": 3, "prompts_per_step": 8, "workers": 2}
EST_SIZES = {"steps": 60, "seeds": 5, "prompts_per_step": 8, "workers": 2}
EST_BUDGETS = (8, 4)
EST_OPTIONS = (
    ("pass_rate_memory", True),
    ("memory_decay", 0.5),
    ("first_round", "prior"),
    ("later_rounds", "prior"),
    ("futility_threshold", 0.05),
)
REFILL_SIZES = {"steps": 60, "seeds": 5, "prompts_per_step": 8, "workers": 2}
REFILL_PROBE = {"eval_every": 2, "eval_samples": 8}
KEYED_PROBE = {"eval_every": 2, "eval_samples": 16}
MILESTONE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
"""Milestones of generated samples: these fractions of what the baseline (GRPO n=4) generates in the whole run."""
PROMPT_OVERSAMPLING = 3.0
SKIP_OPTIONS = (
    ("pass_rate_memory", True),
    ("memory_decay", 0.5),
    ("skip_threshold", 0.6),
    ("skip_exploration", 0.05),
)
SMOKE_SIZES = {"steps": 2, "seeds": 1, "prompts_per_step": 2, "workers": 1}


@dataclass(frozen=True)
class Curve:
    """What a learning curve plots and the targets are read from: a step-record field, smoothed over `window`
    records that have it."""

    metric: str
    window: int
    title: str
    note: str


FIRST_ROUND = Curve(
    "first_round_reward", SMOOTHING_WINDOW, "first-round reward", f"({SMOOTHING_WINDOW}-step moving average)"
)
PASS_RATE = Curve("eval_pass_rate", 1, "pass rate", "(probe of every task prompt)")

Runs = dict[str, dict[int, list[dict[str, Any]]]]
"""method label -> seed -> per-step records of `trl_ada.toy.experiment.run_method`."""


def build_methods(smoke: bool = False) -> list[MethodSpec]:
    """GRPO n=4 (the baseline), GRPO n=16, and Reinforce-Ada pos and balance (M=8, N=4; smoke: M=4, N=2)."""
    adaptive = [
        MethodSpec("pos", "pos", trainer="reinforce_ada", exit_rule="pos"),
        MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance"),
    ]
    m, n = (4, 2) if smoke else (8, 4)
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n16", "GRPO n=16", num_generations=16),
        *(with_rounds(spec, samples_per_round=m, max_rounds=n) for spec in adaptive),
    ]


def build_est_methods(smoke: bool = False) -> list[MethodSpec]:
    """The `--est` comparison at equal generated samples: GRPO n=4 and n=8, balance (paper), Est at budgets 8 and 4.

    Est: the pass-rate memory with prior-sized rounds, the futility stop and a per-step budget, M=8, N=3.
    """
    m, n = (4, 2) if smoke else (8, 4)
    balance = MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance")
    balance = with_rounds(balance, samples_per_round=m, max_rounds=n)
    est = [
        MethodSpec(
            f"est_b{budget}",
            f"Est budget {budget}",
            trainer="reinforce_ada",
            exit_rule="balance",
            samples_per_round=m,
            max_rounds=2 if smoke else 3,
            options=(*EST_OPTIONS, ("sample_budget", budget)),
        )
        for budget in EST_BUDGETS
    ]
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", "GRPO n=8", num_generations=8),
        balance,
        *est,
    ]


def build_refill_methods(smoke: bool = False) -> list[MethodSpec]:
    """The `--refill` comparison: GRPO n=4 and n=8, balance (paper), Est budget 4, DAPO's dynamic sampling, and the
    combinations of candidates (`prompt_oversampling` 3), refill and pre-rollout skipping.

    DAPO: `exit_rule="mixed"`, M = n = 4, one round per candidate, refilled up to 4 rounds. "n=4 + skip": the same
    with a single round, so it is GRPO n=4 whose batch swaps the candidates the memory predicts to give no signal.
    Skipping uses the pass-rate memory (decay 0.5), `skip_threshold=0.6` and `skip_exploration=0.05`: with visits of
    4 completions and decay 0.5 the chance of no signal never exceeds 9/13 under the uniform prior, so the sampling
    benchmark's 0.8 would never skip; at 0.6 two all-wrong (or all-right) visits in a row skip a prompt.
    """
    m, n = (4, 2) if smoke else (8, 4)
    candidates = (("prompt_oversampling", PROMPT_OVERSAMPLING),)
    balance = with_rounds(MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance"), m, n)
    est = {"trainer": "reinforce_ada", "exit_rule": "balance", "samples_per_round": m, "max_rounds": 2 if smoke else 3}
    dapo = {"trainer": "reinforce_ada", "exit_rule": "mixed", "samples_per_round": 4}
    dapo_options = (*candidates, ("rounds_per_prompt", 1))
    refill_rounds, per_prompt = (4, 2) if smoke else (8, 4)
    balance_refill = {"trainer": "reinforce_ada", "exit_rule": "balance", "samples_per_round": 4}
    balance_options = (*candidates, ("rounds_per_prompt", per_prompt))
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", "GRPO n=8", num_generations=8),
        balance,
        MethodSpec("est_b4", "Est budget 4", **est, options=(*EST_OPTIONS, ("sample_budget", 4))),
        MethodSpec("dapo", "DAPO 3x", **dapo, max_rounds=2 if smoke else 4, options=dapo_options),
        MethodSpec(
            "dapo_skip", "DAPO 3x + skip", **dapo, max_rounds=2 if smoke else 4, options=(*dapo_options, *SKIP_OPTIONS)
        ),
        MethodSpec("n4_skip", "n=4 + skip", **dapo, max_rounds=1, options=(*dapo_options, *SKIP_OPTIONS)),
        MethodSpec(
            "balance_refill",
            f"balance 4x{refill_rounds}, {per_prompt} r/p, 3x",
            **balance_refill,
            max_rounds=refill_rounds,
            options=balance_options,
        ),
        MethodSpec(
            "balance_refill_skip",
            f"balance 4x{refill_rounds}, {per_prompt} r/p, 3x + skip",
            **balance_refill,
            max_rounds=refill_rounds,
            options=(*balance_options, *SKIP_OPTIONS),
        ),
        MethodSpec(
            "est_b8_skip",
            "Est budget 8, 3x + skip",
            **est,
            options=(*EST_OPTIONS, ("sample_budget", 8), *candidates, *SKIP_OPTIONS[2:]),
        ),
    ]


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def _jobs(methods: Sequence[MethodSpec], seeds: Sequence[int]) -> list[tuple[MethodSpec, int]]:
    """Every (method, seed), the costliest methods first so that two workers finish close together."""
    cost = {"balance": 0, "pos": 1}
    ordered = sorted(
        methods, key=lambda spec: (bool(spec.options), cost.get(spec.exit_rule or "", 2), -spec.num_generations)
    )
    return [(spec, seed) for spec in ordered for seed in seeds]


def _candidates_per_step(spec: MethodSpec, settings: TaskSettings) -> int:
    """Candidate prompts one step of `spec` samples over (the batch's prompts without `prompt_oversampling`)."""
    return num_candidates(settings.prompts_per_step, dict(spec.options).get("prompt_oversampling", 1.0))


def _describe(records: list[dict[str, Any]]) -> str:
    """One line about a finished run."""
    rewards = [r["first_round_reward"] for r in records]
    head, tail = np.mean(rewards[:SMOOTHING_WINDOW]), np.mean(rewards[-SMOOTHING_WINDOW:])
    return (
        f"{len(records)} steps, first-round reward {head:.2f} -> {tail:.2f}, "
        f"{records[-1]['cumulative_samples']:.0f} samples, {records[-1]['wall_time']:.0f} s"
    )


def run_all(
    methods: Sequence[MethodSpec],
    seeds: Sequence[int],
    steps: int,
    settings: TaskSettings,
    workers: int,
    verbose: bool = True,
) -> Runs:
    """Train every method at every seed (in `workers` processes when > 1); the records of every run."""
    runs: Runs = {spec.label: {} for spec in methods}
    with tempfile.TemporaryDirectory(prefix="trl-ada-learning-") as work:
        with quiet_training():
            model_dirs = {seed: prepare_model(Path(work) / f"model-{seed}", seed) for seed in seeds}
        # every distinct task prompt at least once, and enough rows for one step's candidates (`--smoke`)
        min_prompts = max(len(settings.task_rows()), *(_candidates_per_step(spec, settings) for spec in methods))
        datasets = {seed: make_task(settings, steps, seed, min_prompts, model_dirs[seed]) for seed in seeds}
        jobs = _jobs(methods, seeds)

        def arguments(spec: MethodSpec, seed: int) -> tuple[tuple, dict]:
            kwargs = {"seed": seed, "steps": steps, "settings": settings, "work_dir": work}
            return (spec, model_dirs[seed], datasets[seed]), kwargs

        def finished(k: int, spec: MethodSpec, seed: int, records: list[dict]) -> None:
            runs[spec.label][seed] = records
            if verbose:
                print(
                    f"[{k:>2}/{len(jobs)}] {spec.label} seed {seed}: {_describe(records)}", file=sys.stderr, flush=True
                )

        if workers <= 1:
            for k, (spec, seed) in enumerate(jobs, start=1):
                args, kwargs = arguments(spec, seed)
                finished(k, spec, seed, run_method(*args, **kwargs))
            return runs
        context = multiprocessing.get_context("spawn")  # fresh interpreters: no torch state inherited by fork
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {}
            for spec, seed in jobs:
                args, kwargs = arguments(spec, seed)
                futures[pool.submit(run_method, *args, **kwargs)] = (spec, seed)
            for k, future in enumerate(as_completed(futures), start=1):
                finished(k, *futures[future], future.result())
    return runs


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def _stats(values: Sequence[float]) -> dict[str, Any]:
    """Mean and std over the finite values, how many there are, and the raw values (NaN: target not reached)."""
    mean, std = mean_and_std(values)
    return {"mean": mean, "std": std, "reached": int(np.isfinite(values).sum()), "values": list(values)}


REFILL_COLUMNS = ("refill_consumed", "refill_skipped", "refill_effective_kept_fraction", "refill_hard_kept_fraction")


def summarize_method(
    per_seed: dict[int, list[dict[str, Any]]], targets: Sequence[float], curve: Curve = FIRST_ROUND
) -> dict[str, Any]:
    """Steps and samples to each target on `curve`, final reward (and final probed pass rate), samples per step,
    zero-std fraction, refill counts, wall time (over seeds)."""
    runs = list(per_seed.values())
    summary: dict[str, Any] = {"seeds": list(per_seed), "curve": curve.metric}
    for target in targets:
        reach = {"window": curve.window, "metric": curve.metric}
        summary[f"steps_to_{target:g}"] = _stats([steps_to_reach(r, target, **reach) for r in runs])
        summary[f"samples_to_{target:g}"] = _stats([samples_to_reach(r, target, **reach) for r in runs])
    final = [np.mean([s["first_round_reward"] for s in r[-SMOOTHING_WINDOW:]]) for r in runs]
    summary["final_first_round_reward"] = _stats(final)
    probed = [[s["eval_pass_rate"] for s in r if np.isfinite(s.get("eval_pass_rate", float("nan")))] for r in runs]
    summary["final_eval_pass_rate"] = _stats([np.mean(p[-3:]) if p else float("nan") for p in probed])
    summary["samples_per_step"] = _stats([r[-1]["cumulative_samples"] / len(r) for r in runs])
    names = ("frac_reward_zero_std", "unresolved_all_positive_fraction", "unresolved_all_negative_fraction")
    for name in (*names, *REFILL_COLUMNS):
        summary[name] = _stats([_nanmean([s.get(name, float("nan")) for s in r]) for r in runs])
    summary["wall_time"] = _stats([r[-1]["wall_time"] for r in runs])
    return summary


def _nanmean(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (plain GRPO has no exit-rule metrics)."""
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def add_ratios(summaries: dict[str, dict[str, Any]], targets: Sequence[float], baseline: str = BASELINE) -> None:
    """`ratio_vs_baseline` on every steps/samples-to-target entry: method mean / baseline mean (NaN if undefined)."""
    for summary in summaries.values():
        for target in targets:
            for key in (f"steps_to_{target:g}", f"samples_to_{target:g}"):
                reference = summaries[baseline][key]["mean"]
                summary[key]["ratio_vs_baseline"] = summary[key]["mean"] / reference if reference else float("nan")


def _pm(stats: dict[str, Any], digits: int = 0, missing: str = "never") -> str:
    """'mean ± std', or `missing` when no seed has a value (did not reach a target, or has no such metric)."""
    if not stats["reached"]:
        return missing
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def _ratio(stats: dict[str, Any]) -> str:
    value = stats.get("ratio_vs_baseline", float("nan"))
    return "-" if not np.isfinite(value) else f"{value:.2f}"


def target_table(
    summaries: dict[str, dict[str, Any]], target: float, num_seeds: int, curve: Curve = FIRST_ROUND
) -> str:
    """Steps and samples to `target` on `curve`, with ratios vs GRPO n=4."""
    headers = ["method", "reached", "steps", "steps vs GRPO n=4", "samples", "samples vs GRPO n=4"]
    rows = []
    for label, summary in summaries.items():
        steps, samples = summary[f"steps_to_{target:g}"], summary[f"samples_to_{target:g}"]
        rows.append(
            [label, f"{steps['reached']}/{num_seeds}", _pm(steps), _ratio(steps), _pm(samples), _ratio(samples)]
        )
    title = f"Target: {curve.title} {target:g} {curve.note}; mean ± std over seeds"
    return format_table(headers, rows, title=title)


def overview_table(summaries: dict[str, dict[str, Any]], steps: int) -> str:
    """Final reward, samples per step, zero-variance groups at the loss, unresolved prompts, wall time per run."""
    headers = [
        "method",
        f"final reward (last {SMOOTHING_WINDOW})",
        "samples/step",
        "zero-std groups",
        "unresolved all-right",
        "unresolved all-wrong",
        "wall s/run",
    ]
    rows = [
        [
            label,
            _pm(s["final_first_round_reward"], 3),
            _pm(s["samples_per_step"], 0),
            _pm(s["frac_reward_zero_std"], 2),
            _pm(s["unresolved_all_positive_fraction"], 2, missing="-"),
            _pm(s["unresolved_all_negative_fraction"], 2, missing="-"),
            _pm(s["wall_time"], 0),
        ]
        for label, s in summaries.items()
    ]
    title = f"Over the {steps} steps (final reward: last {SMOOTHING_WINDOW} steps; the rest: mean per step); "
    return format_table(headers, rows, title=title + "mean ± std over seeds")


def refill_table(summaries: dict[str, dict[str, Any]], steps: int) -> str:
    """Final probed pass rate and the candidates: consumed and skipped per step, effective and hard kept shares."""
    headers = [
        "method",
        "final pass rate (last 3 probes)",
        "samples/step",
        "candidates consumed/step",
        "skipped/step",
        "effective kept",
        "hard kept",
    ]
    rows = [
        [
            label,
            _pm(s["final_eval_pass_rate"], 3),
            _pm(s["samples_per_step"], 0),
            _pm(s["refill_consumed"], 1, missing="-"),
            _pm(s["refill_skipped"], 1, missing="-"),
            _pm(s["refill_effective_kept_fraction"], 2, missing="-"),
            _pm(s["refill_hard_kept_fraction"], 2, missing="-"),
        ]
        for label, s in summaries.items()
    ]
    title = f"Candidates over the {steps} steps (mean per step; '-': no candidates beyond the batch); mean ± std"
    return format_table(headers, rows, title=title)


def milestones(settings: TaskSettings, steps: int) -> list[float]:
    """Generated-sample milestones: `MILESTONE_FRACTIONS` of the baseline's samples (prompts x 4 per step)."""
    return [fraction * steps * settings.prompts_per_step * 4 for fraction in MILESTONE_FRACTIONS]


def milestone_summary(per_seed: dict[int, list[dict[str, Any]]], points: Sequence[float]) -> list[dict[str, float]]:
    """At each milestone, every probe metric of the first probe at or after it, averaged over the seeds that have
    one (NaN when none does)."""
    per_run = [metrics_at_milestones(records, points) for records in per_seed.values()]
    return [{name: _nanmean([run[k][name] for run in per_run]) for name in per_run[0][k]} for k in range(len(points))]


def milestone_table(summaries: dict[str, dict[str, Any]], eval_samples: int) -> str:
    """The probe's metrics by difficulty at each sample milestone, one row per method and milestone."""
    top = max(k for k in PASS_AT_K if k <= eval_samples)
    columns = [
        ("pass rate", "eval_pass_rate"),
        ("hardest third", "eval_pass_rate_hard"),
        ("1-2 of 16", "eval_pass_rate_1_2_of_16"),
        ("pass@1", "eval_pass_at_1"),
        (f"pass@{top}", f"eval_pass_at_{top}"),
        ("entropy", "eval_entropy"),
    ]
    headers = ["method", "samples", "step", *(title for title, _ in columns)]
    rows = [
        [label, f"{point['milestone']:.0f}", _number(point["step"], 0)]
        + [_number(point.get(name, float("nan")), 3) for _, name in columns]
        for label, summary in summaries.items()
        for point in summary["milestones"]
    ]
    title = "Probe at fixed generated samples (first probe at or after; buckets by initial pass rate); seed mean"
    return format_table(headers, rows, title=title)


def _number(value: float, digits: int) -> str:
    """`value` with `digits` decimals, '-' for NaN."""
    return "-" if not np.isfinite(value) else f"{value:.{digits}f}"


# --------------------------------------------------------------------------------------------
# Figure and files
# --------------------------------------------------------------------------------------------


def mean_curves(runs: Runs, curve: Curve = FIRST_ROUND) -> dict[str, dict[str, list[float]]]:
    """Per method: the smoothed `curve` averaged over seeds (± std band), against step and mean samples."""
    curves = {}
    for label, per_seed in runs.items():
        measured = [[s for s in r if np.isfinite(s.get(curve.metric, float("nan")))] for r in per_seed.values()]
        smoothed = np.array([moving_average([s[curve.metric] for s in r], curve.window) for r in measured])
        samples = np.array([[s["cumulative_samples"] for s in r] for r in measured])
        mean, std = smoothed.mean(axis=0), smoothed.std(axis=0)
        curves[label] = {
            "step": [s["step"] for s in measured[0]],
            "samples": samples.mean(axis=0).tolist(),
            "reward": mean.tolist(),
            "low": (mean - std).tolist(),
            "high": (mean + std).tolist(),
        }
    return curves


def csv_rows(runs: Runs) -> list[dict[str, Any]]:
    """One row per (method, seed, step)."""
    return [
        {"method": label, "seed": seed, **step}
        for label, per_seed in runs.items()
        for seed, r in per_seed.items()
        for step in r
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Common benchmark options plus --steps, --prompts and --workers; sizes default by --smoke."""
    parser = make_parser(__doc__.split("\n\n", 1)[0], DEFAULT_OUT, default_seeds=None)
    parser.add_argument("--steps", type=int, default=None, help="training steps per run (default 60; smoke 2)")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step (default 8; smoke 2)")
    parser.add_argument("--workers", type=int, default=None, help="parallel runs (default 2; smoke 1: in-process)")
    parser.add_argument(
        "--family", choices=("letters", "keyed"), default="letters", help="task family (default letters)"
    )
    parser.add_argument(
        "--transfer", type=float, default=0.0, help="keyed: share of learning that transfers between items, 0-1"
    )
    parser.add_argument(
        "--band",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        default=None,
        help="keep prompts with base pass rate in (LOW, HIGH] from 16 samples (keyed default: 0 0.375)",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--est",
        action="store_true",
        help="Reinforce-Ada-Est at budgets 8 and 4 against GRPO n=4, n=8 and balance (default 5 seeds)",
    )
    modes.add_argument(
        "--regimes",
        action="store_true",
        help="every preset on the keyed task at transfer 0, 0.5 and 1 (filtered like the paper's data), with "
        "modelled GPU hours (default 5 seeds; benchmarks/learning_regimes.py)",
    )
    modes.add_argument(
        "--refill",
        action="store_true",
        help="DAPO dynamic sampling, candidates and skipping against GRPO n=4, n=8, balance and Est (default 5 "
        "seeds); targets on a pass-rate probe every 2 steps",
    )
    args = parser.parse_args(argv)
    sizes = SMOKE_SIZES if args.smoke else EST_SIZES if args.est or args.regimes else FULL_SIZES
    sizes = REFILL_SIZES if args.refill and not args.smoke else sizes
    args.seeds = args.seeds or sizes["seeds"]
    args.steps = args.steps or sizes["steps"]
    args.prompts = args.prompts or sizes["prompts_per_step"]
    args.workers = args.workers if args.workers is not None else min(sizes["workers"], os.cpu_count() or 1)
    try:
        args.settings = task_settings(args)
    except ValueError as error:  # one line naming the option and the fix, before anything is built
        parser.error(str(error))
    return args


def task_settings(args: argparse.Namespace) -> TaskSettings:
    """The task of the run: the letters task, or the keyed one (band-filtered, probed every 2 steps)."""
    band = {} if args.band is None else {"pass_rate_band": tuple(args.band)}
    if args.family == "keyed":
        probe = REFILL_PROBE if args.refill else KEYED_PROBE
        return keyed_task(prompts_per_step=args.prompts, transfer=args.transfer, **probe, **band)
    probe = REFILL_PROBE if args.refill else {}
    return TaskSettings(prompts_per_step=args.prompts, transfer=args.transfer, **probe, **band)


def main_regimes(args: argparse.Namespace) -> dict[str, Any]:
    """`--regimes`: every preset at each transfer setting of the keyed task; tables, JSON and one figure each."""
    methods = build_regime_methods(args.smoke)
    seeds = list(range(args.seed, args.seed + args.seeds))
    out, pricer = Path(args.out), StepPricer(args.prompts)
    texts, regimes, all_runs = [], {}, {}
    start = time.perf_counter()
    for name, transfer in REGIMES.items():
        settings = regime_settings(transfer, args.prompts)
        runs = run_all(methods, seeds, args.steps, settings, args.workers, verbose=not args.quiet)
        text, regimes[name] = regime_report(name, methods, runs, out, pricer)
        regimes[name]["task"] = asdict(settings)
        all_runs[name] = {label: {str(seed): r for seed, r in per_seed.items()} for label, per_seed in runs.items()}
        print(text, flush=True)
        texts.append(text)
    elapsed = time.perf_counter() - start
    config = {"steps": args.steps, "seeds": seeds, "workers": args.workers, "smoke": args.smoke}
    config["methods"] = [asdict(spec) for spec in methods]
    data = {"benchmark": "learning_regimes", "config": config, "machine": machine_description(), "wall_time": elapsed}
    data.update(regimes=regimes, runs=all_runs)
    write_json(out / "results.json", data)
    footer = f"Total wall time {elapsed:.0f} s ({args.workers} worker(s), {machine_description()})"
    (out / "tables.txt").write_text("\n\n".join(texts) + f"\n\n{footer}\n")
    print(f"{footer}\nwrote {out / 'results.json'}, {out / 'tables.txt'} and one figure per regime")
    return data


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write JSON, CSV, tables and the figure; return the JSON data."""
    args = parse_args(argv)
    if args.regimes:
        return main_regimes(args)
    settings = args.settings
    if args.refill:
        methods = build_refill_methods(args.smoke)
    else:
        methods = build_est_methods(args.smoke) if args.est else build_methods(args.smoke)
    curve = PASS_RATE if args.refill else FIRST_ROUND
    seeds = list(range(args.seed, args.seed + args.seeds))
    start = time.perf_counter()
    runs = run_all(methods, seeds, args.steps, settings, args.workers, verbose=not args.quiet)
    elapsed = time.perf_counter() - start
    summaries = {spec.label: summarize_method(runs[spec.label], TARGETS, curve) for spec in methods}
    add_ratios(summaries, TARGETS)
    tables = [target_table(summaries, t, len(seeds), curve) for t in TARGETS]
    first_round: dict[str, dict[str, Any]] = {}
    if args.refill:  # the biased first-round curve, side by side, and what the candidates did
        first_round = {spec.label: summarize_method(runs[spec.label], TARGETS) for spec in methods}
        add_ratios(first_round, TARGETS)
        tables.append(target_table(first_round, TARGETS[-1], len(seeds)) + "\n(biased under skipping: see the docs)")
        tables.append(refill_table(summaries, args.steps))
    if settings.family == "keyed":  # evaluation by difficulty at fixed sample milestones
        points = milestones(settings, args.steps)
        for spec in methods:
            summaries[spec.label]["milestones"] = milestone_summary(runs[spec.label], points)
        tables.append(milestone_table(summaries, settings.eval_samples))
    tables.append(overview_table(summaries, args.steps))
    text = "\n\n".join(tables)
    print(
        text + f"\n\nTotal wall time {elapsed:.0f} s ({args.workers} worker(s), {machine_description()})", flush=True
    )
    out = Path(args.out)
    config = {
        "steps": args.steps,
        "seeds": seeds,
        "workers": args.workers,
        "smoke": args.smoke,
        "task": asdict(settings),
        "targets": list(TARGETS),
        "smoothing_window": SMOOTHING_WINDOW,
        "curve": asdict(curve),
        "methods": [asdict(spec) for spec in methods],
    }
    data = {
        "benchmark": "learning",
        "config": config,
        "machine": machine_description(),
        "wall_time": elapsed,
        "summaries": summaries,
        "first_round_summaries": first_round,
        "runs": {label: {str(seed): r for seed, r in per_seed.items()} for label, per_seed in runs.items()},
    }
    write_json(out / "results.json", data)
    write_csv(out / "steps.csv", csv_rows(runs))
    (out / "tables.txt").write_text(text + "\n")
    title = task_title(settings, f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else seeds[0])
    figure = plot_curves(mean_curves(runs, curve), title + " (mean ± std)")
    if args.refill:
        figure.axes[0].set_ylabel(f"{curve.title} {curve.note}")
    figure = save_figure(figure, out / "learning.png")
    print(f"wrote {out / 'results.json'}, {out / 'steps.csv'}, {out / 'tables.txt'}, {figure}")
    return data


if __name__ == "__main__":
    main()
