"""Sections that decide exits (the paper's Reinforce-Ada-Seq) and what `AdaptiveSampler` reads of them (`Exits`).

Pure Python (no numpy, no torch, no TRL). A prompt samples until its pool meets the exit rule, M completions at a
time, at most M·N, or until it is futile; rounds may be sized from the pass-rate posterior (`PriorSizing`) and a
step capped by a budget. `Seq` holds the fields every such section has; a section adds the rest as fields of its own
and says so in `exits`. Plain GRPO (`schedules/grpo.py`) has no fields and reads as `Exits("none", n, 1)`: one
round of n under the rule `exit_rules.NONE`, which no config chooses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .exit_rules import exit_rule_names, get_exit_rule
from .plan import MEMORY, SamplingPlan, Section
from .records import Record, option

__all__ = [
    "FIXED_ROUNDS",
    "MAX_SAMPLES_PER_ROUND",
    "ROUND_SIZINGS",
    "Exits",
    "PriorSizing",
    "Seq",
    "budget_option",
    "exit_rule_option",
    "samples_per_round_option",
    "with_budget",
]

ROUND_SIZINGS = ("fixed", "prior")  # "fixed": samples_per_round per round; "prior": sized from the posterior
MAX_SAMPLES_PER_ROUND = 4096
"""The most completions one prompt may draw in one round (the top of `samples_per_round`'s interval): a sane bound,
far above the paper's 8; more would not fit one generation call."""


@dataclass(frozen=True)
class PriorSizing(Record):
    """Rounds sized from the pass-rate posterior instead of `samples_per_round` (off by default)."""

    group: ClassVar[str] = MEMORY

    first_round: str = option(
        "fixed",
        '`"fixed"`: the first round draws `samples_per_round` per prompt. `"prior"`: the smallest size in [n, '
        "M·N] that meets the exit rule with probability `round_confidence` under the prompt's posterior. Needs "
        "`pass_rate_memory=True`.",
        choices=ROUND_SIZINGS,
    )
    later_rounds: str = option(
        "fixed",
        "The same choice for rounds 2…N, from the memory (if on) plus the step's pool.",
        choices=ROUND_SIZINGS,
    )
    round_confidence: float = option(
        0.5,
        "In (0, 1): the probability with which a prior-sized round should meet the exit rule.",
        within="(0, 1)",
    )

    @property
    def from_prior(self) -> bool:
        """True when some round is sized from the pass-rate posterior."""
        return "prior" in (self.first_round, self.later_rounds)


FIXED_ROUNDS = PriorSizing()


@dataclass(frozen=True)
class Exits:
    """What `AdaptiveSampler` reads of a section that decides exits: the exit rule, M and N, the futility stop, the
    step budget and how rounds are sized."""

    exit_rule: str
    samples_per_round: int
    max_rounds: int
    futility_threshold: float = 0.0
    sample_budget: float | None = None
    sizing: PriorSizing = FIXED_ROUNDS


def exit_rule_option() -> Any:
    """`exit_rule`, a field of every section that decides exits."""
    return option(
        "balance",
        'When a prompt stops sampling. `"balance"`: its pool holds at least ⌊n/2⌋ positives and n − ⌊n/2⌋ '
        'negatives (the paper\'s best variant). `"pos"`: at least one positive. `"mixed"`: at least one positive '
        "and one negative (DAPO's filter). Rules registered with `trl_ada.register_exit_rule` are accepted by name.",
    )


def samples_per_round_option() -> Any:
    """`samples_per_round` (M), a field of every section that samples in rounds."""
    return option(
        8,
        "M: completions drawn for every still-active prompt in each round (one batched generation call per round).",
        within=f"[1, {MAX_SAMPLES_PER_ROUND}]",
    )


def budget_option() -> Any:
    """`sample_budget`, a field of the sections whose step may be capped by a budget (rounds, streaming)."""
    return option(
        None,
        "Average completions per prompt one step may draw (at least n); None = no budget. Each round first fills "
        "every group, then spends an equal share of what is left over the rounds left, one completion at a time "
        "where it most raises the posterior probability of a mixed group (streaming: a completion beyond a prompt's "
        "first n is requested while the step's requests stay within the budget).",
        group=MEMORY,
        within="[2, inf)",  # at least n, and n >= 2; `Seq.check` holds it to n
    )


@dataclass(frozen=True)
class Seq(Section):
    """Sequential sampling with exits: the exit rule, M samples per round, the round cap N and the futility stop."""

    all_negative: ClassVar[str] = (
        "no prompt meets its exit rule and each draws samples_per_round * max_rounds completions."
    )

    exit_rule: str = exit_rule_option()
    samples_per_round: int = samples_per_round_option()
    max_rounds: int = option(
        4, "N: the round cap. A prompt draws at most M·N completions per step.", within="[1, inf)"
    )
    futility_threshold: float = option(
        0.0,
        "In [0, 1); 0 = off. A prompt whose pool can fill its group and whose posterior chance to meet its exit rule "
        "within its remaining cap is below this value stops sampling; its group is formed like any unresolved one.",
        group=MEMORY,
        within="[0, 1)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.exit_rule not in exit_rule_names():
            get_exit_rule(self.exit_rule)  # a ValueError listing the valid names

    @property
    def cap(self) -> int:
        """M·N: the most completions one prompt may draw in a step."""
        return self.samples_per_round * self.max_rounds

    def exits(self, num_generations: int) -> Exits:
        """What the sampler reads (a section with a budget or prior-sized rounds adds them)."""
        return Exits(self.exit_rule, self.samples_per_round, self.max_rounds, self.futility_threshold)

    def check(self, plan: SamplingPlan) -> None:
        n, exits = plan.num_generations, self.exits(plan.num_generations)
        if self.cap < n:
            raise ValueError(
                f"samples_per_round * max_rounds = {self.samples_per_round} * {self.max_rounds} = {self.cap} is "
                f"smaller than num_generations={n}: a prompt could never fill its group. Raise samples_per_round or "
                f"max_rounds so that their product is at least {n}."
            )
        budget = exits.sample_budget  # a finite number >= 2 or None (its declaration): here, at least n
        if budget is not None and budget < n:
            raise ValueError(
                f"sample_budget={budget!r}: the average completions per prompt a step may draw must be a number >= "
                f"num_generations={n} (every prompt keeps n completions), or None for no budget."
            )


def with_budget(exits: Exits, sample_budget: float | None, sizing: PriorSizing = FIXED_ROUNDS) -> Exits:
    """`exits` with a step budget and prior-sized rounds."""
    return dataclasses.replace(exits, sample_budget=sample_budget, sizing=sizing)
