"""The `trl-ada` command line: `train`, `train-async`, `evaluate`, `select-prompts`, `demo`.

```bash
trl-ada train --config recipes/Qwen2.5-Math-1.5B/reinforce_ada_balance.yaml --max_steps 100
accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m trl_ada.cli train --config recipe.yaml
accelerate launch --config_file recipes/accelerate_configs/fsdp2.yaml -m trl_ada.cli train-async --config recipe.yaml
```

One module per subcommand (`trl_ada.cli.train`, `.train_async`, `.evaluate`, `.select_prompts`, `.demo`), each
with `make_parser()` (`train_async`: `train.make_parser(command=TRAIN_ASYNC)`) and `main(argv) -> int`, imported only
when its command runs; `trl_ada.cli.common` holds what they share (logging, error lines, the Hub token check, argument
types). The library never imports this package.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from .common import PROG, print_error

__all__ = ["main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "train",
        "Train a model with Reinforce-Ada (or plain GRPO) from a YAML recipe; flags override the recipe.",
    ),
    "train-async": (
        "train_async",
        "Train from a YAML recipe with the asynchronous trainer (generation on a separate vLLM server).",
    ),
    "evaluate": ("evaluate", "Evaluate a model on math benchmarks (avg@k / pass@k)."),
    "select-prompts": ("select_prompts", "Estimate pass rates and keep the prompts worth training on."),
    "demo": ("demo", "Run adaptive sampling on the tiny offline toy task."),
}
"""Subcommand -> (module of `trl_ada.cli` with its `main(argv) -> int`, one-line description)."""


def _run(command: str, argv: list[str]) -> int:
    """Import the module behind a subcommand on use and hand it the remaining arguments."""
    module_name = f"{__name__}.{COMMANDS[command][0]}"
    try:
        function: Callable[[list[str]], int | None] = importlib.import_module(module_name).main
    except (ImportError, AttributeError) as err:
        return print_error(command, f"not available in this installation ({module_name}.main: {err}).")
    return int(function(argv) or 0)


def _top_parser() -> argparse.ArgumentParser:
    """`trl-ada [--version] COMMAND ...`; everything after the command goes to the command itself."""
    commands = "\n".join(f"  {name:<16}{text}" for name, (_, text) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [-h] [--version] COMMAND [ARGS ...]",
        description="Reinforce-Ada adaptive sampling (arXiv 2510.04996) on TRL's GRPOTrainer.",
        epilog=f"commands:\n{commands}\n\nRun `{PROG} COMMAND --help` for the options of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help="one of: " + ", ".join(COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _exit_code(exit_: SystemExit) -> int:
    """The integer status of an argparse exit (`--help`, `--version`, usage errors)."""
    code = exit_.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run `trl-ada` with `argv` (default: `sys.argv[1:]`); return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        _top_parser().print_help(sys.stderr)
        return 2
    try:
        namespace = _top_parser().parse_args(argv)
        return _run(namespace.command, namespace.args)
    except SystemExit as exit_:
        return _exit_code(exit_)
