"""The multi-epoch mode of the sampling-efficiency benchmark (Reinforce-Ada-Est, budgeted balance and refill): D
simulated prompts trained over E epochs, their pass rates moving with the effective groups each sampler produces.

Every sampler of `benchmarks.sampling_efficiency` runs here over the same dataset and epoch orders, with the paper's
Reinforce-Ada-Est (`sampling="est"`: an Ada-EMA pass-rate memory across epochs, one allocated round per step), the
budgeted-balance switches (pass-rate memory, prior-sized rounds, futility stop, sample budget) and the candidate
refill samplers added; the prompt sets, step runners and metrics are that module's. What is measured and the
results: `docs/lab/benchmarks_sampling.md`, "Multi-epoch mode".

    python -m benchmarks.sampling_efficiency --multi-epoch           # D=1024, B=256, 4 epochs, 5 seeds, ~3 min
    python -m benchmarks.sampling_efficiency --multi-epoch --smoke   # D=32, B=16, 2 epochs, 1 seed, seconds
    python -m benchmarks.sampling_multi_epoch [--smoke] ...          # the same, without the flag
    python -m benchmarks.sampling_multi_epoch --skip-coverage       # hard prompts under pre-rollout skipping, ~3 min

Writes `multi_epoch.json`, `multi_epoch.csv`, `multi_epoch_tables.txt` (the full table, then the side-by-side table
of Est at n=8 and its baselines) and `sampling_efficiency_multi_epoch.png` into `--out`
(default `benchmarks/results/sampling_efficiency/`); `--skip-coverage` writes `skip_coverage.json` and
`skip_coverage.txt` instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import sampling_efficiency
from benchmarks.common import (
    derive_seed,
    format_table,
    machine_description,
    mean_and_std,
    progress,
    pyplot,
    save_figure,
    write_csv,
    write_json,
)
from benchmarks.sampling_efficiency import (
    DAPO_MAX_ROUNDS,
    FAMILY_STYLE,
    METRICS,
    NUM_GENERATIONS,
    PROMPT_SETS,
    PromptSet,
    SamplerSpec,
    StepResult,
    _pm,
    add_baseline_ratio,
    csv_rows,
    dapo_rounds,
    is_low_pass,
    run_adaptive_step,
    seed_metrics,
)
from trl_ada.candidates import all_right_probability, all_wrong_probability, num_candidates, skip_before_rollout
from trl_ada.memory import PassRateMemory
from trl_ada.plan import SamplingPlan
from trl_ada.simulation import LearningPrompts, SimulatedPolicy, SkipRule, simulate_refill_step

MULTI_EPOCH_SIZES = {"dataset": 1024, "num_prompts": 256, "epochs": 4, "seeds": 5}
MULTI_EPOCH_SMOKE_SIZES = {"dataset": 32, "num_prompts": 16, "epochs": 2, "seeds": 1}
LEARN_RATE = 0.5  # logit step of a prompt trained with an effective group
TRANSFER = 0.02  # logit step of every solvable prompt per training step
MEMORY_DECAY = 0.5  # the skip-coverage rows' memory (the other rows take their plan's)
FUTILITY_THRESHOLD = 0.05
BUDGETS = (4, 6, 8)
BUDGETED_ROUNDS = 3
BALANCE_PAPER = "balance M=8 N=4"
EST_PAPER = "Est n=8"
EST_COMPARISON = ("GRPO n=4", "GRPO n=8", "GRPO n=16", BALANCE_PAPER, "budgeted balance B=8", EST_PAPER)
"""The side-by-side table: the paper's Est at 8 per prompt, its compute-matched baseline GRPO n=8, and the rest."""
MULTI_EPOCH_METRICS = (
    *METRICS,
    "trained_per_prompt",
    "memory_hit_fraction",
    "futile_fraction",
    "predicted_pass_rate",
    "realized_pass_rate",
    "calibration_error",
    "skipped_per_slot",
    "hard_kept_fraction",
    "epochs_consumed",
)
SKIP_THRESHOLD = 0.8
SKIP_EXPLORATION = 0.05


