"""Statistics, tables and the figure of the step-overhead benchmark (`benchmarks.step_overhead`, which times the
steps): medians over interleaved cycles, paired bootstrap intervals of the ratios, and the A/A control.
How it is timed and the results: `docs/lab/benchmarks_overhead.md`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import format_table, pyplot, save_figure

if TYPE_CHECKING:
    from benchmarks.step_overhead import Step

METHODS = ("grpo", "none", "balance")
LABELS = {"grpo": "GRPOTrainer", "none": "Ada sampling=grpo", "balance": "Ada balance M=8 N=4"}
COLORS = {"grpo": "#4c72b0", "none": "#55a868", "balance": "#c44e52"}
PARTS = (("generation", "generate"), ("reward", "reward"), ("trl_glue", "TRL glue"), ("ours", "ours"))
TARGET_RATIO = 1.05
BOOTSTRAP_ITERATIONS = 2000


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def per_cycle(steps: list[Step], method: str, attribute: str, instance: int | None = None) -> np.ndarray:
    """(cycles,) values of `attribute` for `method`: the mean over its instances, or one `instance`'s."""
    chosen = [s for s in steps if s.method == method and (instance is None or s.instance == instance)]
    cycles = 1 + max(s.cycle for s in chosen)
    table = np.full((cycles, 1 + max(s.instance for s in chosen)), np.nan)
    for s in chosen:
        table[s.cycle, s.instance] = getattr(s, attribute)
    return np.nanmean(table, axis=1)


def interval(replicates: np.ndarray) -> list[float]:
    """The central 95% of bootstrap replicates."""
    return [float(v) for v in np.percentile(replicates, [2.5, 97.5])]


def summarize_method(steps: list[Step], method: str, picks: np.ndarray) -> dict[str, Any]:
    """Medians over cycles with bootstrap intervals, spread and breakdown of one method."""
    wall, cpu = per_cycle(steps, method, "step_time"), per_cycle(steps, method, "cpu_time")
    samples = per_cycle(steps, method, "samples")
    raw = np.array([s.step_time for s in steps if s.method == method])
    summary: dict[str, Any] = {
        "timed_steps": int(raw.size),
        "median_step_time": float(np.median(wall)),
        "ci95_step_time": interval(np.median(wall[picks], axis=1)),
        "min_step_time": float(raw.min()),
        "max_step_time": float(raw.max()),
        "median_cpu_time": float(np.median(cpu)),
        "ci95_cpu_time": interval(np.median(cpu[picks], axis=1)),
        "mean_samples": float(samples.mean()),
        "mean_completion_length": float(per_cycle(steps, method, "mean_length").mean()),
        "mean_tokens": float(per_cycle(steps, method, "tokens").mean()),
        "median_time_per_sample": float(np.median(wall / samples)),
        "median_cpu_time_per_sample": float(np.median(cpu / samples)),
    }
    for part in (*(name for name, _ in PARTS), "rest"):
        summary[f"median_{part}"] = float(np.median(per_cycle(steps, method, part)))
    summary["median_ours_fraction"] = float(np.median(per_cycle(steps, method, "ours") / wall))
    return summary


def ratio_summary(top: np.ndarray, bottom: np.ndarray, picks: np.ndarray) -> dict[str, float]:
    """median(top) / median(bottom) with its paired bootstrap interval, and the per-cycle ratios' median and IQR."""
    low, high = interval(np.median(top[picks], axis=1) / np.median(bottom[picks], axis=1))
    q25, q50, q75 = np.percentile(top / bottom, [25, 50, 75])
    return {
        "ratio": float(np.median(top) / np.median(bottom)),
        "ci95_low": low,
        "ci95_high": high,
        "per_cycle_median": float(q50),
        "per_cycle_q25": float(q25),
        "per_cycle_q75": float(q75),
    }


def method_ratio(steps: list[Step], top: str, bottom: str, picks: np.ndarray) -> dict[str, Any]:
    """Wall and CPU ratios of two methods (instance means per cycle)."""
    return {
        clock: ratio_summary(per_cycle(steps, top, attribute), per_cycle(steps, bottom, attribute), picks)
        for clock, attribute in (("wall", "step_time"), ("cpu", "cpu_time"))
    }


def a_a_ratio(steps: list[Step], picks: np.ndarray) -> dict[str, Any] | None:
    """Second over first `grpo` instance: the ratio that identical trainers show (None with one instance)."""
    if not any(s.method == "grpo" and s.instance == 1 for s in steps):
        return None
    return {
        clock: ratio_summary(per_cycle(steps, "grpo", attribute, 1), per_cycle(steps, "grpo", attribute, 0), picks)
        for clock, attribute in (("wall", "step_time"), ("cpu", "cpu_time"))
    }


