"""What every generation schedule shares: the trainer it serves (as `StepHost`), its plan, the step's sampler, the
state a checkpoint keeps, and what it hands back for a step (`StepOutcome`: the sampler's decisions and the samples
behind them).

Loads without torch and TRL, as every module of `schedules/` does (their sections are part of the plan): a step's
rounds reach TRL through the `_trl.TRLRounds` the trainer hands to `run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..memory import PassRateMemory, prompt_keys
from ..plan import SamplingPlan
from ..sampling import AdaptiveSampler, PromptPools

if TYPE_CHECKING:
    from .._trl import GeneratedRows, RoundScores, TRLRounds
    from ..checks import RewardGuard

__all__ = ["Key", "Sample", "Schedule", "StepHost", "StepOutcome", "sampler_prior"]

Key = tuple[int, int]
"""(prompt, pool index): one completion of the step, by the sampler's prompt numbering and its request order."""


@dataclass
class Sample:
    """One generated completion (or episode), kept by the process that generated it until groups are formed."""

    prompt_ids: list[int]
    completion_ids: list[int]
    completion: Any
    logprobs: list[float] | None
    images: Any = None
    tool_mask: list[int] | None = None
    tool_images: list = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)
    extra_logs: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepOutcome:
    """One step's generation, whatever the schedule: the finished sampler over `inputs` (its prompt rows, candidates
    included) and, per completion in its pool, the rewards per function and the row statistics (every process), and
    the sample itself (the process that generated it, as long as a group may still keep it)."""

    inputs: list[dict]
    sampler: PromptPools
    samples: dict[Key, Sample] = field(default_factory=dict)
    rewards_per_func: dict[Key, np.ndarray] = field(default_factory=dict)
    row_stats: dict[Key, np.ndarray] = field(default_factory=dict)  # prompt length, completion length, truncated
    columns: set[str] = field(default_factory=set)  # log_extra columns some round logged
    metrics: dict[str, float] = field(default_factory=dict)  # the schedule's own (generation time, requests)

    def record(self, keys: list[Key], first: int, rows: GeneratedRows, scores: RoundScores) -> None:
        """Record a round's scored rows: every real row's rewards and statistics (`keys`, every process's), and the
        samples this process generated, the round's rows `first, first + 1, ...` (past `keys`: padding)."""
        self.columns.update(scores.extra_logs)
        for key, reward, stat in zip(keys, scores.rewards_per_func, scores.row_stats, strict=True):
            self.rewards_per_func[key], self.row_stats[key] = reward, stat
        for local in range(max(0, min(len(rows.completions), len(keys) - first))):
            self.samples[keys[first + local]] = _sample(rows, local, scores.extra_logs)

    def keep_selectable(self, prompts: list[int]) -> None:
        """Drop samples of `prompts` that group selection can no longer keep, so a step holds O(n) per prompt."""
        for j in prompts:
            keep = set(self.sampler.candidates(j))
            for i in range(len(self.sampler.pools[j])):
                if i not in keep:
                    self.samples.pop((j, i), None)

    def pool_rewards_per_func(self, num_funcs: int) -> list[np.ndarray]:
        """Per prompt, (pool size, reward functions): the rewards of everything drawn, in pool order."""
        return [
            np.stack([self.rewards_per_func[(j, i)] for i in range(len(pool))]) if pool else np.empty((0, num_funcs))
            for j, pool in enumerate(self.sampler.pools)
        ]

    def kept(self) -> list[Key]:
        """The completions that reach the loss, in TRL's row order: kept prompts in order, each its group."""
        groups = self.sampler.select_groups()
        return [(j, i) for j, group in zip(self.sampler.kept_prompts(), groups, strict=True) for i in group]

    def used_tokens(self) -> int:
        """Completion tokens of every sample in the pools (what the sampler used)."""
        return sum(
            int(self.row_stats[(j, i)][1]) for j, pool in enumerate(self.sampler.pools) for i in range(len(pool))
        )


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


class StepHost(Protocol):
    """What a schedule uses of its trainer (`ReinforceAdaTrainer`) besides the step's `_trl.TRLRounds`, and the `_trl`
    functions a schedule's construction calls on it."""

    args: Any  # ReinforceAdaConfig
    accelerator: Any
    state: Any
    train_dataset: Any
    reward_guard: RewardGuard
    mask_truncated_completions: bool
    pass_rate_memory: PassRateMemory | None
    sampling_plan: SamplingPlan  # the plan it trains, resolved when it was built


class Schedule:
    """A generation schedule of `trainer`: built once with it (refusing there what it cannot do), then `run` once per
    training step over the step's distinct prompts, the same on every process.

    `rounds` generates a round's rows (`rounds.generate`) and scores them (`rounds.score`) with TRL's own code.
    A schedule with state across steps (the refill schedule's candidate stream) returns it from `state_dict`; the
    trainer keeps that at a generation batch's start, hands it to `save_state` in every checkpoint, and calls
    `load_state` on resume.
    """

    def __init__(self, trainer: StepHost):
        self.trainer = trainer

    @property
    def plan(self) -> SamplingPlan:
        """The plan the trainer trains (resolved when it was built)."""
        return self.trainer.sampling_plan

    def run(self, step_inputs: list[dict], rounds: TRLRounds) -> StepOutcome:
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
