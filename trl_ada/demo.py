"""`trl-ada demo`: plain GRPO against Reinforce-Ada on the tiny offline toy task, on a CPU, in a few minutes.

The demo builds the tiny random model of :mod:`trl_ada.toy` in a temporary directory (nothing is downloaded),
trains it from the same saved weights, with the same seed and prompt order, once per method:

* ``grpo``: plain :class:`trl.GRPOTrainer`, n = 4 completions per prompt;
* ``balance`` / ``pos``: :class:`trl_ada.ReinforceAdaTrainer` with that exit rule, n = 4 kept per prompt, M samples
  per round and at most N rounds.

It then prints, per method, the first-round reward over steps (the mean reward of the round-1 samples: for GRPO its
``reward``, for Reinforce-Ada ``reinforce_ada/first_round_reward``; both are unbiased training rewards), the
cumulative number of completions generated, the fraction of zero-variance groups that reached the loss and the wall
time; a summary; and writes ``demo.png`` (reward vs step and vs samples generated) and ``demo.json``.

Results are written into a temporary directory next to ``--output_dir`` and moved into place only at the end, so an
interrupted run leaves nothing half-written. The training helpers (:func:`run_method`, :func:`steps_to_reach`, ...)
are shared with ``benchmarks/learning.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

__all__ = [
    "DEMO_METHODS",
    "MethodSpec",
    "StepRecorder",
    "TaskSettings",
    "main",
    "make_task",
    "moving_average",
    "plot_curves",
    "prepare_model",
    "quiet_training",
    "run_method",
    "samples_to_reach",
    "save_figure",
    "steps_to_reach",
    "summarize",
    "task_title",
    "with_rounds",
]

PROG = "trl-ada demo"
EXIT_BAD_OUTPUT = 2
EXIT_INTERRUPTED = 130
RESULT_FILES = ("demo.json", "demo.png", "demo.txt")
SMOOTHING_WINDOW = 5
ADAPTIVE_METRICS = (
    "rounds",
    "exited_fraction",
    "unresolved_all_positive_fraction",
    "unresolved_all_negative_fraction",
    "pool_pass_rate",
)
"""`reinforce_ada/` metrics kept in each step record (besides first-round reward and samples)."""
DEFAULT_STEPS = 50


# ----------------------------------------------------------------------------------------------------------------
# Methods and task
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    """One training method: plain `trl.GRPOTrainer` when `exit_rule` is None, else Reinforce-Ada with that rule."""

    name: str
    label: str
    num_generations: int = 4
    exit_rule: str | None = None
    samples_per_round: int = 0
    max_rounds: int = 0

    @property
    def is_adaptive(self) -> bool:
        """True for Reinforce-Ada (adaptive rounds), False for plain GRPO."""
        return self.exit_rule is not None


def with_rounds(spec: MethodSpec, samples_per_round: int, max_rounds: int) -> MethodSpec:
    """`spec` with another M and N (and the label to match)."""
    label = f"{spec.exit_rule} M={samples_per_round} N={max_rounds}"
    return replace(spec, label=label, samples_per_round=samples_per_round, max_rounds=max_rounds)


DEMO_METHODS: dict[str, MethodSpec] = {
    "grpo": MethodSpec("grpo", "GRPO n=4"),
    "balance": MethodSpec("balance", "balance M=8 N=4", exit_rule="balance", samples_per_round=8, max_rounds=4),
    "pos": MethodSpec("pos", "pos M=8 N=4", exit_rule="pos", samples_per_round=8, max_rounds=4),
}
"""The methods `--methods` accepts, by name."""


@dataclass(frozen=True)
class TaskSettings:
    """The toy task and the training settings shared by every method (see `trl_ada.toy`).

    The demo's task asks for the letters ``a`` and ``o`` (not ``e``) 1 to 5 times. Under the random model the
    initial pass rates are about 0.5 (k=1), 0.15 (k=2), 0.05 (k=3) and 0.01 or less (k=4, 5): half of the prompts
    are near zero, so GRPO at n=4 sees mostly all-wrong groups (the mean pass rate is about 0.15). With ``e`` in the
    mix (the toy default) the easy ``e`` prompts alone give GRPO enough signal and the methods learn at the same
    pace per step; see docs/demo.md.
    """

    prompts_per_step: int = 8
    max_completion_length: int = 12
    learning_rate: float = 5e-3
    targets: str = "ao"
    counts: tuple[int, ...] = (1, 2, 3, 4, 5)


def make_task(settings: TaskSettings, steps: int, seed: int):
    """The toy dataset: exactly enough distinct prompts for `steps` steps (one epoch, seeded order)."""
    from .toy import make_toy_dataset

    num_prompts = steps * settings.prompts_per_step
    return make_toy_dataset(num_prompts, seed=seed, targets=settings.targets, counts=settings.counts)


def prepare_model(directory: str | Path, seed: int) -> Path:
    """Build and save the tiny random model and tokenizer (offline); every method starts from these weights."""
    from .toy import build_tiny_model

    return build_tiny_model(Path(directory), seed=seed)


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def _config_kwargs(spec: MethodSpec, settings: TaskSettings, steps: int, seed: int, output_dir: Path) -> dict:
    """Config fields: the toy recommendations and the paper's loss settings, the same for every method."""
    from .toy import toy_grpo_kwargs

    kwargs = toy_grpo_kwargs(
        output_dir=str(output_dir),
        num_generations=spec.num_generations,
        per_device_train_batch_size=settings.prompts_per_step * spec.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        max_steps=steps,
        seed=seed,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        scale_rewards="none",
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
    )
    if spec.is_adaptive:
        kwargs.update(exit_rule=spec.exit_rule, samples_per_round=spec.samples_per_round, max_rounds=spec.max_rounds)
    return kwargs


