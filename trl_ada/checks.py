"""Checks the trainer runs on its inputs (reward functions, their values, the dataset), with actionable messages.

* [`check_train_dataset_size`]: a dataset smaller than one generation batch would train 0 steps; refused.
* [`resolve_reward_funcs`]: registry names (`"math"`) and `module:function` paths become callables, as on the
  command line; any other string stays a reward-model id or path for TRL.
* [`RewardGuard`]: the weighted reward of each round's completions (TRL's weighted sum), refusing a reward that is
  infinite or overflows (naming the reward function and the completion), and warning once when no completion of the
  first training steps scored above `positive_threshold`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .sampling import aggregate_rewards

__all__ = ["THRESHOLD_CHECK_STEPS", "RewardGuard", "check_train_dataset_size", "resolve_reward_funcs"]

logger = logging.getLogger(__name__)

THRESHOLD_CHECK_STEPS = 3
"""After this many training steps with no reward above `positive_threshold`, [`RewardGuard`] warns (once)."""
_SHOWN_CHARS = 200
_FLOAT32_MAX = float(np.finfo(np.float32).max)  # TRL sums the weighted rewards in float32


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
    max_seen: float = -math.inf
    steps: int = 0
    _warned: bool = field(default=False, repr=False)

    def aggregate(self, rewards_per_func: np.ndarray, completions: Sequence[Any], offset: int = 0) -> np.ndarray:
        """TRL's weighted sum of `rewards_per_func` (rows: completions of the round, all processes, prompt-major).

        `completions` holds this process's rows `offset, offset + 1, ...`, quoted in the error when a row is bad.
        Raises a ValueError for an infinite reward (a value beyond float32's ±3.4e38 arrives as inf) or a weighted
        sum beyond float32's range. NaN (the function returned None) is "no opinion", as in TRL.
        """
        per_func = np.asarray(rewards_per_func, dtype=np.float64)
        bad = np.argwhere(np.isinf(per_func))
        if bad.size:
            row, column = (int(v) for v in bad[0])
            name = self.reward_func_names[column]
            raise ValueError(
                f"Reward function {name!r} returned {per_func[row, column]} for "
                f"{self._which(row, completions, offset)}. Rewards must be finite floats within float32's range "
                "(±3.4e38); return None for 'no opinion'. "
                f"Make {name!r} clip or rescale its output (e.g. to [0, 1]) and check it on this completion."
            )
        rewards = aggregate_rewards(per_func, self.reward_weights)
        bad_rows = np.flatnonzero(np.abs(rewards) > _FLOAT32_MAX)  # NaN (no opinion) is not an overflow
        if bad_rows.size:
            row = int(bad_rows[0])
            parts = ", ".join(
                f"{n}={v:g} x {w:g}"
                for n, v, w in zip(self.reward_func_names, per_func[row], self.reward_weights, strict=True)
            )
            raise ValueError(
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
        logger.warning(
            "positive_threshold=%g, but no completion of the first %d training steps scored above it (highest "
            "weighted reward: %g). Every sample is negative, so no prompt meets its exit rule and each draws "
            "samples_per_round * max_rounds completions. If your reward functions cannot return more than that, set "
            "positive_threshold below the reward of a correct completion (e.g. 0.5 for rewards in {0, 1}); otherwise "
            "the prompts are too hard for the model so far (none solved yet).",
            self.positive_threshold,
            self.steps,
            self.max_seen,
        )
