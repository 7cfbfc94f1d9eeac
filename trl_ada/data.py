"""Math prompt datasets for Reinforce-Ada training: loading, column mapping, prompt template, length filter.

A training row needs a `prompt` (a conversation: a list of `{"role", "content"}` messages) and an `answer` (the
reference final answer, a string, read by the math reward). Source datasets name these columns in many ways; the
first known alias found is used, and `problem_column` / `answer_column` override the guess.

```python
from trl_ada.data import format_dataset, load_prompt_dataset

dataset = load_prompt_dataset("open-r1/OpenR1-Math-220k", split="train")  # or "data/problems.jsonl"
dataset = format_dataset(dataset)  # -> columns "prompt" (conversational) and "answer" (str), plus the others
```
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl import ScriptArguments

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "ANSWER_ALIASES",
    "DEFAULT_PROMPT_STYLE",
    "INSTRUCTION",
    "ModelContext",
    "PROBLEM_ALIASES",
    "PROMPT_STYLES",
    "SYSTEM_PROMPT",
    "TOKEN_BYTES_MARGIN",
    "PromptStyle",
    "PromptTooLongError",
    "ReinforceAdaScriptArguments",
    "build_prompt",
    "check_prompt_lengths",
    "drop_unanswered",
    "drop_unposed",
    "filter_by_prompt_length",
    "format_dataset",
    "load_prompt_dataset",
    "model_context",
    "nothing_asked",
    "prompt_lengths",
    "prompt_token_count",
    "prompt_token_ids",
    "prompts_over",
    "rendered_prompts",
    "resolve_columns",
]

logger = logging.getLogger(__name__)

INSTRUCTION = "Think through the problem step by step, then write your final answer inside \\boxed{}."
"""trl_ada's own reasoning instruction (the `"trl_ada"` prompt style): system message and problem suffix."""


@dataclass(frozen=True)
class PromptStyle:
    """How a problem becomes a conversation: a system message, and a suffix appended to the problem."""

    system: str
    suffix: str


PROMPT_STYLES: dict[str, PromptStyle] = {
    # The wording of the paper's reference runs; Qwen2.5-Math was tuned on it and is sensitive to it.
    "reference": PromptStyle(
        system="Please reason step by step, and put your final answer within \\boxed{}.",
        suffix=" Let's think step by step and output the final answer within \\boxed{}.",
    ),
    "trl_ada": PromptStyle(system=INSTRUCTION, suffix=f"\n\n{INSTRUCTION}"),
}
"""Prompt wordings selectable with `prompt_style`."""

DEFAULT_PROMPT_STYLE = "reference"

SYSTEM_PROMPT = PROMPT_STYLES[DEFAULT_PROMPT_STYLE].system
"""Default system message (override it with `system_prompt`; an empty string means no system message)."""

PROBLEM_ALIASES: tuple[str, ...] = ("problem", "question", "prompt")
"""Column names read as the problem, in order of preference."""

ANSWER_ALIASES: tuple[str, ...] = ("answer", "gt", "solution", "ground_truth")
"""Column names read as the reference answer, in order of preference."""

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
"""File suffix -> `datasets` builder for local files."""


