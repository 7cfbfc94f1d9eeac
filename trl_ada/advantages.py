"""Advantages of the kept samples from a pool or group baseline (`docs/algorithm.md`, step 5).

    A_i = r_i − mean(baseline set)            scale="none"  (the paper's default)
    A_i = (r_i − mean) / (std + eps)          scale="group" (std of the same baseline set)
    A_i = (r_i − mean) / (std_batch + eps)    scale="batch" (std of every kept reward of the step)

The baseline set is the prompt's whole pool (`baseline="pool"`) or its kept n (`"group"`, as GRPO).
A reward of NaN marks a completion that no reward function scored ("no opinion", TRL's `None`): it is left out of
every mean and std and its advantage is 0. Standard deviations are unbiased (ddof=1) and NaN below two scored values,
as TRL's `nanstd`. With a pool equal to the kept group these are exactly `GRPOTrainer`'s advantages.
Pure numpy, vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "ADVANTAGE_BASELINES",
    "REWARD_SCALINGS",
    "compute_advantages",
    "normalize_then_sum_advantages",
    "ragged_advantages",
    "zero_std_fraction",
]

ADVANTAGE_BASELINES = ("pool", "group")
REWARD_SCALINGS = ("none", "group", "batch")


def _nanmean(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    count = np.sum(~np.isnan(values), axis=axis)
    return np.where(count > 0, np.nansum(values, axis=axis) / np.maximum(count, 1), np.nan)


def nanstd(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Unbiased std ignoring NaN; NaN where fewer than two values are present (TRL's `nanstd`)."""
    values = np.asarray(values, dtype=np.float64)
    count = np.sum(~np.isnan(values), axis=axis)
    mean = _nanmean(values, axis) if axis is None else np.expand_dims(_nanmean(values, axis), axis)
    squares = np.nansum((values - mean) ** 2, axis=axis)
    return np.where(count > 1, np.sqrt(squares / np.maximum(count - 1, 1)), np.nan)


