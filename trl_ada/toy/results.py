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
    "plot_panels",
    "probe_at",
    "probe_metrics",
    "probe_reading",
    "probe_summary",
    "probe_summary_table",
    "probe_table",
    "probed_records",
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
HARDEST_THIRD = "eval_pass_rate_hard"
"""The probe's pass rate on the hardest third of the prompts by initial pass rate."""
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


def probed_records(records: Sequence[dict]) -> list[dict]:
    """The records of the steps the probe measured (`eval_pass_rate` not NaN)."""
    return [r for r in records if not math.isnan(r.get("eval_pass_rate", float("nan")))]


def probe_at(records: Sequence[dict], axis: str, budget: float) -> dict:
    """The last probed record at or within `budget` of `axis` (e.g. `cumulative_samples`): what a run had reached
    with that much spent. Empty when it probed nothing that early."""
    within = [r for r in probed_records(records) if r[axis] <= budget * (1 + 1e-9)]
    return within[-1] if within else {}


PROBE_FIELDS = {
    "step": "step",
    "samples": "cumulative_samples",
    "pass_rate": "eval_pass_rate",
    "hardest_third": HARDEST_THIRD,
}
"""What [`probe_summary`] keeps of a probed record, by the name it keeps it under."""


def probe_summary(records: Sequence[dict], budget: float) -> dict[str, dict[str, float]]:
    """`final`: the last probe; `within_budget`: the last probe within `budget` generated samples (e.g. plain
    GRPO's whole run). Each as step, samples (cumulative), pass rate and hardest-third pass rate; NaN when none."""
    probed = probed_records(records)
    points = {"final": probed[-1] if probed else {}, "within_budget": probe_at(records, "cumulative_samples", budget)}
    return {
        name: {key: float(record.get(field, float("nan"))) for key, field in PROBE_FIELDS.items()}
        for name, record in points.items()
    }


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


def _probe_rows(records: Sequence[dict]) -> list[list[str]]:
    """Table rows: one per probe, over the steps since the previous probe (window means), probed after the last."""
    rows, start = [], 0
    for record in probed_records(records):
        end = next(k for k, r in enumerate(records) if r is record) + 1
        window = records[start:end]
        rows.append(
            [
                f"{window[0]['step']}-{record['step']}",
                f"{record['eval_pass_rate']:.3f}",
                f"{record[HARDEST_THIRD]:.3f}",
                f"{mean(r['frac_reward_zero_std'] for r in window):.2f}",
                f"{mean(r['samples'] for r in window):.0f}",
                f"{record['cumulative_samples']:.0f}",
                f"{record['wall_time']:.1f}",
            ]
        )
        start = end
    return rows


def probe_table(spec: MethodSpec, records: Sequence[dict]) -> str:
    """Per-method table of the probes: pass rate overall and on the hardest third after each window of steps."""
    headers = ["steps", "pass rate", "hardest third", "zero-std groups", "samples/step", "cum. samples", "wall s"]
    return format_table(headers, _probe_rows(records), title=f"{spec.label}  ({spec.name})")


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


def probe_summary_table(specs: Sequence[MethodSpec], summaries: dict[str, dict], budget_owner: str) -> str:
    """One row per method: the final probe, the samples generated, and the last probe within `budget_owner`'s
    samples (from [`probe_summary`])."""
    headers = ["method", "pass rate", "hardest third", "total samples", "wall s"]
    headers += [f"hardest third within {budget_owner}'s samples", "at step"]
    rows = []
    for spec in specs:
        final, within = summaries[spec.name]["probe"]["final"], summaries[spec.name]["probe"]["within_budget"]
        rows.append(
            [
                spec.label,
                _fmt(final["pass_rate"], ".3f"),
                _fmt(final["hardest_third"], ".3f"),
                f"{summaries[spec.name]['total_samples']:.0f}",
                f"{summaries[spec.name]['wall_time']:.0f}",
                _fmt(within["hardest_third"], ".3f"),
                _fmt(within["step"]),
            ]
        )
    title = "Summary (pass rates: the last probe; hardest third: the items the initial model solved least, a third)"
    return format_table(headers, rows, title=title)


def _ahead(difference: float) -> str:
    return "level with" if abs(difference) < 0.0005 else "ahead of" if difference > 0 else "behind"


