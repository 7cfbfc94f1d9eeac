"""`trl-ada demo`: plain GRPO against Reinforce-Ada on the tiny offline toy task, on a CPU, offline.

The demo builds the tiny random model of `trl_ada.toy` in a temporary directory (nothing is downloaded) and trains
it from the same saved weights, with the same seed and prompt order, once per method:

* `grpo`: plain [`~trl.GRPOTrainer`], n = 4 completions per prompt;
* `balance` / `pos`: [`~trl_ada.ReinforceAdaTrainer`] with that exit rule, n = 4 kept per prompt, M samples per
  round and at most N rounds.

It prints per method the first-round reward over steps, the cumulative number of completions generated, the fraction
of zero-variance groups that reached the loss and the wall time; a summary; and writes `demo.png`, `demo.json` and
`demo.txt`. Results are staged next to `--output_dir` and moved into place only at the end, so an interrupted run
leaves nothing half-written. Under a minute on two idle cores. The training and the summaries are
`trl_ada.toy.experiment`; see `docs/demo.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..toy.experiment import (
    SMOOTHING_WINDOW,
    MethodSpec,
    TaskSettings,
    make_task,
    method_table,
    moving_average,
    plot_curves,
    prepare_model,
    quiet_training,
    reading,
    regime_note,
    run_method,
    summarize,
    summary_table,
    task_title,
    with_rounds,
)
from ..utils import json_safe, save_figure
from .common import PROG as TOP_PROG
from .common import print_error

__all__ = ["main", "make_parser"]

PROG = f"{TOP_PROG} demo"
EXIT_BAD_OUTPUT = 2
EXIT_INTERRUPTED = 130
RESULT_FILES = ("demo.json", "demo.png", "demo.txt")
DEFAULT_STEPS = 50


DEMO_METHODS: dict[str, MethodSpec] = {
    "grpo": MethodSpec("grpo", "GRPO n=4"),
    "balance": MethodSpec(
        "balance", "balance M=8 N=4", trainer="reinforce_ada", exit_rule="balance", samples_per_round=8, max_rounds=4
    ),
    "pos": MethodSpec(
        "pos", "pos M=8 N=4", trainer="reinforce_ada", exit_rule="pos", samples_per_round=8, max_rounds=4
    ),
}
"""The methods `--methods` accepts, by name."""


def demo_curves(specs: Sequence[MethodSpec], results: dict[str, list[dict]]) -> dict[str, dict[str, list[float]]]:
    """Per-method curves of the smoothed first-round reward for [`plot_curves`]."""
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


def make_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The `trl-ada demo` options."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Train the tiny offline toy model with plain GRPO and with Reinforce-Ada from the same weights, "
        "then compare first-round reward against steps and against samples generated. CPU only, nothing is "
        "downloaded; under a minute on two idle cores.",
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
    parser = make_parser()
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
        methods = [with_rounds(m, samples_per_round=4, max_rounds=2) if m.uses_reinforce_ada else m for m in methods]
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
    parts.append(regime_note(args.settings))
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
    (staging / "demo.json").write_text(json.dumps(json_safe(payload), indent=2) + "\n")
    (staging / "demo.txt").write_text(text + "\n")
    return text


def main(argv: Sequence[str] | None = None) -> int:
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
        print_error("demo", err)
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