def build_multi_epoch_samplers() -> list[SamplerSpec]:
    """GRPO n=4/8/16, DAPO, balance M=8 N=4, the paper's Est at n=8, the budgeted-balance switches alone and
    together, and the candidate refill samplers."""
    specs = [SamplerSpec(f"GRPO n={k}", "grpo", f"n={k}", k, k, 1) for k in (4, 8, 16)]
    specs.append(SamplerSpec("DAPO n=4 (gen B)", "dapo", "DAPO B", 4, 4, DAPO_MAX_ROUNDS))
    specs.append(SamplerSpec(BALANCE_PAPER, "balance", "8×4", NUM_GENERATIONS, 8, 4, "balance"))
    specs.append(SamplerSpec(EST_PAPER, "est", "Est 8", 8, 8, 1))
    est = {"family": "budgeted", "num_generations": NUM_GENERATIONS, "exit_rule": "balance"}
    specs.append(
        SamplerSpec(
            "memory + prior first round",
            label="prior",
            samples_per_round=8,
            max_rounds=4,
            memory=True,
            first_round="prior",
            **est,
        )
    )
    specs.append(
        SamplerSpec(
            "memory + futility stop",
            label="futility",
            samples_per_round=8,
            max_rounds=4,
            memory=True,
            futility_threshold=FUTILITY_THRESHOLD,
            **est,
        )
    )
    for budget in BUDGETS:
        specs.append(
            SamplerSpec(
                f"budget {budget}",
                label=f"b{budget}",
                samples_per_round=8,
                max_rounds=BUDGETED_ROUNDS,
                sample_budget=budget,
                **est,
            )
        )
    for budget in BUDGETS:
        specs.append(
            SamplerSpec(
                f"memory + budget {budget}",
                label=f"m+b{budget}",
                samples_per_round=8,
                max_rounds=BUDGETED_ROUNDS,
                memory=True,
                sample_budget=budget,
                **est,
            )
        )
    for budget in BUDGETS:
        specs.append(
            SamplerSpec(
                f"budgeted balance B={budget}",
                label=f"bb{budget}",
                samples_per_round=8,
                max_rounds=BUDGETED_ROUNDS,
                memory=True,
                first_round="prior",
                later_rounds="prior",
                futility_threshold=FUTILITY_THRESHOLD,
                sample_budget=budget,
                **est,
            )
        )
    refill = {"family": "refill", "num_generations": NUM_GENERATIONS, "prompt_oversampling": 3.0}
    dapo_mode = {**refill, "exit_rule": "mixed", "samples_per_round": 4, "rounds_per_prompt": 1}
    skip = {"memory": True, "skip_threshold": SKIP_THRESHOLD, "skip_exploration": SKIP_EXPLORATION}
    specs += [
        SamplerSpec("DAPO mode 3x, 4 rounds", label="DAPO mode", max_rounds=4, **dapo_mode),
        SamplerSpec("DAPO mode 3x, 8 rounds", label="DAPO 8r", max_rounds=8, **dapo_mode),
        SamplerSpec("DAPO mode 3x, 8 rounds + skip", label="DAPO+skip", max_rounds=8, **dapo_mode, **skip),
    ]
    mixed = {**refill, "exit_rule": "mixed", "samples_per_round": 4, "max_rounds": 12}
    balance = {**refill, "exit_rule": "balance", "samples_per_round": 4, "max_rounds": 8}
    for rounds in (3, 4, 8):
        specs.append(
            SamplerSpec(f"mixed 4x12, {rounds} r/p, 3x", label=f"mix{rounds}", rounds_per_prompt=rounds, **mixed)
        )
    specs.append(SamplerSpec("mixed 4x12, 4 r/p, 3x + skip", label="mix4+skip", rounds_per_prompt=4, **mixed, **skip))
    specs.append(SamplerSpec("balance 4x8, 4 r/p, 3x", label="bal4", rounds_per_prompt=4, **balance))
    specs.append(
        SamplerSpec("balance 4x8, 4 r/p, 3x + skip", label="bal4+skip", rounds_per_prompt=4, **balance, **skip)
    )
    return specs


