"""Reinforce-Ada-Est (the paper's Algorithm 1): one step's allocation and its single round, on every backend.

Before sampling, each prompt x has the estimate p̂_x = (N_pos + α) / (N_total + α + β) of the pass-rate memory
(Ada-EMA: `PassRateMemory` with decay λ and prior Beta(α, β)). The step's B·n samples are split over its B prompts
∝ the objective's sample weight at p̂ (1/√(p̂ + ε) under the log objective with hybrid weighting), each within
[N_min, N_max] (`objectives.allocate`); one round draws them, and every sample reaches the loss. The pool of a prompt
is its group, so the pool baseline is r̄_x, the mean of the prompt's samples in the step.

    sampler = EstSampler(B, plan, prior_alpha=alpha, prior_beta=beta)
    sampler.plan_round()       # every prompt; sampler.plan_sizes == sampler.allocation
    sampler.ingest(rewards)    # sum(allocation) rewards, prompt-major
    sampler.select_groups()    # every pool index of every prompt: groups of different sizes

The section, `Est`, holds the bounds [N_min, N_max] and names its sampler; the trainer runs it with the rounds loop
(one round, split over the processes at sample level like any round). The asynchronous worker's section, `PromptEst`,
allocates a wave of prompts together (`est_allocation`) and lets each prompt's `EstSampler` take its results as they
arrive (`schedules.streaming.RequestWindow`, whose cap for the prompt is its allocation). Loads without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..groups import reward_values
from ..objectives import allocate, sample_weight
from ..plan import ASYNCHRONOUS, SCHEDULING, SamplingPlan, Section, defaults, register
from ..records import option
from ..sampling import PromptPools, masked_flags
from .base import Schedule
from .rounds import RoundsSchedule
from .streaming import Requests

__all__ = ["LOW_PASS_RATE", "Est", "EstSampler", "PromptEst", "est_allocation"]

LOW_PASS_RATE = 0.1
"""Prompts estimated below this pass rate count as hard in the allocation metrics."""


def est_allocation(estimates: Sequence[float], plan: SamplingPlan) -> np.ndarray:
    """Samples per prompt: B·n split ∝ the plan's sample weight at each estimate, within the Est section's
    [N_min, N_max]."""
    p = np.asarray(estimates, dtype=np.float64)
    objective = plan.objective
    weights = sample_weight(p, objective.function, objective.weighting, objective.alpha, objective.epsilon)
    low, high = plan.section.bounds(plan.num_generations)
    return allocate(weights, p.size * plan.num_generations, low, high)


class EstSampler(PromptPools):
    """One Est step over `num_prompts` prompts with the memory's posterior Beta(`prior_alpha`, `prior_beta`) each.

    The interface of [`AdaptiveSampler`] with one round: `plan_round` plans every prompt with its allocation
    (`est_allocation` of the posterior means, or the given `allocation`), and after `ingest` every prompt has exited
    (round 1) and keeps its whole pool. Results that arrive one by one (`add_sample`, driven by a
    `RequestWindow`) fill each prompt's allocation the same way.
    """

    def __init__(
        self,
        num_prompts: int,
        plan: SamplingPlan,
        *,
        prior_alpha: Sequence[float],
        prior_beta: Sequence[float],
        memory_hits: Sequence[bool] | None = None,
        allocation: Sequence[int] | None = None,
    ):
        super().__init__(num_prompts, plan, prior_alpha=prior_alpha, prior_beta=prior_beta, memory_hits=memory_hits)
        self.estimating = True  # groups differ in size: the first-round reward weighs prompts equally
        self.estimates = self.prior_alpha / (self.prior_alpha + self.prior_beta)
        if allocation is None:
            allocation = est_allocation(self.estimates, plan)
        self.allocation = np.asarray(allocation, dtype=np.int64)
        if self.allocation.shape != (num_prompts,) or (self.allocation < 1).any():
            raise ValueError(f"allocation={list(allocation)!r}: one number of samples >= 1 per prompt.")

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
        if self._plan is None:
            raise RuntimeError("Call plan_round() before ingest().")
        values = reward_values(rewards, sum(self._plan_sizes))
        flags = masked_flags(masked, len(values))
        start = 0
        for prompt, size in zip(self._plan, self._plan_sizes, strict=True):
            self.first_round_sizes[prompt] = size
            self.pools[prompt].extend(values[start : start + size].tolist())
            self.masked[prompt].extend(flags[start : start + size])
            start += size
        self.round, self.exit_round = 1, [1] * self.num_prompts
        self._plan, self._plan_sizes = None, []
        return list(range(self.num_prompts))

    # -- results arriving one by one (the asynchronous worker) ---------------------------------

    def cap_of(self, prompt: int) -> int:
        """The prompt's allocation: it samples exactly this many."""
        return int(self.allocation[prompt])

    def round_of(self, count: int) -> int:
        """Every sample belongs to the one round."""
        return 1

    def budget_room(self, prompt: int, requested: Sequence[int]) -> int:
        """No budget beyond the allocation."""
        return self.cap_of(prompt)

    def add_sample(self, prompt: int, reward: float, masked: bool = False, round: int = 1) -> bool:
        """Append one completion's reward to the pool of `prompt` (the next in its request order); True once the
        pool holds its allocation."""
        if not self.is_active(prompt):
            raise RuntimeError(f"Prompt {prompt} has its allocation; its pool takes no more completions.")
        self.pools[prompt].append(float(reward_values([reward], 1)[0]))
        self.masked[prompt].append(bool(masked))
        if len(self.pools[prompt]) < self.cap_of(prompt):
            return False
        self.exit_round[prompt] = 1
        return True

    def close(self, rounds: int) -> None:
        """End a step driven by `add_sample`: the one round."""
        self.round = 1
        self.first_round_sizes = [len(pool) for pool in self.pools]

    # -- groups --------------------------------------------------------------------------------

    def candidates(self, prompt: int) -> list[int]:
        """Every sample is trained."""
        return list(range(len(self.pools[prompt])))

    def select_groups(self) -> list[list[int]]:
        """Each prompt's whole pool: groups of the allocated sizes."""
        if not self.done:
            raise RuntimeError("Groups are formed once sampling is done.")
        return [list(range(len(pool))) for pool in self.pools]

    def group_among(self, prompt: int, eligible: Sequence[int]) -> list[int]:
        """The prompt's group when only the `eligible` pool indices may be trained: the whole pool, or nothing (an
        allocation is never trained in part)."""
        return list(range(len(self.pools[prompt]))) if len(eligible) == len(self.pools[prompt]) else []

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


