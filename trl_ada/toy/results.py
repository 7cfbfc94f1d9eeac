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
    "SMOOTHING_WINDOW",
    "method_table",
    "moving_average",
    "plot_curves",
    "reading",
    "samples_to_reach",
    "steps_to_reach",
    "summarize",
    "summary_table",
    "task_title",
]

SMOOTHING_WINDOW = 5
"""Steps of the trailing moving average that the summaries and the curves read the first-round reward over."""


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
    return (
        f"Toy task: letters {'/'.join(settings.targets)} x {counts} times, {settings.prompts_per_step} prompts/step, "
        f"seed {seed}"
    )
