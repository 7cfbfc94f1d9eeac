"""Learning speed on the demo's toy task: steps and generated samples to reach a target first-round reward.

GRPO n=4 and n=16 against Reinforce-Ada pos and balance (M=8, N=4), every method from the same weights and prompts
(`trl_ada.toy.experiment`), over several seeds; it reports the steps and samples each method needs to reach a
smoothed first-round reward of 0.5 and 0.7, relative to GRPO n=4. Setup and results: `docs/lab/benchmarks_learning.md`.

    python -m benchmarks.learning            # 3 seeds x 60 steps x 4 methods, 2-4 min on 2 CPUs
    python -m benchmarks.learning --smoke    # 1 seed, 2 steps, 2 prompts/step, in-process: seconds
    python -m benchmarks.learning --budgeted   # GRPO n=4/8, balance and budgeted balance B=8 and B=4, 5 seeds
    python -m benchmarks.learning --refill   # GRPO n=4/8, balance, budgeted balance, DAPO and the combinations
    python -m benchmarks.learning --objectives   # the paper's Est and the log objective against GRPO n=8, 5 seeds
    python -m benchmarks.learning --family keyed --transfer 0   # the main comparison on the keyed task
    python -m benchmarks.learning --regimes  # every preset at transfer 0, 0.5, 1 with modelled GPU hours, 5 seeds
    python -m benchmarks.learning --regimes --regime "no transfer"  # one of the three transfer settings

`--refill` measures the targets on an unbiased probe of the policy's pass rate (every distinct task prompt, every
2 steps; `trl_ada.toy.experiment.PassRateProbe`) instead of the first-round reward, which pre-rollout skipping and
candidate refill bias. `--objectives` also reports the trained samples (rows reaching the loss) to the targets, the
final pass rate of the hardest third of the task's prompts (by their pass rate before training) and the loss and
gradient norm of every step.

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
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is built locally; never reach for the Hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import TrainerCallback

from benchmarks.common import (
    format_table,
    machine_description,
    make_parser,
    pyplot,
    save_figure,
    seed_stats,
    write_csv,
    write_json,
)
from benchmarks.gpu_hours import StepPricer
from benchmarks.learning_regimes import REGIMES, add_gpu_hours, build_regime_methods, regime_report, regime_settings
from trl_ada.candidates import num_candidates
from trl_ada.evaluation import encode_prompts
from trl_ada.toy.experiment import (
    MethodSpec,
    TaskSettings,
    keyed_task,
    make_task,
    prepare_model,
    quiet_training,
    run_method,
    sample_task,
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
BUDGETED_SIZES = {"steps": 60, "seeds": 5, "prompts_per_step": 8, "workers": 2}
BUDGETS = (8, 4)
BUDGETED_OPTIONS = (
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
OBJECTIVES_SIZES = {"steps": 60, "seeds": 5, "prompts_per_step": 8, "workers": 2}
OBJECTIVES_BASELINE = "GRPO n=8"  # the paper's compute-matched baseline of Est at n=8
DIFFICULTY_SAMPLES = 32  # completions per distinct task prompt of the difficulty probe
SPIKE_FACTOR = 5.0  # a loss spike: |loss| above this many times the run's median |loss|
GRAD_SPIKE_FACTOR = 3.0  # a gradient spike: a gradient norm above this many times the run's median


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


def build_budgeted_methods(smoke: bool = False) -> list[MethodSpec]:
    """The `--budgeted` comparison at equal generated samples: GRPO n=4 and n=8, balance (paper), budgeted balance
    B=8 and B=4.

    Budgeted balance: the pass-rate memory with prior-sized rounds, the futility stop and a per-step budget, M=8, N=3.
    """
    m, n = (4, 2) if smoke else (8, 4)
    balance = MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance")
    balance = with_rounds(balance, samples_per_round=m, max_rounds=n)
    budgeted = [
        MethodSpec(
            f"budgeted_b{budget}",
            f"budgeted balance B={budget}",
            trainer="reinforce_ada",
            exit_rule="balance",
            samples_per_round=m,
            max_rounds=2 if smoke else 3,
            options=(*BUDGETED_OPTIONS, ("sample_budget", budget)),
        )
        for budget in BUDGETS
    ]
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", "GRPO n=8", num_generations=8),
        balance,
        *budgeted,
    ]


def build_objective_methods(smoke: bool = False) -> list[MethodSpec]:
    """The `--objectives` comparison: GRPO n=4 and n=8; balance (n=4, M=8, N=4; smoke M=4, N=2) with the linear
    and the log objective; the paper's Est at n=8 (`sampling="est"`: log objective, hybrid weighting) and its
    variants (linear objective; explicit weighting: n each, advantages × 1/p̂; implicit: allocation ∝ 1/p̂, no
    weight); budgeted balance B=8 (`sampling="budgeted_balance"`, n=4)."""
    m, n = (4, 2) if smoke else (8, 4)
    balance = with_rounds(MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance"), m, n)
    est = {"trainer": "reinforce_ada", "sampling": "est", "num_generations": 8}
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", OBJECTIVES_BASELINE, num_generations=8),
        balance,
        replace(balance, name="balance_log", label=f"{balance.label} log", options=(("objective", "log"),)),
        MethodSpec("est", "Est n=8", **est),
        MethodSpec("est_linear", "Est n=8 linear", **est, options=(("objective", "linear"),)),
        MethodSpec("est_explicit", "Est n=8 explicit", **est, options=(("objective_weighting", "explicit"),)),
        MethodSpec("est_implicit", "Est n=8 implicit", **est, options=(("objective_weighting", "implicit"),)),
        MethodSpec("budgeted_b8", "budgeted balance B=8", trainer="reinforce_ada", sampling="budgeted_balance"),
    ]


def build_refill_methods(smoke: bool = False) -> list[MethodSpec]:
    """The `--refill` comparison: GRPO n=4 and n=8, balance (paper), budgeted balance B=4, DAPO's dynamic sampling,
    and the combinations of candidates (`prompt_oversampling` 3), refill and pre-rollout skipping.

    DAPO: `exit_rule="mixed"`, M = n = 4, one round per candidate, refilled up to 4 rounds. "n=4 + skip": the same
    with a single round, so it is GRPO n=4 whose batch swaps the candidates the memory predicts to give no signal.
    Skipping uses the pass-rate memory (decay 0.5), `skip_threshold=0.6` and `skip_exploration=0.05`: with visits of
    4 completions and decay 0.5 the chance of no signal never exceeds 9/13 under the uniform prior, so the sampling
    benchmark's 0.8 would never skip; at 0.6 two all-wrong (or all-right) visits in a row skip a prompt.
    """
    m, n = (4, 2) if smoke else (8, 4)
    candidates = (("prompt_oversampling", PROMPT_OVERSAMPLING),)
    balance = with_rounds(MethodSpec("balance", "balance", trainer="reinforce_ada", exit_rule="balance"), m, n)
    budgeted = {"trainer": "reinforce_ada", "exit_rule": "balance", "samples_per_round": m}
    budgeted["max_rounds"] = 2 if smoke else 3
    dapo = {"trainer": "reinforce_ada", "exit_rule": "mixed", "samples_per_round": 4}
    dapo_options = (*candidates, ("rounds_per_prompt", 1))
    refill_rounds, per_prompt = (4, 2) if smoke else (8, 4)
    balance_refill = {"trainer": "reinforce_ada", "exit_rule": "balance", "samples_per_round": 4}
    balance_options = (*candidates, ("rounds_per_prompt", per_prompt))
    return [
        MethodSpec("grpo_n4", BASELINE, num_generations=4),
        MethodSpec("grpo_n8", "GRPO n=8", num_generations=8),
        balance,
        MethodSpec(
            "budgeted_b4", "budgeted balance B=4", **budgeted, options=(*BUDGETED_OPTIONS, ("sample_budget", 4))
        ),
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
            "budgeted_b8_skip",
            "budgeted balance B=8, 3x + skip",
            **budgeted,
            options=(*BUDGETED_OPTIONS, ("sample_budget", 8), *candidates, *SKIP_OPTIONS[2:]),
        ),
    ]


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def prompt_pass_rates(model: Any, tokenizer: Any, settings: TaskSettings, seed: int, num_samples: int) -> np.ndarray:
    """Pass rate of every distinct task prompt (`settings.task_rows()` order): the mean `toy_reward` of
    `num_samples` completions sampled from `model` now, as in training (temperature 1, no top-k/top-p), under a
    random state of its own seeded by `seed` (the training's stream is left untouched)."""
    rows = settings.task_rows()
    prompt_ids = encode_prompts(tokenizer, [[{"role": "user", "content": text}] for _, _, text in rows])
    targets = ([target for target, _, _ in rows], [count for _, count, _ in rows])
    rewards, _ = sample_task(model, tokenizer, prompt_ids, targets, num_samples, settings.max_completion_length, seed)
    return np.asarray(rewards, dtype=np.float64).reshape(len(rows), num_samples).mean(1)


def hardest_third(initial: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """Indices of the third of the prompts with the lowest initial pass rate (ties: the larger letter count first)."""
    order = np.lexsort((-np.asarray(counts), initial))
    return order[: max(1, len(order) // 3)]


class DifficultyProbe(TrainerCallback):
    """Every distinct task prompt's pass rate before and after training (`prompt_pass_rates`, the same draws for
    every method of a seed); `summary()`: the final pass rate over all prompts and over the hardest third."""

    def __init__(self, settings: TaskSettings, seed: int, num_samples: int = DIFFICULTY_SAMPLES):
        self.settings, self.seed, self.num_samples = settings, seed, num_samples
        self.pass_rates: dict[str, np.ndarray] = {}

    def _probe(self, when: str, model: Any, tokenizer: Any) -> None:
        self.pass_rates[when] = prompt_pass_rates(model, tokenizer, self.settings, self.seed, self.num_samples)

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._probe("initial", model, processing_class)

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._probe("final", model, processing_class)

    def summary(self) -> dict[str, float]:
        """Initial and final pass rate over all prompts and over the hardest third (by the initial pass rate)."""
        initial, final = self.pass_rates["initial"], self.pass_rates["final"]
        hard = hardest_third(initial, [count for _, count, _ in self.settings.task_rows()])
        return {
            "initial_pass_rate": float(initial.mean()),
            "final_pass_rate": float(final.mean()),
            "initial_hard_third_pass_rate": float(initial[hard].mean()),
            "final_hard_third_pass_rate": float(final[hard].mean()),
        }


def run_with_difficulty(spec: MethodSpec, model_dir: Path, dataset: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """`run_method` with a [`DifficultyProbe`]; its summary is added to the last step's record."""
    probe = DifficultyProbe(kwargs["settings"], kwargs["seed"])
    records = run_method(spec, model_dir, dataset, callbacks=(probe,), **kwargs)
    records[-1].update(probe.summary())
    return records


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
    runner: Callable[..., list[dict[str, Any]]] = run_method,
) -> Runs:
    """Train every method at every seed with `runner` (`run_method`'s signature; in `workers` processes when > 1);
    the records of every run."""
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
                finished(k, spec, seed, runner(*args, **kwargs))
            return runs
        context = multiprocessing.get_context("spawn")  # fresh interpreters: no torch state inherited by fork
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {}
            for spec, seed in jobs:
                args, kwargs = arguments(spec, seed)
                futures[pool.submit(runner, *args, **kwargs)] = (spec, seed)
            for k, future in enumerate(as_completed(futures), start=1):
                finished(k, *futures[future], future.result())
    return runs


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


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
        summary[f"steps_to_{target:g}"] = seed_stats([steps_to_reach(r, target, **reach) for r in runs])
        summary[f"samples_to_{target:g}"] = seed_stats([samples_to_reach(r, target, **reach) for r in runs])
    final = [np.mean([s["first_round_reward"] for s in r[-SMOOTHING_WINDOW:]]) for r in runs]
    summary["final_first_round_reward"] = seed_stats(final)
    probed = [[s["eval_pass_rate"] for s in r if np.isfinite(s.get("eval_pass_rate", float("nan")))] for r in runs]
    summary["final_eval_pass_rate"] = seed_stats([np.mean(p[-3:]) if p else float("nan") for p in probed])
    summary["samples_per_step"] = seed_stats([r[-1]["cumulative_samples"] / len(r) for r in runs])
    names = ("frac_reward_zero_std", "unresolved_all_positive_fraction", "unresolved_all_negative_fraction")
    for name in (*names, *REFILL_COLUMNS):
        summary[name] = seed_stats([_nanmean([s.get(name, float("nan")) for s in r]) for r in runs])
    summary["wall_time"] = seed_stats([r[-1]["wall_time"] for r in runs])
    return summary


def trained_to_reach(records: list[dict[str, Any]], target: float, curve: Curve = FIRST_ROUND) -> float:
    """Trained samples (rows that reached the loss) until `curve` reaches `target` (NaN if never)."""
    step = steps_to_reach(records, target, window=curve.window, metric=curve.metric)
    if not np.isfinite(step):
        return float("nan")
    return float(next(r["cumulative_trained_samples"] for r in records if r["step"] == step))


def spikes(values: Sequence[float], factor: float = SPIKE_FACTOR) -> int:
    """Steps whose |value| (loss or gradient norm) is above `factor` times the run's median |value|."""
    magnitude = np.abs(np.asarray(values, dtype=np.float64))
    magnitude = magnitude[np.isfinite(magnitude)]
    return int((magnitude > factor * np.median(magnitude)).sum()) if magnitude.size else 0


DIFFICULTY_COLUMNS = (
    "initial_pass_rate",
    "final_pass_rate",
    "initial_hard_third_pass_rate",
    "final_hard_third_pass_rate",
)


def summarize_objectives(per_seed: dict[int, list[dict[str, Any]]], targets: Sequence[float]) -> dict[str, Any]:
    """`summarize_method` on the first-round reward plus trained samples to each target and per step, the
    [`DifficultyProbe`] pass rates and the stability of the loss (mean and max gradient norm, loss spikes)."""
    summary = summarize_method(per_seed, targets)
    runs = list(per_seed.values())
    for target in targets:
        summary[f"trained_to_{target:g}"] = seed_stats([trained_to_reach(r, target) for r in runs])
    summary["trained_per_step"] = seed_stats([r[-1]["cumulative_trained_samples"] / len(r) for r in runs])
    for name in DIFFICULTY_COLUMNS:
        summary[name] = seed_stats([r[-1].get(name, float("nan")) for r in runs])
    summary["grad_norm_mean"] = seed_stats([_nanmean([s["grad_norm"] for s in r]) for r in runs])
    summary["grad_norm_max"] = seed_stats([float(np.nanmax([s["grad_norm"] for s in r])) for r in runs])
    summary["grad_norm_spikes"] = seed_stats([spikes([s["grad_norm"] for s in r], GRAD_SPIKE_FACTOR) for r in runs])
    summary["loss_spikes"] = seed_stats([spikes([s["loss"] for s in r]) for r in runs])
    return summary


def _nanmean(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (plain GRPO has no exit-rule metrics)."""
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def add_ratios(summaries: dict[str, dict[str, Any]], targets: Sequence[float], baseline: str = BASELINE) -> None:
    """`ratio_vs_baseline` on every steps/samples/trained-to-target entry: method mean / baseline mean (NaN if
    undefined)."""
    for summary in summaries.values():
        for target in targets:
            for key in (f"{name}_to_{target:g}" for name in ("steps", "samples", "trained")):
                if key not in summary:
                    continue
                reference = summaries[baseline][key]["mean"]
                summary[key]["ratio_vs_baseline"] = summary[key]["mean"] / reference if reference else float("nan")


def _pm(stats: dict[str, Any], digits: int = 0, missing: str = "never") -> str:
    """'mean ± population std', or `missing` when no seed has a value (did not reach a target, or has no such
    metric)."""
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
    title = f"Target: {curve.title} {target:g} {curve.note}; mean ± population std over seeds"
    return format_table(headers, rows, title=title)


def objectives_target_table(summaries: dict[str, dict[str, Any]], target: float, num_seeds: int) -> str:
    """Steps, generated samples and trained samples to `target` (first-round reward), with ratios vs GRPO n=8."""
    versus = f"vs {OBJECTIVES_BASELINE}"
    headers = ["method", "reached", "steps", "samples", f"samples {versus}", "trained", f"trained {versus}"]
    rows = []
    for label, summary in summaries.items():
        steps, samples = summary[f"steps_to_{target:g}"], summary[f"samples_to_{target:g}"]
        trained = summary[f"trained_to_{target:g}"]
        rows.append(
            [
                label,
                f"{steps['reached']}/{num_seeds}",
                _pm(steps),
                _pm(samples),
                _ratio(samples),
                _pm(trained),
                _ratio(trained),
            ]
        )
    title = (
        f"Target: {FIRST_ROUND.title} {target:g} {FIRST_ROUND.note}; samples generated and trained; "
        "mean ± population std"
    )
    return format_table(headers, rows, title=title)


def objectives_outcome_table(summaries: dict[str, dict[str, Any]], steps: int) -> str:
    """Final reward, final pass rate over all prompts and the hardest third, samples and trained samples per step,
    and the loss's stability (gradient norm, loss spikes)."""
    headers = [
        f"method (after {steps} steps)",
        "final reward",
        "pass rate",
        "hardest third",
        "samples/step",
        "trained/step",
        "grad norm mean",
        "grad norm max",
        f"grad spikes (>{GRAD_SPIKE_FACTOR:g}x med.)",
        f"loss spikes (>{SPIKE_FACTOR:g}x med.)",
    ]
    rows = [
        [
            label,
            _pm(s["final_first_round_reward"], 3),
            _pm(s["final_pass_rate"], 3, missing="-"),
            _pm(s["final_hard_third_pass_rate"], 3, missing="-"),
            _pm(s["samples_per_step"], 0),
            _pm(s["trained_per_step"], 0),
            _pm(s["grad_norm_mean"], 3),
            _pm(s["grad_norm_max"], 3),
            _pm(s["grad_norm_spikes"], 1),
            _pm(s["loss_spikes"], 1),
        ]
        for label, s in summaries.items()
    ]
    first = next(iter(summaries.values()))
    title = (
        f"Final reward: first-round reward of the last {SMOOTHING_WINDOW} steps; pass rate: {DIFFICULTY_SAMPLES} "
        "completions of every distinct task prompt after training; hardest third: the third of the prompts with the "
        f"lowest pass rate before training (then {_pm(first['initial_hard_third_pass_rate'], 3)}; all prompts "
        f"{_pm(first['initial_pass_rate'], 3)}); mean ± population std over seeds"
    )
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
    return format_table(headers, rows, title=title + "mean ± population std over seeds")


def gpu_hours_table(runs: Runs) -> str:
    """Modelled GPU hours of each method's run and per step, mean ± population std over seeds
    (`benchmarks/gpu_hours.py`)."""
    rows = []
    for label, per_seed in runs.items():
        hours = [records[-1]["gpu_hours"] for records in per_seed.values()]
        per_step = [records[-1]["gpu_hours"] * 3600 / len(records) for records in per_seed.values()]
        rows.append([label, _pm(seed_stats(hours), 2), _pm(seed_stats(per_step), 0)])
    title = "Modelled GPU time (the paper's 1.5B setting; multi-round methods are over-priced, see benchmarks_cost.md)"
    return format_table(["method", "GPU h per run", "GPU s per step"], rows, title=title)


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
    title = (
        f"Candidates over the {steps} steps (mean per step; '-': no candidates beyond the batch); "
        "mean ± population std"
    )
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
        trained = np.array([[s["cumulative_trained_samples"] for s in r] for r in measured])
        mean, std = smoothed.mean(axis=0), smoothed.std(axis=0)
        curves[label] = {
            "step": [s["step"] for s in measured[0]],
            "samples": samples.mean(axis=0).tolist(),
            "trained": trained.mean(axis=0).tolist(),
            "reward": mean.tolist(),
            "low": (mean - std).tolist(),
            "high": (mean + std).tolist(),
        }
    return curves


def plot_against_samples(curves: dict[str, dict[str, list[float]]], title: str) -> Any:
    """Two panels: the smoothed first-round reward (mean ± population std over seeds) against the completions
    generated and against the completions trained (rows that reached the loss), a line per method."""
    fig, axes = pyplot().subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for label, curve in curves.items():
        for ax, x in zip(axes, (curve["samples"], curve["trained"]), strict=True):
            (line,) = ax.plot(x, curve["reward"], label=label, linestyle="--" if "log" in label else "-")
            ax.fill_between(x, curve["low"], curve["high"], color=line.get_color(), alpha=0.12, linewidth=0)
    axes[0].set_xlabel("completions generated (cumulative)")
    axes[1].set_xlabel("completions trained (cumulative; backward cost)")
    axes[0].set_ylabel(f"{FIRST_ROUND.title} {FIRST_ROUND.note}")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    return fig


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
    parser.add_argument(
        "--regime",
        choices=tuple(REGIMES),
        default=None,
        help="with --regimes: run only this transfer setting (default: all three)",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--budgeted",
        action="store_true",
        help="budgeted balance B=8 and B=4 against GRPO n=4, n=8 and balance (default 5 seeds)",
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
        help="DAPO dynamic sampling, candidates and skipping against GRPO n=4, n=8, balance and budgeted balance "
        "(default 5 seeds); targets on a pass-rate probe every 2 steps",
    )
    modes.add_argument(
        "--objectives",
        action="store_true",
        help="the paper's Est at n=8 and the log objective against GRPO n=4/8, balance and budgeted balance "
        "(default 5 seeds): trained samples to the targets, hardest-third pass rate, gradient norm and loss spikes",
    )
    args = parser.parse_args(argv)
    if args.regime is not None and not args.regimes:
        parser.error(f"--regime {args.regime!r} chooses among the transfer settings of --regimes; add --regimes.")
    sizes = SMOKE_SIZES if args.smoke else _mode_sizes(args)
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
    chosen = {name: transfer for name, transfer in REGIMES.items() if args.regime in (None, name)}
    for name, transfer in chosen.items():
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


def _mode_sizes(args: argparse.Namespace) -> dict[str, int]:
    """The default sizes of the mode `args` selects."""
    if args.budgeted or args.regimes:
        return BUDGETED_SIZES
    if args.refill:
        return REFILL_SIZES
    return OBJECTIVES_SIZES if args.objectives else FULL_SIZES


def _methods(args: argparse.Namespace) -> list[MethodSpec]:
    """The methods of the mode `args` selects."""
    if args.budgeted:
        return build_budgeted_methods(args.smoke)
    if args.refill:
        return build_refill_methods(args.smoke)
    return build_objective_methods(args.smoke) if args.objectives else build_methods(args.smoke)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write JSON, CSV, tables and the figure; return the JSON data."""
    args = parse_args(argv)
    if args.regimes:
        return main_regimes(args)
    settings = args.settings
    methods = _methods(args)
    curve = PASS_RATE if args.refill else FIRST_ROUND
    seeds = list(range(args.seed, args.seed + args.seeds))
    start = time.perf_counter()
    runner = run_with_difficulty if args.objectives else run_method
    runs = run_all(methods, seeds, args.steps, settings, args.workers, verbose=not args.quiet, runner=runner)
    elapsed = time.perf_counter() - start
    pricer = StepPricer(args.prompts)
    for spec in methods:  # every step in modelled GPU hours (`gpu_hours` in each record)
        for records in runs[spec.label].values():
            add_gpu_hours(records, spec, pricer)
    if args.objectives:
        summaries = {spec.label: summarize_objectives(runs[spec.label], TARGETS) for spec in methods}
        add_ratios(summaries, TARGETS, OBJECTIVES_BASELINE)
        tables = [objectives_target_table(summaries, t, len(seeds)) for t in TARGETS]
        tables.append(objectives_outcome_table(summaries, args.steps))
    else:
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
    if not args.objectives:
        tables.append(overview_table(summaries, args.steps))
    tables.append(gpu_hours_table(runs))
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
        **(
            {
                "difficulty_samples": DIFFICULTY_SAMPLES,
                "spike_factor": SPIKE_FACTOR,
                "grad_spike_factor": GRAD_SPIKE_FACTOR,
            }
            if args.objectives
            else {}
        ),
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
    if args.objectives:
        figure = plot_against_samples(mean_curves(runs, curve), title + " (mean ± population std)")
    else:
        figure = plot_curves(mean_curves(runs, curve), title + " (mean ± population std)")
    if args.refill:
        figure.axes[0].set_ylabel(f"{curve.title} {curve.note}")
    figure = save_figure(figure, out / "learning.png")
    print(f"wrote {out / 'results.json'}, {out / 'steps.csv'}, {out / 'tables.txt'}, {figure}")
    return data


if __name__ == "__main__":
    main()
