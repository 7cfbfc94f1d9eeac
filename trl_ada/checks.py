"""Checks the trainer runs on its inputs (reward functions, their values, the dataset), with actionable messages.

* [`check_trainer_inputs`]: all of the checks below that `ReinforceAdaTrainer` runs before the model loads.
* [`check_train_dataset_size`]: a dataset smaller than one generation batch would train 0 steps; refused.
* [`resolve_reward_funcs`]: registry names (`"math"`) and `module:function` paths become callables, as on the
  command line; any other string stays a reward-model id or path for TRL.
* [`check_reward_columns`]: a reward function's own arguments (`answer` for `math`) must be dataset columns.
* [`check_rewards`] and [`CheckedReward`]: a reward function's answer must be one number or None per completion; a
  bad answer is a [`RewardError`], which the command line reports in one line whenever it happens. Training, the
  asynchronous worker, evaluation and prompt selection all check with `check_rewards`.
* [`RewardGuard`]: the weighted reward of each round's completions (TRL's weighted sum), refusing a reward that is
  infinite or overflows (naming the reward function and the completion), and warning once when no completion of the
  first training steps scored above `positive_threshold`.
"""

from __future__ import annotations

import inspect
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .run_dir import check_output_dir_is_directory
from .sampling import aggregate_rewards
from .seq import Seq

__all__ = [
    "THRESHOLD_CHECK_STEPS",
    "TRL_REWARD_ARGUMENTS",
    "CheckedAsyncReward",
    "CheckedReward",
    "RewardError",
    "RewardGuard",
    "check_reward_columns",
    "check_rewards",
    "check_train_dataset_size",
    "check_trainer_inputs",
    "checked_reward_funcs",
    "resolve_reward_funcs",
]

logger = logging.getLogger(__name__)

THRESHOLD_CHECK_STEPS = 3
"""After this many training steps with no reward above `positive_threshold`, [`RewardGuard`] warns (once)."""
_SHOWN_CHARS = 200
_FLOAT32_MAX = float(np.finfo(np.float32).max)  # TRL sums the weighted rewards in float32
TRL_REWARD_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)
"""Arguments TRL passes every reward function; its other arguments are dataset columns."""


class RewardError(ValueError):
    """A reward function answered something that is not a reward per completion (a string, an infinite value...)."""


def check_trainer_inputs(args: Any, reward_funcs: Any, pargs: tuple, kwargs: dict[str, Any]) -> Any:
    """The checks run before the model loads (output_dir, dataset size, reward columns) on the trainer's arguments
    (`pargs` and `kwargs` after `args`, as `GRPOTrainer` takes them); returns the reward functions to hand TRL:
    resolved ([`resolve_reward_funcs`]) and checked ([`checked_reward_funcs`]).

    The reward columns are not checked with a `rollout_func`: the extra fields it returns reach the rewards too.
    """
    train_dataset = kwargs.get("train_dataset", pargs[0] if pargs else None)
    check_output_dir_is_directory(args.output_dir)
    check_train_dataset_size(train_dataset, args)
    reward_funcs = resolve_reward_funcs(reward_funcs)
    if kwargs.get("rollout_func") is None:
        check_reward_columns(reward_funcs, train_dataset)
    return checked_reward_funcs(reward_funcs)


def check_train_dataset_size(dataset: Any, args: Any) -> None:
    """Raise a ValueError when `dataset` (with a length) holds fewer prompts than one generation batch draws.

    TRL's sampler takes `generation_batch_size / num_generations` distinct prompts per generation batch and drops an
    incomplete last batch, so a smaller dataset trains 0 steps and would save the untrained model as the result.
    """
    if dataset is None or not hasattr(dataset, "__len__"):
        return
    per_batch = args.generation_batch_size // args.num_generations
    if len(dataset) >= per_batch:
        return
    have = "is empty" if len(dataset) == 0 else f"has {len(dataset)} prompts"
    raise ValueError(
        f"train_dataset {have}, fewer than the {per_batch} distinct prompts of one generation batch "
        f"(generation_batch_size={args.generation_batch_size} / num_generations={args.num_generations}): training "
        "would run 0 steps. Add prompts, or lower per_device_train_batch_size (or gradient_accumulation_steps / "
        "steps_per_generation) so that a batch needs at most "
        f"{max(len(dataset), 1)} prompts."
    )


def resolve_reward_funcs(reward_funcs: Any) -> Any:
    """Registered reward names and `package.module:function` paths resolved to callables; everything else as given.

    A string that is neither (a Hub reward-model id, a local model path) and model objects are left to TRL.
    """
    from .rewards import REWARD_FUNCS, get_reward_funcs

    def resolve(item: Any) -> Any:
        if isinstance(item, str) and (item in REWARD_FUNCS or ":" in item):
            return get_reward_funcs(item)[0]
        return item

    if isinstance(reward_funcs, (list, tuple)):
        return [resolve(item) for item in reward_funcs]
    return resolve(reward_funcs)