def summarize(steps: list[Step], seed: int) -> dict[str, Any]:
    """Per-method summaries, the headline ratios (wall and CPU) and the A/A control."""
    cycles = 1 + max(s.cycle for s in steps)
    picks = np.random.default_rng(seed).integers(0, cycles, size=(BOOTSTRAP_ITERATIONS, cycles))
    methods = {method: summarize_method(steps, method, picks) for method in METHODS}
    none_over_grpo = method_ratio(steps, "none", "grpo", picks)
    for clock in ("wall", "cpu"):
        none_over_grpo[clock]["within_target"] = none_over_grpo[clock]["ratio"] <= TARGET_RATIO
    balance_over_none = method_ratio(steps, "balance", "none", picks)
    balance, none = methods["balance"], methods["none"]
    balance_over_none["samples_ratio"] = balance["mean_samples"] / none["mean_samples"]
    balance_over_none["time_per_sample_ratio"] = balance["median_time_per_sample"] / none["median_time_per_sample"]
    balance_over_none["cpu_time_per_sample_ratio"] = (
        balance["median_cpu_time_per_sample"] / none["median_cpu_time_per_sample"]
    )
    return {
        "cycles": cycles,
        "methods": methods,
        "target_ratio": TARGET_RATIO,
        "none_over_grpo": none_over_grpo,
        "balance_over_none": balance_over_none,
        "grpo_a_a": a_a_ratio(steps, picks),
    }


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def _ms(seconds: float, digits: int = 0) -> str:
    return f"{1000 * seconds:.{digits}f}"


def method_table(summary: dict[str, Any], config: dict[str, Any]) -> str:
    """One row per method: samples, length, wall and CPU step times with spread, breakdown, per-sample time."""
    headers = ["method", "samples/step", "mean len", "wall ms", "95% CI", "min-max", "CPU ms", "95% CI"]
    headers += [label for _, label in PARTS] + ["loss+rest", "wall ms/sample", "wall vs GRPO", "CPU vs GRPO"]
    grpo = summary["methods"]["grpo"]
    rows = []
    for method in METHODS:
        m = summary["methods"][method]
        rows.append(
            [
                LABELS[method],
                f"{m['mean_samples']:.1f}",
                f"{m['mean_completion_length']:.1f}",
                _ms(m["median_step_time"]),
                "-".join(_ms(v) for v in m["ci95_step_time"]),
                f"{_ms(m['min_step_time'])}-{_ms(m['max_step_time'])}",
                _ms(m["median_cpu_time"]),
                "-".join(_ms(v) for v in m["ci95_cpu_time"]),
                *(_ms(m[f"median_{part}"], 1) for part, _ in PARTS),
                _ms(m["median_rest"], 1),
                f"{1000 * m['median_time_per_sample']:.2f}",
                f"{m['median_step_time'] / grpo['median_step_time']:.3f}x",
                f"{m['median_cpu_time'] / grpo['median_cpu_time']:.3f}x",
            ]
        )
    title = (
        f"Step time, tiny model on CPU: {config['prompts']} prompts x n={config['num_generations']}, "
        f"{config['max_completion_length']} tokens per completion; {config['instances']} trainer(s) per method, "
        f"{summary['cycles']} interleaved cycles after {config['warmup']} warm-up steps. Medians over cycles in ms; "
        "generate / reward / TRL glue / ours / loss+rest: wall time inside the step."
    )
    return format_table(headers, rows, title=title)


def _ratio_text(r: dict[str, float], digits: int) -> str:
    return (
        f"{r['ratio']:.{digits}f}x (95% CI {r['ci95_low']:.{digits}f}-{r['ci95_high']:.{digits}f}; per cycle median "
        f"{r['per_cycle_median']:.{digits}f}, IQR {r['per_cycle_q25']:.{digits}f}-{r['per_cycle_q75']:.{digits}f})"
    )


