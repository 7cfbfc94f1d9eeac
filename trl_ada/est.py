"""Reinforce-Ada-Est (the paper's Algorithm 1): one step's allocation and its single round. Pure numpy, no torch.

Before sampling, each prompt x has the estimate p̂_x = (N_pos + α) / (N_total + α + β) of the pass-rate memory
(Ada-EMA: `PassRateMemory` with decay λ and prior Beta(α, β)). The step's B·n samples are split over its B prompts
∝ the objective's sample weight at p̂ (1/√(p̂ + ε) under the log objective with hybrid weighting), each within
[N_min, N_max] (`objectives.allocate`); one round draws them, and every sample reaches the loss. The pool of a prompt
is its group, so the pool baseline is r̄_x, the mean of the prompt's samples in the step.

    sampler = EstSampler(B, plan, prior_alpha=alpha, prior_beta=beta)
    sampler.plan_round()       # every prompt; sampler.plan_sizes == sampler.allocation
    sampler.ingest(rewards)    # sum(allocation) rewards, prompt-major
    sampler.select_groups()    # every pool index of every prompt: groups of different sizes
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .objectives import allocate, sample_weight
from .plan import SamplingPlan
from .sampling import AdaptiveSampler

__all__ = ["LOW_PASS_RATE", "EstSampler", "est_allocation"]

LOW_PASS_RATE = 0.1
"""Prompts estimated below this pass rate count as hard in the allocation metrics."""


def est_allocation(estimates: Sequence[float], plan: SamplingPlan) -> np.ndarray:
    """Samples per prompt: B·n split ∝ the plan's sample weight at each estimate, within the plan's [N_min, N_max]."""
    p = np.asarray(estimates, dtype=np.float64)
    weights = sample_weight(p, plan.objective, plan.objective_weighting, plan.objective_alpha, plan.objective_epsilon)
    low, high = plan.est_bounds
    return allocate(weights, p.size * plan.num_generations, low, high)


class EstSampler(AdaptiveSampler):
    """One Est step over `num_prompts` prompts with the memory's posterior Beta(`prior_alpha`, `prior_beta`) each.

    The interface of [`AdaptiveSampler`] with one round: `plan_round` plans every prompt with its allocation, and
    after `ingest` every prompt has exited (round 1) and keeps its whole pool.
    """

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan,
        *,
        prior_alpha: Sequence[float],
        prior_beta: Sequence[float],
        memory_hits: Sequence[bool] | None = None,
    ):
        super().__init__(num_prompts, plan, prior_alpha=prior_alpha, prior_beta=prior_beta, memory_hits=memory_hits)
        self.estimating = True  # groups differ in size: the first-round reward weighs prompts equally
        self.estimates = self.prior_alpha / (self.prior_alpha + self.prior_beta)
        self.allocation = est_allocation(self.estimates, plan)

    @property
    def done(self) -> bool:
        """After the one round."""
        return self.round >= 1

    def plan_round(self) -> list[int]:
        """Every prompt, with its allocated number of samples (`plan_sizes`)."""
        if self.done:
            raise RuntimeError("Est samples one round per step; it is done.")
        self._plan = list(range(self.num_prompts))
        self._plan_sizes = [int(size) for size in self.allocation]
        return list(self._plan)

    def ingest(self, rewards: Sequence[float], masked: Sequence[bool] | None = None) -> list[int]:
        """Add the round's rewards (prompt-major, `allocation` per prompt); every prompt leaves sampling."""
        super().ingest(rewards, masked)
        self.exit_round = [1] * self.num_prompts
        return list(range(self.num_prompts))

    def candidates(self, prompt: int) -> list[int]:
        """Every sample is trained."""
        return list(range(len(self.pools[prompt])))

    def select_groups(self) -> list[list[int]]:
        """Each prompt's whole pool: groups of the allocated sizes."""
        if not self.done:
            raise RuntimeError("Groups are formed once sampling is done.")
        return [list(range(len(pool))) for pool in self.pools]

    def kept_rewards(self) -> list[np.ndarray]:
        """Per prompt, the rewards of its samples (groups differ in size)."""
        return [np.asarray(pool, dtype=np.float64) for pool in self.pools]

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """The sampler's numbers plus the allocation and the estimator's calibration (`est/...`)."""
        metrics = super().metrics(prefix)
        metrics.update({f"{prefix}est/{name}": value for name, value in self.allocation_metrics().items()})
        return metrics

    def allocation_metrics(self) -> dict[str, Any]:
        """Samples per prompt (min, mean, max), the budget's share on prompts with p̂ < 0.1, and calibration: the
        mean estimate against the pass rate realised in the step, and their mean absolute difference per prompt."""
        sizes = self.allocation
        low = self.estimates < LOW_PASS_RATE
        realized = np.array([self.first_round_pass_rate(p) for p in range(self.num_prompts)])
        seen = ~np.isnan(realized)
        return {
            "samples_min": float(sizes.min()),
            "samples_mean": float(sizes.mean()),
            "samples_max": float(sizes.max()),
            "low_pass_share": float(sizes[low].sum() / sizes.sum()),
            "predicted_pass_rate": float(self.estimates.mean()),
            "realized_pass_rate": float(realized[seen].mean()) if seen.any() else float("nan"),
            "calibration_error": float(np.abs(self.estimates - realized)[seen].mean()) if seen.any() else float("nan"),
        }