@dataclass
class ReinforceAdaScriptArguments(ScriptArguments):
    """
    Script arguments for `trl-ada train`: TRL's [`~trl.ScriptArguments`] (dataset name, config and splits) plus the
    prompt-dataset options below.

    Parameters:
        dataset_name (`str`, *optional*):
            Hub dataset id, local json/jsonl/parquet/csv file, directory of split files (`train.jsonl`, ...), or
            `save_to_disk` directory. Required by `trl-ada train`.
        problem_column (`str`, *optional*):
            Column holding the problem. Defaults to the first of `problem`, `question`, `prompt` present.
        answer_column (`str`, *optional*):
            Column holding the reference answer. Defaults to the first of `answer`, `gt`, `solution`, `ground_truth`
            present.
        reward_funcs (`list[str]`, *optional*, defaults to `["math"]`):
            Names of the reward functions (see `trl_ada.rewards.get_reward_funcs`), summed with `reward_weights`.
        reward_kwargs (`dict[str, dict]` or `str`, *optional*):
            Options of the reward functions, by name (a JSON string on the command line), e.g.
            `{"math": {"float_rounding": 4, "strict": false}}`: see `trl_ada.rewards.make_math_reward`.
        max_prompt_tokens (`int`, *optional*):
            Drop prompts longer than this many tokens (chat template included) before training.
        system_prompt (`str`, *optional*):
            Replace the prompt style's system message. An empty string sends no system message.
        prompt_style (`str`, *optional*, defaults to `"reference"`):
            Wording of the math prompt: `"reference"` (the paper's runs: system "Please reason step by step, and put
            your final answer within \\boxed{}.", problem followed by " Let's think step by step and output the final
            answer within \\boxed{}.") or `"trl_ada"` (`INSTRUCTION` as system message and after the problem).
    """

    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "Hub dataset id, local json/jsonl/parquet/csv file, directory of split files (train.jsonl, ...), "
            "or save_to_disk directory."
        },
    )
    problem_column: str | None = field(
        default=None,
        metadata={"help": f"Column holding the problem. Defaults to the first of {list(PROBLEM_ALIASES)} present."},
    )
    answer_column: str | None = field(
        default=None,
        metadata={
            "help": f"Column holding the reference answer. Defaults to the first of {list(ANSWER_ALIASES)} present."
        },
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["math"],
        metadata={"help": "Reward function names (see trl_ada.rewards), summed with `reward_weights`."},
    )
    reward_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": 'Options of the reward functions by name, as JSON, e.g. \'{"math": {"strict": false}}\' '
            "(see trl_ada.rewards.make_math_reward)."
        },
    )
    max_prompt_tokens: int | None = field(
        default=None,
        metadata={"help": "Drop prompts longer than this many tokens (chat template included) before training."},
    )
    system_prompt: str | None = field(
        default=None,
        metadata={"help": "Replace the prompt style's system message; an empty string sends no system message."},
    )
    prompt_style: str = field(
        default=DEFAULT_PROMPT_STYLE,
        metadata={
            "help": "Wording of the math prompt: 'reference' (the paper's runs) or 'trl_ada' (this package's own).",
            "choices": list(PROMPT_STYLES),
        },
    )

    def __post_init__(self) -> None:
        if hasattr(super(), "__post_init__"):  # TRL's ScriptArguments has none today
            super().__post_init__()
        if self.max_prompt_tokens is not None and self.max_prompt_tokens <= 0:
            raise ValueError(f"max_prompt_tokens={self.max_prompt_tokens} must be a positive number of tokens.")
        if isinstance(self.reward_funcs, str):
            self.reward_funcs = [self.reward_funcs]
        if not self.reward_funcs:
            raise ValueError("reward_funcs is empty: name at least one reward function, e.g. `reward_funcs: [math]`.")
        if not isinstance(self.reward_funcs, list) or not all(isinstance(name, str) for name in self.reward_funcs):
            raise ValueError(
                f"reward_funcs={self.reward_funcs!r} must be a list of reward names (registered ones or "
                "`package.module:function` paths), e.g. `reward_funcs: [math]` or --reward_funcs math format."
            )
        if isinstance(self.reward_kwargs, str):
            try:
                self.reward_kwargs = json.loads(self.reward_kwargs)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"reward_kwargs={self.reward_kwargs!r} is not valid JSON ({exc}); write e.g. "
                    '\'{"math": {"strict": false}}\'.'
                ) from exc
        get_prompt_style(self.prompt_style)


def get_prompt_style(name: str) -> PromptStyle:
    """The prompt style called `name`; a ValueError lists the valid names otherwise."""
    if name not in PROMPT_STYLES:
        raise ValueError(f"prompt_style={name!r} is not a prompt style; choose one of {list(PROMPT_STYLES)}.")
    return PROMPT_STYLES[name]


def build_prompt(
    problem: str, system_prompt: str | None = None, prompt_style: str = DEFAULT_PROMPT_STYLE
) -> list[dict[str, str]]:
    """The conversational prompt for one problem: system message, then the problem followed by the style's suffix."""
    style = get_prompt_style(prompt_style)
    system = style.system if system_prompt is None else system_prompt
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": f"{problem.strip()}{style.suffix}"})
    return messages


