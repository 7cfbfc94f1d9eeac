"""What the `trl-ada` subcommands share: logging setup, one-line errors, the Hub token check, argument types and
the sampling, data and reward options of `evaluate` and `select-prompts`."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..evaluation import BACKENDS

if TYPE_CHECKING:
    from datasets import Dataset

    from ..evaluation import SamplingSettings
    from ..rewards import RewardFunc

__all__ = [
    "DTYPES",
    "PROG",
    "UsageError",
    "add_data_arguments",
    "add_reward_argument",
    "add_sampling_arguments",
    "answerable_rows",
    "fitting_prompts",
    "check_model",
    "check_not_empty",
    "exit_code",
    "load_split",
    "print_error",
    "require_hub_token",
    "resolve_reward",
    "sampling_settings",
    "setup_logging",
]

PROG = "trl-ada"
DTYPES = ("auto", "bfloat16", "float16", "float32")
"""Values of `--dtype` (as TRL's `ModelConfig.dtype`)."""
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger(__name__)


class _StderrHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment, not the one at setup (a command run in-process, by a test or a
    notebook, may have replaced it since; a closed one would turn every record into a logging error)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(level: int = logging.INFO) -> None:
    """Log records of `trl_ada` at `level` and above to stderr (one handler, added once)."""
    package_logger = logging.getLogger("trl_ada")
    package_logger.setLevel(level)
    if not package_logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT, "%H:%M:%S"))
        package_logger.addHandler(handler)


class UsageError(ValueError):
    """The command line, the config file, or a file, directory or model it names is wrong; exit code 2."""


class HubAccessError(ValueError):
    """The Hugging Face Hub could not be reached or refused the token; exit code 1 (the environment, not usage)."""


def exit_code(err: BaseException | str) -> int:
    """2 for a usage error (a bad value, file, path or model in the invocation), 1 for the environment (network,
    credentials) and anything else."""
    from ..outputs import OutputError
    from ..run_dir import RunDirectoryError

    usage = (UsageError, OutputError, RunDirectoryError, ValueError, TypeError, FileNotFoundError, NotADirectoryError)
    return 2 if isinstance(err, usage) and not isinstance(err, HubAccessError) else 1


def print_error(command: str, err: BaseException | str) -> int:
    """Print a setup or input error as one line without a traceback (`trl-ada CMD: error: ...`); return its exit
    code ([`exit_code`]: 2 for usage errors, 1 otherwise)."""
    print(f"{PROG} {command}: error: {err}", file=sys.stderr)
    return exit_code(err)


