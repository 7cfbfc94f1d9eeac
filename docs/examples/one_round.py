"""A generation schedule in one module: `generation_schedule="one_round"` (the worked example of
`docs/architecture.md`).

Every prompt draws M = `samples_per_round` completions (M >= n) in one batched round, and its group is the n its exit
rule's selection keeps (under `"balance"`: ⌊n/2⌋ positives and n − ⌊n/2⌋ negatives where the pool has them); the pool
baseline reads all M. It is the rounds schedule with N = 1, so the class that runs it is `RoundsSchedule`; what
makes it a schedule of its own is its section: its name, the fields it owns and its refusals.

In the package this module would be `trl_ada/schedules/one_round.py`, registered by one line of `SCHEDULES` in
`trl_ada/schedules/__init__.py`. From outside the package, register it before the config is built:

    SCHEDULES["one_round"] = OneRound
    config = ReinforceAdaConfig(output_dir="out", generation_schedule="one_round", samples_per_round=8)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from trl_ada.plan import SamplingPlan, Seq
from trl_ada.schedules.rounds import RoundsSchedule


@dataclass(frozen=True)
class OneRound(Seq):
    """The section: the exit rule (its selection picks the group) and M; one round, so `max_rounds` is 1."""

    name: ClassVar[str] = "one_round"
    summary: ClassVar[str] = "one round of samples_per_round completions per prompt, then each group is selected"
    choose: ClassVar[str] = "use generation_schedule='one_round'"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "max_rounds", 1)  # the sampler reads N from the section

    def schedule_class(self) -> type[RoundsSchedule]:
        return RoundsSchedule

    def check(self, plan: SamplingPlan) -> None:
        if self.samples_per_round < plan.num_generations:
            raise ValueError(
                f"samples_per_round={self.samples_per_round!r}: generation_schedule='one_round' draws one round, "
                f"which must fill a group of num_generations={plan.num_generations}. Set samples_per_round >= "
                f"{plan.num_generations}."
            )
        super().check(plan)

    def unused(self, num_generations: int) -> dict[str, Any]:
        return {**super().unused(num_generations), "max_rounds": 1}

    def unused_message(self, name: str, value: Any, agrees: Any, context: Any) -> str:
        return (
            f"{name}={value!r} has no effect under generation_schedule='one_round': it draws one round per step. "
            f"Remove {name} (or set it to {agrees!r}), or use generation_schedule='rounds'."
        )