class CandidateStream:
    """The data order of the refill samplers: each prompt once per epoch (seeded permutation); candidates a step
    did not examine stay at the front of the stream. At an epoch's end the next permutation follows, with the
    prompts still in the step moved to its end, so no prompt repeats inside a step."""

    def __init__(self, dataset: int, rng: np.random.Generator):
        self.dataset, self.rng = dataset, rng
        self.order, self.position = rng.permutation(dataset), 0

    def peek(self, size: int) -> np.ndarray:
        """The next `size` candidates (not consumed yet)."""
        if self.position + size > self.order.size:
            rest = self.order[self.position :]
            new = self.rng.permutation(self.dataset)
            in_rest = np.isin(new, rest)
            self.order, self.position = np.concatenate([rest, new[~in_rest], new[in_rest]]), 0
        return self.order[self.position : self.position + size]

    def consume(self, count: int) -> None:
        """The first `count` candidates of the last `peek` were examined: they leave the stream."""
        self.position += count


def run_refill_step(
    spec: SamplerSpec, rates: np.ndarray, ids: np.ndarray, num_kept: int, seed: int, memory: PassRateMemory | None
) -> tuple[StepResult, np.ndarray, np.ndarray, int]:
    """One refill step over candidates `ids`: (result, kept ids, their effectiveness, candidates consumed)."""
    sampler = simulate_refill_step(SimulatedPolicy(rates[ids], seed=seed), num_kept, memory, ids, spec.plan)
    stats = sampler.refill_statistics()
    kept = np.array(sampler.kept_prompts())
    effective = np.array([sampler.is_effective(p) for p in kept])
    low = is_low_pass(rates[ids[: stats.consumed]])
    low_effective = is_low_pass(rates[ids[kept]]) & effective
    result = StepResult(
        num_prompts=num_kept,
        samples=sampler.samples_drawn,
        effective_groups=int(effective.sum()),
        rounds=sampler.round,
        prompts_drawn=stats.consumed,
        low_pass_drawn=int(low.sum()),
        low_pass_effective=int(low_effective.sum()),
        futile=int(sum(sampler.stopped)),
        skipped=stats.skipped,
        hard_kept=round(stats.hard_kept_fraction * num_kept),
        trained=num_kept * spec.num_generations,
    )
    return result, ids[kept], effective, stats.consumed