def _looks_local(name: str) -> bool:
    """A path rather than a Hub id (`name` or `org/name`): starts with `.`, `/` or `~`, or has more than one `/`."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or name.endswith("/") or "\\" in name


def check_model(name: str, option: str, **config_kwargs: Any) -> None:
    """Fail before any data or generation work when the model cannot be found.

    A local-looking path must be a directory (with a "did you mean" hint from its parent) whose safetensors files are
    whole; anything else must have a loadable config (a cheap download, or the local cache offline);
    `config_kwargs` go to `AutoConfig`.
    """
    from ..utils import closest_name

    path = Path(name).expanduser()
    if path.is_dir():
        from ..run_dir import weights_file_problem

        problem = next(filter(None, map(weights_file_problem, sorted(path.glob("*.safetensors")))), None)
        if problem:
            raise UsageError(f"{option} {name}: {problem}. Download or copy the model again, or pass another one.")
        return
    if path.exists():
        raise UsageError(f"{option} {name}: is a file; pass the model's directory (with config.json) or a Hub id.")
    if _looks_local(name):
        parent = path.parent if path.parent.is_dir() else None
        similar = closest_name(path.name, [p.name for p in parent.iterdir() if p.is_dir()]) if parent else None
        hint = f" Did you mean {os.path.join(os.path.dirname(name), similar)!r}?" if similar else ""
        raise UsageError(f"{option} {name}: no such directory.{hint} Check the path, or give a Hub model id.")
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name, **config_kwargs)
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(
            f"{option} {name}: no such local directory, and no model of that name could be loaded from the Hub "
            f"({reason}). Check the spelling or the path; offline, the model must be in the Hugging Face cache."
        ) from err


def check_not_empty(dataset: Dataset, option: str, source: str, minimum: int = 1) -> None:
    """Fail before any generation when `dataset` holds fewer than `minimum` rows."""
    if len(dataset) < minimum:
        have = "no rows" if len(dataset) == 0 else f"only {len(dataset)} rows"
        raise UsageError(f"{option} {source}: has {have}; at least {minimum} needed. Check the file or the split.")


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
        raise HubAccessError(
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
        help="auto: vLLM with CUDA, else transformers; server: a running vLLM server (--vllm_server_base_url).",
    )
    group.add_argument(
        "--vllm_server_base_url",
        default=None,
        metavar="URL",
        help="Base URL of the vLLM server serving --model, for --backend server (e.g. http://127.0.0.1:8000).",
    )
    group.add_argument(
        "--batch_size", type=positive_int, default=8, help="Prompts per `generate` call (transformers)."
    )
    group.add_argument(
        "--dtype", choices=DTYPES, default="auto", help="Model dtype: auto (checkpoint dtype; float32 on CPU), ..."
    )
    group.add_argument("--seed", type=int, default=0, help="Random seed of the sampling.")


def sampling_settings(args: argparse.Namespace) -> SamplingSettings:
    """The parsed sampling options as [`~trl_ada.evaluation.SamplingSettings`]; a ValueError now (before any data
    is sampled) when `--backend vllm` cannot run here, or `--backend server` has no `--vllm_server_base_url`."""
    from ..evaluation import SamplingSettings, resolve_backend

    resolve_backend(args.backend)
    if (args.backend == "server") != bool(args.vllm_server_base_url):
        raise UsageError(
            "--backend server samples from the vLLM server at --vllm_server_base_url: give both or neither (got "
            f"--backend {args.backend}, --vllm_server_base_url {args.vllm_server_base_url})."
        )
    return SamplingSettings(
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_completion_length,
        seed=args.seed,
        backend=args.backend,
        batch_size=args.batch_size,
        dtype=args.dtype,
        server_url=args.vllm_server_base_url,
    )


def add_data_arguments(parser: argparse.ArgumentParser, split: str) -> None:
    """Split and column options."""
    parser.add_argument(
        "--split", default=split, help=f"Dataset split (default: {split}); a single local file is always its data."
    )
    parser.add_argument("--problem_column", default=None, help="Problem column (default: problem, question, prompt).")
    parser.add_argument("--answer_column", default=None, help="Answer column (default: answer, gt, solution, ...).")
    parser.add_argument(
        "--max_prompt_tokens",
        type=positive_int,
        default=None,
        help="Drop problems whose prompt (chat template included) is longer than this many tokens.",
    )


def add_reward_argument(parser: argparse.ArgumentParser) -> None:
    """`--reward`: the reward that decides which samples are correct."""
    parser.add_argument(
        "--reward",
        default="math",
        metavar="NAME",
        help="Reward that scores each sample (correct: reward > 0.5): a registered name, such as math (the final "
        "\\boxed{} answer), math_final (the boxed answer, else the final number of a plain-text answer) or "
        "short_answer (fact prompts), or package.module:function (default: math).",
    )


def resolve_reward(name: str) -> RewardFunc:
    """The reward function `--reward` names; a UsageError naming the option, the value and the known rewards."""
    from ..rewards import get_reward_funcs

    try:
        return get_reward_funcs([name])[0]
    except ValueError as err:
        raise UsageError(f"--reward {name}: {err}") from err


def load_split(source: str, split: str, limit: int | None) -> Dataset:
    """Load a dataset split (a single local file is read whole) and keep its first `limit` rows."""
    from ..data import load_prompt_dataset

    dataset = load_prompt_dataset(source, split="train" if Path(source).expanduser().is_file() else split)
    return dataset.select(range(min(limit, len(dataset)))) if limit else dataset


def answerable_rows(dataset: Dataset, problem_column: str | None, answer_column: str | None, source: str) -> Dataset:
    """Fail before any generation when the problem or answer column is missing; the rows with a null or empty answer
    (they could never score) or problem (nothing to ask) are dropped with a warning."""
    from ..data import drop_unanswered, drop_unposed, resolve_columns

    problem, answer = resolve_columns(dataset.column_names, problem_column, answer_column)
    return drop_unanswered(drop_unposed(dataset, problem, source), answer, source)


def fitting_prompts(datasets: dict[str, Dataset], args: argparse.Namespace, option: str) -> dict[str, Dataset]:
    """Each dataset (by the label its errors name) without the problems longer than `--max_prompt_tokens`, if set;
    a one-line `PromptTooLongError` for a prompt that leaves no room for a completion in `--model`'s context."""
    from transformers import AutoConfig

    from ..data import (
        check_prompt_lengths,
        format_dataset,
        max_prompt_tokens_hint,
        model_context,
        prompt_lengths,
        prompts_over,
        rendered_prompts,
    )
    from ..evaluation import load_tokenizer

    tokenizer = load_tokenizer(args.model)
    context = model_context(AutoConfig.from_pretrained(args.model), tokenizer)
    render, count = partial(rendered_prompts, tokenizer=tokenizer), partial(prompt_lengths, tokenizer=tokenizer)
    fitting = {}
    for label, dataset in datasets.items():
        prompts = format_dataset(dataset, args.problem_column, args.answer_column)["prompt"]
        if args.max_prompt_tokens is not None:
            over = prompts_over(prompts, args.max_prompt_tokens + 1, render, count)
            if len(over) == len(dataset):
                raise UsageError(
                    f"{option} {label}: every prompt is longer than --max_prompt_tokens {args.max_prompt_tokens}; "
                    "raise it."
                )
            if over:
                logger.warning(
                    "%s: dropped %d of %d problems whose prompt is longer than --max_prompt_tokens %d.",
                    label,
                    len(over),
                    len(dataset),
                    args.max_prompt_tokens,
                )
                keep = [index for index in range(len(dataset)) if index not in over]
                dataset, prompts = dataset.select(keep), [prompts[index] for index in keep]
        if context is not None:
            hint = max_prompt_tokens_hint(context, args.max_completion_length)
            fix = f"Drop such problems with --max_prompt_tokens {hint}, or use a model with a longer context."
            over = prompts_over(prompts, context.tokens, render, count)
            check_prompt_lengths(prompts, over, context, f"{option} {label}: problem", fix)
        fitting[label] = dataset
    return fitting
