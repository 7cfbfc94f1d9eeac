"""`trl-ada train`: train from a YAML recipe with Reinforce-Ada (or plain GRPO).

```bash
trl-ada train --config recipes/Qwen2.5-Math-1.5B/reinforce_ada_balance.yaml --max_steps 100
accelerate launch --config_file recipes/accelerate_configs/zero2.yaml -m trl_ada.cli train --config recipe.yaml
```

The recipe is read with TRL's `TrlParser` into three dataclasses (`ReinforceAdaScriptArguments`,
`ReinforceAdaConfig`, `ModelConfig`); flags on the command line override the YAML, and the YAML's `env:` block is
exported before anything else runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import re
import sys
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback
from trl import TrlParser

from ..checkpoint_state import CheckpointStateError
from ..checks import RewardError
from ..plan import defaults
from ..server_requests import NotVLLMAnswer
from ..utils import closest_name
from .common import PROG, UsageError, check_model, print_error, require_hub_token, setup_logging

if TYPE_CHECKING:
    from datasets import Dataset
    from trl import ModelConfig

    from ..config import ReinforceAdaConfig
    from ..data import ReinforceAdaScriptArguments
    from ..trainer import ReinforceAdaTrainer

__all__ = [
    "TRAIN",
    "ConfigKeyError",
    "ReinforceAdaParser",
    "TrainCommand",
    "build_trainer",
    "main",
    "make_parser",
    "parse_train_args",
    "train",
]

logger = logging.getLogger(__name__)

COMMAND = "train"

TRUE_STRINGS = {"true", "yes", "1"}
FALSE_STRINGS = {"false", "no", "0", ""}


# ----------------------------------------------------------------------------------------------------------------
# Argument parsing
# ----------------------------------------------------------------------------------------------------------------


class ConfigKeyError(UsageError):
    """A key of the YAML config, or a command-line flag, that none of the argument dataclasses knows."""


@dataclasses.dataclass(frozen=True)
class TrainCommand:
    """What `trl-ada train` and `trl-ada train-async` do differently; the parsing, checks, run directory, training,
    saving and error reporting in this module are shared. Classes are named `"module:Class"` and imported on use."""

    name: str
    """The subcommand (`train`)."""
    config: str
    """The training config dataclass (`trl_ada.config:ReinforceAdaConfig`)."""
    trl_config: str
    """The TRL config it extends, whose docstring groups its fields in `--help` (`trl:GRPOConfig`)."""
    trainer: str
    """The trainer class (`trl_ada.trainer:ReinforceAdaTrainer`)."""
    description: str
    """The first paragraph of `--help`."""
    recipe: str
    """The example recipe of `--help`."""
    evaluation: bool = True
    """The trainer takes an `eval_dataset` (else `eval_strategy` must be "no")."""
    quantization: bool = True
    """The trainer takes a bitsandbytes `quantization_config` (`load_in_4bit`, `load_in_8bit`)."""
    attn_implementation: bool = True
    """`attn_implementation` reaches the model (else the trainer chooses the attention and refuses the option)."""
    startup_errors: tuple[type[BaseException], ...] = ()
    """Errors raised by `trainer.train()` before the first step (a generation server not answering) that are reported
    in one line; after the first step they keep their traceback."""

    def load(self, what: str) -> type:
        """The class named by the field `what` (`"config"`, `"trl_config"`, `"trainer"`)."""
        module, name = getattr(self, what).split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def prog(self) -> str:
        return f"{PROG} {self.name}"

    @property
    def usage(self) -> str:
        return (
            f"{self.prog} --config RECIPE.yaml [--KEY VALUE ...]\n"
            f"       {self.prog} --model_name_or_path MODEL --dataset_name DATA --output_dir DIR [--KEY VALUE ...]"
        )

    @property
    def epilog(self) -> str:
        return (
            f"examples:\n  {self.prog} --config {self.recipe} --max_steps 100\n"
            f"  {self.prog} --config recipe.yaml --resume_from_checkpoint true"
        )


TRAIN = TrainCommand(
    name=COMMAND,
    config="trl_ada.config:ReinforceAdaConfig",
    trl_config="trl:GRPOConfig",
    trainer="trl_ada.trainer:ReinforceAdaTrainer",
    description="""\
