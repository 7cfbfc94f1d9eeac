"""The Est schedule (Reinforce-Ada-Est): the rounds schedule with one round, allocated from the pass-rate memory.

The step's B·n samples are split over its B prompts by the memory's estimates (`trl_ada.est.EstSampler`); the one
round is one batched generation call on every backend, split over the processes at sample level like any round, and
every sample reaches the loss in groups of the allocated sizes.
"""

from __future__ import annotations

from ..est import EstSampler
from .base import sampler_prior
from .rounds import RoundsSchedule

__all__ = ["EstSchedule"]


class EstSchedule(RoundsSchedule):
    """One allocated round per step (`EstSampler`), run by the rounds loop."""

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], EstSampler]:
        """The step's prompts and their Est sampler, allocated from the memory's posterior of each."""
        prior = sampler_prior(self.trainer.pass_rate_memory, step_inputs)
        return step_inputs, EstSampler(len(step_inputs), self.plan, **prior)
