"""What every generation schedule shares: the trainer it serves (as `StepHost`), its plan, and the step's sampler."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .._trl import GeneratedRows
from ..checks import RewardGuard
from ..memory import PassRateMemory
from ..plan import SamplingPlan
from ..refill import CandidateStream
from ..sampling import AdaptiveSampler
from .outcome import StepOutcome

__all__ = ["Schedule", "StepHost"]


class StepHost(Protocol):
    """What a schedule uses of its trainer (`ReinforceAdaTrainer`), besides the `_trl` functions it calls on it."""

    args: Any  # ReinforceAdaConfig
    accelerator: Any
    state: Any
    train_dataset: Any
    reward_guard: RewardGuard
    mask_truncated_completions: bool
    candidate_stream: CandidateStream | None
    pass_rate_memory: PassRateMemory | None

    def memory_prior(self, inputs: list[dict]) -> dict[str, np.ndarray]: ...

    def gather_row_statistics(self, rows: GeneratedRows) -> np.ndarray: ...


class Schedule:
    """A generation schedule of `trainer`: built once with it (refusing there what it cannot do), then `run` once per
    training step over the step's distinct prompts, the same on every process."""

    def __init__(self, trainer: StepHost):
        self.trainer = trainer

    @property
    def plan(self) -> SamplingPlan:
        """The trainer's sampling plan, as its config says now."""
        return self.trainer.args.sampling_plan

    def run(self, step_inputs: list[dict]) -> StepOutcome:
        """Generate and score the step's completions; every process returns the same decisions."""
        raise NotImplementedError

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], AdaptiveSampler]:
        """The step's prompt rows and their sampler, with the pass-rate memory's posterior as prior when it is on."""
        return step_inputs, AdaptiveSampler(len(step_inputs), self.plan, **self.trainer.memory_prior(step_inputs))

    def end_step(self, outcome: StepOutcome) -> None:
        """After the step's groups are formed (the refill schedule consumes its candidates here)."""
