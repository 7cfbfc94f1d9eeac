"""Beta-binomial maths of the pass-rate posterior: exit probabilities, prior-sized rounds, budget grants.

Pure numpy. A prompt's pass rate p has a Beta(alpha, beta) posterior; the number of positives among m new
completions is then Beta-binomial(m, alpha, beta), and every planning decision of the budgeted rounds reads the
probability of an outcome (the exit rule met, a mixed pool) as a function of m.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .exit_rules import ExitRule

__all__ = ["beta_binomial_pmf", "exit_probability", "grant_by_marginal_gain", "prior_round_size"]


def beta_binomial_pmf(draws: int, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """(len(alpha), draws + 1): P(k positives in `draws` new completions) when p ~ Beta(alpha, beta)."""
    alpha, beta = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    i = np.arange(draws)
    first = np.prod((beta[:, None] + i) / (alpha[:, None] + beta[:, None] + i), axis=1)  # k = 0
    k = np.arange(draws)
    ratios = (draws - k) * (alpha[:, None] + k) / ((k + 1) * (beta[:, None] + draws - k - 1))  # pmf(k+1) / pmf(k)
    return np.concatenate([first[:, None], first[:, None] * np.cumprod(ratios, axis=1)], axis=1)


@lru_cache(maxsize=65536)
def _exit_grid(rule: ExitRule, positives: int, negatives: int, num_generations: int, cap: int) -> np.ndarray:
    """(cap + 1, cap + 1) booleans: after m more draws with k positives, can the pool fill a group and meet `rule`?"""
    grid = np.zeros((cap + 1, cap + 1), dtype=bool)
    for m in range(cap + 1):
        if positives + negatives + m >= num_generations:
            for k in range(m + 1):
                grid[m, k] = rule.is_met(positives + k, negatives + m - k, num_generations)
    return grid


def exit_probability(
    rule: ExitRule,
    num_generations: int,
    alpha: np.ndarray,
    beta: np.ndarray,
    positives: Sequence[int],
    negatives: Sequence[int],
    cap: int,
) -> np.ndarray:
    """(prompts, cap + 1): posterior probability that m = 0..cap more completions make the pool meet `rule`.

    `alpha`, `beta` are each prompt's Beta posterior *including* its current pool; the number of positives among m
    new completions is then Beta-binomial(m, alpha, beta).
    """
    pools = zip(positives, negatives, strict=True)
    grids = np.stack([_exit_grid(rule, int(p), int(q), num_generations, cap) for p, q in pools])
    probability = np.empty((len(grids), cap + 1))
    for m in range(cap + 1):
        probability[:, m] = (beta_binomial_pmf(m, alpha, beta) * grids[:, m, : m + 1]).sum(axis=1)
    return probability


def prior_round_size(probability: np.ndarray, low: int, high: int, confidence: float) -> int:
    """Smallest m in [low, high] with probability[m] >= confidence, or `high` if none reaches it."""
    reaching = np.flatnonzero(probability[low : high + 1] >= confidence)
    return low + int(reaching[0]) if reaching.size else high


def grant_by_marginal_gain(low: np.ndarray, high: np.ndarray, available: int, *gains: np.ndarray) -> np.ndarray:
    """Completions per prompt in [low, high] spending at most `available` beyond `low`, one at a time by gain.

    `gains` are (prompts, cap + 1) curves (probability of an outcome after m completions); the (m+1)-th completion
    of a prompt is worth `gain[m + 1] - gain[m]`. The extra completions go to the largest marginal gains of the
    first curve, ties broken by the next curve's, then by prompt order: the greedy optimum when the curves are
    concave, as the probability of a mixed pool is once the pool can fill a group.
    """
    rows, draws = np.nonzero(np.arange(gains[0].shape[1] - 1)[None, :] < high[:, None])
    keep = draws >= low[rows]
    rows, draws = rows[keep], draws[keep]
    marginal = [np.diff(gain, axis=1)[rows, draws] for gain in gains]
    order = np.lexsort((draws, rows, *(-m for m in reversed(marginal))))
    granted = np.bincount(rows[order[: max(int(available), 0)]], minlength=len(low))
    return low + granted
