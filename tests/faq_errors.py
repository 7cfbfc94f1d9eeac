"""The bad inputs behind the error headings of `docs/faq.md`, and the generator of those headings.

Each entry of [`ENTRIES`] makes the code print one error (or warning) the cheapest way a user meets it: building a
config, parsing a command line, reading a data file, a run directory or a checkpoint, checking a reward. It runs in a
fresh scratch directory and returns the message as the user reads it: the exception's text (what `trl-ada` prints
after `trl-ada COMMAND: error: `) or the log record's. Paths of the scratch directory are written relative to it
(`runs/x`), so the messages are the same on every machine.

In `docs/faq.md`, a heading that quotes a message follows a marker naming its entries, `<!-- error: KEY -->` (several
keys: one heading quoting each message, joined by ` / `); the heading line is generated from what the entries print
([`heading_line`]: the message on one line, cut after its last whole sentence within [`HEADING_CHARS`] characters).
`tests/test_faq.py` checks that every heading is what the code prints now.

    python tests/faq_errors.py           # rewrite the generated headings of docs/faq.md
    python tests/faq_errors.py --check   # exit 1, naming them, if some heading is stale

Only the heading lines are generated; the explanation under each heading is written by hand.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
FAQ = REPO / "docs" / "faq.md"
REGENERATE = "python tests/faq_errors.py"
"""The command that rewrites the generated headings of `docs/faq.md` (run from the repository root)."""

HEADING_CHARS = 170
"""A heading quotes the whole message when it fits in this many characters, else its leading whole sentences that
fit, else the start of its first sentence, cut at its last clause (`, `, `; `, `: `) or word that fits, with ` …`."""
MARKER = re.compile(r"^<!-- error: (?P<keys>[\w ]+?) -->[ \t]*$", re.M)
SENTENCE_END = re.compile(r"[.?!]\)?(?=\s+[A-Z])")
"""The end of a sentence: `.`, `?` or `!` (and a closing parenthesis), then a space and a capital letter."""

ENTRIES: dict[str, Callable[[], str]] = {}
"""Entry key -> the function that makes the code print the message (in the current directory, a scratch one)."""


class NoMessage(AssertionError):
    """An entry's input no longer makes the code raise (or warn): the FAQ would quote a message the code does not
    print."""


def entry(function: Callable[[], str]) -> Callable[[], str]:
    """Add `function` to [`ENTRIES`] under its name."""
    ENTRIES[function.__name__] = function
    return function


# ------------------------------------------------------------------------------------------------------------- helpers


def raised(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The text of the exception `call(*args, **kwargs)` raises; [`NoMessage`] when it returns."""
    try:
        call(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - whatever the code raises is the message the user reads
        return str(error)
    raise NoMessage(f"{getattr(call, '__qualname__', call)!s} returned without raising")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def warned(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The first warning `call(*args, **kwargs)` logs on the `trl_ada` loggers; [`NoMessage`] when it logs none."""
    package = logging.getLogger("trl_ada")
    handler, level = _Records(), package.level
    package.addHandler(handler)
    if package.getEffectiveLevel() > logging.WARNING:
        package.setLevel(logging.WARNING)
    try:
        call(*args, **kwargs)
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
    if not handler.records:
        raise NoMessage(f"{getattr(call, '__qualname__', call)!s} logged no warning")
    return handler.records[0].getMessage()


def cli_error(*argv: str) -> str:
    """What `trl-ada ARGV` prints after `trl-ada COMMAND: error: ` (all of it, when it spans several lines)."""
    from trl_ada.cli import main

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(list(argv))
    text, prefix = stderr.getvalue(), f"trl-ada {argv[0]}: error: "
    if code == 0 or prefix not in text:
        raise NoMessage(f"`trl-ada {' '.join(argv)}` exited {code} without an error line")
    return text[text.index(prefix) + len(prefix) :].strip()


def config(**fields: Any) -> Any:
    """A `ReinforceAdaConfig` of a CPU run into `runs/x`, with `fields`."""
    from trl_ada import ReinforceAdaConfig

    return ReinforceAdaConfig(**{"output_dir": "runs/x", "use_cpu": True, "report_to": "none", **fields})


def write_jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    Path(path).write_text("".join(json.dumps(row) + "\n" for row in rows))


PROBLEMS = [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(8)]


def _reward(completions, **kwargs):
    return [0.0] * len(completions)


# ----------------------------------------------------------------------------------------------------- sampling fields


@entry
def rounds_cap() -> str:
    return raised(config, samples_per_round=1, max_rounds=2)


@entry
def unknown_exit_rule() -> str:
    return raised(config, exit_rule="balanced")


@entry
def exit_rule_none() -> str:
    return raised(config, exit_rule="none")


@entry
def unused_field() -> str:
    return raised(config, sampling="est", exit_rule="balance")


@entry
def streaming_needs_server() -> str:
    return raised(config, generation_schedule="streaming")


@entry
def unknown_preset() -> str:
    return raised(config, sampling="dappo")


@entry
def field_type() -> str:
    return raised(config, samples_per_round="8")


@entry
def group_size() -> str:
    return raised(config, num_generations=1)


@entry
def grpo_config() -> str:
    from trl import GRPOConfig

    from trl_ada import ReinforceAdaTrainer

    args = GRPOConfig(output_dir="runs/x", use_cpu=True, report_to="none")
    return raised(ReinforceAdaTrainer, "no-model-is-loaded", _reward, args=args)


@entry
def generation_batch_size() -> str:
    return raised(config, per_device_train_batch_size=6)


@entry
def bf16_without_gpu() -> str:
    """transformers' check on a machine without a bf16 GPU (faked here, so that a GPU machine prints it too)."""
    from trl_ada import ReinforceAdaConfig

    module = "transformers.training_args"
    with (
        mock.patch(f"{module}.is_torch_bf16_gpu_available", return_value=False),
        mock.patch(f"{module}.is_torch_cuda_available", return_value=False),
        mock.patch(f"{module}.is_torch_xla_available", return_value=False),
    ):
        return raised(ReinforceAdaConfig, output_dir="runs/x", report_to="none")


@entry
def push_without_token() -> str:
    """`trl-ada train --push_to_hub true` on a machine with no Hugging Face token."""
    from trl_ada.cli.train import check_hub_credentials

    with mock.patch("huggingface_hub.get_token", return_value=None):
        return raised(check_hub_credentials, config(push_to_hub=True))


# ------------------------------------------------------------------------------------------------- data, recipe, paths


@entry
def no_problem_column() -> str:
    from datasets import Dataset

    from trl_ada.data import format_dataset

    return raised(format_dataset, Dataset.from_list([{"q": "What is 1 + 1?", "a": "2"}]))


@entry
def single_split() -> str:
    from trl_ada.data import load_prompt_dataset

    write_jsonl("problems.jsonl", PROBLEMS)
    return raised(load_prompt_dataset, "problems.jsonl", split="test")


@entry
def recipe_not_found() -> str:
    return cli_error("train", "--config", "recipe.yaml")


@entry
def recipe_value_type() -> str:
    Path("recipe.yaml").write_text("samples_per_round: eight\n")
    return cli_error("train", "--config", "recipe.yaml")


@entry
def unknown_key() -> str:
    return cli_error("train", "--max_round", "3")


@entry
def unknown_reward() -> str:
    from trl_ada.rewards import get_reward_funcs

    return raised(get_reward_funcs, ["maths"])


@entry
def model_path_typo() -> str:
    """`--model_name_or_path ./Qwen2.5-Math-1.5b` next to the directory `Qwen2.5-Math-1.5B` (as `train`,
    `evaluate` and `select-prompts` check it)."""
    from trl_ada.cli.common import check_model

    Path("Qwen2.5-Math-1.5B").mkdir()
    return raised(check_model, "./Qwen2.5-Math-1.5b", "--model_name_or_path")


@entry
def output_exists() -> str:
    """`trl-ada evaluate --datasets problems.jsonl --output report.json` when report.json exists."""
    from trl_ada.outputs import check_output

    write_jsonl("problems.jsonl", PROBLEMS)
    Path("report.json").write_text("{}\n")
    return raised(check_output, "report.json", option="--output", overwrite=False, inputs=["problems.jsonl"])


@entry
def impossible_filter() -> str:
    """`trl-ada select-prompts --min_correct 5 --num_samples 2` (the check its `main` runs first)."""
    from trl_ada.cli.select_prompts import check_filter
    from trl_ada.evaluation import DEFAULT_MAX_PASS_RATE

    return raised(check_filter, num_samples=2, min_correct=5, max_pass_rate=DEFAULT_MAX_PASS_RATE)


@entry
def empty_file() -> str:
    from trl_ada.data import load_prompt_dataset

    Path("empty.jsonl").write_bytes(b"")
    return raised(load_prompt_dataset, "empty.jsonl")


@entry
def broken_file() -> str:
    from trl_ada.data import load_prompt_dataset

    Path("broken.jsonl").write_text('{"problem": "a", "answer": "1"}\n{"problem": broken\n')
    return raised(load_prompt_dataset, "broken.jsonl")


@entry
def dropped_answers() -> str:
    """The warning of `evaluate` and `select-prompts` on problems.jsonl, 2 of whose 500 answers are missing."""
    from datasets import Dataset

    from trl_ada.cli.common import answerable_rows

    rows = [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(500)]
    rows[3]["answer"], rows[7]["answer"] = None, ""
    return warned(answerable_rows, Dataset.from_list(rows), None, None, "problems.jsonl")


@entry
def dataset_streaming() -> str:
    from trl import ModelConfig

    from trl_ada.cli.train import build_datasets
    from trl_ada.data import ReinforceAdaScriptArguments

    write_jsonl("problems.jsonl", PROBLEMS)
    script_args = ReinforceAdaScriptArguments(dataset_name="problems.jsonl", dataset_streaming=True)
    return raised(build_datasets, script_args, config(), ModelConfig())


# ------------------------------------------------------------------------------------------------------- run directory


@entry
def old_checkpoints() -> str:
    from trl_ada.cli.train import check_run_dir

    for step in (2, 3):
        Path(f"runs/x/checkpoint-{step}").mkdir(parents=True)
    return raised(check_run_dir, config())


@entry
def finished_run() -> str:
    from trl_ada.cli.train import check_run_dir

    Path("runs/x").mkdir(parents=True)
    for name in ("trainer_state.json", "config.json", "model.safetensors"):
        Path("runs/x", name).write_text("{}")
    return raised(check_run_dir, config())


@entry
def prompt_too_long() -> str:
    """A train_dataset whose row 17 has 5120 tokens (counted here one per word, for a model whose
    max_position_embeddings is 4096); the trainer runs this check when it is built."""
    from types import SimpleNamespace

    from datasets import Dataset

    from trl_ada.data import check_train_prompts, model_context

    long = "Sum these numbers: " + " ".join(str(i) for i in range(5117))
    dataset = Dataset.from_dict({"prompt": [f"What is {i} + 1?" for i in range(17)] + [long]})
    context = model_context(SimpleNamespace(max_position_embeddings=4096))

    def words(prompts):
        return [len(prompt.split()) for prompt in prompts]

    return raised(check_train_prompts, dataset, None, context, 1024, render=list, count=words)


@entry
def run_lock_held() -> str:
    """runs/x locked by a run on another machine (process 1234 on node-3, started 2026-05-02 14:03:11)."""
    from trl_ada.run_dir import LOCK_NAME, run_lock

    started = time.mktime((2026, 5, 2, 14, 3, 11, 0, 0, -1))  # printed in local time: the same on every machine
    Path("runs/x").mkdir(parents=True)
    holder = {"pid": 1234, "host": "node-3", "started": started, "process_start": None}
    Path("runs/x", LOCK_NAME).write_text(json.dumps(holder))

    def enter() -> None:
        with run_lock("runs/x"):
            pass

    return raised(enter)


@entry
def resume_nothing() -> str:
    from trl_ada.cli.train import check_run_dir

    return raised(check_run_dir, config(resume_from_checkpoint="true"))


@entry
def partial_checkpoint() -> str:
    """Resuming runs/x, whose checkpoint-300 still holds its saving marker."""
    from trl_ada.run_dir import SAVING_MARKER, last_complete_checkpoint

    Path("runs/x/checkpoint-300").mkdir(parents=True)
    Path("runs/x/checkpoint-300", SAVING_MARKER).write_text("")
    return warned(last_complete_checkpoint, "runs/x")


@entry
def corrupt_memory() -> str:
    """Resuming with pass_rate_memory=True from a checkpoint whose pass_rate_memory.npz is empty."""
    from trl_ada.checkpoint_state import MEMORY_FILE, load_memory

    Path("runs/x/checkpoint-300").mkdir(parents=True)
    Path("runs/x/checkpoint-300", MEMORY_FILE).write_bytes(b"")
    return raised(load_memory, "runs/x/checkpoint-300", 0.5)


@entry
def corrupt_stream() -> str:
    """Resuming with candidates from a checkpoint whose candidate_stream.json is empty."""
    from trl_ada.checkpoint_state import CANDIDATE_STREAM_FILE, load_candidate_stream

    Path("runs/x/checkpoint-300").mkdir(parents=True)
    Path("runs/x/checkpoint-300", CANDIDATE_STREAM_FILE).write_bytes(b"")
    return raised(load_candidate_stream, "runs/x/checkpoint-300", 1000)


@entry
def stream_size() -> str:
    """Resuming on 800 prompts a checkpoint whose candidate stream covers 1000."""
    from trl_ada.candidates import CandidateStream
    from trl_ada.checkpoint_state import CANDIDATE_STREAM_FILE, load_candidate_stream, save_candidate_stream

    Path("runs/x/checkpoint-300").mkdir(parents=True)
    save_candidate_stream(CandidateStream(1000, 0), f"runs/x/checkpoint-300/{CANDIDATE_STREAM_FILE}")
    return raised(load_candidate_stream, "runs/x/checkpoint-300", 800)


@entry
def output_dir_file() -> str:
    from trl_ada.run_dir import run_lock

    Path("runs").mkdir()
    Path("runs/x").write_text("not a directory\n")

    def enter() -> None:
        with run_lock("runs/x"):
            pass

    return raised(enter)


@entry
def small_dataset() -> str:
    """A trainer over 3 prompts when a generation batch draws 4 (16 completions, n = 4); no model is loaded."""
    from datasets import Dataset

    from trl_ada import ReinforceAdaTrainer

    dataset = Dataset.from_dict({"prompt": ["What is 1 + 1?", "What is 2 + 1?", "What is 3 + 1?"]})
    args = config(per_device_train_batch_size=16)
    return raised(ReinforceAdaTrainer, "no-model-is-loaded", _reward, args=args, train_dataset=dataset)


# ------------------------------------------------------------------------------------------------------------- rewards


@entry
def reward_inf() -> str:
    """The trainer's check of a round's rewards, when `my_reward` returned inf for the completion '1e400'."""
    import numpy as np

    from trl_ada.checks import RewardGuard

    guard = RewardGuard(["my_reward"], [1.0], positive_threshold=0.7)
    return raised(guard.aggregate, np.array([[np.inf]]), ["1e400"])


@entry
def reward_str() -> str:
    """`my_reward` returning the string '1', as every path that calls a reward function checks it."""
    from trl_ada.checks import CheckedReward

    def my_reward(completions, **kwargs):
        return ["1" for _ in completions]

    return raised(CheckedReward(my_reward), prompts=["What is 0 + 1?"], completions=["1"])


@entry
def reward_column() -> str:
    """A trainer with the `math` reward over a dataset without an `answer` column; no model is loaded."""
    from datasets import Dataset

    from trl_ada import ReinforceAdaTrainer

    dataset = Dataset.from_dict({"prompt": ["What is 2 + 3?", "What is 1 + 1?"]})
    return raised(ReinforceAdaTrainer, "no-model-is-loaded", "math", args=config(), train_dataset=dataset)


@entry
def threshold_warning() -> str:
    """Three training steps whose highest weighted reward is 0.5, under positive_threshold=0.7."""
    import numpy as np

    from trl_ada.checks import THRESHOLD_CHECK_STEPS, RewardGuard

    guard = RewardGuard(["my_reward"], [1.0], positive_threshold=0.7)

    def steps() -> None:
        for _ in range(THRESHOLD_CHECK_STEPS):
            guard.aggregate(np.array([[0.5], [0.0]]), ["a", "b"])
            guard.end_step()

    return warned(steps)


@entry
def math_budget() -> str:
    """A call of the `math` reward on 4096 completions, 812 of them with a boxed answer, that starts after its 300 s
    budget ran out (its clock is set 1000 s back, so that no answer is verified)."""
    from types import SimpleNamespace

    from trl_ada.rewards import scoring

    completions = [f"\\boxed{{{i}}}" for i in range(812)] + ["no answer"] * (4096 - 812)
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() - 1000)
    scoring.clear_caches()
    with mock.patch.object(scoring, "time", clock), mock.patch.dict(os.environ, {"TRL_ADA_REWARD_WORKERS": "0"}):
        return warned(scoring.math_reward, completions, answer=["1"] * len(completions))


# ---------------------------------------------------------------------------------------------------------- generation


def error_message(key: str) -> str:
    """What entry `key` makes the code print, run in a fresh scratch directory whose path is written relative to it;
    [`NoMessage`] naming the entry when the code prints nothing."""
    previous = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="faq-") as scratch:
        os.chdir(scratch)
        try:
            message = ENTRIES[key]()
        except NoMessage as missing:
            raise NoMessage(
                f"the entry {key!r} of tests/faq_errors.py no longer makes the code print an error ({missing}): "
                f"docs/faq.md would quote a message the code does not print. Fix the entry, or drop it and its "
                "section of docs/faq.md."
            ) from None
        finally:
            os.chdir(previous)
        for root in dict.fromkeys([str(Path(scratch).resolve()), scratch]):
            message = message.replace(root + os.sep, "").replace(root, ".")
    return message