def _pick_column(
    column_names: Sequence[str], explicit: str | None, aliases: Sequence[str], role: str, option: str
) -> str:
    """The explicit column if given and present, else the first alias present; a clear ValueError otherwise."""
    if explicit is not None:
        if explicit in column_names:
            return explicit
        raise ValueError(
            f"The {role} column {explicit!r} (set by `{option}`) is not in the dataset. Columns found: "
            f"{list(column_names)}."
        )
    for name in aliases:
        if name in column_names:
            return name
    raise ValueError(
        f"No {role} column found: looked for {list(aliases)}, but the dataset has columns {list(column_names)}. "
        f"Name the {role} column with `--{option}` (or `{option}:` in the YAML config)."
    )


def resolve_columns(
    column_names: Sequence[str], problem_column: str | None = None, answer_column: str | None = None
) -> tuple[str, str]:
    """The (problem, answer) source columns of a dataset with these column names."""
    problem = _pick_column(column_names, problem_column, PROBLEM_ALIASES, "problem", "problem_column")
    answer = _pick_column(column_names, answer_column, ANSWER_ALIASES, "answer", "answer_column")
    return problem, answer


def _is_conversation(value: Any) -> bool:
    """True for a list of chat messages (an already formatted prompt)."""
    return isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value)


def _answer_text(value: Any) -> str | None:
    """The reference answer as a string (`trl_ada.rewards.answers.reference_answer`); None when it can never score:
    null, blank, or without a clear meaning (a boolean, NaN)."""
    from .rewards.answers import reference_answer

    text = reference_answer(value)
    return text if text is not None and text.strip() else None


def _is_blank(value: Any) -> bool:
    """A null or blank answer, or a list of nothing but those (the empty list included)."""
    if isinstance(value, (list, tuple)):
        return all(_is_blank(part) for part in value)
    return value is None or (isinstance(value, str) and not value.strip())


def drop_unanswered(dataset: Dataset, answer_column: str, source: str = "The dataset") -> Dataset:
    """`dataset` without the rows whose answer can never score: null or empty, or without a clear meaning (a
    boolean, NaN or infinity, a mapping; `trl_ada.rewards.answers.reference_answer`), with a warning giving their
    counts; a ValueError when no row is left."""
    answers = dataset[answer_column]
    keep = [index for index, value in enumerate(answers) if _answer_text(value) is not None]
    if len(keep) == len(dataset):
        return dataset
    unclear = sum(not _is_blank(value) and _answer_text(value) is None for value in answers)
    if not keep:
        raise ValueError(
            f"{source}: every row's answer (column {answer_column!r}) is null, empty or without a clear meaning (a "
            "boolean, NaN), so no row can be scored. Fill in the answers, or name the right column with "
            "`answer_column`."
        )
    dropped = len(dataset) - len(keep)
    if unclear:
        logger.warning(
            "%s: dropped %d of %d rows whose answer (column %r) could never score: %d null or empty, %d without a "
            "clear meaning (a boolean, NaN or infinity, a mapping).",
            source,
            dropped,
            len(dataset),
            answer_column,
            dropped - unclear,
            unclear,
        )
    else:
        logger.warning(
            "%s: dropped %d of %d rows whose answer (column %r) is null or empty: they could never score.",
            source,
            dropped,
            len(dataset),
            answer_column,
        )
    return dataset.select(keep)


def _is_unposed(value: Any) -> bool:
    """A problem with nothing to ask: null, blank, or a conversation that asks nothing (`nothing_asked`)."""
    return nothing_asked(value) is not None if _is_conversation(value) else _is_blank(value)


def nothing_asked(conversation: list[dict[str, Any]]) -> str | None:
    """Why a conversation asks nothing a chat template can render: no message, a message whose content is null, or
    a blank last message; None when it asks something."""
    if not conversation:
        return "it has no message"
    for index, message in enumerate(conversation):
        if message.get("content") is None:
            return f"message {index} ({message.get('role')!r}) has content null"
    if _is_blank(conversation[-1]["content"]):
        return f"its last message ({conversation[-1].get('role')!r}) is empty"
    return None