def probe_reading(specs: Sequence[MethodSpec], summaries: dict[str, dict]) -> str:
    """What the probes say, method by method against plain GRPO, per step and per sample (empty without GRPO)."""
    base = next((spec for spec in specs if not spec.uses_reinforce_ada), None)
    if base is None:
        return ""
    ref = summaries[base.name]
    lines = []
    for spec in specs:
        if spec is base:
            continue
        ours = summaries[spec.name]
        final, base_final = ours["probe"]["final"], ref["probe"]["final"]
        within = ours["probe"]["within_budget"]
        diff = final["hardest_third"] - base_final["hardest_third"]
        lines.append(
            f"Per step: after {final['step']:.0f} steps {spec.label} is {_ahead(diff)} {base.label} on the hardest "
            f"third, {final['hardest_third']:.3f} vs {base_final['hardest_third']:.3f} ({diff:+.3f}; overall "
            f"{final['pass_rate']:.3f} vs {base_final['pass_rate']:.3f})."
        )
        ratio = ours["total_samples"] / ref["total_samples"]
        if math.isnan(within["step"]):
            spent = f"it had not reached its first probe within {base.label}'s {ref['total_samples']:.0f} samples"
        else:
            diff = within["hardest_third"] - base_final["hardest_third"]
            spent = (
                f"within {base.label}'s {ref['total_samples']:.0f} samples ({spec.label}'s probe at step "
                f"{within['step']:.0f}) "
                f"it was {_ahead(diff)} {base.label}'s end of run on the hardest third, "
                f"{within['hardest_third']:.3f} vs {base_final['hardest_third']:.3f}"
            )
        lines.append(
            f"Per sample: {spec.label} generated {ours['total_samples']:.0f} samples ({ratio:.1f}x {base.label}'s); "
            f"{spent}."
        )
    lines.append("One seed, and the hardest third is a few items: one item moves it by a quarter or more.")
    return "Reading (the probe's pass rate, overall and on the hardest third):\n" + "\n".join(
        f"- {line}" for line in lines
    )


def regime_note(settings: TaskSettings) -> str:
    """What the task's regime shows, where adaptive sampling wins and where it loses, and where the guide is."""
    if settings.family == "letters" or settings.transfer >= 1.0:
        return (
            "What this regime shows: learning transfers. One skill (writing a letter often enough) solves every "
            "prompt, so what GRPO n=4 learns on the easy prompts carries over to the hard ones for free. Adaptive "
            "sampling learns faster per step and loses per generated sample: it pays here only when optimizer steps, "
            "not generation, are what you pay for. Over 5 seeds the regimes benchmark (`python -m benchmarks.learning "
            "--regimes`) finds the same on the keyed task with full transfer: plain GRPO n=4 reaches every target "
            "with the fewest samples and the fewest modelled GPU hours. See docs/choosing.md."
        )
    return (
        f"What this regime shows: no transfer (transfer {settings.transfer:g}). Each item needs its own code, like "
        "the paper's data (problems filtered to those the base model rarely solves), so only samples spent on a hard "
        "item teach it. Balance's extra rounds find the hard items' rare right answers and turn their groups into a "
        "gradient: per step it lifts the hardest third. It still costs several times GRPO n=4's samples, and per "
        "generated sample GRPO n=4 stays ahead. Over 5 seeds (`python -m benchmarks.learning --regimes`, no "
        "transfer): balance ahead of GRPO n=4 on the hardest third after 60 steps on 5 of 5 seeds; at equal "
        'modelled GPU hours Seq-balance was not shown to beat GRPO, and the paper\'s Est (`sampling="est"`, n=8) '
        "beat GRPO n=8 on 5 of 5. See docs/choosing.md."
    )


# ----------------------------------------------------------------------------------------------------------------
# Figures
# ----------------------------------------------------------------------------------------------------------------


def _draw_curves(axes: Any, curves: dict[str, dict[str, Any]], ylabel: str) -> None:
    """A line per method on a pair of axes: the metric against the step (left) and against samples (right)."""
    for label, curve in curves.items():
        for ax, x in zip(axes, (curve["step"], curve["samples"]), strict=True):
            (line,) = ax.plot(x, curve["reward"], label=label)
            if "low" in curve:
                ax.fill_between(x, curve["low"], curve["high"], color=line.get_color(), alpha=0.2, linewidth=0)
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("completions generated (cumulative)")
    axes[0].set_ylabel(ylabel)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend()


REWARD_LABEL = f"first-round reward ({SMOOTHING_WINDOW}-step moving avg.)"


def plot_curves(curves: dict[str, dict[str, Any]], title: str) -> Any:
    """A figure with two panels: first-round reward vs step and vs cumulative samples generated, a line per method.

    `curves` maps a label to {"step": [...], "samples": [...], "reward": [...]} (already smoothed), optionally with
    "low" and "high" (a shaded band). The caller saves and closes the figure (see [`~trl_ada.utils.save_figure`]).
    """
    return plot_panels([(curves, title, REWARD_LABEL)])


def plot_panels(rows: Sequence[tuple[dict[str, dict[str, Any]], str, str]]) -> Any:
    """A figure with a row of two panels (against step, against samples) per (curves, title, y label) in `rows`;
    `curves` as for [`plot_curves`] (the metric under "reward"). The caller saves and closes the figure."""
    fig, axes = pyplot().subplots(len(rows), 2, figsize=(11, 4 * len(rows)), sharey="row", squeeze=False)
    for pair, (curves, title, ylabel) in zip(axes, rows, strict=True):
        _draw_curves(pair, curves, ylabel)
        if len(rows) > 1:
            pair[0].set_title(title, loc="left")
    if len(rows) == 1:
        fig.suptitle(rows[0][1])
    else:
        fig.subplots_adjust(hspace=0.35)
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