@register
@dataclass(frozen=True)
class Est(Section):
    """Reinforce-Ada-Est, every backend: one batched call per step, the step's B·n samples split over its prompts by
    the memory's estimates, every sample trained.

    The section holds the fewest and most samples one prompt is allocated in a step."""

    name: ClassVar[str] = "est"
    group: ClassVar[str] = SCHEDULING
    sampler: ClassVar[type] = EstSampler
    allocates_samples: ClassVar[bool] = True
    all_negative: ClassVar[str] = (
        "the pass-rate memory counts every prompt as unsolved: its estimates fall towards 0 and the allocation of "
        "each step's one round (num_generations samples per prompt on average) cannot tell the prompts apart."
    )

    min_samples: int = option(
        2,
        "Est: N_min, the fewest samples a prompt is allocated, in [2, n].",
        flat="est_min_samples",
        within="[2, inf)",  # at most n: `check`
    )
    max_samples: int | None = option(
        None,
        "Est: N_max, the most samples a prompt is allocated, at least n; None = 4n.",
        flat="est_max_samples",
        within="[2, inf)",  # at least n: `check`
    )

    def bounds(self, num_generations: int) -> tuple[int, int]:
        """[N_min, N_max]: the fewest and most samples Est allocates to one prompt (N_max defaults to 4n)."""
        high = 4 * num_generations if self.max_samples is None else self.max_samples
        return self.min_samples, high

    def schedule_class(self) -> type[Schedule]:
        return RoundsSchedule  # one round, the `EstSampler`'s

    def check(self, plan: SamplingPlan) -> None:
        """Est samples one allocated round from the memory: bounds that can meet the total B·n."""
        n = plan.num_generations
        if not plan.memory.enabled:
            raise ValueError(
                "generation_schedule='est' allocates each step from the pass-rate memory's estimates, but "
                "pass_rate_memory=False. Set pass_rate_memory=True (sampling='est' does), or use "
                "generation_schedule='rounds'."
            )
        low, high = self.min_samples, self.max_samples
        if low > n:
            raise ValueError(
                f"est_min_samples={low} is more than num_generations={n}: a step allocates n samples per prompt on "
                f"average, so B prompts cannot all get {low}. Lower est_min_samples to at most {n}."
            )
        if self.bounds(n)[1] < n:
            raise ValueError(
                f"est_max_samples={high} is less than num_generations={n}: a step allocates n samples per prompt on "
                f"average, so B prompts with at most {high} each cannot meet the total. Raise est_max_samples to at "
                f"least {n}, or leave it None (4 * num_generations)."
            )


@register(host=ASYNCHRONOUS)
@dataclass(frozen=True)
class PromptEst(Est, Requests):
    """Reinforce-Ada-Est in the asynchronous worker: a wave of prompts allocated together, each requesting its
    allocation a chunk at a time."""

    def in_flight(self, num_generations: int) -> int:
        """Prompts in flight are counted per window of `samples_per_round`'s default (8)."""
        return defaults()["samples_per_round"]
