"""Advantages of the kept samples from a pool or group baseline (`docs/algorithm.md`, step 5).

    A_i = r_i − mean(baseline set)            scale="none"  (the paper's default)
    A_i = (r_i − mean) / (std + eps)          scale="group" (std of the same baseline set)
    A_i = (r_i − mean) / (std_batch + eps)    scale="batch" (std of every kept reward of the step)

The baseline set is the prompt's whole pool (`baseline="pool"`) or its kept n (`"group"`, as GRPO).
Standard deviations are unbiased (ddof=1), as `torch.std` in TRL. Pure numpy, vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ADVANTAGE_BASELINES", "REWARD_SCALINGS", "compute_advantages"]

ADVANTAGE_BASELINES = ("pool", "group")
REWARD_SCALINGS = ("none", "group", "batch")


def pool_moments(pools: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and unbiased std of each prompt's pool (pools may differ in size)."""
    means = np.array([np.mean(pool) for pool in pools], dtype=np.float64)
    stds = np.array([np.std(pool, ddof=1) if len(pool) > 1 else 0.0 for pool in pools], dtype=np.float64)
    return means, stds


def compute_advantages(
    kept_rewards: np.ndarray,
    pools: Sequence[Sequence[float]] | None = None,
    *,
    baseline: str = "pool",
    scale: str = "none",
    epsilon: float = 1e-4,
) -> np.ndarray:
    """(B, n) advantages of the kept rewards; `pools` is needed for the pool baseline."""
    kept = np.asarray(kept_rewards, dtype=np.float64)
    if kept.ndim != 2:
        raise ValueError(f"kept_rewards must have shape (num_prompts, num_generations); got {kept.shape}.")
    if baseline not in ADVANTAGE_BASELINES:
        raise ValueError(f"advantage_baseline={baseline!r}: choose one of {list(ADVANTAGE_BASELINES)}.")
    if scale not in REWARD_SCALINGS:
        raise ValueError(f"scale_rewards={scale!r}: choose one of {list(REWARD_SCALINGS)}.")
    if baseline == "pool":
        if pools is None or len(pools) != kept.shape[0]:
            raise ValueError("The pool baseline needs one pool of rewards per prompt (`pools`).")
        mean, std = pool_moments(pools)
    else:
        mean, std = kept.mean(axis=1), kept.std(axis=1, ddof=1)
    advantages = kept - mean[:, None]
    if scale == "group":
        advantages = advantages / (std[:, None] + epsilon)
    elif scale == "batch":
        advantages = advantages / (kept.std(ddof=1) + epsilon)
    return advantages