def drop_unposed(dataset: Dataset, problem_column: str, source: str = "The dataset") -> Dataset:
    """`dataset` without the rows whose problem is null or empty (nothing to ask), with a warning giving their count;
    a ValueError when no row is left."""
    keep = [index for index, value in enumerate(dataset[problem_column]) if not _is_unposed(value)]
    if len(keep) == len(dataset):
        return dataset
    if not keep:
        raise ValueError(
            f"{source}: every row's problem (column {problem_column!r}) is null or empty, so there is nothing to ask. "
            "Fill in the problems, or name the right column with `problem_column`."
        )
    logger.warning(
        "%s: dropped %d of %d rows whose problem (column %r) is null or empty: there is nothing to ask.",
        source,
        len(dataset) - len(keep),
        len(dataset),
        problem_column,
    )
    return dataset.select(keep)


def format_dataset(
    dataset: Dataset,
    problem_column: str | None = None,
    answer_column: str | None = None,
    system_prompt: str | None = None,
    prompt_style: str = DEFAULT_PROMPT_STYLE,
) -> Dataset:
    """Add the conversational `prompt` and the string `answer` columns; every other column is kept.

    A problem column that already holds conversations is kept as it is (no template is applied). An answer becomes
    text as `trl_ada.rewards.answers.reference_answer` reads it (a list of several answers: `2, 3`); rows whose
    answer is null, empty or without a clear meaning are dropped with a warning ([`drop_unanswered`]), and so are
    the rows whose problem is null or empty ([`drop_unposed`]).
    """
    problem_key, answer_key = resolve_columns(dataset.column_names, problem_column, answer_column)
    dataset = drop_unanswered(drop_unposed(dataset, problem_key), answer_key)

    def to_row(example: dict[str, Any]) -> dict[str, Any]:
        problem = example[problem_key]
        prompt = problem if _is_conversation(problem) else build_prompt(str(problem), system_prompt, prompt_style)
        return {"_trl_ada_prompt": prompt, "_trl_ada_answer": _answer_text(example[answer_key])}

    # Written under other names first: `map` would cast a value onto the type of a same-named input column (a float
    # or boolean `answer`), even one it removes.
    replaced = [name for name in ("prompt", "answer") if name in dataset.column_names]
    formatted = dataset.map(to_row, remove_columns=replaced, desc="Formatting prompts")
    return formatted.rename_columns({"_trl_ada_prompt": "prompt", "_trl_ada_answer": "answer"})


def _local_data_file(path: Path) -> str | None:
    """The `datasets` builder for a local data file, or None when the path is not one."""
    if not path.is_file():
        return None
    builder = LOCAL_FORMATS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"Unsupported local dataset file {str(path)!r}: use one of {sorted(LOCAL_FORMATS)}.")
    return builder


def _check_single_split(name_or_path: str, split: str) -> None:
    """A single file (or a saved `Dataset`) is the `train` split; anything else is an error, not a silent reuse."""
    if split.split("[", 1)[0] != "train":
        raise ValueError(
            f"{name_or_path!r} holds a single split, 'train'; got split {split!r}. Put split files "
            "(train.jsonl, test.jsonl, ...) in a directory and pass the directory instead."
        )


def _load_saved(path: Path, split: str) -> Dataset:
    """A directory written by `save_to_disk` (e.g. by `trl-ada select-prompts`)."""
    from datasets import DatasetDict, load_from_disk

    if "[" in split:
        raise ValueError(f"Split slicing ({split!r}) is not supported for the save_to_disk directory {str(path)!r}.")
    saved = load_from_disk(str(path))
    if not isinstance(saved, DatasetDict):
        _check_single_split(str(path), split)
        return saved
    if split not in saved:
        raise ValueError(f"Split {split!r} not found in {str(path)!r}; its splits are {list(saved)}.")
    return saved[split]