Train a model with Reinforce-Ada adaptive sampling (arXiv 2510.04996), or plain GRPO with --sampling grpo, on
TRL's GRPOTrainer. Every option below can be set in the YAML recipe (as `key: value`) or as a flag; flags override
the recipe. Booleans take a value (--bf16 false); lists take several (--reward_funcs math format).

The Reinforce-Ada options come first, then the data and rewards, the model, and TRL's and transformers' options
in the groups of their documentation.""",
    recipe="recipes/Qwen2.5-Math-1.5B/reinforce_ada_balance.yaml",
)
"""`trl-ada train`: the synchronous `ReinforceAdaTrainer` (TRL's `GRPOTrainer`)."""

_HEADING = re.compile(r"^\s*> (.+?)\s*$")
_FIELD = re.compile(r"^\s+(\w+) \(`")


def _docstring_groups(cls: type) -> list[tuple[str, list[str]]]:
    """(section title, field names) of a TRL-style docstring: `> Parameters that control ...` headings over fields.
    TRL's and transformers' configs carry their groups only there; our own configs name theirs in `help_groups`."""
    groups: list[tuple[str, list[str]]] = [("general", [])]  # fields documented before the first heading
    in_note = False
    for line in (cls.__doc__ or "").splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = heading.group(1)
            in_note = in_note or title.startswith("[!")
            if not in_note:
                groups.append((title.removeprefix("Parameters that control ").rstrip(":"), []))
            continue
        in_note = False
        field = _FIELD.match(line)
        if field:
            groups[-1][1].append(field.group(1))
    return [(title, names) for title, names in groups if names]


def _own_groups(config: type) -> list[tuple[str, list[str]]]:
    """(title, field names) of the config's own fields, as its `help_groups` names them (the sampling fields: their
    group in `trl_ada.plan.GROUPS`; `overwrite_output_dir`; an asynchronous field), in the order of `GROUPS`."""
    from ..plan import GROUPS

    groups: dict[str, list[str]] = {}
    named = getattr(config, "help_groups", {})
    for f in dataclasses.fields(config):
        if f.name in named:
            groups.setdefault(named[f.name], []).append(f.name)
    order = {title: i for i, title in enumerate(GROUPS)}
    return sorted(
        groups.items(), key=lambda item: order.get(item[0], -1 if item[0] == config.__name__ else len(order))
    )


def _help_groups(command: TrainCommand) -> list[tuple[str, list[str]]]:
    """The option groups of `--help`, in order; a field goes to the first group that names it. The config's own
    fields come first (their groups in the config's `help_groups`), then the data, the model, and the TRL config's and
    transformers' groups (read from their docstrings, the only place they are written)."""
    from transformers import TrainingArguments
    from trl import ModelConfig

    from ..data import ReinforceAdaScriptArguments

    config, trl_config = command.load("config"), command.load("trl_config")
    groups = _own_groups(config)
    groups.append(("data and rewards", [f.name for f in dataclasses.fields(ReinforceAdaScriptArguments)]))
    groups.append(("model (TRL ModelConfig)", [f.name for f in dataclasses.fields(ModelConfig)]))
    groups += [(f"TRL {trl_config.__name__}: {title}", names) for title, names in _docstring_groups(trl_config)]
    groups += [
        (f"transformers TrainingArguments: {title}", names) for title, names in _docstring_groups(TrainingArguments)
    ]
    return groups


def _check_config_file(path: str) -> dict[str, Any]:
    """The recipe's mapping; a missing file, broken YAML or a non-mapping is a one-line `UsageError`."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
    except UnicodeDecodeError as err:
        raise UsageError(
            f"--config {path}: is not UTF-8 text ({err.reason} at byte {err.start}). Save the recipe as UTF-8."
        ) from None
    except FileNotFoundError:
        raise UsageError(f"--config {path}: no such file. Check the path of the YAML recipe.") from None
    except IsADirectoryError:
        raise UsageError(f"--config {path}: is a directory; pass the YAML recipe inside it.") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"--config {path}: not valid YAML{where}: {problem}. Fix the file.") from None
    if not isinstance(config, dict):
        raise UsageError(
            f"--config {path}: holds a {type(config).__name__}, not a mapping of `key: value` lines. Fix the file."
        )
    return config


_YAML_BOOLEAN_WORDS = {False: ("no", "off", "false"), True: ("yes", "on", "true")}
"""The words YAML 1.1 reads as booleans, each value's in the order a choice is matched."""


_YAML_BOOLEAN_MEANS = {"report_to": {False: "none", True: "all"}}
"""Options without choices whose YAML booleans have a meaning: `report_to: no` reports nowhere."""


def _yaml_choice(action: argparse.Action, value: Any) -> Any:
    """A YAML boolean as the option's choice it was written as (`eval_strategy: no` is read as False, and so is
    `report_to: no`, `_YAML_BOOLEAN_MEANS`); any other value as it is."""
    if isinstance(value, bool) and action.dest in _YAML_BOOLEAN_MEANS:
        return _YAML_BOOLEAN_MEANS[action.dest][value]
    if not isinstance(value, bool) or action.choices is None:
        return value
    choices = [str(choice) for choice in action.choices]
    return next((word for word in _YAML_BOOLEAN_WORDS[value] if word in choices), value)


def _yaml_value_problem(action: argparse.Action, value: Any) -> str | None:
    """Why `value` (from the YAML) does not fit the option, or None. Strings go through the flag's own type."""
    if action.nargs in ("+", "*") or value is None:
        return None
    if isinstance(value, str) and callable(action.type):
        try:
            value = action.type(value)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            return f"is not a valid {getattr(action.type, '__name__', 'value')}"
    elif action.type in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"is a {type(value).__name__}, not a number"
    elif action.type is int and isinstance(value, float) and not value.is_integer():
        return "is not an integer"
    if action.choices is not None and value not in action.choices:
        return f"is not one of {list(action.choices)}"
    return None


def unknown_key_message(
    keys: Sequence[str],
    known: Iterable[str],
    where: str,
    prefix: str = "",
    classes: Sequence[str] = ("ReinforceAdaScriptArguments", "ReinforceAdaConfig", "ModelConfig"),
    prog: str = TRAIN.prog,
) -> str:
    """One line per unknown key, each with the closest valid name when there is one."""
    known = set(known)
    lines = [f"Unknown {'key' if len(keys) == 1 else 'keys'} {where}:"]
    for key in keys:
        suggestion = closest_name(key, known)
        hint = f" (did you mean {prefix}{suggestion}?)" if suggestion else ""
        lines.append(f"  - {prefix}{key}{hint}")
    fields = f"{', '.join(classes[:-1])} or {classes[-1]}"
    lines.append(f"Each key must be a field of {fields}; `{prog} --help` lists them all.")
    return "\n".join(lines)


class ReinforceAdaParser(TrlParser):
    """TRL's `TrlParser` (YAML defaults, flag overrides, `env:` block) whose errors name unknown config keys and
    flags and suggest the closest valid name.

    A field that two dataclasses share (`dtype`: TRL's `AsyncGRPOConfig` and `ModelConfig`) is one option, defined by
    the first dataclass and set on every dataclass that has it."""

    config_path: str | None = None
    shared_fields: frozenset[str] = frozenset()
    """Fields a later dataclass shares with an earlier one (found while the options are added)."""

    def __init__(self, dataclass_types: Any, help_groups: Sequence[tuple[str, list[str]]] = (), **kwargs: Any):
        self.help_groups = list(help_groups)
        self._groups: dict[str, Any] | None = None
        super().__init__(dataclass_types, **kwargs)

    def _parse_dataclass_field(self, parser, field: dataclasses.Field) -> None:
        """Add the option into its `--help` group (the first of `help_groups` that names it, else "other options");
        a field an earlier dataclass already added is shared."""
        if f"--{field.name}" in self._option_string_actions:
            self.shared_fields = self.shared_fields | {field.name}
            return
        super()._parse_dataclass_field(self._group_of(field.name) if parser is self else parser, field)

    def _group_of(self, name: str) -> Any:
        if self._groups is None:  # created at the first option, in order: argparse lists groups as created
            titles = [title for title, _ in self.help_groups] + ["other options"]
            self._groups = {title: self.add_argument_group(title) for title in dict.fromkeys(titles)}
        title = next((title for title, names in self.help_groups if name in names), "other options")
        return self._groups[title]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[Any, list[str]]:
        if namespace is None and self.shared_fields:
            namespace = _SharedFieldsNamespace()
        return super().parse_known_args(args, namespace)

    def parse_args_into_dataclasses(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        output = super().parse_args_into_dataclasses(*args, **kwargs)
        for name in self.shared_fields:
            owners = [obj for obj in output if dataclasses.is_dataclass(obj) and hasattr(obj, name)]
            for obj in owners[1:]:
                setattr(obj, name, getattr(owners[0], name))
        return output

    def known_keys(self) -> set[str]:
        """Every field name the dataclasses accept."""
        return {action.dest for action in self._actions if action.dest not in ("help", "config")}

    def _unknown_key_message(self, keys: Sequence[str], where: str, prefix: str = "") -> str:
        classes = [cls.__name__ for cls in self.dataclass_types]
        return unknown_key_message(keys, self.known_keys(), where, prefix, classes=classes, prog=self.prog)

    def error(self, message: str):
        """argparse's errors (a bad flag value) as one `UsageError` line instead of the 200-line usage."""
        raise UsageError(f"{message}. Run `{self.prog} --help` for the options.")

    def set_defaults_with_config(self, **kwargs: Any) -> list[str]:
        where = f"in the config file {self.config_path}" if self.config_path else "in the config file"
        unknown = [key for key in kwargs if key not in self.known_keys()]
        if unknown:
            raise ConfigKeyError(self._unknown_key_message(unknown, where))
        actions = {action.dest: action for action in self._actions if action.option_strings}
        kwargs = {key: _yaml_choice(actions[key], value) for key, value in kwargs.items()}
        for key, value in kwargs.items():
            problem = _yaml_value_problem(actions[key], value)
            if problem:
                default = defaults().get(key) if actions[key].default is None else actions[key].default
                example = f" (e.g. `{key}: {default}`, the default)" if default not in (None, "") else ""
                raise UsageError(
                    f"{key}: {value!r} {where} {problem}. Fix that key{example}, or override it with --{key}."
                )
        return super().set_defaults_with_config(**kwargs)

    def parse_args_and_config(self, args: Iterable[str] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """Like `TrlParser.parse_args_and_config`, but every problem with `--config`, the recipe or a flag raises a
        one-line `UsageError` (`ConfigKeyError` for unknown keys) before any dataclass is built."""
        args = _split_config_flag(list(sys.argv[1:] if args is None else args))
        self.config_path = None
        if "--config" in args:
            index = args.index("--config")
            if index + 1 >= len(args) or args[index + 1].startswith("-"):
                raise UsageError(
                    "--config needs a value: the path of a YAML recipe, e.g. "
                    "--config recipes/Qwen2.5-Math-1.5B/reinforce_ada_balance.yaml."
                )
            self.config_path = args[index + 1]
            _check_config_file(self.config_path)
        self.check_flags(_without_config(args))
        return super().parse_args_and_config(args)

    def check_flags(self, args: list[str]) -> None:
        """Raise `ConfigKeyError` for command-line flags that no dataclass knows (before any validation runs)."""
        _, remaining = argparse.ArgumentParser.parse_known_args(self, args)
        if not remaining:
            return
        flags = [token.split("=", 1)[0].lstrip("-") for token in remaining if token.startswith("--")]
        if not flags:
            raise ConfigKeyError(f"Unexpected command-line arguments: {remaining}.")
        raise ConfigKeyError(self._unknown_key_message(flags, "on the command line", prefix="--"))


class _SharedFieldsNamespace(argparse.Namespace):
    """`HfArgumentParser` deletes every field of a dataclass from the namespace once it has built it; a shared field
    is gone for the next dataclass, which keeps its default until `parse_args_into_dataclasses` copies the value."""

    def __delattr__(self, name: str) -> None:
        self.__dict__.pop(name, None)


def _split_config_flag(args: list[str]) -> list[str]:
    """Accept `--config=path` as well as `--config path` (TrlParser only understands the latter)."""
    out: list[str] = []
    for token in args:
        if token.startswith("--config="):
            out += ["--config", token.split("=", 1)[1]]
        else:
            out.append(token)
    return out


def _without_config(args: list[str]) -> list[str]:
    """The arguments without `--config PATH`."""
    if "--config" not in args:
        return args
    index = args.index("--config")
    return args[:index] + args[index + 2 :]


def make_parser(prog: str | None = None, command: TrainCommand = TRAIN) -> ReinforceAdaParser:
    """The parser of `command` over (ReinforceAdaScriptArguments, its config, ModelConfig)."""
    from trl import ModelConfig

    from ..data import ReinforceAdaScriptArguments

    # No abbreviations: `--max_round` must not silently mean `--max_rounds`.
    dataclass_types = (ReinforceAdaScriptArguments, command.load("config"), ModelConfig)
    parser = ReinforceAdaParser(
        dataclass_types,
        help_groups=_help_groups(command),
        prog=prog or command.prog,
        usage=command.usage,
        description=command.description,
        epilog=command.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        metavar="RECIPE.yaml",
        default=argparse.SUPPRESS,  # read (and removed from the arguments) by TrlParser before argparse runs
        help="YAML recipe: its `key: value` lines set the options below; flags given here override them.",
    )
    return parser


def parse_train_args(argv: Sequence[str], command: TrainCommand = TRAIN) -> tuple[Any, Any, ModelConfig]:
    """Parse `--config recipe.yaml` and flag overrides into (ReinforceAdaScriptArguments, the command's config,
    ModelConfig).

    Raises `ConfigKeyError` (a `ValueError`) naming any unknown YAML key or flag and the closest valid name.
    """
    script_args, training_args, model_args = make_parser(command=command).parse_args_and_config(list(argv))
    return script_args, training_args, model_args


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def check_hub_credentials(training_args: ReinforceAdaConfig) -> None:
    """With `push_to_hub`, fail now (not after training) when no valid Hugging Face token is available."""
    if training_args.push_to_hub:
        require_hub_token(training_args.hub_token, option="push_to_hub=True", before="training")


def _require(value: Any, name: str) -> None:
    """A clear error for a missing required option."""
    if value is None or value == "":
        raise ValueError(f"`{name}` is required: set it in the YAML config or pass --{name}.")


def _is_local(name_or_path: str | None) -> bool:
    """True when the dataset name is a local path (not a Hub id worth linking in the model card)."""
    return name_or_path is not None and Path(name_or_path).expanduser().exists()


def build_model_init_kwargs(
    model_args: ModelConfig, training_args: ReinforceAdaConfig, attn_implementation: bool = True
) -> dict[str, Any]:
    """Model loading options from `ModelConfig`, as TRL's own `grpo` script builds them; YAML values win.
    `attn_implementation=False`: the trainer sets the attention itself (TRL's asynchronous trainer)."""
    kwargs: dict[str, Any] = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "dtype": model_args.dtype,
    }
    if attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    kwargs.update(training_args.model_init_kwargs or {})
    return kwargs


def prepare_split(
    split: str, script_args: ReinforceAdaScriptArguments, tokenizer: Any, chat_template_kwargs: dict | None
) -> Dataset:
    """Load one split, format its prompts, and apply the prompt-length filter when set."""
    from ..data import filter_by_prompt_length, format_dataset, load_prompt_dataset

    dataset = load_prompt_dataset(script_args.dataset_name, split=split, config=script_args.dataset_config)
    dataset = format_dataset(
        dataset,
        problem_column=script_args.problem_column,
        answer_column=script_args.answer_column,
        system_prompt=script_args.system_prompt,
        prompt_style=script_args.prompt_style,
    )
    if script_args.max_prompt_tokens is not None:
        dataset = filter_by_prompt_length(dataset, tokenizer, script_args.max_prompt_tokens, chat_template_kwargs)
    return dataset


def build_datasets(
    script_args: ReinforceAdaScriptArguments,
    training_args: ReinforceAdaConfig,
    model_args: ModelConfig,
    command: TrainCommand = TRAIN,
) -> tuple[Dataset, Dataset | None]:
    """The train split and, when evaluation is on, the test split; the main process prepares them first."""
    _require(script_args.dataset_name, "dataset_name")
    if script_args.dataset_streaming:
        raise ValueError(f"dataset_streaming=True is not supported by `{command.prog}`; drop it.")
    tokenizer = None
    if script_args.max_prompt_tokens:  # the prompt-length filter counts tokens
        from ..evaluation import load_tokenizer

        revision, trust_remote_code = model_args.model_revision, training_args.trust_remote_code
        tokenizer = load_tokenizer(
            model_args.model_name_or_path, revision=revision, trust_remote_code=trust_remote_code
        )
    template_kwargs = training_args.chat_template_kwargs
    with training_args.main_process_first(desc="preparing the dataset"):
        train_dataset = prepare_split(script_args.dataset_train_split, script_args, tokenizer, template_kwargs)
        eval_dataset = None
        if training_args.eval_strategy != "no":
            eval_dataset = prepare_split(script_args.dataset_test_split, script_args, tokenizer, template_kwargs)
    return train_dataset, eval_dataset


def check_trainer_options(training_args: Any, model_args: ModelConfig, command: TrainCommand = TRAIN) -> None:
    """Refuse, before any data or model work, the options the command's trainer cannot take."""
    strategy = getattr(training_args.eval_strategy, "value", training_args.eval_strategy)
    if not command.evaluation and strategy != "no":
        raise ValueError(
            f"eval_strategy={strategy!r} is not supported by `{command.prog}`: its trainer "
            "takes no evaluation dataset. Set eval_strategy: no, and evaluate checkpoints with `trl-ada evaluate`."
        )
    if not command.quantization and (model_args.load_in_4bit or model_args.load_in_8bit):
        raise ValueError(
            f"load_in_4bit / load_in_8bit are not supported by `{command.prog}`: its trainer loads the model itself, "
            "without quantization. Drop them."
        )
    if not command.attn_implementation and model_args.attn_implementation is not None:
        raise ValueError(
            f"attn_implementation={model_args.attn_implementation!r} is not supported by `{command.prog}`: its "
            "trainer attends with its own (tree) attention. Drop the option."
        )


def build_trainer(
    script_args: ReinforceAdaScriptArguments,
    training_args: ReinforceAdaConfig,
    model_args: ModelConfig,
    command: TrainCommand = TRAIN,
) -> ReinforceAdaTrainer:
    """Datasets, reward functions, LoRA and model options -> a ready trainer of `command` (`ReinforceAdaTrainer`)."""
    from trl import get_peft_config, get_quantization_config

    from ..rewards import get_reward_funcs

    _require(model_args.model_name_or_path, "model_name_or_path")
    check_trainer_options(training_args, model_args, command)
    reward_funcs = get_reward_funcs(list(script_args.reward_funcs), script_args.reward_kwargs)
    train_dataset, eval_dataset = build_datasets(script_args, training_args, model_args, command)
    training_args.model_init_kwargs = build_model_init_kwargs(
        model_args, training_args, attn_implementation=command.attn_implementation
    )
    extra: dict[str, Any] = {"eval_dataset": eval_dataset} if command.evaluation else {}
    quantization_config = get_quantization_config(model_args) if command.quantization else None
    if quantization_config is not None:
        extra["quantization_config"] = quantization_config
    return command.load("trainer")(
        model=model_args.model_name_or_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        peft_config=get_peft_config(model_args),
        **extra,
    )


def _resume_value(value: str | bool | None) -> str | bool | None:
    """`resume_from_checkpoint`: a path, or true (the last checkpoint in output_dir), or false/None."""
    if isinstance(value, str) and value.strip().lower() in TRUE_STRINGS:
        return True
    if isinstance(value, str) and value.strip().lower() in FALSE_STRINGS:
        return None
    return value


def save_and_push(trainer: ReinforceAdaTrainer, script_args: ReinforceAdaScriptArguments) -> None:
    """Save model (or adapter) + tokenizer + trainer state + model card to output_dir; push when `push_to_hub`."""
    args = trainer.args
    dataset_name = None if _is_local(script_args.dataset_name) else script_args.dataset_name
    trainer.save_model(args.output_dir)
    trainer.save_state()  # trainer_state.json: global step, log history
    model_name = args.hub_model_id.split("/")[-1] if args.hub_model_id else Path(args.output_dir).name
    trainer.create_model_card(model_name=model_name, dataset_name=dataset_name)
    logger.info("Model, tokenizer and model card saved to %s.", args.output_dir)
    if args.push_to_hub:
        trainer.push_to_hub(dataset_name=dataset_name)
        logger.info("Model pushed to https://huggingface.co/%s.", trainer.hub_model_id)


def run_training(trainer: ReinforceAdaTrainer, script_args: ReinforceAdaScriptArguments) -> None:
    """Train (resuming when asked), save, push, and finish the trackers."""
    trainer.train(resume_from_checkpoint=_resume_value(trainer.args.resume_from_checkpoint))
    save_and_push(trainer, script_args)
    trainer.accelerator.wait_for_everyone()  # rank 0 writes the files; no rank tears down before it is done
    if hasattr(trainer, "end"):  # transformers >= 5.18: finish the trackers, tear down the process group
        trainer.end()


def train(
    script_args: ReinforceAdaScriptArguments, training_args: ReinforceAdaConfig, model_args: ModelConfig
) -> ReinforceAdaTrainer:
    """The whole `train` command from parsed arguments; returns the trainer."""
    check_hub_credentials(training_args)
    trainer = build_trainer(script_args, training_args, model_args)
    run_training(trainer, script_args)
    return trainer


def _log_level(training_args: ReinforceAdaConfig) -> int:
    """INFO on the main process (or `log_level` when set), warnings elsewhere."""
    if training_args.log_level != "passive":
        return training_args.get_process_log_level()
    return logging.INFO if training_args.should_log else logging.WARNING


def check_run_dir(training_args: ReinforceAdaConfig) -> None:
    """Before the model loads: resuming needs a complete checkpoint (`true` falls back to the newest complete one,
    which is then resumed by path), and a new run a directory without another run's checkpoints (unless
    `overwrite_output_dir`; the trainer deletes them when training starts)."""
    from ..run_dir import check_output_dir, resolve_resume

    resume = resolve_resume(training_args.output_dir, _resume_value(training_args.resume_from_checkpoint))
    if resume is not None:
        training_args.resume_from_checkpoint = resume
    check_output_dir(
        training_args.output_dir,
        resuming=resume is not None,
        overwrite=training_args.overwrite_output_dir,
    )


class _FirstStep(TrainerCallback):
    """Records that training reached its first step (what failed before it is a setup error)."""

    reached = False

    def on_step_begin(self, args, state, control, **kwargs):
        self.reached = True


def main(argv: Sequence[str] | None = None, command: TrainCommand = TRAIN) -> int:
    """`trl-ada train`: setup errors (flags, recipe, model, data, rewards, run directory, credentials) are reported
    in one line without a traceback, before the model loads; exit code 2 for usage errors, 1 otherwise. So is a
    resumed checkpoint's unusable Reinforce-Ada state (memory, candidate stream), found when training starts, a reward
    function's answer that is not a reward per completion (`RewardError`, whenever a call returns one),
    `command.startup_errors` raised before the first step, and Ctrl-C during a checkpoint save (exit code 130).

    The main process holds the `output_dir` lock from these checks until the final model is saved.
    """
    from ..run_dir import SaveInterrupted, run_lock

    name = command.name
    try:
        script_args, training_args, model_args = parse_train_args(
            list(sys.argv[1:] if argv is None else argv), command
        )
    except (ValueError, OSError) as err:
        return print_error(name, err)
    setup_logging(_log_level(training_args))
    with ExitStack() as run:
        try:
            if training_args.process_index == 0:
                run.enter_context(run_lock(training_args.output_dir))
            check_run_dir(training_args)
            check_hub_credentials(training_args)
            _require(model_args.model_name_or_path, "model_name_or_path")
            check_model(
                model_args.model_name_or_path,
                "--model_name_or_path",
                revision=model_args.model_revision,
                trust_remote_code=training_args.trust_remote_code,
            )
            trainer = build_trainer(script_args, training_args, model_args, command)
        except (ValueError, OSError, NotVLLMAnswer) as err:  # NotVLLMAnswer: a server the trainer asks when built
            return print_error(name, err)
        first_step = _FirstStep()
        if command.startup_errors:
            trainer.add_callback(first_step)
        try:
            run_training(trainer, script_args)
        except CheckpointStateError as err:  # read when training starts: a resumed checkpoint's Reinforce-Ada state
            return print_error(name, err)
        except RewardError as err:  # a reward function's answer, found where it is first called (a training step)
            return print_error(name, err)
        except SaveInterrupted as err:  # Ctrl-C during a checkpoint save: one line, the usual exit code of SIGINT
            print_error(name, err)
            return 130
        except command.startup_errors as err:  # e.g. no generation server: one line; later failures keep the trace
            if first_step.reached:
                raise
            return print_error(name, err)
    return 0