def build_trainer(
    spec: MethodSpec, model_dir: str | Path, dataset, settings: TaskSettings, steps: int, seed: int, output_dir: Path
):
    """A `GRPOTrainer` (plain GRPO) or `ReinforceAdaTrainer` on the toy reward, from the saved model."""
    from .toy import toy_reward

    kwargs = _config_kwargs(spec, settings, steps, seed, output_dir)
    if spec.is_adaptive:
        from .config import ReinforceAdaConfig
        from .trainer import ReinforceAdaTrainer

        return ReinforceAdaTrainer(str(model_dir), [toy_reward], ReinforceAdaConfig(**kwargs), train_dataset=dataset)
    from trl import GRPOConfig, GRPOTrainer

    return GRPOTrainer(str(model_dir), [toy_reward], GRPOConfig(**kwargs), train_dataset=dataset)


def step_record(spec: MethodSpec, logs: dict[str, float], prompts_per_step: int) -> dict[str, float]:
    """One step's numbers from the trainer's log: first-round reward, samples generated, zero-std fraction, time."""
    nan = float("nan")
    if spec.is_adaptive:
        first_round_reward, samples = logs["reinforce_ada/first_round_reward"], logs["reinforce_ada/samples"]
    else:
        first_round_reward, samples = logs["reward"], float(prompts_per_step * spec.num_generations)
    record = {
        "first_round_reward": float(first_round_reward),
        "samples": float(samples),
        "frac_reward_zero_std": float(logs.get("frac_reward_zero_std", nan)),
        "kept_reward": float(logs.get("reward", nan)),
        "step_time": float(logs.get("step_time", nan)),
    }
    for name in ADAPTIVE_METRICS:  # NaN for plain GRPO: one round, no exit rule
        record[name] = float(logs.get(f"reinforce_ada/{name}", 1.0 if name == "rounds" else nan))
    return record


class StepRecorder(TrainerCallback):
    """Collects one record per logged training step (see :func:`run_method`) and reports it."""

    def __init__(self, spec: MethodSpec, prompts_per_step: int, report: Callable[[dict], None] | None = None):
        self.spec, self.prompts_per_step, self.report = spec, prompts_per_step, report
        self.records: list[dict[str, Any]] = []
        self.start = time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:  # a training step's metrics (not the end-of-training summary)
            self.add(state.global_step, state.max_steps, logs)

    def add(self, step: int, max_steps: int, logs: dict[str, float]) -> None:
        """Append the record of `step` (cumulative samples and wall time included) and report it."""
        record = {"step": step, **step_record(self.spec, logs, self.prompts_per_step)}
        previous = self.records[-1]["cumulative_samples"] if self.records else 0.0
        record["cumulative_samples"] = previous + record["samples"]
        record["wall_time"] = time.perf_counter() - self.start
        self.records.append(record)
        if self.report is not None:
            self.report({**record, "method": self.spec.name, "max_steps": max_steps})


