"""Results of the toy experiments (`trl_ada.toy.experiment`): summaries of the per-step records of
[`~trl_ada.toy.experiment.run_method`], the tables of `trl-ada demo` and the reward-curve figure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..utils import format_table, mean, pyplot

if TYPE_CHECKING:
    from .specs import MethodSpec, TaskSettings

__all__ = [
    "PASS_AT_K",
    "SMOOTHING_WINDOW",
    "difficulty_buckets",
    "mean_token_entropy",
    "method_table",
    "metrics_at_milestones",
    "moving_average",
    "pass_at_k",
    "plot_curves",
    "probe_metrics",
    "reading",
    "samples_to_reach",
    "steps_to_reach",
    "summarize",
    "summary_table",
    "task_title",
]

SMOOTHING_WINDOW = 5
"""Steps of the trailing moving average that the summaries and the curves read the first-round reward over."""
PASS_AT_K = (1, 2, 4, 8, 16)
"""The k of the probe's pass@k (those up to its samples per prompt)."""
HARD_SET = (1, 2)
"""The paper's hard set: prompts with 1 or 2 right of `INITIAL_SAMPLES` initial samples."""
INITIAL_SAMPLES = 16


# ----------------------------------------------------------------------------------------------------------------
# Summaries
# ----------------------------------------------------------------------------------------------------------------


def moving_average(values: Sequence[float], window: int = SMOOTHING_WINDOW) -> list[float]:
    """Trailing moving average: entry k is the mean of values[max(0, k-window+1) : k+1]."""
    out, total = [], 0.0
    for k, value in enumerate(values):
        total += value
        if k >= window:
            total -= values[k - window]
        out.append(total / min(k + 1, window))
    return out


def _first_reaching(records: Sequence[dict], target: float, window: int, metric: str) -> dict | None:
    """The first record whose `metric`, smoothed over the records that have it, reaches `target` (None if never)."""
    measured = [r for r in records if not math.isnan(r.get(metric, float("nan")))]
    smoothed = moving_average([r[metric] for r in measured], window)
    return next((r for r, s in zip(measured, smoothed, strict=True) if s >= target), None)


def steps_to_reach(
    records: Sequence[dict], target: float, window: int = SMOOTHING_WINDOW, metric: str = "first_round_reward"
) -> float:
    """Training steps until the smoothed `metric` (first-round reward) reaches `target` (NaN if it never does)."""
    record = _first_reaching(records, target, window, metric)
    return float("nan") if record is None else float(record["step"])


def samples_to_reach(
    records: Sequence[dict], target: float, window: int = SMOOTHING_WINDOW, metric: str = "first_round_reward"
) -> float:
    """Completions generated until the smoothed `metric` (first-round reward) reaches `target` (NaN if never)."""
    record = _first_reaching(records, target, window, metric)
    return float("nan") if record is None else float(record["cumulative_samples"])


def summarize(records: Sequence[dict], targets: Sequence[float], window: int = SMOOTHING_WINDOW) -> dict[str, Any]:
    """Final (last-`window`-steps) first-round reward, totals, gain per 1k samples, steps/samples to targets.

    Means skip NaN (see [`~trl_ada.utils.mean`]): a step without a metric does not make its mean NaN.
    """
    rewards = [r["first_round_reward"] for r in records]
    initial, final = mean(rewards[:window]), mean(rewards[-window:])
    total = records[-1]["cumulative_samples"] if records else 0.0
    return {
        "steps": len(records),
        "initial_first_round_reward": initial,
        "final_first_round_reward": final,
        "total_samples": total,
        "reward_gain_per_1k_samples": (final - initial) / total * 1000 if total else float("nan"),
        "mean_frac_reward_zero_std": mean(r["frac_reward_zero_std"] for r in records),
        "wall_time": records[-1]["wall_time"] if records else 0.0,
        "steps_to": {f"{t:g}": steps_to_reach(records, t, window) for t in targets},
        "samples_to": {f"{t:g}": samples_to_reach(records, t, window) for t in targets},
    }


def metrics_at_milestones(
    records: Sequence[dict], milestones: Sequence[float], prefix: str = "eval_"
) -> list[dict[str, float]]:
    """For each milestone of cumulative generated samples, the probe metrics (record fields starting with `prefix`)
    of the first probed record at or after it, with its `step` and `cumulative_samples`; NaN when none is."""
    probed = [r for r in records if not math.isnan(r.get(f"{prefix}pass_rate", float("nan")))]
    names = [name for name in (probed[0] if probed else {}) if name.startswith(prefix)]
    rows = []
    for milestone in milestones:
        record = next((r for r in probed if r["cumulative_samples"] >= milestone), None)
        fields = ("step", "cumulative_samples", *names)
        values = {name: float("nan") if record is None else float(record[name]) for name in fields}
        rows.append({"milestone": float(milestone), **values})
    return rows


