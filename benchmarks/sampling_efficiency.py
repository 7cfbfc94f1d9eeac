"""Sampling efficiency of GRPO, DAPO dynamic sampling and Reinforce-Ada on simulated prompts (no model).

For each sampler and prompt set (base, hard, easy) it reports the effective-group fraction, samples per prompt,
samples per effective group and generation rounds per step, averaged over steps and seeds. What is measured, the
prompt sets, the samplers and the results: `docs/lab/benchmarks_sampling.md`.

    python -m benchmarks.sampling_efficiency            # B=512, 5 seeds x 10 steps, ~1 min on 2 CPUs
    python -m benchmarks.sampling_efficiency --smoke    # B=64, 1 seed, 1 step, a few seconds
    python -m benchmarks.sampling_efficiency --multi-epoch   # Est, budgeted balance: D prompts over E epochs, ~3 min

Writes `results.json`, `results.csv`, `tables.txt` and `sampling_efficiency.png` into `--out`
(default `benchmarks/results/sampling_efficiency/`). The multi-epoch mode is `benchmarks.sampling_multi_epoch`,
built on the prompt sets, samplers, step runners and metrics of this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    derive_seed,
    format_table,
    machine_description,
    make_parser,
    mean_and_std,
    progress,
    pyplot,
    save_figure,
    write_csv,
    write_json,
)
from trl_ada.candidates import HARD_PASS_RATE
from trl_ada.memory import PassRateMemory
from trl_ada.plan import SamplingPlan
from trl_ada.simulation import SimulatedPolicy, simulate_step

POSITIVE_THRESHOLD = 0.7
NUM_GENERATIONS = 4
DAPO_MAX_ROUNDS = 4
ADA_GRID = ((4, 4), (8, 4), (8, 8), (16, 2), (32, 1))
GRPO_SIZES = (4, 8, 16, 32)
BASELINE = "GRPO n=4"
LOW_PASS_RATE = 0.1
DEFAULT_OUT = Path("benchmarks/results/sampling_efficiency")
FULL_SIZES = {"num_prompts": 512, "steps": 10, "seeds": 5}
SMOKE_SIZES = {"num_prompts": 64, "steps": 1, "seeds": 1}

# --------------------------------------------------------------------------------------------
# Prompt sets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSet:
    """Pass rates: p = 0 with probability `zero_fraction`, otherwise p ~ Beta(beta_a, beta_b)."""

    name: str
    zero_fraction: float
    beta_a: float
    beta_b: float
    description: str

    @property
    def expected_mean(self) -> float:
        """Mean pass rate of the distribution."""
        return (1.0 - self.zero_fraction) * self.beta_a / (self.beta_a + self.beta_b)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` pass rates drawn from the distribution."""
        is_zero = rng.random(size) < self.zero_fraction
        rates = rng.beta(self.beta_a, self.beta_b, size)
        return np.where(is_zero, 0.0, rates)


PROMPT_SETS = (
    PromptSet("base", 0.19, 0.8, 1.65, "paper's base model: ~19% unsolvable, mean pass rate ~0.265"),
    PromptSet("hard", 0.0, 0.3, 3.0, "hard prompts / early training: Beta(0.3, 3)"),
    PromptSet("easy", 0.0, 3.0, 0.5, "easy prompts / late training: Beta(3, 0.5)"),
)

# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplerSpec:
    """One sampling strategy. `family` is grpo, dapo, pos or balance (multi-epoch mode: also budgeted, refill, and
    est: the paper's Reinforce-Ada-Est, `sampling="est"` at `num_generations`); `label` is its short figure label."""

    name: str
    family: str
    label: str
    num_generations: int
    samples_per_round: int
    max_rounds: int
    exit_rule: str | None = None  # None: plain GRPO (`sampling="grpo"`)
    generation_batch_factor: int = 1
    memory: bool = False  # budgeted balance switches (multi-epoch mode)
    first_round: str = "fixed"
    later_rounds: str = "fixed"
    futility_threshold: float = 0.0
    sample_budget: float | None = None
    prompt_oversampling: float = 1.0  # candidates beyond the batch (family "refill", multi-epoch mode)
    rounds_per_prompt: int | None = None
    skip_threshold: float | None = None
    skip_exploration: float = 0.0
    skip_unsolvable_draws: int | None = 64
    skip_max_consecutive: int = 4

    @property
    def plan(self) -> SamplingPlan:
        """The library's sampling plan of this sampler: every parameter, the ones the spec leaves at their default
        (`round_confidence`, `memory_decay`, ...) included; family est: the `sampling="est"` preset's plan."""
        if self.family == "est":
            return SamplingPlan.from_fields(
                sampling="est", num_generations=self.num_generations, positive_threshold=POSITIVE_THRESHOLD
            )
        rounds = {  # what a schedule with rounds reads; plain GRPO draws one round of n (the DAPO rows refill by
            # their own loop)
            "exit_rule": self.exit_rule,
            "samples_per_round": self.samples_per_round,
            "max_rounds": self.max_rounds,
            "first_round": self.first_round,
            "later_rounds": self.later_rounds,
            "futility_threshold": self.futility_threshold,
            "sample_budget": self.sample_budget,
            "prompt_oversampling": self.prompt_oversampling,
            "rounds_per_prompt": self.rounds_per_prompt,
            "skip_threshold": self.skip_threshold,
            "skip_exploration": self.skip_exploration,
            "skip_unsolvable_draws": self.skip_unsolvable_draws,
            "skip_max_consecutive": self.skip_max_consecutive,
        }
        return SamplingPlan.from_fields(
            sampling="grpo" if self.exit_rule is None else None,
            num_generations=self.num_generations,
            positive_threshold=POSITIVE_THRESHOLD,
            pass_rate_memory=self.memory,
            **({} if self.exit_rule is None else rounds),
        )


def build_samplers() -> list[SamplerSpec]:
    """All compared samplers, in table order."""
    specs = [SamplerSpec(f"GRPO n={k}", "grpo", f"n={k}", k, k, 1) for k in GRPO_SIZES]
    for factor in (1, 3):
        gen = "B" if factor == 1 else f"{factor}B"
        specs.append(SamplerSpec(f"DAPO n=4 (gen {gen})", "dapo", f"DAPO {gen}", 4, 4, DAPO_MAX_ROUNDS, None, factor))
    caps = sorted({m * n for m, n in ADA_GRID})
    for rule in ("pos", "balance"):
        for m, n in (*ADA_GRID, *((1, cap) for cap in caps)):
            specs.append(SamplerSpec(f"{rule} M={m} N={n}", rule, f"{m}×{n}", NUM_GENERATIONS, m, n, rule))
    return specs


@dataclass(frozen=True)
class StepResult:
    """What one sampler did in one step of B prompts."""

    num_prompts: int
    samples: int
    effective_groups: int
    rounds: int
    prompts_drawn: int
    low_pass_drawn: int = 0  # solvable prompts with p < LOW_PASS_RATE among the prompts drawn
    low_pass_effective: int = 0  # ... of which ended in the batch with an effective group
    exited: int | None = None  # prompts that met the exit rule (None: the sampler has no exit rule)
    exited_effective: int | None = None
    memory_hits: int = 0  # pass-rate memory: prompts it had seen before
    predicted_pass_rate_sum: float = 0.0  # ... sum over hits of the posterior mean before the step
    realized_pass_rate_sum: float = 0.0  # ... sum over hits of the first round's pass rate
    calibration_error_sum: float = 0.0  # ... sum over hits of |predicted - realised|
    futile: int = 0  # prompts stopped as futile
    skipped: int = 0  # candidates skipped before rollout (refill)
    hard_kept: int = 0  # trained prompts whose first round's pass rate is below HARD_PASS_RATE
    trained: int = 0  # samples that reach the loss (every sample under Est; n per trained prompt otherwise)


def is_low_pass(pass_rates: np.ndarray) -> np.ndarray:
    """Solvable but rarely solved prompts: 0 < p < LOW_PASS_RATE."""
    return (pass_rates > 0.0) & (pass_rates < LOW_PASS_RATE)


def has_both_classes(rewards: np.ndarray) -> np.ndarray:
    """Per row: does the group hold at least one positive and one negative completion?"""
    positive = rewards > POSITIVE_THRESHOLD
    return positive.any(axis=-1) & ~positive.all(axis=-1)


