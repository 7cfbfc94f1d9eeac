"""A simulated policy: prompts with fixed pass rates and Bernoulli 0/1 rewards, no model.

It drives the sampling core end to end for tests and for `benchmarks/sampling_efficiency.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .sampling import AdaptiveSampler

__all__ = ["SimulatedPolicy", "simulate_step"]


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

    def sample(self, prompts: Sequence[int], samples_per_prompt: int) -> np.ndarray:
        """0/1 rewards, prompt-major: `samples_per_prompt` draws for each prompt in `prompts`."""
        p = np.repeat(self.pass_rates[np.asarray(prompts, dtype=int)], samples_per_prompt)
        return (self.rng.random(p.size) < p).astype(np.float64)


def simulate_step(policy: SimulatedPolicy, **sampler_kwargs) -> AdaptiveSampler:
    """Run one step of adaptive sampling over all of the policy's prompts; returns the finished sampler."""
    sampler = AdaptiveSampler(num_prompts=len(policy.pass_rates), **sampler_kwargs)
    while not sampler.done:
        prompts = sampler.plan_round()
        sampler.ingest(policy.sample(prompts, sampler.samples_per_round))
    return sampler
