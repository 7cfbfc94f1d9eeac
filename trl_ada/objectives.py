"""Non-linear objectives: each prompt's weight, how it splits between samples and gradient, and the allocation.

Pure numpy, no torch, no TRL (`docs/algorithm.md`, "Objectives"). Training for J_f(θ) = E_x[f(p_θ(x))], with p the
prompt's pass rate, weighs the policy gradient of prompt x by f′(p_x):

    objective="linear"   f(p) = p         w(p) = 1                 (GRPO's objective)
    objective="log"      f(p) = log p     w(p) = 1 / p
    objective="power"    f(p) = p^α       w(p) = α · p^(α − 1)     (objective_alpha = α > 0)

Every weight reads p + ε (`objective_epsilon`): ε is the floor that keeps w finite at p = 0, so w(0) = f′(ε) is the
largest weight a prompt can get. The weight w = w_sample · w_grad is realised in two places (`objective_weighting`):

    "explicit"   w_sample = 1          w_grad = w(p)           (uniform n; every schedule)
    "implicit"   w_sample = w(p)       w_grad = 1              (samples per prompt ∝ w)
    "hybrid"     w_sample = √w(p)      w_grad = √w(p)          (the paper's choice for the log objective)
    "variance"   w_sample = √((1−p)/p) w_grad = 1/√(p(1−p))    (log only: the variance-optimal split, Appendix B)

(with ε added to p and, for "variance", to 1 − p).

The sample weight sizes a step's allocation before sampling, from the estimated pass rate p̂ (`allocate`); the
gradient weight multiplies the advantages after sampling, from the pass rate of the prompt's samples in the step.
Gradient weights are normalised per step (`normalize`), so the learning rate keeps its meaning.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .plan import OBJECTIVE_WEIGHTINGS, OBJECTIVES, SamplingPlan

__all__ = [
    "OBJECTIVES",
    "OBJECTIVE_WEIGHTINGS",
    "advantage_weights",
    "allocate",
    "gradient_weight",
    "normalize",
    "objective_weight",
    "sample_weight",
]


def objective_weight(p: np.ndarray, objective: str, alpha: float, epsilon: float) -> np.ndarray:
    """w(p) = f′(p + ε) for each pass rate in `p`."""
    q = np.asarray(p, dtype=np.float64) + epsilon
    if objective == "linear":
        return np.ones_like(q)
    if objective == "log":
        return 1.0 / q
    if objective == "power":
        return alpha * q ** (alpha - 1.0)
    raise ValueError(f"objective={objective!r}: choose one of {list(OBJECTIVES)}.")


def sample_weight(p: np.ndarray, objective: str, weighting: str, alpha: float, epsilon: float) -> np.ndarray:
    """w_sample(p): the share of the weight realised by the number of samples (relative sizes only)."""
    q = np.asarray(p, dtype=np.float64)
    if weighting == "explicit":
        return np.ones_like(q)
    if weighting == "variance":
        return np.sqrt((np.clip(1.0 - q, 0.0, None) + epsilon) / (q + epsilon))
    w = objective_weight(q, objective, alpha, epsilon)
    return w if weighting == "implicit" else np.sqrt(w)


def gradient_weight(p: np.ndarray, objective: str, weighting: str, alpha: float, epsilon: float) -> np.ndarray:
    """w_grad(p): the share of the weight that multiplies the advantages (before `normalize`)."""
    q = np.asarray(p, dtype=np.float64)
    if weighting == "implicit":
        return np.ones_like(q)
    if weighting == "variance":
        return 1.0 / np.sqrt((q + epsilon) * (np.clip(1.0 - q, 0.0, None) + epsilon))
    w = objective_weight(q, objective, alpha, epsilon)
    return w if weighting == "explicit" else np.sqrt(w)


def normalize(weights: np.ndarray, sizes: Sequence[int], has_signal: Sequence[bool]) -> np.ndarray:
    """`weights` (one per prompt) divided by their mean over the trained samples of the prompts with signal.

    Each prompt counts once per trained sample (`sizes`), and only prompts whose advantages are not all zero
    (`has_signal`) enter the mean: a prompt without signal gets no gradient whatever its weight. After it, the mean
    weight of a gradient-carrying sample is 1, so the step's gradient keeps GRPO's scale. Without any prompt with
    signal the weights are returned as ones.
    """
    weights = np.asarray(weights, dtype=np.float64)
    rows = np.asarray(sizes, dtype=np.float64) * np.asarray(has_signal, dtype=bool)
    if rows.sum() == 0:
        return np.ones_like(weights)
    return weights / (np.dot(weights, rows) / rows.sum())


def _continuous_allocation(weights: np.ndarray, total: int, low: int, high: int) -> np.ndarray:
    """The real sizes clip(c · w, low, high) with the scale c that makes them sum to `total` exactly.

    The sum is piecewise linear and non-decreasing in c, with breakpoints at low/w and high/w: find the first
    breakpoint where it reaches `total` (by bisection: the last one puts every prompt at `high`, which reaches it),
    and solve the linear equation on the segment that ends there.
    """
    breaks = np.unique(np.concatenate([low / weights, high / weights]))
    first, last = 0, breaks.size - 1
    while first < last:
        probe = (first + last) // 2
        if np.clip(breaks[probe] * weights, low, high).sum() >= total:
            last = probe
        else:
            first = probe + 1
    c, previous = breaks[first], breaks[first - 1] if first else 0.0
    sizes = np.clip(c * weights, low, high)
    if sizes.sum() == total:
        return sizes
    middle = (previous + c) / 2  # inside the segment: which prompts are clipped does not change on it
    at_low, at_high = weights * middle <= low, weights * middle >= high
    free = ~at_low & ~at_high
    scale = (total - low * at_low.sum() - high * at_high.sum()) / weights[free].sum()
    return np.where(free, scale * weights, np.where(at_low, low, high)).astype(np.float64)


def allocate(weights: Sequence[float], total: int, low: int, high: int) -> np.ndarray:
    """Integer sample counts ∝ `weights`, each in [`low`, `high`], summing to `total` exactly.

    First the real allocation clip(c · w, low, high) with Σ = total (`_continuous_allocation`); then every count is
    rounded down, and the completions still missing go one each to the prompts with the largest fractional parts
    (ties to the earlier prompt). The result depends only on the inputs, so every process computes the same one.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or weights.size == 0 or not np.all(np.isfinite(weights) & (weights > 0)):
        raise ValueError(f"allocate needs one finite positive weight per prompt; got {weights!r}.")
    b = weights.size
    if not low * b <= total <= high * b:
        raise ValueError(
            f"cannot allocate {total} samples over {b} prompts with {low} to {high} each: the total must lie in "
            f"[{low * b}, {high * b}]."
        )
    real = _continuous_allocation(weights, total, low, high)
    counts = np.floor(real + 1e-9).astype(np.int64)  # Σ counts <= total: each floor is at most its real size
    missing = total - int(counts.sum())
    order = sorted((i for i in range(b) if counts[i] < high), key=lambda i: (-(real[i] - counts[i]), i))
    counts[order[:missing]] += 1
    return counts


def advantage_weights(
    plan: SamplingPlan, pass_rates: list[float], advantages: list[np.ndarray]
) -> tuple[np.ndarray, dict[str, float]]:
    """Each kept prompt's gradient weight under the plan's objective, normalised over the step (`normalize`), and
    the weight metrics: raw mean over the samples with signal, normalised max, and the share of prompts with signal
    whose pass rate is below the floor ε."""
    p, objective = np.asarray(pass_rates, dtype=np.float64), plan.objective
    raw = gradient_weight(p, objective.function, objective.weighting, objective.alpha, objective.epsilon)
    sizes = np.array([a.size for a in advantages])
    signal = np.array([bool(np.any(a != 0)) for a in advantages])
    weights = normalize(raw, sizes, signal)
    rows = sizes * signal
    metrics = {
        "weight_mean": float(np.dot(raw, rows) / rows.sum()) if rows.sum() else float("nan"),
        "weight_max": float(weights[signal].max()) if signal.any() else float("nan"),
        "floored_fraction": float(np.mean(p[signal] < objective.epsilon)) if signal.any() else float("nan"),
    }
    return weights, metrics