def pool_moments(pools: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and unbiased std of the scored rewards of each prompt's pool (pools may differ in size)."""
    arrays = [np.asarray(pool, dtype=np.float64) for pool in pools]
    means = np.array([_nanmean(pool) for pool in arrays], dtype=np.float64)
    stds = np.array([nanstd(pool) for pool in arrays], dtype=np.float64)
    return means, stds


def _check(kept: np.ndarray, pools, baseline: str, ndim: int) -> None:
    if kept.ndim != ndim:
        shape = "(num_prompts, num_generations)" if ndim == 2 else "(num_prompts, num_generations, num_functions)"
        raise ValueError(f"kept rewards must have shape {shape}; got {kept.shape}.")
    if baseline not in ADVANTAGE_BASELINES:
        raise ValueError(f"advantage_baseline={baseline!r}: choose one of {list(ADVANTAGE_BASELINES)}.")
    if baseline == "pool" and (pools is None or len(pools) != kept.shape[0]):
        raise ValueError("The pool baseline needs one pool of rewards per prompt (`pools`).")


def compute_advantages(
    kept_rewards: np.ndarray,
    pools: Sequence[Sequence[float]] | None = None,
    *,
    baseline: str = "pool",
    scale: str = "none",
    epsilon: float = 1e-4,
) -> np.ndarray:
    """(B, n) advantages of the kept rewards (`multi_objective_aggregation="sum_then_normalize"`).

    `pools` (the prompts' weighted rewards, NaN for unscored) is needed for the pool baseline.
    """
    kept = np.asarray(kept_rewards, dtype=np.float64)
    _check(kept, pools, baseline, ndim=2)
    if scale not in REWARD_SCALINGS:
        raise ValueError(f"scale_rewards={scale!r}: choose one of {list(REWARD_SCALINGS)}.")
    if baseline == "pool":
        mean, std = pool_moments(pools)
    else:
        mean, std = _nanmean(kept, axis=1), nanstd(kept, axis=1)
    advantages = kept - mean[:, None]
    if scale == "group":
        advantages = advantages / (std[:, None] + epsilon)
    elif scale == "batch":
        advantages = advantages / (nanstd(kept) + epsilon)
    return np.nan_to_num(advantages, nan=0.0)


def normalize_then_sum_advantages(
    kept_rewards_per_func: np.ndarray,
    pools_per_func: Sequence[np.ndarray] | None,
    weights: Sequence[float],
    *,
    baseline: str = "pool",
    epsilon: float = 1e-4,
) -> np.ndarray:
    """(B, n) advantages for `multi_objective_aggregation="normalize_then_sum"`.

    Each function's reward is normalised by the mean and std of its baseline set (pool or kept group), the normalised
    rewards are summed with `weights`, and the sums are normalised over the kept batch. `scale_rewards` plays no part,
    as in TRL. `kept_rewards_per_func` is (B, n, F); `pools_per_func` holds one (pool size, F) array per prompt.
    """
    kept = np.asarray(kept_rewards_per_func, dtype=np.float64)
    _check(kept, pools_per_func, baseline, ndim=3)
    if baseline == "pool":
        pools = [np.asarray(pool, dtype=np.float64) for pool in pools_per_func]
        mean = np.stack([_nanmean(pool, axis=0) for pool in pools])[:, None, :]
        std = np.stack([nanstd(pool, axis=0) for pool in pools])[:, None, :]
    else:
        mean, std = _nanmean(kept, axis=1)[:, None, :], nanstd(kept, axis=1)[:, None, :]
    normalized = (kept - mean) / (std + epsilon)
    rewards = np.nansum(normalized * np.asarray(weights, dtype=np.float64), axis=2)
    rewards[np.isnan(kept).all(axis=2)] = np.nan  # unscored by every function
    advantages = (rewards - _nanmean(rewards)) / (nanstd(rewards) + epsilon)
    return np.nan_to_num(advantages, nan=0.0)


def ragged_advantages(
    kept: Sequence[np.ndarray],
    pools: Sequence[Sequence[float]] | Sequence[np.ndarray] | None = None,
    *,
    baseline: str = "pool",
    scale: str = "none",
    weights: Sequence[float] | None = None,
    epsilon: float = 1e-4,
) -> list[np.ndarray]:
    """Advantages of kept groups that may differ in size (Est), one array per prompt.

    `kept[i]` holds prompt i's kept rewards: shape (n_i,), or (n_i, F) per reward function with `weights` given
    (`multi_objective_aggregation="normalize_then_sum"`). The groups are padded to the longest with NaN (no opinion:
    out of every mean and std), passed to [`compute_advantages`] or [`normalize_then_sum_advantages`], and cut back,
    so groups of one size give exactly those functions' advantages.
    """
    sizes = [len(group) for group in kept]
    trailing = np.shape(kept[0])[1:]
    padded = np.full((len(kept), max(sizes), *trailing), np.nan)
    for row, group in enumerate(kept):
        padded[row, : sizes[row]] = group
    if weights is None:
        advantages = compute_advantages(padded, pools, baseline=baseline, scale=scale, epsilon=epsilon)
    else:
        advantages = normalize_then_sum_advantages(padded, pools, weights, baseline=baseline, epsilon=epsilon)
    return [advantages[row, :size] for row, size in enumerate(sizes)]


def zero_std_fraction(kept: Sequence[Sequence[float]]) -> float:
    """TRL's `frac_reward_zero_std` for groups that may differ in size (Est): the fraction of prompts whose kept
    rewards have zero std. TRL cuts the rows into blocks of `num_generations`, which cross prompts of other sizes;
    here each prompt's group is one block. A group with fewer than two scored rewards has a NaN std, not zero, as in
    TRL."""
    stds = np.array([nanstd(np.asarray(group, dtype=np.float64)) for group in kept])
    return float(np.mean(np.isclose(stds, 0.0))) if len(stds) else 0.0