@contextlib.contextmanager
def quiet_training() -> Iterator[None]:
    """Hide transformers' download/save progress bars and its known v6-deprecation FutureWarnings (restored after)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated and will be removed in v6", category=FutureWarning)
        try:
            yield
        finally:
            if bars:
                hf_logging.enable_progress_bar()


def run_method(
    spec: MethodSpec,
    model_dir: str | Path,
    dataset,
    *,
    seed: int,
    steps: int,
    settings: TaskSettings | None = None,
    work_dir: str | Path | None = None,
    report: Callable[[dict], None] | None = None,
) -> list[dict[str, Any]]:
    """Train `spec` for `steps` steps from `model_dir`; return one record per step.

    Each record holds `step`, `first_round_reward`, `samples` (completions generated in the step),
    `cumulative_samples`, `frac_reward_zero_std`, `kept_reward` (mean reward of the groups that reached the loss),
    `step_time`, `wall_time` (seconds since training started) and the :data:`ADAPTIVE_METRICS` (NaN for plain GRPO,
    except `rounds` = 1). `report` is called with each record.
    """
    from transformers import PrinterCallback

    from .toy import configure_torch_threads

    settings = settings or TaskSettings()
    configure_torch_threads()
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="trl-ada-demo-"))
        stack.enter_context(quiet_training())
        output_dir = Path(work_dir) / f"trainer-{spec.name}"
        trainer = build_trainer(spec, model_dir, dataset, settings, steps, seed, output_dir)
        recorder = StepRecorder(spec, settings.prompts_per_step, report)
        trainer.remove_callback(PrinterCallback)  # it prints every log dict; the recorder reports instead
        trainer.add_callback(recorder)
        trainer.train()
    return recorder.records


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


def _first_reaching(records: Sequence[dict], target: float, window: int) -> dict | None:
    """The first record whose smoothed first-round reward reaches `target` (None if never)."""
    smoothed = moving_average([r["first_round_reward"] for r in records], window)
    return next((r for r, s in zip(records, smoothed, strict=True) if s >= target), None)


def steps_to_reach(records: Sequence[dict], target: float, window: int = SMOOTHING_WINDOW) -> float:
    """Training steps until the smoothed first-round reward reaches `target` (NaN if it never does)."""
    record = _first_reaching(records, target, window)
    return float("nan") if record is None else float(record["step"])


def samples_to_reach(records: Sequence[dict], target: float, window: int = SMOOTHING_WINDOW) -> float:
    """Completions generated until the smoothed first-round reward reaches `target` (NaN if it never does)."""
    record = _first_reaching(records, target, window)
    return float("nan") if record is None else float(record["cumulative_samples"])


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
                f"{_mean(r['first_round_reward'] for r in window):.3f}",
                f"{_mean(r['frac_reward_zero_std'] for r in window):.2f}",
                f"{_mean(r['samples'] for r in window):.0f}",
                f"{last['cumulative_samples']:.0f}",
                f"{last['wall_time']:.1f}",
            ]
        )
    return rows


def _mean(values: Iterator[float] | Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> str:
    """A fixed-width text table, first column left-aligned."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    rule = "-" * len(line(headers))
    return "\n".join([*([title] if title else []), line(headers), rule, *(line(r) for r in rows)])


def method_table(spec: MethodSpec, records: Sequence[dict], every: int) -> str:
    """Per-method table of `every`-step windows."""
    headers = ["steps", "first-round reward", "zero-std groups", "samples/step", "cum. samples", "wall s"]
    return format_table(headers, _window_rows(records, every), title=f"{spec.label}  ({spec.name})")


def summarize(records: Sequence[dict], targets: Sequence[float], window: int = SMOOTHING_WINDOW) -> dict[str, Any]:
    """Final (last-`window`-steps) first-round reward, totals, gain per 1k samples, steps/samples to targets."""
    rewards = [r["first_round_reward"] for r in records]
    initial, final = _mean(rewards[:window]), _mean(rewards[-window:])
    total = records[-1]["cumulative_samples"] if records else 0.0
    return {
        "steps": len(records),
        "initial_first_round_reward": initial,
        "final_first_round_reward": final,
        "total_samples": total,
        "reward_gain_per_1k_samples": (final - initial) / total * 1000 if total else float("nan"),
        "mean_frac_reward_zero_std": _mean(r["frac_reward_zero_std"] for r in records),
        "wall_time": records[-1]["wall_time"] if records else 0.0,
        "steps_to": {f"{t:g}": steps_to_reach(records, t, window) for t in targets},
        "samples_to": {f"{t:g}": samples_to_reach(records, t, window) for t in targets},
    }


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
    base = next((spec for spec in specs if not spec.is_adaptive), None)
    if base is None:
        return ""
    lines = [
        _versus(spec.label, base.label, summaries[spec.name], summaries[base.name], target)
        for spec in specs
        if spec is not base
        for target in targets
    ]
    lines.append(
        "One seed of a toy task (rewards are noisy step to step); benchmarks/learning.py repeats it over seeds."
    )
    return "Reading (first step whose 5-step average reaches the target):\n" + "\n".join(f"- {line}" for line in lines)


