"""A generation schedule in one module: `generation_schedule="one_round"` (the worked example of
`docs/architecture.md`).

Every prompt draws M = `samples_per_round` completions (M >= n) in one batched round, and its group is the n its exit
rule's selection keeps (under `"balance"`: ⌊n/2⌋ positives and n − ⌊n/2⌋ negatives where the pool has them); the pool
baseline reads all M. The sampler reads it as one round of M (`exits`), so the class that runs it is the rounds
schedule's; what makes it a schedule of its own is its section: its name and the fields it owns. Every other field
(`max_rounds`, `streaming_window`, ...) is refused under it by the generic refusal, which names the schedules that
use the field.

In the package this module would be `trl_ada/schedules/one_round.py`, its class decorated with `@register`. From
outside the package, register it with one line before the config is built:

    register(OneRound)
    config = ReinforceAdaConfig(output_dir="out", generation_schedule="one_round", samples_per_round=8)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trl_ada.plan import SamplingPlan, Section
from trl_ada.sampling import get_exit_rule
from trl_ada.schedules.rounds import RoundsSchedule
from trl_ada.seq import Exits, exit_rule_option, samples_per_round_option


@dataclass(frozen=True)
class OneRound(Section):
    """One round of `samples_per_round` (M >= n) completions per prompt, then each group is selected by the exit
    rule."""

    name: ClassVar[str] = "one_round"

    exit_rule: str = exit_rule_option()
    samples_per_round: int = samples_per_round_option()

    def exits(self, num_generations: int) -> Exits:
        return Exits(self.exit_rule, self.samples_per_round, 1)  # what `AdaptiveSampler` reads: N = 1

    def schedule_class(self) -> type[RoundsSchedule]:
        return RoundsSchedule

    def check(self, plan: SamplingPlan) -> None:
        get_exit_rule(self.exit_rule)  # a ValueError listing the valid names
        if self.samples_per_round < plan.num_generations:
            raise ValueError(
                f"samples_per_round={self.samples_per_round!r}: generation_schedule='one_round' draws one round, "
                f"which must fill a group of num_generations={plan.num_generations}. Set samples_per_round >= "
                f"{plan.num_generations}."
            )
