"""Plain GRPO sampling: one round of exactly n completions per prompt, every one trained.

`sampling="grpo"` selects it (as does `generation_schedule="grpo"`); it has no field of its own. The trainer runs it
with the rounds loop and `AdaptiveSampler`, which reads it as one round of n under the exit rule `NONE`, always met
(`Exits`), so plain GRPO goes through the same code path as Reinforce-Ada. The asynchronous worker's `PromptGrpo`
requests each prompt's n completions a chunk at a time. Loads without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..exit_rules import NONE
from ..plan import ASYNCHRONOUS, Section, register
from ..seq import Exits
from .base import Schedule
from .rounds import RoundsSchedule
from .streaming import Requests

__all__ = ["Grpo", "PromptGrpo"]


@register
@dataclass(frozen=True)
class Grpo(Section):
    """Plain GRPO sampling, every backend: one round of exactly n per prompt through the same code path (selected
    by `sampling="grpo"`)."""

    name: ClassVar[str] = "grpo"
    samples_adaptively: ClassVar[bool] = False

    def exits(self, num_generations: int) -> Exits:
        """One round of n, every prompt leaving after it (`NONE`, always met)."""
        return Exits(NONE.name, num_generations, 1)

    def schedule_class(self) -> type[Schedule]:
        return RoundsSchedule


@register(host=ASYNCHRONOUS)
@dataclass(frozen=True)
class PromptGrpo(Grpo, Requests):
    """Plain GRPO in the asynchronous worker: each prompt requests its n completions, a chunk at a time."""

    def in_flight(self, num_generations: int) -> int:
        """All n completions of a prompt are in flight at once."""
        return num_generations