def draw_from_dataset(rates: np.ndarray, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` prompts drawn uniformly from the dataset: (their pass rates, their ids); DAPO's refills."""
    drawn = rng.integers(0, rates.size, size)
    return rates[drawn], drawn


def new_memory(plan: SamplingPlan) -> PassRateMemory | None:
    """The pass-rate memory a trainer with `plan` keeps across steps (its decay and prior), or None without one."""
    if not plan.memory.enabled:
        return None
    return PassRateMemory(decay=plan.memory.decay, prior=plan.memory.prior)


def run_multi_epoch(spec: SamplerSpec, prompt_set: PromptSet, seed: int, sizes: dict[str, int]) -> list[StepResult]:
    """`spec` trained over a dataset of D prompts for E epochs of D / B steps; pass rates move (`LearningPrompts`).

    The dataset and the epoch orders depend on the seed only, so every sampler starts from the same prompts in the
    same order; how the pass rates move then depends on the effective groups the sampler produced.
    """
    dataset, batch = sizes["dataset"], sizes["num_prompts"]
    prompts = LearningPrompts(
        prompt_set.sample(np.random.default_rng(derive_seed(seed, prompt_set.name, "dataset")), dataset),
        learn_rate=LEARN_RATE,
        transfer=TRANSFER,
    )
    order_rng = np.random.default_rng(derive_seed(seed, prompt_set.name, "order"))
    memory = new_memory(spec.plan)
    stream = CandidateStream(dataset, order_rng) if spec.family == "refill" else None
    results = []
    for epoch in range(sizes["epochs"]):
        order = order_rng.permutation(dataset) if stream is None else None
        for step in range(dataset // batch):
            rates = prompts.current
            step_seed = derive_seed(seed, prompt_set.name, epoch, step, spec.name)
            if stream is not None:  # the same number of trained steps; the stream says how many epochs they took
                candidates = stream.peek(num_candidates(batch, spec.prompt_oversampling))
                result, trained, effective, consumed = run_refill_step(
                    spec, rates, candidates, batch, step_seed, memory
                )
                stream.consume(consumed)
                prompts.learn(trained, effective)
                results.append(result)
                continue
            ids = order[step * batch : (step + 1) * batch]
            if spec.family == "dapo":
                fresh = partial(draw_from_dataset, rates)
                result, trained = dapo_rounds(spec, rates[ids], ids, fresh, np.random.default_rng(step_seed))
                effective = np.ones(trained.size, dtype=bool)
            else:
                result, effective = run_adaptive_step(spec, rates[ids], step_seed, memory, ids)
                trained = ids
            prompts.learn(trained, effective)
            results.append(result)
    return results


def multi_epoch_seed_metrics(steps: Sequence[StepResult], dataset: int) -> dict[str, float]:
    """`seed_metrics` plus trained samples per prompt, memory hits, futile stops, first-round calibration on memory
    hits, candidates skipped, the hard share of trained prompts and the epochs of data the steps consumed."""
    metrics = seed_metrics(steps)
    hits = sum(s.memory_hits for s in steps)
    prompts = sum(s.num_prompts for s in steps)
    metrics["trained_per_prompt"] = sum(s.trained for s in steps) / prompts
    metrics["skipped_per_slot"] = sum(s.skipped for s in steps) / prompts
    metrics["hard_kept_fraction"] = sum(s.hard_kept for s in steps) / prompts
    metrics["epochs_consumed"] = sum(s.prompts_drawn for s in steps) / dataset
    metrics["memory_hit_fraction"] = hits / prompts
    metrics["futile_fraction"] = sum(s.futile for s in steps) / prompts
    for name, field_name in (
        ("predicted_pass_rate", "predicted_pass_rate_sum"),
        ("realized_pass_rate", "realized_pass_rate_sum"),
        ("calibration_error", "calibration_error_sum"),
    ):
        metrics[name] = sum(getattr(s, field_name) for s in steps) / hits if hits else float("nan")
    return metrics


def run_multi_epoch_set(
    prompt_set: PromptSet, specs: Sequence[SamplerSpec], seeds: Sequence[int], sizes: dict[str, int], show: bool
) -> dict[str, dict[str, float]]:
    """Per-sampler summaries (mean and std over seeds) of the multi-epoch mode on one prompt set."""
    per_seed: dict[str, list[dict[str, float]]] = {spec.name: [] for spec in specs}
    tasks = [(seed, spec) for seed in seeds for spec in specs]
    for seed, spec in progress(tasks, total=len(tasks), desc=f"{prompt_set.name} multi-epoch", enabled=show):
        per_seed[spec.name].append(
            multi_epoch_seed_metrics(run_multi_epoch(spec, prompt_set, seed, sizes), sizes["dataset"])
        )
    summaries = {}
    for name, values in per_seed.items():
        summaries[name] = {}
        for metric in MULTI_EPOCH_METRICS:
            summaries[name][metric], summaries[name][f"{metric}_std"] = mean_and_std([v[metric] for v in values])
    add_baseline_ratio(summaries)
    return summaries


def multi_epoch_table(prompt_set: PromptSet, summaries: dict[str, dict[str, float]], sizes: dict[str, int]) -> str:
    """The fixed-width table of the multi-epoch mode."""
    headers = [
        "sampler",
        "eff. groups",
        "samples/prompt",
        "samples/eff. group",
        "low-pass cov.",
        "rounds",
        "hits",
        "futile",
        "pred./real. pass",
        "calib. MAE",
        "skipped",
        "hard kept",
        "epochs",
    ]
    rows = []
    for name, v in summaries.items():
        calibrated = np.isfinite(v["predicted_pass_rate"])
        rows.append(
            [
                name,
                _pm(v["effective_fraction"], v["effective_fraction_std"], 3),
                _pm(v["samples_per_prompt"], v["samples_per_prompt_std"], 2),
                _pm(v["samples_per_effective_group"], v["samples_per_effective_group_std"], 2),
                _pm(v["low_pass_effective_fraction"], v["low_pass_effective_fraction_std"], 3),
                f"{v['rounds']:.2f}",
                f"{v['memory_hit_fraction']:.2f}",
                f"{v['futile_fraction']:.3f}",
                f"{v['predicted_pass_rate']:.3f}/{v['realized_pass_rate']:.3f}" if calibrated else "-",
                f"{v['calibration_error']:.3f}" if calibrated else "-",
                f"{v['skipped_per_slot']:.2f}",
                f"{v['hard_kept_fraction']:.3f}",
                f"{v['epochs_consumed']:.2f}",
            ]
        )
    title = (
        f"[{prompt_set.name} multi-epoch] D={sizes['dataset']} prompts, B={sizes['num_prompts']} per step, "
        f"{sizes['epochs']} epochs, {sizes['seeds']} seed(s); pass rates move (learn {LEARN_RATE}, transfer "
        f"{TRANSFER} logits)"
    )
    return format_table(headers, rows, title)


def est_comparison_table(summaries: dict[str, dict[str, float]], sizes: dict[str, int]) -> str:
    """Side by side: the paper's Est at n=8 against GRPO n=4/8/16, balance and budgeted balance B=8."""
    headers = [
        "sampler",
        "eff. prompts",
        "samples/prompt",
        "trained/prompt",
        "low-pass cov.",
        "pred./real. pass",
        "calib. MAE",
    ]
    rows = []
    for name in EST_COMPARISON:
        v = summaries[name]
        calibrated = np.isfinite(v["predicted_pass_rate"])
        rows.append(
            [
                name,
                _pm(v["effective_fraction"], v["effective_fraction_std"], 3),
                _pm(v["samples_per_prompt"], v["samples_per_prompt_std"], 2),
                _pm(v["trained_per_prompt"], v["trained_per_prompt_std"], 2),
                _pm(v["low_pass_effective_fraction"], v["low_pass_effective_fraction_std"], 3),
                f"{v['predicted_pass_rate']:.3f}/{v['realized_pass_rate']:.3f}" if calibrated else "-",
                _pm(v["calibration_error"], v["calibration_error_std"], 3) if calibrated else "-",
            ]
        )
    title = (
        f"[base multi-epoch, Est side by side] D={sizes['dataset']}, B={sizes['num_prompts']}, {sizes['epochs']} "
        f"epochs, {sizes['seeds']} seed(s); eff. prompts: trained samples not all equal; mean ± population std over "
        "seeds"
    )
    return format_table(headers, rows, title)


def plot_multi_epoch(summaries: dict[str, dict[str, float]], specs: Sequence[SamplerSpec], path: Path) -> Path:
    """Samples per prompt (x) against effective-group fraction and low-pass coverage (y), one point per sampler."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12.0, 5.0))
    colors = {
        **{family: style[0] for family, style in FAMILY_STYLE.items()},
        "budgeted": "tab:red",
        "refill": "tab:purple",
        "est": "black",
    }
    for ax, metric, label in (
        (axes[0], "effective_fraction", "effective-group fraction"),
        (axes[1], "low_pass_effective_fraction", "low-pass coverage (0 < p < 0.1)"),
    ):
        for spec in specs:
            v = summaries[spec.name]
            ax.errorbar(
                v["samples_per_prompt"],
                v[metric],
                xerr=v["samples_per_prompt_std"],
                yerr=v[f"{metric}_std"],
                fmt="o",
                color=colors[spec.family],
                capsize=2,
                markersize=5,
            )
            ax.annotate(
                spec.label,
                (v["samples_per_prompt"], v[metric]),
                textcoords="offset points",
                xytext=(3, 4),
                fontsize=7,
                color=colors[spec.family],
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("samples per prompt (log scale)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    fig.suptitle(
        "Multi-epoch simulation (base prompts): GRPO (grey), DAPO (green), balance (blue), budgeted balance (red), "
        "refill (purple), Est n=8 (black)"
    )
    return save_figure(fig, path)


def main_multi_epoch(args: argparse.Namespace) -> dict[str, Any]:
    """The multi-epoch mode on the base prompt set: tables, JSON, CSV and figure under `args.out`."""
    if args.skip_coverage:
        return main_skip_coverage(args)
    sizes = dict(MULTI_EPOCH_SMOKE_SIZES if args.smoke else MULTI_EPOCH_SIZES)
    sizes["seeds"] = args.seeds_given or sizes["seeds"]
    prompt_set = PROMPT_SETS[0]
    specs = build_multi_epoch_samplers()
    seeds = list(range(args.seed, args.seed + sizes["seeds"]))
    summaries = run_multi_epoch_set(prompt_set, specs, seeds, sizes, not args.quiet)
    table = multi_epoch_table(prompt_set, summaries, sizes) + "\n\n" + est_comparison_table(summaries, sizes)
    print(table + "\n", flush=True)
    out = Path(args.out)
    cfg = {
        **sizes,
        "first_seed": args.seed,
        "smoke": args.smoke,
        "learn_rate": LEARN_RATE,
        "transfer": TRANSFER,
        "futility_threshold": FUTILITY_THRESHOLD,
    }
    data = {
        "benchmark": "sampling_efficiency_multi_epoch",
        "config": cfg,
        "samplers": [asdict(spec) for spec in specs],
        "results": {prompt_set.name: summaries},
        "machine": machine_description(),
    }
    write_json(out / "multi_epoch.json", data)
    write_csv(out / "multi_epoch.csv", csv_rows(data["results"], specs))
    (out / "multi_epoch_tables.txt").write_text(table + "\n")
    figure = plot_multi_epoch(summaries, specs, out / "sampling_efficiency_multi_epoch.png")
    print(f"wrote {out / 'multi_epoch.json'}, {out / 'multi_epoch.csv'}, {figure}")
    return data


# --------------------------------------------------------------------------------------------
# Skip coverage: how often hard prompts are visited under pre-rollout skipping
# --------------------------------------------------------------------------------------------

SKIP_COVERAGE_SIZES = {"dataset": 1024, "num_prompts": 256, "epochs": 8, "seeds": 5}
SKIP_COVERAGE_SMOKE_SIZES = {"dataset": 48, "num_prompts": 8, "epochs": 3, "seeds": 1}
COVERAGE_SKIP_THRESHOLD = 0.6  # the setting; at 0.8 the rule before the fix never skips n=4 visits
EAGER_UNSOLVABLE_DRAWS = 16  # skip_unsolvable_draws that fires at memory_decay=0.5 (the default 64 does not here)
STARVED_STREAK = 4  # a prompt skipped more than this many turns in a row is "starved" (the default guarantee's bound)


def skip_rule_before_fix(
    plan: SamplingPlan,
    alpha: np.ndarray,
    beta: np.ndarray,
    memory_hits: np.ndarray,
    skip_streaks: np.ndarray,
    uniforms: np.ndarray,
) -> np.ndarray:
    """The skip rule up to the fix, kept here to measure it: a memory hit whose chance of n completions all right
    *or all wrong* is at least `skip_threshold` is skipped unless its uniform draw is below `skip_exploration`; hard
    prompts count as futile, and no skip streak brings them back."""
    n = plan.num_generations
    no_signal = all_right_probability(alpha, beta, n) + all_wrong_probability(alpha, beta, n)
    candidates = plan.section.candidates
    explored = np.asarray(uniforms) < candidates.skip_exploration
    return np.asarray(memory_hits, dtype=bool) & (no_signal >= candidates.skip_threshold) & ~explored


@dataclass(frozen=True)
class CoverageRow:
    """One sampler of the skip-coverage table and the rule that decides its skips (`None`: no skipping)."""

    spec: SamplerSpec
    rule: str
    skip_rule: SkipRule | None


def build_coverage_rows() -> list[CoverageRow]:
    """n=4 with 3x candidates (the issue's GRPO n=4 + skip) and balance 4x8 with refill: no skip, the rule before
    the fix, the rule after it (defaults), and the rule after it with an eager unsolvable side."""
    refill = {"family": "refill", "num_generations": NUM_GENERATIONS, "prompt_oversampling": 3.0}
    n4 = SamplerSpec("n=4, 3x", label="n4", exit_rule="mixed", samples_per_round=4, max_rounds=1, **refill)
    balance = SamplerSpec(
        "balance 4x8, 4 r/p, 3x",
        label="bal4",
        exit_rule="balance",
        samples_per_round=4,
        max_rounds=8,
        rounds_per_prompt=4,
        **refill,
    )
    skip = {"memory": True, "skip_threshold": COVERAGE_SKIP_THRESHOLD, "skip_exploration": SKIP_EXPLORATION}
    rows = []
    for base in (n4, balance):
        rows.append(CoverageRow(base, "no skip", None))
        rows.append(CoverageRow(replace(base, **skip), "before fix", skip_rule_before_fix))
        rows.append(CoverageRow(replace(base, **skip), "after fix", skip_before_rollout))
        eager = replace(base, **skip, skip_unsolvable_draws=EAGER_UNSOLVABLE_DRAWS)
        rows.append(CoverageRow(eager, f"after, K={EAGER_UNSOLVABLE_DRAWS}", skip_before_rollout))
    return rows


def run_skip_coverage(row: CoverageRow, prompt_set: PromptSet, seed: int, sizes: dict[str, int]) -> dict[str, float]:
    """One seed of `row` over E epochs of D / B steps (data and stream as in `run_multi_epoch`): per-prompt visits,
    skips and first visits, then the coverage metrics of the prompt classes (by their pass rate at the start)."""
    dataset, batch, spec = sizes["dataset"], sizes["num_prompts"], row.spec
    start = prompt_set.sample(np.random.default_rng(derive_seed(seed, prompt_set.name, "dataset")), dataset)
    prompts = LearningPrompts(start, learn_rate=LEARN_RATE, transfer=TRANSFER)
    stream = CandidateStream(dataset, np.random.default_rng(derive_seed(seed, prompt_set.name, "order")))
    memory = PassRateMemory(decay=MEMORY_DECAY) if row.skip_rule is not None else None
    visits, turns, skips = np.zeros(dataset), np.zeros(dataset), np.zeros(dataset)
    streak, longest = np.zeros(dataset), np.zeros(dataset)
    samples = effective = 0
    steps = sizes["epochs"] * (dataset // batch)
    for step in range(steps):
        ids = stream.peek(num_candidates(batch, spec.prompt_oversampling))
        policy = SimulatedPolicy(prompts.current[ids], seed=derive_seed(seed, prompt_set.name, step))
        rule = row.skip_rule or skip_before_rollout
        sampler = simulate_refill_step(policy, batch, memory, ids, spec.plan, skip_rule=rule)
        sampled, skipped = ids[[p for p in range(ids.size) if sampler.pools[p]]], ids[sampler.skipped_prompts()]
        visits[sampled] += 1
        turns[ids[: sampler.consumed]] += 1
        skips[skipped] += 1
        streak[skipped] += 1
        streak[sampled] = 0
        longest = np.maximum(longest, streak)
        kept = sampler.kept_prompts()
        effect = [sampler.is_effective(p) for p in kept]
        prompts.learn(ids[kept], effect)
        stream.consume(sampler.consumed)
        samples, effective = samples + sampler.samples_drawn, effective + sum(effect)
    solvable = start > 0
    classes = {
        "low": solvable & (start < 0.1),
        "third": solvable & (start <= np.quantile(start[solvable], 1 / 3)),
        "zero": ~solvable,
    }
    metrics = {"samples_per_prompt": samples / (steps * batch), "effective_fraction": effective / (steps * batch)}
    for name, members in classes.items():
        metrics[f"{name}_visits"] = float(visits[members].mean())
        metrics[f"{name}_skipped"] = float(skips[members].sum() / max(turns[members].sum(), 1))
        metrics[f"{name}_starved"] = float((longest[members] > STARVED_STREAK).mean())
        metrics[f"{name}_final_pass_rate"] = float(prompts.current[members].mean())
    metrics["final_pass_rate"] = float(prompts.current.mean())
    return metrics


def skip_coverage_table(summaries: dict[str, dict[str, float]], sizes: dict[str, int]) -> str:
    """Side by side: each sampler without skipping, with the rule before the fix and with the rule after it."""
    headers = [
        "sampler",
        "skip rule",
        "samples/prompt",
        "eff. groups",
        "low: visits",
        "low: skipped",
        "low: starved",
        "low: final p",
        "third: visits",
        "third: starved",
        "third: final p",
        "p=0: visits",
        "p=0: skipped",
        "final p",
    ]
    rows = []
    for key, v in summaries.items():
        sampler, rule = key.split(" | ")
        rows.append(
            [
                sampler,
                rule,
                _pm(v["samples_per_prompt"], v["samples_per_prompt_std"], 2),
                _pm(v["effective_fraction"], v["effective_fraction_std"], 3),
                _pm(v["low_visits"], v["low_visits_std"], 2),
                _pm(v["low_skipped"], v["low_skipped_std"], 2),
                _pm(v["low_starved"], v["low_starved_std"], 2),
                _pm(v["low_final_pass_rate"], v["low_final_pass_rate_std"], 3),
                _pm(v["third_visits"], v["third_visits_std"], 2),
                _pm(v["third_starved"], v["third_starved_std"], 2),
                _pm(v["third_final_pass_rate"], v["third_final_pass_rate_std"], 3),
                _pm(v["zero_visits"], v["zero_visits_std"], 2),
                _pm(v["zero_skipped"], v["zero_skipped_std"], 2),
                _pm(v["final_pass_rate"], v["final_pass_rate_std"], 3),
            ]
        )
    title = (
        f"[skip coverage] D={sizes['dataset']} prompts, B={sizes['num_prompts']} per step, {sizes['epochs']} epochs "
        f"of steps, {sizes['seeds']} seed(s), mean ± population std; skip_threshold={COVERAGE_SKIP_THRESHOLD}, "
        f"exploration {SKIP_EXPLORATION}, memory_decay={MEMORY_DECAY}. low: 0 < p < 0.1 at the start; third: the "
        f"hardest third of the solvable prompts; starved: share skipped more than {STARVED_STREAK} turns in a row at "
        "some point"
    )
    return format_table(headers, rows, title)


def main_skip_coverage(args: argparse.Namespace) -> dict[str, Any]:
    """The skip-coverage comparison on the base prompt set: table and JSON under `args.out`."""
    sizes = dict(SKIP_COVERAGE_SMOKE_SIZES if args.smoke else SKIP_COVERAGE_SIZES)
    sizes["seeds"] = args.seeds_given or sizes["seeds"]
    prompt_set, rows = PROMPT_SETS[0], build_coverage_rows()
    seeds = list(range(args.seed, args.seed + sizes["seeds"]))
    tasks = [(row, seed) for row in rows for seed in seeds]
    per_row: dict[str, list[dict[str, float]]] = {}
    for row, seed in progress(tasks, total=len(tasks), desc="skip coverage", enabled=not args.quiet):
        per_row.setdefault(f"{row.spec.name} | {row.rule}", []).append(run_skip_coverage(row, prompt_set, seed, sizes))
    summaries = {}
    for key, values in per_row.items():
        summaries[key] = {}
        for metric in values[0]:
            summaries[key][metric], summaries[key][f"{metric}_std"] = mean_and_std([v[metric] for v in values])
    table = skip_coverage_table(summaries, sizes)
    print(table + "\n", flush=True)
    out = Path(args.out)
    config = {**sizes, "first_seed": args.seed, "smoke": args.smoke, "skip_threshold": COVERAGE_SKIP_THRESHOLD}
    data = {
        "benchmark": "sampling_skip_coverage",
        "config": {**config, "learn_rate": LEARN_RATE, "transfer": TRANSFER, "memory_decay": MEMORY_DECAY},
        "samplers": {f"{row.spec.name} | {row.rule}": asdict(row.spec) for row in rows},
        "results": summaries,
        "machine": machine_description(),
    }
    write_json(out / "skip_coverage.json", data)
    (out / "skip_coverage.txt").write_text(table + "\n")
    print(f"wrote {out / 'skip_coverage.json'}, {out / 'skip_coverage.txt'}")
    return data


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """`python -m benchmarks.sampling_multi_epoch ARGS` is `python -m benchmarks.sampling_efficiency --multi-epoch
    ARGS`: the same options, outputs and return value."""
    return sampling_efficiency.main(["--multi-epoch", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