def ratio_lines(summary: dict[str, Any]) -> str:
    """The headline ratios, the A/A control and the directly measured orchestration cost, in words."""
    a, b, control = summary["none_over_grpo"], summary["balance_over_none"], summary["grpo_a_a"]
    target = f"{summary['target_ratio']:.2f}x"
    lines = []
    for clock, name in (("wall", "wall"), ("cpu", "CPU ")):
        verdict = "within" if a[clock]["within_target"] else "ABOVE"
        lines.append(f"sampling=grpo / GRPOTrainer, {name}: {_ratio_text(a[clock], 3)}: {verdict} the {target} target")
    if control is not None:
        for clock, name in (("wall", "wall"), ("cpu", "CPU ")):
            lines.append(f"A/A control, GRPOTrainer #2 / #1, {name}: {_ratio_text(control[clock], 3)}")
    for method in ("none", "balance"):
        m = summary["methods"][method]
        lines.append(
            f"ours (measured directly), {LABELS[method]}: {_ms(m['median_ours'], 2)} ms per step = "
            f"{100 * m['median_ours_fraction']:.2f}% of the step"
        )
    lines += [
        f"balance / none, wall: {_ratio_text(b['wall'], 2)}",
        f"balance / none, CPU:  {_ratio_text(b['cpu'], 2)}",
        f"balance draws {b['samples_ratio']:.2f}x the samples of none: {b['time_per_sample_ratio']:.2f}x wall "
        f"time ({b['cpu_time_per_sample_ratio']:.2f}x CPU time) per generated sample",
    ]
    return "\n".join(lines)


def csv_rows(steps: list[Step]) -> list[dict[str, Any]]:
    """Every timed step of every trainer."""
    return [{**asdict(step), "rest": step.rest} for step in steps]


def _step_time_panel(ax: Any, summary: dict[str, Any]) -> None:
    """Wall and CPU median step times with 95% CIs, wall min/max and the samples drawn per step."""
    x = np.arange(len(METHODS))
    methods = [summary["methods"][m] for m in METHODS]
    for offset, clock, alpha in ((-0.2, "step_time", 1.0), (0.2, "cpu_time", 0.45)):
        medians = np.array([1000 * m[f"median_{clock}"] for m in methods])
        ci = np.array([[1000 * v for v in m[f"ci95_{clock}"]] for m in methods])
        errors = [medians - ci[:, 0], ci[:, 1] - medians]
        label = "wall (95% CI)" if clock == "step_time" else "CPU (95% CI)"
        ax.bar(x + offset, medians, 0.4, color=[COLORS[m] for m in METHODS], alpha=alpha, yerr=errors, label=label)
    ax.scatter(
        x - 0.2, [1000 * m["min_step_time"] for m in methods], marker="_", color="k", s=120, label="wall min/max"
    )
    ax.scatter(x - 0.2, [1000 * m["max_step_time"] for m in methods], marker="_", color="k", s=120)
    for k, m in enumerate(methods):
        ax.text(k - 0.2, 5, f"{m['mean_samples']:.0f}\nsamples", ha="center", va="bottom", color="w", fontsize=7)
    a, control = summary["none_over_grpo"], summary["grpo_a_a"]
    noise = "" if control is None else f"; A/A GRPO #2 / #1: {control['wall']['ratio']:.3f}x"
    ax.set_title(f"median step time\nnone / GRPO: wall {a['wall']['ratio']:.3f}x, CPU {a['cpu']['ratio']:.3f}x{noise}")
    ax.title.set_fontsize(9)
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=7, loc="upper left")


def _breakdown_panel(ax: Any, summary: dict[str, Any]) -> None:
    """Stacked medians of the parts of a step (wall time)."""
    x = np.arange(len(METHODS))
    methods = [summary["methods"][m] for m in METHODS]
    bottom = np.zeros(len(METHODS))
    colors = ("#8172b2", "#ccb974", "#937860", "#da8bc3", "#64b5cd")
    for (part, label), color in zip((*PARTS, ("rest", "loss+rest")), colors, strict=True):
        heights = np.array([1000 * m[f"median_{part}"] for m in methods])
        ax.bar(x, heights, bottom=bottom, color=color, label=label)
        bottom += heights
    ours = ", ".join(f"{m} {1000 * summary['methods'][m]['median_ours']:.1f}" for m in METHODS[1:])
    ax.set_title(f"inside the step (wall, medians)\nours (ms): {ours}", fontsize=10)
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=7)


def _per_sample_panel(ax: Any, summary: dict[str, Any]) -> None:
    """Wall time per generated sample."""
    x = np.arange(len(METHODS))
    ax.bar(x, [1000 * summary["methods"][m]["median_time_per_sample"] for m in METHODS], color=list(COLORS.values()))
    b = summary["balance_over_none"]
    ax.set_title(f"wall time per generated sample\nbalance / none = {b['time_per_sample_ratio']:.2f}x", fontsize=10)
    ax.set_ylabel("ms per sample")


def plot(summary: dict[str, Any], path: Path) -> Path:
    """Three panels: median step times, the in-step breakdown, time per generated sample."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    _step_time_panel(axes[0], summary)
    _breakdown_panel(axes[1], summary)
    _per_sample_panel(axes[2], summary)
    for ax in axes:
        ax.set_xticks(np.arange(len(METHODS)), [LABELS[m].replace(" ", "\n", 1) for m in METHODS], fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
