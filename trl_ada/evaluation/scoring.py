"""Scoring sampled completions: per-sample correctness ([`score_completions`]) and per-prompt pass rates
([`estimate_pass_rates`]). A sample is *correct* when its reward exceeds `CORRECT_THRESHOLD`."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..utils import mean
from . import generation
from .generation import Prompt, SamplingSettings, _check_positive_int

if TYPE_CHECKING:
    from datasets import Dataset

    from ..rewards import RewardFunc

logger = logging.getLogger(__name__)

CORRECT_THRESHOLD = 0.5
"""A sample whose reward is strictly above this counts as correct."""
SCORE_CHUNK_SIZE = 1024
"""Samples per `math_reward` call (one progress-bar step)."""


def score_completions(
    completions: Sequence[Sequence[str]],
    answers: Sequence[str],
    chunk_size: int = SCORE_CHUNK_SIZE,
    *,
    reward_func: RewardFunc | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
) -> list[list[bool]]:
    """Correctness of every sample: its reward against its problem's answer is above `CORRECT_THRESHOLD`.

    `reward_func` (default [`~trl_ada.rewards.math_reward`]) is called as TRL calls a reward function:
    `reward_func(completions=..., answer=..., **columns)`, every per-problem value of `answer` and of the extra
    `columns` repeated for each of its samples. All samples are scored in chunks of `chunk_size` (math_reward
    verifies repeated answers once and may use its worker processes, see `TRL_ADA_REWARD_WORKERS`). Each answer is
    checked as training checks it (`trl_ada.checks.check_rewards` and `check_finite`: one finite number or None per
    completion, else a `RewardError` naming the function). A sample the reward abstains on (None or NaN: no
    opinion) is not correct; their count is logged as a warning.
    """
    from tqdm.auto import tqdm

    from ..checks import check_finite, check_rewards

    name = reward_name(reward_func)
    if reward_func is None:
        from ..rewards import math_reward as reward_func

    if len(completions) != len(answers):
        raise ValueError(f"Got {len(completions)} lists of completions for {len(answers)} answers.")
    per_problem = {"answer": answers, **(columns or {})}
    flat = [text for samples in completions for text in samples]
    repeated = {
        column: [value for samples, value in zip(completions, values, strict=True) for _ in samples]
        for column, values in per_problem.items()
    }
    rewards: list[float | None] = []
    for start in tqdm(range(0, len(flat), chunk_size), desc="Scoring", unit="chunk"):
        chunk = slice(start, start + chunk_size)
        scored = reward_func(completions=flat[chunk], **{column: values[chunk] for column, values in repeated.items()})
        check_finite(name, check_rewards(name, scored, len(flat[chunk])), flat[chunk])
        rewards.extend(scored)
    abstained = sum(_abstains(reward) for reward in rewards)
    if abstained:
        logger.warning(
            "Reward function %r gave no reward (None or NaN: no opinion) to %d of %d samples; they count as not "
            "correct.",
            name,
            abstained,
            len(rewards),
        )
    correct = [not _abstains(reward) and float(reward) > CORRECT_THRESHOLD for reward in rewards]
    return _split_by_sizes(correct, [len(samples) for samples in completions])


def reward_name(reward_func: RewardFunc | None) -> str:
    """The name a reward function is reported under (TRL logs a reward under the same name); `math_reward` when
    none is given."""
    return "math_reward" if reward_func is None else getattr(reward_func, "__name__", type(reward_func).__name__)


def _abstains(reward: float | None) -> bool:
    """Whether a checked reward is "no opinion": None or NaN."""
    return reward is None or math.isnan(float(reward))


def _pass_rate(correct: Sequence[bool]) -> float:
    """Share of correct samples (0.0 for none)."""
    return mean((float(c) for c in correct), default=0.0)


def estimate_pass_rates(
    model: str | Path,
    prompts: Sequence[Prompt],
    answers: Sequence[str],
    num_samples: int,
    *,
    sampling: SamplingSettings | None = None,
    reward_func: RewardFunc | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
) -> list[float]:
    """Each prompt's pass rate: the share of its `num_samples` sampled completions that are correct.

    Samples with [`generate_completions`] under `sampling` and scores with [`score_completions`] (`reward_func`,
    default [`~trl_ada.rewards.math_reward`], gets `answer` and the extra per-prompt `columns`).
    """
    _check_positive_int(num_samples, "num_samples")
    sampling = sampling or SamplingSettings()
    completions = generation.generate_completions(model, prompts, num_samples, **sampling.generate_kwargs())
    correct = score_completions(completions, answers, reward_func=reward_func, columns=columns)
    return [_pass_rate(samples) for samples in correct]


def _format(dataset: Dataset, problem_column: str | None, answer_column: str | None) -> Dataset:
    """The dataset with the paper's conversational `prompt` and string `answer` columns."""
    from ..data import format_dataset

    return format_dataset(dataset, problem_column=problem_column, answer_column=answer_column)


def _split_by_sizes(items: list, sizes: Sequence[int]) -> list[list]:
    """Cut `items` into consecutive chunks of the given sizes."""
    chunks, start = [], 0
    for size in sizes:
        chunks.append(items[start : start + size])
        start += size
    return chunks