def heading_text(message: str) -> str:
    """The message on one line (a list line's `- ` dropped), whole when it fits in [`HEADING_CHARS`], else its
    leading whole sentences that fit, else its start cut at the last clause (or else word) that fits, with ` …`."""
    text = " ".join(line.strip().removeprefix("- ") for line in message.strip().splitlines() if line.strip())
    if len(text) <= HEADING_CHARS:
        return text
    ends = [match.end() for match in SENTENCE_END.finditer(text) if match.end() <= HEADING_CHARS]
    if ends:
        return text[: ends[-1]]
    start = text[: HEADING_CHARS - 2]
    clause = max(start.rfind(separator) for separator in (", ", "; ", ": "))
    start = start[:clause] if clause > HEADING_CHARS // 2 else start.rsplit(" ", 1)[0]
    return start.rstrip(" ,;:") + " …"


def code_span(text: str) -> str:
    """`text` as inline code (between double backticks when it holds one)."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def heading_line(messages: list[str]) -> str:
    """The FAQ heading that quotes `messages` (one per key of its marker)."""
    return "### " + " / ".join(code_span(heading_text(message)) for message in messages)


def marked_headings(page: str) -> list[tuple[tuple[str, ...], str]]:
    """(keys of the marker, the line after it) for every `<!-- error: KEY ... -->` marker of the page, in order."""
    lines = page.splitlines()
    found = []
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if match:
            following = lines[index + 1] if index + 1 < len(lines) else ""
            found.append((tuple(match["keys"].split()), following))
    return found


def with_headings(page: str, messages: dict[str, str]) -> str:
    """The page with the line after each marker replaced by the heading quoting its entries' `messages` (inserted
    when that line is no heading)."""
    lines = page.splitlines(keepends=True)
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        match = MARKER.match(line.rstrip("\n"))
        if match:
            out.append(heading_line([messages[key] for key in match["keys"].split()]) + "\n")
            if index < len(lines) and lines[index].startswith("#"):
                index += 1  # the heading it replaces
    return "".join(out)


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    page = FAQ.read_text()
    keys = [key for marker, _ in marked_headings(page) for key in marker]
    unknown = sorted(set(keys) - set(ENTRIES))
    if unknown:
        print(f"docs/faq.md marks headings with keys that tests/faq_errors.py has no entry for: {unknown}")
        return 1
    unused = sorted(set(ENTRIES) - set(keys))
    if unused:
        print(f"entries of tests/faq_errors.py that no heading of docs/faq.md quotes: {unused}")
    messages = {key: error_message(key) for key in dict.fromkeys(keys)}
    updated = with_headings(page, messages)
    stale = [
        f"{' '.join(marker)}: {line!r}"
        for (marker, line), (_, new) in zip(marked_headings(page), marked_headings(updated), strict=True)
        if line != new
    ]
    if "--check" in argv:
        print("\n".join(stale) if stale else "docs/faq.md: every generated heading is up to date")
        return 1 if stale else 0
    FAQ.write_text(updated)
    print(f"docs/faq.md: {len(marked_headings(updated))} generated headings, {len(stale)} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
