"""A simulated policy: prompts with given pass rates and Bernoulli 0/1 rewards, no model.

It drives the sampling core end to end for tests and for `benchmarks/sampling_efficiency.py`: one step over fixed
pass rates (`simulate_step`), or many steps over a dataset whose pass rates move as training would
(`LearningPrompts`), with an optional `PassRateMemory` carried from step to step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .candidates import RefillSampler, skip_before_rollout
from .memory import PassRateMemory
from .plan import SamplingPlan
from .sampling import AdaptiveSampler, plan_with

__all__ = ["LearningPrompts", "SimulatedPolicy", "SkipRule", "simulate_refill_step", "simulate_step"]

PRIOR_FIELDS = ("prior_alpha", "prior_beta", "memory_hits")
"""Keyword arguments of `simulate_step` that are the sampler's priors, not plan fields."""
SkipRule = Callable[[SamplingPlan, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""(plan, alpha, beta, memory hits, skip streaks, uniforms) -> skipped flags: `skip_before_rollout`'s signature."""


@dataclass
class SimulatedPolicy:
    """Prompt i is answered correctly with probability `pass_rates[i]`, independently per sample."""

    pass_rates: Sequence[float]
    seed: int = 0

    def __post_init__(self) -> None:
        rates = np.asarray(self.pass_rates, dtype=np.float64)
        if rates.ndim != 1 or rates.size == 0 or np.any((rates < 0) | (rates > 1)) or not np.all(np.isfinite(rates)):
            raise ValueError(
                f"pass_rates must be a non-empty list of probabilities in [0, 1]; got {self.pass_rates!r}."
            )
        self.pass_rates = rates
        self.rng = np.random.default_rng(self.seed)

    def sample(self, prompts: Sequence[int], samples_per_prompt: int | Sequence[int]) -> np.ndarray:
        """0/1 rewards, prompt-major: `samples_per_prompt` draws (one count, or one per prompt) for each prompt."""
        p = np.repeat(self.pass_rates[np.asarray(prompts, dtype=int)], samples_per_prompt)
        return (self.rng.random(p.size) < p).astype(np.float64)


def simulate_step(
    policy: SimulatedPolicy,
    memory: PassRateMemory | None = None,
    prompt_ids: Sequence[int] | None = None,
    plan: SamplingPlan | None = None,
    **plan_fields,
) -> AdaptiveSampler:
    """Run one step of adaptive sampling over all of the policy's prompts; returns the finished sampler.

    `plan` (or `plan_fields`, which build or change one) says how; `prior_alpha`, `prior_beta` and `memory_hits` among
    them go to the sampler, as its priors. The sampler is the section's own (`Section.sampler`: Est's `EstSampler`, one
    allocated round that needs a `memory`), else an [`AdaptiveSampler`]. With a `memory`, prompt i is remembered under
    the key `prompt_ids[i] + 1` (default: i + 1): its posterior is the sampler's prior, and the step's pool counts are
    written back as one visit.
    """
    prior = {name: plan_fields.pop(name) for name in PRIOR_FIELDS if name in plan_fields}  # the sampler's own
    plan = plan_with(plan, plan_fields)
    if memory is not None:
        ids = np.arange(len(policy.pass_rates)) if prompt_ids is None else np.asarray(prompt_ids)
        keys = ids.astype(np.uint64) + np.uint64(1)
        alpha, beta, hits = memory.posterior(keys)
        prior = {"prior_alpha": alpha, "prior_beta": beta, "memory_hits": hits}
    sampler = (plan.section.sampler or AdaptiveSampler)(len(policy.pass_rates), plan, **prior)
    while not sampler.done:
        prompts = sampler.plan_round()
        sampler.ingest(policy.sample(prompts, sampler.plan_sizes))
    if memory is not None:
        counts = np.array([sampler.counts(p) for p in range(sampler.num_prompts)])
        memory.update(keys, counts[:, 0], counts[:, 1])
    return sampler


def simulate_refill_step(
    policy: SimulatedPolicy,
    num_kept: int,
    memory: PassRateMemory | None = None,
    prompt_ids: Sequence[int] | None = None,
    plan: SamplingPlan | None = None,
    skip_rule: SkipRule = skip_before_rollout,
    **plan_fields,
) -> RefillSampler:
    """One step over the policy's prompts as candidates (in order), keeping `num_kept`; returns the finished sampler.

    With a `memory` (keys as in `simulate_step`), candidates are skipped before rollout by `skip_rule` (default
    `skip_before_rollout`, with the plan's skip fields; `skip_exploration` is 0 unless given: the simulation explores
    only when asked; draws from the policy's generator), every sampled candidate's pool is written back as one
    visit, and every skip to the candidate's skip streak.
    """
    num = len(policy.pass_rates)
    plan = plan_with(plan, plan_fields if plan is not None else {"skip_exploration": 0.0, **plan_fields})
    skipped, prior = None, {}
    if memory is not None:
        ids = np.arange(num) if prompt_ids is None else np.asarray(prompt_ids)
        keys = ids.astype(np.uint64) + np.uint64(1)
        alpha, beta, hits = memory.posterior(keys)
        uniforms = policy.rng.random(num)
        skipped = skip_rule(plan, alpha, beta, hits, memory.skip_streaks(keys), uniforms)
        prior = {"prior_alpha": alpha, "prior_beta": beta, "memory_hits": hits}
    sampler = RefillSampler(num, plan, num_kept=num_kept, skipped=skipped, **prior)
    while not sampler.done:
        prompts = sampler.plan_round()
        sampler.ingest(policy.sample(prompts, sampler.plan_sizes))
    if memory is not None:
        sampled = np.array([p for p in range(num) if sampler.pools[p]], dtype=int)
        counts = np.array([sampler.counts(p) for p in sampled]).reshape(-1, 2)
        memory.update(keys[sampled], counts[:, 0], counts[:, 1])
        memory.record_skips(keys[sampler.skipped_prompts()])
    return sampler


@dataclass
class LearningPrompts:
    """A dataset whose pass rates move as training would, driven by the effective groups a sampler produces.

    Each prompt has a logit z = log(p / (1 − p)). After every step, each prompt that was trained with an effective
    (mixed) group gets z += `learn_rate` (it was learned from), and every solvable prompt gets z += `transfer`
    (what is learned on some prompts carries over to others). Unsolvable prompts (p = 0) stay at 0, and p = 1 stays 1.
    """

    pass_rates: Sequence[float]
    learn_rate: float = 0.5
    transfer: float = 0.02

    def __post_init__(self) -> None:
        rates = np.asarray(self.pass_rates, dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.logits = np.log(rates) - np.log1p(-rates)

    @property
    def current(self) -> np.ndarray:
        """Current pass rates."""
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-self.logits))

    def learn(self, prompts: Sequence[int], effective: Sequence[bool]) -> None:
        """One training step on `prompts`; `effective[i]`: did prompt `prompts[i]` have a mixed group?"""
        prompts = np.asarray(prompts, dtype=int)
        self.logits[prompts[np.asarray(effective, dtype=bool)]] += self.learn_rate
        solvable = np.isfinite(self.logits)
        self.logits[solvable] += self.transfer