# ----------------------------------------------------------------------------------------------------------------
# Probe metrics
# ----------------------------------------------------------------------------------------------------------------


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """The unbiased pass@k from `num_correct` right of `num_samples`: 1 - C(n-c, k) / C(n, k); NaN when k > n."""
    if k > num_samples:
        return float("nan")
    return 1.0 - math.comb(num_samples - num_correct, k) / math.comb(num_samples, k)


def difficulty_buckets(initial_correct: Sequence[int]) -> dict[str, list[int]]:
    """Prompt indices by initial difficulty, from each prompt's right answers of `INITIAL_SAMPLES`.

    `hard`, `medium` and `easy`: the thirds by initial pass rate (ties in index order; `hard` is the hardest third);
    `1_2_of_16`: the paper's hard set, 1 or 2 right.
    """
    order = sorted(range(len(initial_correct)), key=lambda i: initial_correct[i])
    size = len(order)
    thirds = [order[j * size // 3 : (j + 1) * size // 3] for j in range(3)]
    hard_set = [i for i, c in enumerate(initial_correct) if c in HARD_SET]
    return {"hard": thirds[0], "medium": thirds[1], "easy": thirds[2], "1_2_of_16": hard_set}


def probe_metrics(correct: Sequence[int], num_samples: int, buckets: dict[str, list[int]]) -> dict[str, float]:
    """Pass rate per bucket (`eval_pass_rate_<bucket>`, NaN when empty) and `eval_pass_at_<k>` for `PASS_AT_K`
    up to `num_samples`, from each prompt's right answers of `num_samples`."""
    rates = [c / num_samples for c in correct]
    metrics = {f"eval_pass_rate_{name}": mean(rates[i] for i in indices) for name, indices in buckets.items()}
    for k in PASS_AT_K:
        if k <= num_samples:
            metrics[f"eval_pass_at_{k}"] = mean(pass_at_k(num_samples, c, k) for c in correct)
    return metrics


def mean_token_entropy(logits: Any, live: Any) -> float:
    """Mean entropy (nats) of the next-token distributions `softmax(logits)` at the `live` positions.

    `logits`: a (batch, steps, vocab) tensor; `live`: a (batch, steps) bool tensor (False after a completion ended).
    """
    import torch

    log_probs = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return float(entropy[live].mean()) if bool(live.any()) else float("nan")


# ----------------------------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------------------------


def _window_rows(records: Sequence[dict], every: int) -> list[list[str]]:
    """Table rows: one per `every` steps, with window means of the per-step numbers."""
    rows = []
    for end in range(every, len(records) + every, every):
        window = records[end - every : end]
        if not window:
            break
        last = window[-1]
        rows.append(
            [
                f"{window[0]['step']}-{last['step']}",
                f"{mean(r['first_round_reward'] for r in window):.3f}",
                f"{mean(r['frac_reward_zero_std'] for r in window):.2f}",
                f"{mean(r['samples'] for r in window):.0f}",
                f"{last['cumulative_samples']:.0f}",
                f"{last['wall_time']:.1f}",
            ]
        )
    return rows


def method_table(spec: MethodSpec, records: Sequence[dict], every: int) -> str:
    """Per-method table of `every`-step windows."""
    headers = ["steps", "first-round reward", "zero-std groups", "samples/step", "cum. samples", "wall s"]
    return format_table(headers, _window_rows(records, every), title=f"{spec.label}  ({spec.name})")


def _fmt(value: float, spec: str = ".0f") -> str:
    return "never" if math.isnan(value) else format(value, spec)


def summary_table(specs: Sequence[MethodSpec], summaries: dict[str, dict], targets: Sequence[float]) -> str:
    """One row per method: final reward, samples, gain per 1k samples, steps and samples to each target."""
    headers = ["method", "final reward", "total samples", "gain/1k samples", "zero-std", "wall s"]
    for t in targets:
        headers += [f"steps to {t:g}", f"samples to {t:g}"]
    rows = []
    for spec in specs:
        s = summaries[spec.name]
        row = [
            spec.label,
            f"{s['final_first_round_reward']:.3f}",
            f"{s['total_samples']:.0f}",
            f"{s['reward_gain_per_1k_samples']:+.3f}",
            f"{s['mean_frac_reward_zero_std']:.2f}",
            f"{s['wall_time']:.0f}",
        ]
        for t in targets:
            row += [_fmt(s["steps_to"][f"{t:g}"]), _fmt(s["samples_to"][f"{t:g}"])]
        rows.append(row)
    title = f"Summary (rewards: mean first-round reward of the last {SMOOTHING_WINDOW} steps; targets on the "
    title += f"{SMOOTHING_WINDOW}-step moving average)"
    return format_table(headers, rows, title=title)


def _versus(label: str, base_label: str, summary: dict, base: dict, target: float) -> str:
    """One sentence: `label` against the baseline on one target."""
    key = f"{target:g}"
    steps, base_steps = summary["steps_to"][key], base["steps_to"][key]
    samples, base_samples = summary["samples_to"][key], base["samples_to"][key]
    if math.isnan(steps) and math.isnan(base_steps):
        return f"Neither {label} nor {base_label} reached {key}."
    if math.isnan(steps):
        return f"{label} did not reach {key}; {base_label} did after {base_steps:.0f} steps."
    if math.isnan(base_steps):
        return f"{label} reached {key} after {steps:.0f} steps ({samples:.0f} samples); {base_label} did not."
    return (
        f"{label} reached {key} after {steps:.0f} steps vs {base_steps:.0f} ({steps / base_steps:.2f}x the steps), "
        f"using {samples:.0f} vs {base_samples:.0f} samples ({samples / base_samples:.1f}x the samples)."
    )


def reading(specs: Sequence[MethodSpec], summaries: dict[str, dict], targets: Sequence[float]) -> str:
    """What the numbers say, method by method against plain GRPO (empty when GRPO was not run)."""
    base = next((spec for spec in specs if not spec.uses_reinforce_ada), None)
    if base is None:
        return ""
    lines = [
        _versus(spec.label, base.label, summaries[spec.name], summaries[base.name], target)
        for spec in specs
        if spec is not base
        for target in targets
    ]
    lines.append(
        "One seed of a toy task (rewards are noisy step to step); the learning benchmark repeats it over seeds."
    )
    return "Reading (first step whose 5-step average reaches the target):\n" + "\n".join(f"- {line}" for line in lines)


def regime_note(settings: TaskSettings) -> str:
    """Which regime the task is in, what that means for reading the numbers, and where the guide is."""
    if settings.family == "letters" or settings.transfer >= 1.0:
        regime = (
            "Regime: full transfer. One skill (writing a letter often enough) solves every prompt of this task, so "
            "what GRPO learns on the easy prompts carries over to the hard ones for free. Here adaptive sampling "
            "learns faster per step and costs more per generated sample; which axis matters depends on whether your "
            "step is generation-bound."
        )
    else:
        regime = (
            f"Regime: transfer {settings.transfer:g} (keyed task). Each item needs its own answer, so samples spent "
            "on a hard item teach that item; compare the methods on the hardest third of the items."
        )
    return (
        f"{regime} On a task whose prompts need their own answers the ranking can change: see docs/choosing.md, "
        "and `python -m benchmarks.learning --regimes`, which measures both regimes in modelled GPU hours too."
    )


# ----------------------------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------------------------


def plot_curves(curves: dict[str, dict[str, Any]], title: str) -> Any:
    """A figure with two panels: first-round reward vs step and vs cumulative samples generated, a line per method.

    `curves` maps a label to {"step": [...], "samples": [...], "reward": [...]} (already smoothed), optionally with
    "low" and "high" (a shaded band). The caller saves and closes the figure (see [`~trl_ada.utils.save_figure`]).
    """
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4), sharey=True)
    for label, curve in curves.items():
        for ax, x in zip(axes, (curve["step"], curve["samples"]), strict=True):
            (line,) = ax.plot(x, curve["reward"], label=label)
            if "low" in curve:
                ax.fill_between(x, curve["low"], curve["high"], color=line.get_color(), alpha=0.2, linewidth=0)
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("completions generated (cumulative)")
    axes[0].set_ylabel(f"first-round reward ({SMOOTHING_WINDOW}-step moving avg.)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    return fig


def task_title(settings: TaskSettings, seed: int | str) -> str:
    """A one-line description of the task for figure titles."""
    counts = f"{min(settings.counts)}-{max(settings.counts)}"
    if settings.family == "keyed":
        task = f"Keyed task: {settings.num_prompts} items, transfer {settings.transfer:g}, codes x {counts} times"
    else:
        task = f"Toy task: letters {'/'.join(settings.targets)} x {counts} times"
    if settings.pass_rate_band is not None:
        low, high = settings.pass_rate_band
        task += f", base pass rate in ({low:g}, {high:g}]"
    return f"{task}, {settings.prompts_per_step} prompts/step, seed {seed}"