# ----------------------------------------------------------------------------------------------------------------
# Figure
# ----------------------------------------------------------------------------------------------------------------


def plot_curves(curves: dict[str, dict[str, Any]], title: str):
    """A figure with two panels: first-round reward vs step and vs cumulative samples generated, a line per method.

    `curves` maps a label to {"step": [...], "samples": [...], "reward": [...]} (already smoothed), optionally with
    "low" and "high" (a shaded band). Uses matplotlib's Agg backend; the caller saves and closes the figure.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
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


def save_figure(fig, path: Path) -> Path:
    """Save a matplotlib figure as PNG and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def task_title(settings: TaskSettings, seed: int | str) -> str:
    """A one-line description of the task for figure titles."""
    counts = f"{min(settings.counts)}-{max(settings.counts)}"
    return (
        f"Toy task: letters {'/'.join(settings.targets)} x {counts} times, {settings.prompts_per_step} prompts/step, "
        f"seed {seed}"
    )


def demo_curves(specs: Sequence[MethodSpec], results: dict[str, list[dict]]) -> dict[str, dict[str, list[float]]]:
    """Per-method curves of the smoothed first-round reward for :func:`plot_curves`."""
    return {
        spec.label: {
            "step": [r["step"] for r in results[spec.name]],
            "samples": [r["cumulative_samples"] for r in results[spec.name]],
            "reward": moving_average([r["first_round_reward"] for r in results[spec.name]]),
        }
        for spec in specs
    }


# ----------------------------------------------------------------------------------------------------------------
# Output directory
# ----------------------------------------------------------------------------------------------------------------


class OutputDirError(OSError):
    """The output directory cannot be created or written."""


def _not_a_directory(path: Path) -> Path | None:
    """The nearest of `path` and its ancestors that exists, when it is not a directory (else None)."""
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    return existing if existing is not None and not existing.is_dir() else None


def stage_output(output_dir: Path) -> Path:
    """Create (and return) a temporary staging directory next to `output_dir`; fail early if it cannot be written."""
    output_dir = output_dir.expanduser().absolute()
    blocker = _not_a_directory(output_dir)
    if blocker is not None:
        raise OutputDirError(f"cannot write to output directory {output_dir}: {blocker} is a file, not a directory")
    if output_dir.is_dir() and not os.access(output_dir, os.W_OK | os.X_OK):
        raise OutputDirError(f"cannot write to output directory {output_dir}: permission denied")
    try:
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.partial-", dir=output_dir.parent))
    except OSError as err:
        reason = err.strerror or str(err)
        raise OutputDirError(f"cannot write to output directory {output_dir}: {reason}") from err
    os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; the published directory should not be
    return staging


