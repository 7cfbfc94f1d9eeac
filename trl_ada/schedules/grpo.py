"""Plain GRPO sampling: one round of exactly n completions per prompt, every one trained.

`exit_rule="none"` selects it (as does `sampling="grpo"`); it has no field of its own. The trainer runs it with the
rounds loop and `AdaptiveSampler`, which reads it as one round of n with the exit rule `none` (`Exits`), so plain GRPO
goes through the same code path as Reinforce-Ada. The asynchronous worker's `PromptGrpo` requests each prompt's n
completions a chunk at a time. Loads without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

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
    by `exit_rule="none"` or `sampling="grpo"`)."""

    name: ClassVar[str] = "grpo"
    selected_by: ClassVar[dict[str, str]] = {"exit_rule": "none"}
    samples_adaptively: ClassVar[bool] = False

    def exits(self, num_generations: int) -> Exits:
        """One round of n, no exit rule."""
        return Exits("none", num_generations, 1)

    def schedule_class(self) -> type[Schedule]:
        return RoundsSchedule


@register(host=ASYNCHRONOUS)
@dataclass(frozen=True)
class PromptGrpo(Grpo, Requests):
    """Plain GRPO in the asynchronous worker: each prompt requests its n completions, a chunk at a time."""

    def in_flight(self, num_generations: int) -> int:
        """All n completions of a prompt are in flight at once."""
        return num_generations
