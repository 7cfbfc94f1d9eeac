"""What the `trl-ada` subcommands share: logging setup, one-line errors, the Hub token check, argument types and
the sampling and data options of `evaluate` and `select-prompts`."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..evaluation import BACKENDS

if TYPE_CHECKING:
    from datasets import Dataset

    from ..evaluation import SamplingSettings

__all__ = [
    "PROG",
    "add_data_arguments",
    "add_sampling_arguments",
    "check_columns",
    "load_split",
    "print_error",
    "require_hub_token",
    "sampling_settings",
    "setup_logging",
]

PROG = "trl-ada"
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"


def setup_logging(level: int = logging.INFO) -> None:
    """Log records of `trl_ada` at `level` and above to stderr (one handler, added once)."""
    package_logger = logging.getLogger("trl_ada")
    package_logger.setLevel(level)
    if not package_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT, "%H:%M:%S"))
        package_logger.addHandler(handler)


def print_error(command: str, err: BaseException | str) -> int:
    """Print a setup or input error as one line without a traceback (`trl-ada CMD: error: ...`); exit code 1."""
    print(f"{PROG} {command}: error: {err}", file=sys.stderr)
    return 1


def require_hub_token(token: str | None = None, *, option: str, before: str) -> None:
    """Raise huggingface_hub's clear error now when no valid token is available for a later upload."""
    import huggingface_hub
    from huggingface_hub.errors import LocalTokenNotFoundError

    token = token or huggingface_hub.get_token()
    if not token:
        raise LocalTokenNotFoundError(
            f"{option}, but no Hugging Face token was found. Log in with `hf auth login`, set the HF_TOKEN "
            f"environment variable, or pass --hub_token; or drop the push. Checked before {before} so that the "
            "run does not end in a failed upload."
        )
    try:
        huggingface_hub.whoami(token=token)
    except Exception as err:
        raise ValueError(
            f"{option}, but the Hugging Face token could not be verified ({type(err).__name__}: {err}). "
            "Fix the token or the connection, or drop the push."
        ) from err


# ----------------------------------------------------------------------------------------------------------------
# Argument types
# ----------------------------------------------------------------------------------------------------------------


def bounded(cast: type, low: float, high: float = math.inf, low_open: bool = False) -> Callable[[str], Any]:
    """An argparse type: `cast(text)` within [low, high] (or (low, high] when `low_open`)."""
    if high == math.inf:
        interval = f"{'>' if low_open else '>='} {low}"
    else:
        interval = f"in {'(' if low_open else '['}{low}, {high}]"
    kind = "an integer" if cast is int else "a number"

    def parse(text: str):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind} {interval}, got {text!r}") from None
        if value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"must be {interval}, got {value}")
        return value

    return parse


positive_int = bounded(int, 1)
non_negative_int = bounded(int, 0)
non_negative_float = bounded(float, 0.0)
probability = bounded(float, 0.0, 1.0, low_open=True)
"""A number in (0, 1]."""


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: stores into the new option's `dest` and warns once it is used."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.new}.", file=sys.stderr)
        setattr(namespace, self.dest, values)


# ----------------------------------------------------------------------------------------------------------------
# Options of `evaluate` and `select-prompts`
# ----------------------------------------------------------------------------------------------------------------


def add_sampling_arguments(parser: argparse.ArgumentParser, max_completion_length: int) -> None:
    """The sampling options (fields of [`~trl_ada.evaluation.SamplingSettings`])."""
    group = parser.add_argument_group("generation")
    group.add_argument(
        "--temperature", type=non_negative_float, default=1.0, help="Sampling temperature; 0 is greedy."
    )
    group.add_argument("--top_p", type=probability, default=1.0, help="Nucleus sampling probability mass.")
    group.add_argument(
        "--max_completion_length",
        type=positive_int,
        default=max_completion_length,
        help=f"Most tokens per completion, as in training (default: {max_completion_length}).",
    )
    group.add_argument(
        "--max_new_tokens",
        type=positive_int,
        dest="max_completion_length",
        action=DeprecatedAlias,
        new="--max_completion_length",
    )
    group.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="auto: vLLM with CUDA, else transformers.",
    )
    group.add_argument(
        "--batch_size", type=positive_int, default=8, help="Prompts per `generate` call (transformers)."
    )
    group.add_argument(
        "--dtype", default="auto", help="Model dtype: auto (checkpoint dtype; float32 on CPU), bfloat16..."
    )
    group.add_argument("--seed", type=int, default=0, help="Random seed of the sampling.")


def sampling_settings(args: argparse.Namespace) -> SamplingSettings:
    """The parsed sampling options as [`~trl_ada.evaluation.SamplingSettings`]; a ValueError now (before any data
    is sampled) when `--backend vllm` cannot run here."""
    from ..evaluation import SamplingSettings, resolve_backend

    resolve_backend(args.backend)
    return SamplingSettings(
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_completion_length,
        seed=args.seed,
        backend=args.backend,
        batch_size=args.batch_size,
        dtype=args.dtype,
    )


def add_data_arguments(parser: argparse.ArgumentParser, split: str) -> None:
    """Split and column options."""
    parser.add_argument(
        "--split", default=split, help=f"Dataset split (default: {split}); a single local file is always its data."
    )
    parser.add_argument("--problem_column", default=None, help="Problem column (default: problem, question, prompt).")
    parser.add_argument("--answer_column", default=None, help="Answer column (default: answer, gt, solution, ...).")


def load_split(source: str, split: str, limit: int | None) -> Dataset:
    """Load a dataset split (a single local file is read whole) and keep its first `limit` rows."""
    from ..data import load_prompt_dataset

    dataset = load_prompt_dataset(source, split="train" if Path(source).expanduser().is_file() else split)
    return dataset.select(range(min(limit, len(dataset)))) if limit else dataset


def check_columns(dataset: Dataset, problem_column: str | None, answer_column: str | None) -> None:
    """Fail before any generation when the problem or answer column is missing."""
    from ..data import resolve_columns

    resolve_columns(dataset.column_names, problem_column, answer_column)
