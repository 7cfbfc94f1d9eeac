"""The paper's prompt selection: keep the prompts a model solves sometimes, but not too often."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..utils import is_int
from .generation import SamplingSettings, _check_positive_int
from .scoring import _format, estimate_pass_rates

if TYPE_CHECKING:
    from datasets import Dataset

    from ..rewards import RewardFunc

logger = logging.getLogger(__name__)

DEFAULT_MAX_PASS_RATE = 0.75
"""`select_prompts` keeps prompts solved at most this often (with 16 samples: at most 12 correct). Above it, a GRPO
group of 4 is all-correct, hence gradient-free, more than a third of the time (0.75**4 = 0.32; at 0.9, 0.66)."""


def _check_band(max_pass_rate: float, min_correct: int) -> None:
    """ValueError unless 0 < max_pass_rate <= 1 and min_correct is an integer >= 0."""
    if not 0 < max_pass_rate <= 1:
        raise ValueError(f"max_pass_rate must be in (0, 1], got {max_pass_rate!r}.")
    if not is_int(min_correct) or min_correct < 0:
        raise ValueError(f"min_correct must be an integer >= 0, got {min_correct!r}.")


def score_prompts(
    model: str | Path,
    dataset: Dataset,
    num_samples: int = 16,
    *,
    sampling: SamplingSettings | None = None,
    problem_column: str | None = None,
    answer_column: str | None = None,
    reward_func: RewardFunc | None = None,
) -> Dataset:
    """Every prompt with its pass rate: the rows formatted with the paper's prompt (a conversation is kept as it is),
    plus `num_correct` (of `num_samples` samples) and `pass_rate` columns ([`estimate_pass_rates`]).

    `reward_func` (default [`~trl_ada.rewards.math_reward`]) is called as TRL calls it, with the dataset's other
    columns as keywords. `sampling` defaults to `SamplingSettings(max_new_tokens=2048)`.
    """
    _check_positive_int(num_samples, "num_samples")
    formatted = _format(dataset, problem_column, answer_column)
    earlier = [column for column in ("num_correct", "pass_rate") if column in formatted.column_names]
    formatted = formatted.remove_columns(earlier)  # re-selecting an earlier selection replaces its estimates
    sampling = sampling or SamplingSettings(max_new_tokens=2048)
    columns = {name: formatted[name] for name in formatted.column_names if name not in ("prompt", "answer")}
    pass_rates = estimate_pass_rates(
        model,
        formatted["prompt"],
        formatted["answer"],
        num_samples,
        sampling=sampling,
        reward_func=reward_func,
        columns=columns,
    )
    num_correct = [round(rate * num_samples) for rate in pass_rates]
    return formatted.add_column("num_correct", num_correct).add_column("pass_rate", pass_rates)


def keep_in_band(scored: Dataset, max_pass_rate: float = DEFAULT_MAX_PASS_RATE, min_correct: int = 1) -> Dataset:
    """The prompts of [`score_prompts`] worth training on: at least `min_correct` correct samples and a pass rate at
    most `max_pass_rate`; the counts dropped each way are logged."""
    _check_band(max_pass_rate, min_correct)
    num_correct, pass_rates = scored["num_correct"], scored["pass_rate"]
    keep = [
        i
        for i, (n, p) in enumerate(zip(num_correct, pass_rates, strict=True))
        if n >= min_correct and p <= max_pass_rate
    ]
    _log_selection(num_correct, pass_rates, len(keep), min_correct, max_pass_rate)
    return scored.select(keep)


def select_prompts(
    model: str | Path,
    dataset: Dataset,
    num_samples: int = 16,
    max_pass_rate: float = DEFAULT_MAX_PASS_RATE,
    min_correct: int = 1,
    *,
    sampling: SamplingSettings | None = None,
    problem_column: str | None = None,
    answer_column: str | None = None,
    reward_func: RewardFunc | None = None,
) -> Dataset:
    """The paper's difficulty filter: keep prompts the model solves sometimes, but not too often.

    Estimates each prompt's pass rate from `num_samples` samples (paper: 16; [`score_prompts`], scored by
    `reward_func`, default [`~trl_ada.rewards.math_reward`]) and keeps a prompt when it has at least `min_correct`
    correct samples and a pass rate <= `max_pass_rate` (default 0.75; [`keep_in_band`]). Returns the kept rows,
    formatted with the paper's prompt, plus `num_correct` and `pass_rate` columns. `sampling` defaults to
    `SamplingSettings(max_new_tokens=2048)`.
    """
    _check_positive_int(num_samples, "num_samples")
    _check_band(max_pass_rate, min_correct)
    scored = score_prompts(
        model,
        dataset,
        num_samples,
        sampling=sampling,
        problem_column=problem_column,
        answer_column=answer_column,
        reward_func=reward_func,
    )
    return keep_in_band(scored, max_pass_rate, min_correct)


def _log_selection(
    num_correct: Sequence[int], pass_rates: Sequence[float], kept: int, min_correct: int, max_pass_rate: float
) -> None:
    """Log how many prompts were kept and why the others were dropped."""
    too_hard = sum(n < min_correct for n in num_correct)
    too_easy = sum(n >= min_correct and p > max_pass_rate for n, p in zip(num_correct, pass_rates, strict=True))
    logger.info(
        "Prompt selection: kept %d of %d; dropped %d with fewer than %d correct (all-wrong when 1) and %d with pass "
        "rate > %.2f (too easy).",
        kept,
        len(num_correct),
        too_hard,
        min_correct,
        too_easy,
        max_pass_rate,
    )


_SELECTION_FILES = ("state.json", "dataset_info.json", "prompts.jsonl")
_SELECTION_SHARD = re.compile(r"data-\d{5}-of-\d{5}\.arrow")


def is_selection_file(name: str) -> bool:
    """True for a file that [`save_selection`] writes: `save_to_disk`'s state, info and shards, and `prompts.jsonl`."""
    return name in _SELECTION_FILES or _SELECTION_SHARD.fullmatch(name) is not None


def save_selection(
    dataset: Dataset, output_dir: str | Path, push_to_hub: str | None = None, hub_token: str | None = None
) -> Path:
    """Save with `save_to_disk` to `output_dir`, copy to `output_dir/prompts.jsonl`, and push when asked."""
    output_dir = Path(output_dir)
    dataset.save_to_disk(str(output_dir))
    dataset.to_json(str(output_dir / "prompts.jsonl"), lines=True, force_ascii=False)
    if push_to_hub:
        dataset.push_to_hub(push_to_hub, token=hub_token)
        logger.info("Pushed the kept prompts to https://huggingface.co/datasets/%s.", push_to_hub)
    return output_dir