def _umask() -> int:
    """The process umask (reading it means setting it; restored at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_output(staging: Path, output_dir: Path) -> None:
    """Move the finished results into `output_dir`: one rename when it does not exist, else file by file."""
    output_dir = output_dir.expanduser().absolute()
    if not output_dir.exists():
        os.rename(staging, output_dir)
        return
    for item in staging.iterdir():
        os.replace(item, output_dir / item.name)
    staging.rmdir()


# ----------------------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The `trl-ada demo` options."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the tiny offline toy model with plain GRPO and with Reinforce-Ada from the same weights, "
        "then compare first-round reward against steps and against samples generated. CPU only, nothing is "
        "downloaded; well under a minute on 2 cores.",
    )
    parser.add_argument("--output_dir", type=Path, default=Path("demo_output"), help="results (default: %(default)s)")
    parser.add_argument(
        "--steps", type=int, default=None, help=f"training steps per method (default: {DEFAULT_STEPS}; smoke: 2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="model init, data order and sampling seed (default: 0)")
    parser.add_argument(
        "--methods",
        default="grpo,balance",
        help=f"comma-separated, from {', '.join(DEMO_METHODS)} (default: %(default)s)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny run (2 steps, 2 prompts per step) for tests")
    return parser


@dataclass
class DemoArgs:
    """Parsed and checked options."""

    output_dir: Path
    steps: int
    seed: int
    methods: list[MethodSpec]
    settings: TaskSettings
    smoke: bool
    every: int
    targets: tuple[float, ...] = (0.5, 0.7)


def parse_args(argv: Sequence[str]) -> DemoArgs:
    """Parse `argv`; argparse exits with code 2 on a bad option."""
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    names = [name.strip() for name in ns.methods.split(",") if name.strip()]
    unknown = [name for name in names if name not in DEMO_METHODS]
    if unknown or not names:
        parser.error(f"--methods: unknown {unknown or 'empty list'}; choose from {', '.join(DEMO_METHODS)}")
    steps = ns.steps if ns.steps is not None else (2 if ns.smoke else DEFAULT_STEPS)
    if steps < 1:
        parser.error(f"--steps must be at least 1, got {steps}")
    settings = TaskSettings(prompts_per_step=2) if ns.smoke else TaskSettings()
    methods = [DEMO_METHODS[name] for name in dict.fromkeys(names)]
    if ns.smoke:
        methods = [with_rounds(m, samples_per_round=4, max_rounds=2) if m.is_adaptive else m for m in methods]
    every = 1 if steps < 10 else 5
    return DemoArgs(ns.output_dir, steps, ns.seed, methods, settings, ns.smoke, every)


def _progress_line(record: dict) -> None:
    """One concise line per step on stderr."""
    print(
        f"  [{record['method']}] step {record['step']:>3}/{record['max_steps']}  "
        f"first-round reward {record['first_round_reward']:.3f}  samples {record['samples']:>4.0f} "
        f"(total {record['cumulative_samples']:>5.0f})  zero-std groups {record['frac_reward_zero_std']:.2f}  "
        f"{record['wall_time']:6.1f} s",
        file=sys.stderr,
        flush=True,
    )


def train_all(args: DemoArgs, work_dir: Path, status: dict[str, Any]) -> dict[str, list[dict]]:
    """Build the model once, then train every method from it; records per method name.

    `status["running"]` names the method in training (for the message after an interruption).
    """
    print(f"Building the tiny model and the toy task in {work_dir} (offline) ...", file=sys.stderr, flush=True)
    with quiet_training():
        model_dir = prepare_model(work_dir / "model", args.seed)
    dataset = make_task(args.settings, args.steps, args.seed)
    results: dict[str, list[dict]] = {}
    for spec in args.methods:
        status["running"] = spec.label
        print(f"Training {spec.label} for {args.steps} steps ...", file=sys.stderr, flush=True)
        results[spec.name] = run_method(
            spec,
            model_dir,
            dataset,
            seed=args.seed,
            steps=args.steps,
            settings=args.settings,
            work_dir=work_dir,
            report=_progress_line,
        )
    return results


def report(args: DemoArgs, results: dict[str, list[dict]], staging: Path) -> str:
    """Tables and summary (returned as text), figure and JSON written into `staging`."""
    summaries = {spec.name: summarize(results[spec.name], args.targets) for spec in args.methods}
    parts = [method_table(spec, results[spec.name], args.every) for spec in args.methods]
    parts.append(summary_table(args.methods, summaries, args.targets))
    parts.append(reading(args.methods, summaries, args.targets))
    text = "\n\n".join(part for part in parts if part)
    save_figure(
        plot_curves(demo_curves(args.methods, results), task_title(args.settings, args.seed)), staging / "demo.png"
    )
    payload = {
        "config": {
            "steps": args.steps,
            "seed": args.seed,
            "smoke": args.smoke,
            "task": asdict(args.settings),
            "methods": {spec.name: asdict(spec) for spec in args.methods},
            "smoothing_window": SMOOTHING_WINDOW,
            "targets": list(args.targets),
        },
        "summary": summaries,
        "steps": results,
    }
    (staging / "demo.json").write_text(json.dumps(_json_safe(payload), indent=2) + "\n")
    (staging / "demo.txt").write_text(text + "\n")
    return text


def _json_safe(value: Any) -> Any:
    """NaN and infinity become null (JSON has neither)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 on success, 2 for an unusable output directory, 130 when interrupted."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        staging = stage_output(args.output_dir)
    except OutputDirError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_OUTPUT
    start, status = time.perf_counter(), {"running": "setup"}
    try:
        with tempfile.TemporaryDirectory(prefix="trl-ada-demo-") as work:
            results = train_all(args, Path(work), status)
        status["running"] = "writing results"
        text = report(args, results, staging)
        publish_output(staging, args.output_dir)
    except KeyboardInterrupt:
        shutil.rmtree(staging, ignore_errors=True)
        print(
            f"\n{PROG}: interrupted (Ctrl-C) during {status['running']}; no results were written to "
            f"{args.output_dir}.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(text)
    files = ", ".join(RESULT_FILES)
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. Results in {args.output_dir}/: {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
