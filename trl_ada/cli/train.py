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
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl import TrlParser

from ..utils import closest_name
from .common import PROG, print_error, require_hub_token, setup_logging

if TYPE_CHECKING:
    from datasets import Dataset
    from trl import ModelConfig

    from ..config import ReinforceAdaConfig
    from ..data import ReinforceAdaScriptArguments
    from ..trainer import ReinforceAdaTrainer

__all__ = ["ConfigKeyError", "ReinforceAdaParser", "build_trainer", "main", "make_parser", "parse_train_args", "train"]

logger = logging.getLogger(__name__)

COMMAND = "train"

TRUE_STRINGS = {"true", "yes", "1"}
FALSE_STRINGS = {"false", "no", "0", ""}


# ----------------------------------------------------------------------------------------------------------------
# Argument parsing
# ----------------------------------------------------------------------------------------------------------------


class ConfigKeyError(ValueError):
    """A key of the YAML config, or a command-line flag, that none of the argument dataclasses knows."""


def unknown_key_message(keys: Sequence[str], known: Iterable[str], where: str, prefix: str = "") -> str:
    """One line per unknown key, each with the closest valid name when there is one."""
    known = set(known)
    lines = [f"Unknown {'key' if len(keys) == 1 else 'keys'} {where}:"]
    for key in keys:
        suggestion = closest_name(key, known)
        hint = f" (did you mean {prefix}{suggestion}?)" if suggestion else ""
        lines.append(f"  - {prefix}{key}{hint}")
    lines.append(
        "Each key must be a field of ReinforceAdaScriptArguments, ReinforceAdaConfig or ModelConfig; "
        "`trl-ada train --help` lists them all."
    )
    return "\n".join(lines)


class ReinforceAdaParser(TrlParser):
    """TRL's `TrlParser` (YAML defaults, flag overrides, `env:` block) whose errors name unknown config keys and
    flags and suggest the closest valid name."""

    config_path: str | None = None

    def known_keys(self) -> set[str]:
        """Every field name the dataclasses accept."""
        return {action.dest for action in self._actions if action.dest != "help"}

    def set_defaults_with_config(self, **kwargs: Any) -> list[str]:
        unknown = [key for key in kwargs if key not in self.known_keys()]
        if unknown:
            where = f"in the config file {self.config_path}" if self.config_path else "in the config file"
            raise ConfigKeyError(unknown_key_message(unknown, self.known_keys(), where))
        return super().set_defaults_with_config(**kwargs)

    def parse_args_and_config(self, args: Iterable[str] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """Like `TrlParser.parse_args_and_config`, but an unknown key or flag raises `ConfigKeyError` up front."""
        args = _split_config_flag(list(sys.argv[1:] if args is None else args))
        self.config_path = args[args.index("--config") + 1] if "--config" in args[:-1] else None
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
        raise ConfigKeyError(unknown_key_message(flags, self.known_keys(), "on the command line", prefix="--"))


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


def make_parser(prog: str = f"{PROG} {COMMAND}") -> ReinforceAdaParser:
    """The `train` parser over (ReinforceAdaScriptArguments, ReinforceAdaConfig, ModelConfig)."""
    from trl import ModelConfig

    from ..config import ReinforceAdaConfig
    from ..data import ReinforceAdaScriptArguments

    # No abbreviations: `--max_round` must not silently mean `--max_rounds`.
    dataclass_types = (ReinforceAdaScriptArguments, ReinforceAdaConfig, ModelConfig)
    return ReinforceAdaParser(dataclass_types, prog=prog, allow_abbrev=False)


def parse_train_args(
    argv: Sequence[str],
) -> tuple[ReinforceAdaScriptArguments, ReinforceAdaConfig, ModelConfig]:
    """Parse `--config recipe.yaml` and flag overrides into the three dataclasses.

    Raises `ConfigKeyError` (a `ValueError`) naming any unknown YAML key or flag and the closest valid name.
    """
    script_args, training_args, model_args = make_parser().parse_args_and_config(list(argv))
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


def build_model_init_kwargs(model_args: ModelConfig, training_args: ReinforceAdaConfig) -> dict[str, Any]:
    """Model loading options from `ModelConfig`, as TRL's own `grpo` script builds them; YAML values win."""
    kwargs: dict[str, Any] = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
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
    script_args: ReinforceAdaScriptArguments, training_args: ReinforceAdaConfig, model_args: ModelConfig
) -> tuple[Dataset, Dataset | None]:
    """The train split and, when evaluation is on, the test split; the main process prepares them first."""
    _require(script_args.dataset_name, "dataset_name")
    if script_args.dataset_streaming:
        raise ValueError("dataset_streaming=True is not supported by `trl-ada train`; drop it.")
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


def build_trainer(
    script_args: ReinforceAdaScriptArguments, training_args: ReinforceAdaConfig, model_args: ModelConfig
) -> ReinforceAdaTrainer:
    """Datasets, reward functions, LoRA and model options -> a ready `ReinforceAdaTrainer`."""
    from trl import get_peft_config, get_quantization_config

    from ..rewards import get_reward_funcs
    from ..trainer import ReinforceAdaTrainer

    _require(model_args.model_name_or_path, "model_name_or_path")
    reward_funcs = get_reward_funcs(list(script_args.reward_funcs), script_args.reward_kwargs)
    train_dataset, eval_dataset = build_datasets(script_args, training_args, model_args)
    training_args.model_init_kwargs = build_model_init_kwargs(model_args, training_args)
    extra: dict[str, Any] = {}
    quantization_config = get_quantization_config(model_args)
    if quantization_config is not None:
        extra["quantization_config"] = quantization_config
    return ReinforceAdaTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
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


def main(argv: Sequence[str] | None = None) -> int:
    """`trl-ada train`: setup errors (bad keys, data, rewards, credentials) are reported without a traceback."""
    try:
        script_args, training_args, model_args = parse_train_args(list(sys.argv[1:] if argv is None else argv))
    except (ValueError, OSError) as err:
        return print_error(COMMAND, err)
    setup_logging(_log_level(training_args))
    try:
        check_hub_credentials(training_args)
        trainer = build_trainer(script_args, training_args, model_args)
    except (ValueError, OSError) as err:
        return print_error(COMMAND, err)
    run_training(trainer, script_args)
    return 0