def _is_saved_dataset(path: Path) -> bool:
    """True for a directory written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def load_prompt_dataset(name_or_path: str, split: str = "train", config: str | None = None) -> Dataset:
    """Load one split of a Hub dataset, a local data directory, or a local json/jsonl/parquet/csv file.

    A single local file holds one split, `train`; a local directory follows the `datasets` naming of split files
    (`train.jsonl`, `test.jsonl`, ...); a `save_to_disk` directory is loaded with `load_from_disk`. An empty or
    unreadable file is a one-line ValueError naming the file and, for json/jsonl, the line.
    """
    path = Path(name_or_path).expanduser()
    if _is_saved_dataset(path):
        return _load_saved(path, split)
    builder = _local_data_file(path)
    if builder is None:
        return _load_dataset(name_or_path, str(path) if path.is_dir() else name_or_path, name=config, split=split)
    _check_single_split(name_or_path, split)
    return _load_dataset(name_or_path, builder, data_files={"train": str(path)}, split=split)


def _load_dataset(source: str, *args: Any, **kwargs: Any) -> Dataset:
    """`datasets.load_dataset(*args, **kwargs)`; an empty or unreadable `source` is a one-line ValueError."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetGenerationError

    try:
        return load_dataset(*args, **kwargs)
    except StopIteration as error:  # what `datasets` raises for a 0-byte file
        raise ValueError(f"{source}: has no rows. Check the file or the split.") from error
    except ValueError as error:
        if "corresponds to no data" not in str(error):  # what `datasets` says about a file of blank lines
            raise
        raise ValueError(f"{source}: has no rows. Check the file or the split.") from error
    except DatasetGenerationError as error:
        raise ValueError(_unreadable(source, error)) from error


def _unreadable(source: str, error: Exception) -> str:
    """Why `source` could not be read: the first bad json/jsonl file and line when there is one, else the cause."""
    path = Path(source).expanduser()
    candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
    for file in candidates:
        problem = _json_problem(file) if file.suffix.lower() in (".json", ".jsonl") and file.is_file() else None
        if problem:
            return f"{file}: {problem}. Fix the file, or pass another one."
    cause = error.__cause__ or error.__context__ or error
    lines = [line.strip() for line in str(cause).strip().splitlines() if line.strip()] or [type(cause).__name__]
    summary = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return (
        f"{source}: could not be read as a dataset ({summary}). Check its data files: those of one split need the "
        "same format and columns."
    )


def _json_problem(path: Path) -> str | None:
    """The first thing a json/jsonl reader chokes on (text that is not UTF-8, a line that is not JSON), or None."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        return f"line {line} is not UTF-8 text (is it a binary file?)"
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            if line.strip():
                json.loads(line)
        except json.JSONDecodeError as error:
            if path.suffix.lower() == ".json":  # a .json file may also hold one JSON document over many lines
                return _json_document_problem(text)
            return f"line {number} is not valid JSON ({error.msg} at column {error.colno})"
    return None


def _json_document_problem(text: str) -> str | None:
    """Where a whole-file JSON document is invalid, or None when it parses."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"line {error.lineno} is not valid JSON ({error.msg} at column {error.colno})"
    return None


def prompt_token_ids(
    tokenizer: PreTrainedTokenizerBase, prompt: list[dict[str, str]], chat_template_kwargs: dict | None = None
) -> list[int]:
    """Token ids of a conversational prompt once the chat template and the generation prompt are applied."""
    ids = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False, **(chat_template_kwargs or {})
    )
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def rendered_prompts(
    prompts: Sequence[Any],
    tokenizer: PreTrainedTokenizerBase,
    chat_template_kwargs: dict | None = None,
    **template: Any,
) -> list[str]:
    """The text generation tokenizes: a conversation through the chat template with the generation prompt (`template`:
    more `apply_chat_template` options, e.g. `tools`), a string as it is."""
    if not len(prompts) or isinstance(prompts[0], str):
        return list(prompts)
    options = {**template, **(chat_template_kwargs or {})}
    return tokenizer.apply_chat_template(list(prompts), add_generation_prompt=True, tokenize=False, **options)