def _as_list(reward_funcs: Any) -> list:
    return list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]


def _is_function(item: Any) -> bool:
    """A reward function (not a reward-model id, path or model)."""
    import torch

    return callable(item) and not isinstance(item, torch.nn.Module)


def _required_arguments(func: Any) -> list[str]:
    """Names of the arguments `func` cannot be called without (by keyword); none when it has no signature."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return []
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in parameters if p.kind in keyword and p.default is inspect.Parameter.empty]


def check_reward_columns(reward_funcs: Any, dataset: Any) -> None:
    """Raise a ValueError when a reward function needs an argument that is neither given by TRL nor a column of
    `dataset` (e.g. `math` on a dataset without `answer`): TRL would fail at the first step, after the model loaded."""
    from trl.trainer.utils import get_callable_name

    columns = getattr(dataset, "column_names", None)
    if not columns:
        return
    for func in filter(_is_function, _as_list(reward_funcs)):
        missing = [name for name in _required_arguments(func) if name not in TRL_REWARD_ARGUMENTS | set(columns)]
        if missing:
            hint = (
                " trl_ada.data.format_dataset builds it from an answer, gt, solution or ground_truth column."
                if missing[0] == "answer"
                else ""
            )
            raise ValueError(
                f"Reward function {get_callable_name(func)!r} needs the dataset column {missing[0]!r} (its argument "
                f"`{missing[0]}`), but train_dataset has columns {list(columns)}. Add or rename that column, or "
                f"choose another reward function.{hint}"
            )


def checked_reward_funcs(reward_funcs: Any) -> Any:
    """Each reward function wrapped in a [`CheckedReward`] (same name, same sync/async kind); the rest as given."""
    from trl.trainer.utils import is_async_callable

    def checked(item: Any) -> Any:
        if not _is_function(item):
            return item
        return CheckedAsyncReward(item) if is_async_callable(item) else CheckedReward(item)

    if isinstance(reward_funcs, (list, tuple)):
        return [checked(item) for item in reward_funcs]
    return checked(reward_funcs)


def _is_reward(value: Any) -> bool:
    """A number (numpy and torch scalars included) or None; not a string."""
    if value is None or isinstance(value, numbers.Real):
        return True
    if isinstance(value, (str, bytes)):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def _length(rewards: Any) -> int | None:
    """The length of an ordered collection (a list, a tuple, a 1-d array), else None (a string, a mapping, a set,
    a scalar, a generator, a 0-d array)."""
    if isinstance(rewards, (str, bytes, Mapping, AbstractSet)):
        return None
    try:
        return len(rewards)
    except TypeError:
        return None


def check_rewards(name: str, rewards: Any, expected: int | None = None) -> Any:
    """`rewards` as returned, when it is a list of numbers or None, one per completion when `expected` (the number
    of completions scored) is given; else a `RewardError` naming `name`, what it returned and the fix. Every path
    that calls a reward function (`train`, `train-async`, `evaluate`, `select-prompts`) checks its answer here."""
    length = _length(rewards)
    if length is None:
        raise RewardError(
            f"Reward function {name!r} returned a {type(rewards).__name__} ({_short(rewards)}), not a list with one "
            f"reward per completion. Make {name!r} return a list of floats (None for 'no opinion')."
        )
    if expected is not None and length != expected:
        raise RewardError(
            f"Reward function {name!r} returned {length} rewards for {expected} completions; it must return one per "
            f"completion, in the order of `completions` (None for 'no opinion')."
        )
    for index, value in enumerate(rewards):
        if not _is_reward(value):
            raise RewardError(
                f"Reward function {name!r} returned a {type(value).__name__} ({_short(value)}) for completion "
                f"{index}; rewards must be numbers (None for 'no opinion'). Make {name!r} return floats, e.g. "
                "float(score)."
            )
    return rewards


def infinite_reward(name: str, value: Any, which: str) -> RewardError:
    """The refusal of a reward that is infinite, or beyond float32's range (TRL's tensors turn it into inf), given
    by `name` for `which` completion."""
    return RewardError(
        f"Reward function {name!r} returned {value} for {which}. Rewards must be finite floats within float32's "
        f"range (±3.4e38); return None for 'no opinion'. Make {name!r} clip or rescale its output (e.g. to [0, 1]) "
        "and check it on this completion."
    )


def check_finite(name: str, rewards: Sequence[Any], completions: Sequence[Any]) -> None:
    """An [`infinite_reward`] for the first reward of `rewards` (checked by [`check_rewards`]) beyond float32's
    range, quoting its completion; None and NaN are 'no opinion'."""
    for reward, completion in zip(rewards, completions, strict=True):
        if reward is not None and abs(float(reward)) > _FLOAT32_MAX:
            raise infinite_reward(name, reward, f"the completion {_shown(completion)}")


class CheckedReward:
    """A reward function whose answer is checked by [`check_rewards`]; TRL sees the function's name."""

    def __init__(self, func: Any):
        from trl.trainer.utils import get_callable_name

        self.func = self.__wrapped__ = func
        self.__name__ = get_callable_name(func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return check_rewards(self.__name__, self.func(*args, **kwargs), _expected(kwargs))


class CheckedAsyncReward(CheckedReward):
    """[`CheckedReward`] for an async reward function."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return check_rewards(self.__name__, await self.func(*args, **kwargs), _expected(kwargs))


def _expected(kwargs: dict[str, Any]) -> int | None:
    """The number of completions TRL asks a reward for (its `completions` argument), None when not given."""
    completions = kwargs.get("completions")
    return None if completions is None else _length(completions)


def _shown(completion: Any) -> str:
    from .rewards import completion_text

    text = completion_text(completion)
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


@dataclass
class RewardGuard:
    """Weighted rewards of a round, checked; and the running maximum for the `positive_threshold` warning."""

    reward_func_names: Sequence[str]
    reward_weights: Sequence[float]
    positive_threshold: float
    check_threshold: bool = True
    all_negative: str = Seq.all_negative
    """What a step without positives does under the schedule (`Section.all_negative`), as the warning says it."""
    max_seen: float = -math.inf
    steps: int = 0
    _warned: bool = field(default=False, repr=False)

    def aggregate(self, rewards_per_func: np.ndarray, completions: Sequence[Any], offset: int = 0) -> np.ndarray:
        """TRL's weighted sum of `rewards_per_func` (rows: completions of the round, all processes, prompt-major).

        `completions` holds this process's rows `offset, offset + 1, ...`, quoted in the error when a row is bad.
        Raises a `RewardError` for an infinite reward (a value beyond float32's ±3.4e38 arrives as inf) or a weighted
        sum beyond float32's range. NaN (the function returned None) is "no opinion", as in TRL.
        """
        per_func = np.asarray(rewards_per_func, dtype=np.float64)
        bad = np.argwhere(np.isinf(per_func))
        if bad.size:
            row, column = (int(v) for v in bad[0])
            raise infinite_reward(
                self.reward_func_names[column], per_func[row, column], self._which(row, completions, offset)
            )
        rewards = aggregate_rewards(per_func, self.reward_weights)
        bad_rows = np.flatnonzero(np.abs(rewards) > _FLOAT32_MAX)  # NaN (no opinion) is not an overflow
        if bad_rows.size:
            row = int(bad_rows[0])
            parts = ", ".join(
                f"{n}={v:g} x {w:g}"
                for n, v, w in zip(self.reward_func_names, per_func[row], self.reward_weights, strict=True)
            )
            raise RewardError(
                f"The weighted reward of {self._which(row, completions, offset)} overflows ({parts}). Rescale the "
                "reward functions or reward_weights so that their weighted sum stays within ±3.4e38 (e.g. rewards in "
                "[0, 1])."
            )
        if rewards.size and not np.isnan(per_func).all():
            self.max_seen = max(self.max_seen, float(np.nanmax(rewards)))
        return rewards

    @staticmethod
    def _which(row: int, completions: Sequence[Any], offset: int) -> str:
        local = row - offset
        if 0 <= local < len(completions):
            return f"the completion {_shown(completions[local])}"
        return f"completion {row} of the round (generated on another process)"

    def end_step(self) -> None:
        """Count a training step; after `THRESHOLD_CHECK_STEPS` warn once if no reward beat `positive_threshold`."""
        self.steps += 1
        if self._warned or not self.check_threshold or self.steps < THRESHOLD_CHECK_STEPS:
            return
        self._warned = True
        if self.max_seen > self.positive_threshold:
            return
        if self.max_seen == -math.inf:
            logger.warning(
                "No reward function scored any completion of the first %d training steps (each returned None or "
                "NaN: no opinion), so every advantage is 0 and nothing trains; %s Check that the reward functions "
                "get the dataset columns they need (e.g. `answer`) and return a number for every completion they "
                "can judge.",
                self.steps,
                self.all_negative,
            )
            return
        logger.warning(
            "positive_threshold=%g, but no completion of the first %d training steps scored above it (highest "
            "weighted reward: %g). Every sample is negative, so %s If your reward functions cannot return more "
            "than that, set positive_threshold below the reward of a correct completion (e.g. 0.5 for rewards in "
            "{0, 1}); otherwise the prompts are too hard for the model so far (none solved yet).",
            self.positive_threshold,
            self.steps,
            self.max_seen,
            self.all_negative,
        )