def run_adaptive_step(
    spec: SamplerSpec,
    pass_rates: np.ndarray,
    seed: int,
    memory: PassRateMemory | None = None,
    prompt_ids: np.ndarray | None = None,
) -> tuple[StepResult, np.ndarray]:
    """GRPO (`sampling="grpo"`), Reinforce-Ada, budgeted balance or Est over the step's prompts, through the
    trl_ada core.

    Returns the step's result and, per prompt, whether its kept group is effective (mixed; Est's groups differ in
    size).
    """
    sampler = simulate_step(SimulatedPolicy(pass_rates, seed=seed), memory, prompt_ids, spec.plan)
    kept = sampler.kept_rewards()
    mixed = np.array([has_both_classes(group) for group in kept], dtype=bool)
    exited = np.array([r is not None for r in sampler.exit_round])
    low = is_low_pass(pass_rates)
    hits = np.flatnonzero(sampler.memory_hits)
    predicted = sampler.prior_alpha[hits] / (sampler.prior_alpha[hits] + sampler.prior_beta[hits])
    realized = np.array([np.mean(sampler.is_positive(p)[: sampler.first_round_sizes[p]]) for p in hits])
    return StepResult(
        num_prompts=len(pass_rates),
        samples=sum(len(pool) for pool in sampler.pools),
        effective_groups=int(mixed.sum()),
        rounds=sampler.round,
        prompts_drawn=len(pass_rates),
        low_pass_drawn=int(low.sum()),
        low_pass_effective=int((low & mixed).sum()),
        exited=int(exited.sum()),
        exited_effective=int((mixed & exited).sum()),
        memory_hits=int(hits.size),
        predicted_pass_rate_sum=float(predicted.sum()),
        realized_pass_rate_sum=float(realized.sum()),
        calibration_error_sum=float(np.abs(predicted - realized).sum()),
        futile=int(sum(sampler.stopped)),
        hard_kept=sum(sampler.first_round_pass_rate(p) < HARD_PASS_RATE for p in range(len(pass_rates))),
        trained=sum(len(group) for group in kept),
    ), mixed