def prompt_lengths(
    prompts: Sequence[Any],
    tokenizer: PreTrainedTokenizerBase,
    chat_template_kwargs: dict | None = None,
    batch_size: int = 256,
) -> list[int]:
    """Tokens of each prompt as generation sends it: a conversation with the chat template and the generation
    prompt, a string as it is; `batch_size` prompts per tokenizer call."""
    lengths: list[int] = []
    for start in range(0, len(prompts), batch_size):
        texts = rendered_prompts(prompts[start : start + batch_size], tokenizer, chat_template_kwargs)
        lengths += [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    return lengths


def prompt_token_count(
    tokenizer: PreTrainedTokenizerBase, prompt: list[dict[str, str]], chat_template_kwargs: dict | None = None
) -> int:
    """Tokens of a conversational prompt once the chat template and the generation prompt are applied."""
    return prompt_lengths([prompt], tokenizer, chat_template_kwargs)[0]


TOKEN_BYTES_MARGIN = 8
"""A prompt's tokens are at most the UTF-8 bytes of its text plus this (a token covers at least one byte in
byte-level BPE and in SentencePiece with byte fallback; the margin covers a prefix or BOS token)."""


def prompts_over(
    prompts: Sequence[Any],
    limit: int,
    render: Callable[[Sequence[Any]], list[str]],
    count: Callable[[list], Sequence[int]],
) -> dict[int, int]:
    """Index -> tokens of every prompt with at least `limit` tokens. Only the prompts whose text (`render`) is long
    enough to hold that many tokens are counted (`count`): tokenizing a dataset costs far more than rendering it."""
    texts = render(prompts)
    candidates = [i for i, text in enumerate(texts) if len(text.encode()) + TOKEN_BYTES_MARGIN >= limit]
    lengths = count([prompts[i] for i in candidates]) if candidates else []
    return {i: length for i, length in zip(candidates, lengths, strict=True) if length >= limit}


def filter_by_prompt_length(
    dataset: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    max_prompt_tokens: int,
    chat_template_kwargs: dict | None = None,
) -> Dataset:
    """Drop rows whose `prompt` is longer than `max_prompt_tokens` tokens; log how many were dropped."""
    over = prompts_over(
        dataset["prompt"],
        max_prompt_tokens + 1,
        lambda prompts: rendered_prompts(prompts, tokenizer, chat_template_kwargs),
        lambda prompts: prompt_lengths(prompts, tokenizer, chat_template_kwargs),
    )
    kept = dataset.select([index for index in range(len(dataset)) if index not in over]) if over else dataset
    logger.info(
        "Prompt-length filter: dropped %d of %d prompts longer than %d tokens (%d kept).",
        len(over),
        len(dataset),
        max_prompt_tokens,
        len(kept),
    )
    if len(kept) == 0:
        raise ValueError(
            f"Every prompt is longer than max_prompt_tokens={max_prompt_tokens}; raise `max_prompt_tokens`."
        )
    return kept


# ----------------------------------------------------------------------------------------------------------------
# Prompts longer than the model's context
# ----------------------------------------------------------------------------------------------------------------

_UNBOUNDED = 10**9
"""A tokenizer's `model_max_length` at or above this is transformers' "no limit" placeholder."""
_EXCERPT_CHARS = 60


class PromptTooLongError(ValueError):
    """A prompt leaves no room for a completion in the model's context; the message names it and the fix."""


@dataclass(frozen=True)
class ModelContext:
    """The most tokens a sequence may hold, and which setting says so."""

    tokens: int
    source: str


def model_context(
    model_config: Any = None, tokenizer: Any = None, vllm_max_model_len: int | None = None
) -> ModelContext | None:
    """The context a prompt must fit, where known: the model's `max_position_embeddings` (not with RoPE scaling,
    which extends it), or where the model says nothing the tokenizer's `model_max_length` (unless it is
    transformers' placeholder for none: a tokenizer's is metadata, often stale), capped by vLLM's `max_model_len`;
    None when none is known."""
    known = []
    if isinstance(vllm_max_model_len, int) and vllm_max_model_len > 0:
        known.append(ModelContext(vllm_max_model_len, "vllm_max_model_length"))
    positions = _max_positions(model_config)
    length = getattr(tokenizer, "model_max_length", None)
    if positions is not None:
        known.append(ModelContext(positions, "the model's max_position_embeddings"))
    elif isinstance(length, int) and 0 < length < _UNBOUNDED:
        known.append(ModelContext(length, "the tokenizer's model_max_length"))
    return min(known, key=lambda context: context.tokens, default=None)


def _max_positions(config: Any) -> int | None:
    """The positions a model config allows, or None (no config, no such field, or RoPE scaling)."""
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("rope_scaling", "rope_parameters"):
        rope = getattr(text, name, None)
        if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (None, "default"):
            return None
    value = getattr(text, "max_position_embeddings", None)
    return value if isinstance(value, int) and value > 0 else None


def check_prompt_lengths(
    prompts: Sequence[Any], over: dict[int, int], context: ModelContext, where: str, fix: str
) -> None:
    """Raise a one-line [`PromptTooLongError`] naming the first prompt in `over` (index -> tokens of the prompts that
    leave no room for a completion in `context`, [`prompts_over`]) by `where` and its index and an excerpt, its token
    count, how many more there are, and `fix`."""
    if not over:
        return
    first = min(over)
    more = f"; {len(over) - 1} more of the {len(prompts)} prompts are as long" if len(over) > 1 else ""
    raise PromptTooLongError(
        f"{where} {first} ({_excerpt(prompts[first])!r}) has {over[first]} prompt tokens, but {context.source} is "
        f"{context.tokens}: no room for a completion{more}. {fix}"
    )


def _excerpt(prompt: Any) -> str:
    """The start of a prompt's text (a conversation's last message), on one line."""
    last = prompt if isinstance(prompt, str) or not prompt else prompt[-1].get("content", "")
    text = " ".join(str(last or "").split())
    return text if len(text) <= _EXCERPT_CHARS else f"{text[:_EXCERPT_CHARS]}..."


def max_prompt_tokens_hint(context: ModelContext, max_completion_length: int | None) -> int:
    """A `max_prompt_tokens` that leaves `max_completion_length` tokens of `context` for the completion."""
    room = context.tokens - (max_completion_length or 0)
    return room if room > 0 else context.tokens - 1


def check_train_prompts(
    dataset: Any,
    tokenizer: PreTrainedTokenizerBase,
    context: ModelContext | None,
    max_completion_length: int | None,
    chat_template_kwargs: dict | None = None,
    render: Callable[[Sequence[Any]], list[str]] | None = None,
    count: Callable[[list], Sequence[int]] | None = None,
) -> None:
    """Before training: refuse a `train_dataset` (with a `prompt` column) holding a conversation that asks nothing
    ([`nothing_asked`]) or a prompt that fills the model's context, naming it and the fix. `render` and `count`
    give the text and the tokens of prompts as generation sends them (default: `tokenizer`'s chat template with
    `chat_template_kwargs`)."""
    columns = getattr(dataset, "column_names", None) or []
    if not hasattr(dataset, "__len__") or "prompt" not in columns:
        return  # a streamed dataset is read as training goes
    prompts = dataset["prompt"]
    for row, prompt in enumerate(prompts):
        if _is_conversation(prompt) and (why := nothing_asked(prompt)):
            raise ValueError(
                f"train_dataset row {row}: {why}, so it asks nothing. Fill in its content, or drop such rows "
                "first: trl_ada.data.drop_unposed(train_dataset, 'prompt') drops them with a warning."
            )
    if context is None:
        return
    render = render or (lambda chunk: rendered_prompts(chunk, tokenizer, chat_template_kwargs))
    count = count or (lambda chunk: prompt_lengths(chunk, tokenizer, chat_template_kwargs))
    hint = max_prompt_tokens_hint(context, max_completion_length)
    fix = (
        f"Drop such prompts with max_prompt_tokens (e.g. `max_prompt_tokens: {hint}` in the recipe or "
        f"--max_prompt_tokens {hint}, which leaves max_completion_length={max_completion_length} tokens; in Python, "
        "trl_ada.data.filter_by_prompt_length), or shorten them."
    )
    over = prompts_over(prompts, context.tokens, render, count)
    check_prompt_lengths(prompts, over, context, "train_dataset row", fix)
