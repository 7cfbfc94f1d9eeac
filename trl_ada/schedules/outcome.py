"""What a generation schedule hands back for one step: the sampler's decisions and the samples behind them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..sampling import PromptPools

if TYPE_CHECKING:
    from .._trl import RoundLogs

__all__ = ["Key", "Sample", "StepOutcome"]

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
    logs: RoundLogs = field(default_factory=lambda: _round_logs())
    columns: set[str] = field(default_factory=set)  # log_extra columns some round logged
    metrics: dict[str, float] = field(default_factory=dict)  # the schedule's own (generation time, requests)

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


def _round_logs() -> RoundLogs:
    """Empty accumulators of what TRL logs while a step generates (`_trl.RoundLogs`, loaded with the trainer)."""
    from .._trl import RoundLogs

    return RoundLogs()