def run_dapo_step(spec: SamplerSpec, prompt_set: PromptSet, pass_rates: np.ndarray, seed: int) -> StepResult:
    """DAPO dynamic sampling: generation batches of n per prompt, keep mixed groups, refill up to the round cap."""

    def fresh(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        return prompt_set.sample(rng, size), np.full(size, -1)

    return dapo_rounds(spec, pass_rates, np.full(len(pass_rates), -1), fresh, np.random.default_rng(seed))[0]


def dapo_rounds(spec: SamplerSpec, pass_rates: np.ndarray, ids: np.ndarray, fresh, rng: np.random.Generator):
    """DAPO's rounds over the step's prompts (`ids`) and fresh ones from `fresh(rng, size) -> (rates, ids)`.

    Returns the step's result and the ids of the prompts whose mixed groups were kept (the trained ones).
    """
    batch = len(pass_rates)
    generation_batch = spec.generation_batch_factor * batch
    filled = samples = rounds = drawn = low_drawn = low_kept = hard_kept = 0
    trained = []
    while filled < batch and rounds < spec.max_rounds:
        fresh_rates, fresh_ids = fresh(rng, generation_batch if rounds else generation_batch - batch)
        rates = fresh_rates if rounds else np.concatenate([pass_rates, fresh_rates])
        round_ids = fresh_ids if rounds else np.concatenate([ids, fresh_ids])
        rewards = (rng.random((rates.size, spec.num_generations)) < rates[:, None]).astype(np.float64)
        mixed = has_both_classes(rewards)
        kept = mixed & (np.cumsum(mixed) <= batch - filled)  # surplus mixed groups of the last round are dropped
        low = is_low_pass(rates)
        filled += int(kept.sum())
        low_drawn += int(low.sum())
        low_kept += int((low & kept).sum())
        hard_kept += int((kept & (rewards.mean(axis=1) < HARD_PASS_RATE)).sum())
        samples += rewards.size
        drawn += rates.size
        rounds += 1
        trained.append(round_ids[kept])
    result = StepResult(
        batch,
        samples,
        filled,
        rounds,
        drawn,
        low_drawn,
        low_kept,
        hard_kept=hard_kept,
        trained=filled * spec.num_generations,
    )
    return result, np.concatenate(trained)


def run_step(spec: SamplerSpec, prompt_set: PromptSet, pass_rates: np.ndarray, seed: int) -> StepResult:
    """One step of `spec` over the step's prompts."""
    if spec.family == "dapo":
        return run_dapo_step(spec, prompt_set, pass_rates, seed)
    return run_adaptive_step(spec, pass_rates, seed)[0]


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------

METRICS = (
    "effective_fraction",
    "samples_per_prompt",
    "samples_per_effective_group",
    "rounds",
    "prompts_drawn_per_slot",
    "low_pass_effective_fraction",
    "exited_fraction",
    "exited_effective_fraction",
)


def seed_metrics(steps: Sequence[StepResult]) -> dict[str, float]:
    """Per-seed values: step means, except samples per effective group (ratio of sums over steps)."""
    effective = sum(s.effective_groups for s in steps)
    has_exits = all(s.exited is not None for s in steps)
    exited = sum(s.exited for s in steps) if has_exits else 0
    low_drawn = sum(s.low_pass_drawn for s in steps)
    return {
        "effective_fraction": float(np.mean([s.effective_groups / s.num_prompts for s in steps])),
        "samples_per_prompt": float(np.mean([s.samples / s.num_prompts for s in steps])),
        "samples_per_effective_group": sum(s.samples for s in steps) / effective if effective else float("inf"),
        "rounds": float(np.mean([s.rounds for s in steps])),
        "prompts_drawn_per_slot": float(np.mean([s.prompts_drawn / s.num_prompts for s in steps])),
        "low_pass_effective_fraction": (
            sum(s.low_pass_effective for s in steps) / low_drawn if low_drawn else float("nan")
        ),
        "exited_fraction": float(np.mean([s.exited / s.num_prompts for s in steps])) if has_exits else float("nan"),
        "exited_effective_fraction": sum(s.exited_effective for s in steps) / exited if exited else float("nan"),
    }


def summarise(per_seed: Sequence[dict[str, float]]) -> dict[str, float]:
    """Mean and std over seeds of every metric, plus the largest per-seed mean of rounds."""
    summary: dict[str, float] = {}
    for metric in METRICS:
        summary[metric], summary[f"{metric}_std"] = mean_and_std([values[metric] for values in per_seed])
    summary["rounds_max"] = max(values["rounds"] for values in per_seed)
    return summary


def add_baseline_ratio(results: dict[str, dict[str, float]], baseline: str = BASELINE) -> None:
    """Samples per effective group of each sampler divided by the baseline's (in place)."""
    reference = results[baseline]["samples_per_effective_group"]
    for values in results.values():
        values["ratio_vs_grpo4"] = values["samples_per_effective_group"] / reference


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def step_prompts(prompt_set: PromptSet, seed: int, step: int, num_prompts: int) -> np.ndarray:
    """The B pass rates every sampler sees in step `step` of seed `seed`."""
    return prompt_set.sample(np.random.default_rng(derive_seed(seed, prompt_set.name, step, "prompts")), num_prompts)


def run_prompt_set(
    prompt_set: PromptSet, specs: Sequence[SamplerSpec], seeds: Sequence[int], steps: int, num_prompts: int, show: bool
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per-sampler summaries and the realised pass-rate statistics of the prompts, for one prompt set."""
    per_seed: dict[str, list[dict[str, float]]] = {spec.name: [] for spec in specs}
    prompts = {seed: [step_prompts(prompt_set, seed, step, num_prompts) for step in range(steps)] for seed in seeds}
    tasks = [(seed, spec) for seed in seeds for spec in specs]
    for seed, spec in progress(tasks, total=len(tasks), desc=f"{prompt_set.name}", enabled=show):
        results = [
            run_step(spec, prompt_set, rates, derive_seed(seed, prompt_set.name, step, spec.name))
            for step, rates in enumerate(prompts[seed])
        ]
        per_seed[spec.name].append(seed_metrics(results))
    summaries = {name: summarise(values) for name, values in per_seed.items()}
    add_baseline_ratio(summaries)
    rates = np.concatenate([r for per_step in prompts.values() for r in per_step])
    realised = {
        "realised_mean_pass_rate": float(rates.mean()),
        "realised_zero_fraction": float(np.mean(rates == 0.0)),
        "num_step_prompts": int(rates.size),
    }
    return summaries, realised


def _pm(mean: float, std: float, digits: int) -> str:
    if not np.isfinite(mean):
        return "inf"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def table_for(
    prompt_set: PromptSet, realised: dict[str, float], summaries: dict[str, dict[str, float]], cfg: dict[str, Any]
) -> str:
    """The fixed-width table of one prompt set."""
    headers = ["sampler", "eff. groups", "samples/prompt", "samples/eff. group", "rounds", "vs GRPO n=4"]
    rows = [
        [
            name,
            _pm(v["effective_fraction"], v["effective_fraction_std"], 3),
            _pm(v["samples_per_prompt"], v["samples_per_prompt_std"], 2),
            _pm(v["samples_per_effective_group"], v["samples_per_effective_group_std"], 2),
            f"{v['rounds']:.2f}",
            f"{v['ratio_vs_grpo4']:.2f}x" if np.isfinite(v["ratio_vs_grpo4"]) else "inf",
        ]
        for name, v in summaries.items()
    ]
    mean, zeros = realised["realised_mean_pass_rate"], realised["realised_zero_fraction"]
    title = (
        f"[{prompt_set.name}] {prompt_set.description} | realised mean pass rate {mean:.3f}, "
        f"p=0 for {100 * zeros:.1f}% | B={cfg['num_prompts']}, {cfg['seeds']} seed(s) x {cfg['steps']} step(s)"
    )
    return format_table(headers, rows, title)


FAMILY_STYLE = {
    "grpo": ("tab:gray", "o", "GRPO n=k (one round)"),
    "dapo": ("tab:green", "s", "DAPO dynamic sampling, n=4"),
    "pos": ("tab:orange", "^", "Reinforce-Ada pos"),
    "balance": ("tab:blue", "D", "Reinforce-Ada balance"),
}


def _marker_groups(specs: Sequence[SamplerSpec]) -> list[tuple[str, bool, list[SamplerSpec]]]:
    """(family, one-at-a-time?, members): one-at-a-time samplers (M=1) get hollow markers."""
    groups = []
    for family in FAMILY_STYLE:
        for single in (False, True):
            members = [s for s in specs if s.family == family and (s.samples_per_round == 1) == single]
            if members:
                groups.append((family, single, members))
    return groups


def _scatter_group(ax, summaries: dict[str, dict[str, float]], family: str, single: bool, members) -> None:
    """One family's points with std-over-seeds error bars and a short label next to each."""
    color, marker, legend = FAMILY_STYLE[family]
    if family in ("pos", "balance"):
        legend += ", one at a time (1×cap)" if single else ", M×N"
    xs = [summaries[s.name]["samples_per_prompt"] for s in members]
    ys = [summaries[s.name]["effective_fraction"] for s in members]
    ax.errorbar(
        xs,
        ys,
        xerr=[summaries[s.name]["samples_per_prompt_std"] for s in members],
        yerr=[summaries[s.name]["effective_fraction_std"] for s in members],
        fmt=marker,
        color=color,
        markerfacecolor="none" if single else color,
        label=legend,
        markersize=6,
        capsize=2,
        alpha=0.85,
    )
    for k, (spec, x, y) in enumerate(zip(members, xs, ys, strict=True)):
        ax.annotate(
            spec.label, (x, y), textcoords="offset points", xytext=_label_offset(family, k), fontsize=7, color=color
        )


def _label_offset(family: str, index: int) -> tuple[int, int]:
    """Label offsets in points: balance above its marker, pos and GRPO below, neighbours staggered."""
    stagger = 7 * (index % 2)
    if family == "balance":
        return 3, 5 + stagger
    if family == "dapo":
        return 3, 5 if index % 2 == 0 else -12
    return 3, -12 - stagger


def plot(results: dict[str, dict[str, dict[str, float]]], specs: Sequence[SamplerSpec], path: Path) -> Path:
    """Scatter of samples per prompt (x, log scale) vs effective-group fraction (y), one panel per prompt set."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(6.0 * len(results), 5.2), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (set_name, summaries) in zip(axes, results.items(), strict=True):
        for family, single, members in _marker_groups(specs):
            _scatter_group(ax, summaries, family, single, members)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{set_name} prompts")
        ax.set_xlabel("samples per prompt (log scale)")
        ax.set_ylim(-0.02, 1.05)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("effective-group fraction (kept group has both classes)")
    axes[0].legend(loc="lower right", fontsize=7)
    fig.suptitle("Sampling efficiency on simulated prompts (Bernoulli 0/1 rewards, kept group n=4 except GRPO n=k)")
    return save_figure(fig, path)


def csv_rows(results: dict[str, dict[str, dict[str, float]]], specs: Sequence[SamplerSpec]) -> list[dict[str, Any]]:
    """One flat row per (prompt set, sampler)."""
    by_name = {spec.name: spec for spec in specs}
    rows = []
    for set_name, summaries in results.items():
        for name, values in summaries.items():
            spec = by_name[name]
            rows.append({"prompt_set": set_name, "sampler": name, **_spec_fields(spec), **values})
    return rows


def _spec_fields(spec: SamplerSpec) -> dict[str, Any]:
    fields = asdict(spec)
    fields.pop("name")
    return fields


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (common ones from benchmarks.common, plus sizes)."""
    parser = make_parser(__doc__.split("\n\n", 1)[0], DEFAULT_OUT, default_seeds=None)
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step B (default 512; smoke 64)")
    parser.add_argument("--steps", type=int, default=None, help="steps per seed (default 10; smoke 1)")
    parser.add_argument(
        "--multi-epoch",
        action="store_true",
        help="the multi-epoch mode (Reinforce-Ada-Est): D prompts over E epochs with moving pass rates",
    )
    parser.add_argument(
        "--skip-coverage",
        action="store_true",
        help="with --multi-epoch: how often hard prompts are visited with pre-rollout skipping off, before and after "
        "the fix that skips only easy or unsolvable prompts",
    )
    args = parser.parse_args(argv)
    if args.skip_coverage and not args.multi_epoch:
        parser.error("--skip-coverage is a part of the multi-epoch mode: add --multi-epoch.")
    args.seeds_given = args.seeds
    sizes = SMOKE_SIZES if args.smoke else FULL_SIZES
    args.seeds = args.seeds or sizes["seeds"]
    args.prompts = args.prompts or sizes["num_prompts"]
    args.steps = args.steps or sizes["steps"]
    for option in ("seeds", "prompts", "steps"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1; got {getattr(args, option)}.")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write JSON, CSV, tables and the figure; return the JSON data."""
    args = parse_args(argv)
    if args.multi_epoch:  # the other benchmark of this file's command line; it builds on this module
        from benchmarks.sampling_multi_epoch import main_multi_epoch

        return main_multi_epoch(args)
    cfg = {
        "num_prompts": args.prompts,
        "steps": args.steps,
        "seeds": args.seeds,
        "first_seed": args.seed,
        "smoke": args.smoke,
        "num_generations": NUM_GENERATIONS,
        "positive_threshold": POSITIVE_THRESHOLD,
        "dapo_max_rounds": DAPO_MAX_ROUNDS,
        "reinforce_ada_grid": [list(mn) for mn in ADA_GRID],
    }
    specs = build_samplers()
    seeds = list(range(args.seed, args.seed + args.seeds))
    results, prompt_stats, tables = {}, {}, []
    for prompt_set in PROMPT_SETS:
        summaries, realised = run_prompt_set(prompt_set, specs, seeds, args.steps, args.prompts, not args.quiet)
        results[prompt_set.name] = summaries
        prompt_stats[prompt_set.name] = {**asdict(prompt_set), "expected_mean": prompt_set.expected_mean, **realised}
        tables.append(table_for(prompt_set, realised, summaries, cfg))
        print(tables[-1] + "\n", flush=True)
    out = Path(args.out)
    data = {
        "benchmark": "sampling_efficiency",
        "config": cfg,
        "prompt_sets": prompt_stats,
        "samplers": [asdict(spec) for spec in specs],
        "results": results,
        "machine": machine_description(),
    }
    write_json(out / "results.json", data)
    write_csv(out / "results.csv", csv_rows(results, specs))
    (out / "tables.txt").write_text("\n\n".join(tables) + "\n")
    figure = plot(results, specs, out / "sampling_efficiency.png")
    print(f"wrote {out / 'results.json'}, {out / 'results.csv'}, {out / 'tables.txt'}, {figure}")
    return data


if __name__ == "__main__":
    main()
