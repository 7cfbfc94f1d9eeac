"""Rewards in, groups out: reward aggregation over functions and the choice of a prompt's n kept samples.

Pure numpy. Rewards handed to a sampler are the weighted sums of the reward functions (TRL's `nansum`): a function
returning None has no opinion and adds nothing, and a completion no function scored is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "aggregate_rewards",
    "flat_group_probability",
    "grpo_flat_fraction",
    "reward_values",
    "select_group",
    "split_by_class",
]


def aggregate_rewards(rewards_per_func: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Weighted sum over reward functions, as TRL does: a NaN (function returned None) adds nothing.

    A completion that every function declined stays NaN (unscored), as in TRL's advantage computation.
    """
    rewards_per_func = np.asarray(rewards_per_func, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if rewards_per_func.ndim != 2 or rewards_per_func.shape[1] != weights.shape[0]:
        raise ValueError(
            f"rewards_per_func has shape {rewards_per_func.shape}; expected (num_completions, {weights.shape[0]}), "
            "one column per reward function."
        )
    rewards = np.nansum(rewards_per_func * weights[None, :], axis=1)
    rewards[np.isnan(rewards_per_func).all(axis=1)] = np.nan
    return rewards


def reward_values(rewards: Sequence[float], expected: int) -> np.ndarray:
    """`rewards` as a float array of `expected` finite values or NaN (a completion no reward function scored)."""
    values = np.asarray(rewards, dtype=np.float64).reshape(-1)
    if values.shape[0] != expected:
        raise ValueError(
            f"rewards has {values.shape[0]} values; expected {expected} (samples_per_round for each prompt of the "
            "round's plan, prompt-major)."
        )
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        raise ValueError(
            f"rewards[{int(bad[0])}] = {values[bad[0]]}: a reward must be finite, or NaN for a completion that no "
            "reward function scored."
        )
    return values


# --------------------------------------------------------------------------------------------
# Group selection
# --------------------------------------------------------------------------------------------


def split_by_class(
    is_positive: Sequence[bool], is_scored: Sequence[bool] | None = None, is_masked: Sequence[bool] | None = None
) -> tuple[list[int], list[int], list[int]]:
    """(positive, negative, unscored) indices of a pool; within each, unmasked samples first, then draw order."""
    scored = is_scored if is_scored is not None else [True] * len(is_positive)
    masked = is_masked if is_masked is not None else [False] * len(is_positive)
    order = sorted(range(len(is_positive)), key=lambda i: (masked[i], i))
    positives = [i for i in order if scored[i] and is_positive[i]]
    negatives = [i for i in order if scored[i] and not is_positive[i]]
    unscored = [i for i in order if not scored[i]]
    return positives, negatives, unscored


def select_group(
    is_positive: Sequence[bool],
    num_generations: int,
    is_scored: Sequence[bool] | None = None,
    is_masked: Sequence[bool] | None = None,
) -> list[int]:
    """Indices (ascending, i.e. draw order) of the n pool samples that form the prompt's group.

    k_pos = min(⌊n/2⌋, P), k_neg = min(n − k_pos, Q); a shortfall is filled from the other class, then from the
    unscored samples (`is_scored` False: no reward function had an opinion). Within a class, samples that still
    carry gradient (`is_masked` False, e.g. not truncated under `mask_truncated_completions`) come first, then the
    earliest draws, so the choice is deterministic given the pool.
    """
    n = num_generations
    positives, negatives, unscored = split_by_class(is_positive, is_scored, is_masked)
    if len(is_positive) < n:
        raise ValueError(f"A pool of {len(is_positive)} samples cannot fill a group of num_generations={n}.")
    k_pos = min(n // 2, len(positives))
    k_neg = min(n - k_pos, len(negatives))
    k_pos = min(n - k_neg, len(positives))
    return sorted(positives[:k_pos] + negatives[:k_neg] + unscored[: n - k_pos - k_neg])


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def flat_group_probability(pass_rates: Sequence[float], group_size: int) -> np.ndarray:
    """Per prompt, p^n + (1 − p)^n: the probability that n independent draws at pass rate p are all positive or all
    negative, i.e. that a plain GRPO group of n binary rewards is flat (every advantage 0)."""
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size={group_size!r}: must be an integer >= 1 (the configured num_generations).")
    p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
    outside = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))
    if outside.size:
        raise ValueError(f"pass_rates[{int(outside[0])}] = {p[outside[0]]}: a pass rate must be in [0, 1].")
    return p**group_size + (1.0 - p) ** group_size


def grpo_flat_fraction(pass_rates: Sequence[float], group_size: int) -> float:
    """The expected share of prompts whose plain GRPO group of `group_size` would be flat (no gradient): the mean
    over prompts of p̂^n + (1 − p̂)^n at each prompt's pooled pass rate p̂ (`flat_group_probability`); NaN for no
    prompt. NaN entries (a prompt none of whose samples was scored) are left out."""
    p = np.asarray(pass_rates, dtype=np.float64).reshape(-1)
    p = p[~np.isnan(p)]
    return float(flat_group_probability(p, group_size).mean()) if p.size else float("nan")
