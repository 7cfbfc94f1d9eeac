"""What every generation schedule shares: the trainer it serves (as `StepHost`), its plan, the step's sampler, the
state a checkpoint keeps, and the bookkeeping of scored rows.

Loads without torch and TRL, as every module of `schedules/` does (their sections are part of the plan): what runs a
step imports `_trl` inside the functions that call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..memory import PassRateMemory, prompt_keys
from ..plan import SamplingPlan
from ..sampling import AdaptiveSampler
from .outcome import Key, Sample, StepOutcome

if TYPE_CHECKING:
    from .._trl import GeneratedRows
    from ..checks import RewardGuard

__all__ = ["Schedule", "StepHost", "sampler_prior", "score_and_record"]


class StepHost(Protocol):
    """What a schedule uses of its trainer (`ReinforceAdaTrainer`), besides the `_trl` functions it calls on it."""

    args: Any  # ReinforceAdaConfig
    accelerator: Any
    state: Any
    train_dataset: Any
    reward_guard: RewardGuard
    mask_truncated_completions: bool
    pass_rate_memory: PassRateMemory | None

    def gather_row_statistics(self, rows: GeneratedRows) -> np.ndarray: ...


class Schedule:
    """A generation schedule of `trainer`: built once with it (refusing there what it cannot do), then `run` once per
    training step over the step's distinct prompts, the same on every process.

    A schedule with state across steps (the refill schedule's candidate stream) returns it from `state_dict`; the
    trainer keeps that at a generation batch's start, hands it to `save_state` in every checkpoint, and calls
    `load_state` on resume.
    """

    def __init__(self, trainer: StepHost):
        self.trainer = trainer

    @property
    def plan(self) -> SamplingPlan:
        """The trainer's sampling plan (the config resolves it once)."""
        return self.trainer.args.sampling_plan

    def run(self, step_inputs: list[dict]) -> StepOutcome:
        """Generate and score the step's completions; every process returns the same decisions."""
        raise NotImplementedError

    def new_sampler(self, step_inputs: list[dict]) -> tuple[list[dict], AdaptiveSampler]:
        """The step's prompt rows and their sampler (the section's, else `AdaptiveSampler`), with the pass-rate
        memory's posterior as prior when it is on."""
        prior = sampler_prior(self.trainer.pass_rate_memory, step_inputs)
        sampler = self.plan.section.sampler or AdaptiveSampler
        return step_inputs, sampler(len(step_inputs), self.plan, **prior)

    def end_step(self, outcome: StepOutcome) -> None:
        """After the step's groups are formed (the refill schedule consumes its candidates here)."""

    def state_dict(self) -> dict[str, Any] | None:
        """A copy of what a resumed run needs to continue this schedule exactly (None: nothing)."""
        return None

    def save_state(self, state: dict[str, Any], folder: str) -> None:
        """Write `state` (a `state_dict()`, possibly an earlier one) into the checkpoint `folder`."""

    def load_state(self, checkpoint: str) -> None:
        """Continue from the state `save_state` wrote into `checkpoint`; one clear error if it cannot."""


def sampler_prior(memory: PassRateMemory | None, inputs: list[dict]) -> dict[str, np.ndarray]:
    """The pass-rate memory's posterior of each prompt as the sampler's prior (nothing when the memory is off)."""
    if memory is None:
        return {}
    alpha, beta, hits = memory.posterior(prompt_keys([x["prompt"] for x in inputs]))
    return {"prior_alpha": alpha, "prior_beta": beta, "memory_hits": hits}


def score_and_record(
    trainer: StepHost,
    outcome: StepOutcome,
    keys: Sequence[Key],
    first: int,
    inputs: list[dict],
    prompts: list,
    generated: GeneratedRows,
) -> tuple[np.ndarray, np.ndarray]:
    """Score this process's generated rows with TRL's `_calculate_rewards` and record them in `outcome`.

    The rows are global rows `first, first + 1, ...` of a batch whose real rows are `keys` (one per completion,
    every process's); rows past `len(keys)` only even out the processes' shares and count nowhere. Records the
    rewards per function and the row statistics of every real row (gathered), and this process's samples; returns
    the guarded reward and the masked flag (truncated under `mask_truncated_completions`) of every real row.
    """
    from .. import _trl

    num_real = max(0, min(len(inputs), len(keys) - first))
    _merge_extra_fields(inputs, generated.extra_fields)
    with _trl.held_reward_metrics(trainer, outcome.logs, num_real):
        rewards = _trl.score_rows(trainer, inputs, prompts, generated)
    rewards = rewards.float().cpu().numpy()[: len(keys)]
    stats = trainer.gather_row_statistics(generated)[: len(keys)]
    extra_logs = _trl.take_extra_logs(trainer, len(inputs))
    outcome.columns.update(extra_logs)
    for key, reward, stat in zip(keys, rewards, stats, strict=True):
        outcome.rewards_per_func[key], outcome.row_stats[key] = reward, stat
    for local in range(num_real):
        outcome.samples[keys[first + local]] = _sample(generated, local, extra_logs)
    guarded = trainer.reward_guard.aggregate(rewards, generated.completions, offset=first)
    masked = stats[:, 2].astype(bool) if trainer.mask_truncated_completions else np.zeros(len(keys), dtype=bool)
    return guarded, masked


def _merge_extra_fields(inputs: list[dict], extra_fields: dict[str, Any]) -> None:
    """Give reward functions the fields `rollout_func` returned, row by row, as GRPOTrainer does."""
    for i, row in enumerate(inputs):
        for key, values in extra_fields.items():
            if not isinstance(values, list):
                row[key] = values
            elif i < len(values):
                row[key] = values[i]


def _sample(rows: GeneratedRows, local: int, extra_logs: dict[str, list]) -> Sample:
    """Row `local` of generated rows, with the `log_extra` values reward functions logged for it."""
    return Sample(
        prompt_ids=rows.prompt_ids[local],
        completion_ids=rows.completion_ids[local],
        completion=rows.completions[local],
        logprobs=None if rows.logprobs is None else rows.logprobs[local],
        images=None if rows.images is None else rows.images[local],
        tool_mask=None if rows.tool_mask is None else rows.tool_mask[local],
        tool_images=rows.tool_images[local] if rows.tool_images else [],
        extra_fields={k: v[local] if isinstance(v, list) else v for k, v in rows.extra_fields.items()},
        extra_logs={column: values[local] for column, values in extra_logs.items()},
    )
