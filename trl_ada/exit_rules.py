"""Exit rules: when a prompt's pool holds enough signal to stop sampling (pure Python, no numpy, no torch).

A rule reads a prompt's pool counts (positives, negatives) and the group size n. The three built-in rules are
quotas; `register_exit_rule` adds a rule of your own, which `ReinforceAdaConfig(exit_rule=...)` then accepts by name.
`NONE`, always met, is plain GRPO's (`sampling="grpo"`: one round of exactly n); it is not registered, so no config
chooses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .utils import closest_name

__all__ = [
    "BALANCE",
    "MIXED",
    "NONE",
    "POS",
    "ExitRule",
    "QuotaRule",
    "exit_rule_names",
    "get_exit_rule",
    "register_exit_rule",
]


class ExitRule(Protocol):
    """Decides, from a prompt's pool counts, whether the prompt has enough signal to stop sampling."""

    name: str

    def is_met(self, num_positive: int, num_negative: int, num_generations: int) -> bool: ...


@dataclass(frozen=True)
class QuotaRule:
    """Exit once the pool holds at least `min_positive(n)` positives and `min_negative(n)` negatives."""

    name: str
    min_positive: Callable[[int], int]
    min_negative: Callable[[int], int]
    description: str = ""

    def is_met(self, num_positive: int, num_negative: int, num_generations: int) -> bool:
        return num_positive >= self.min_positive(num_generations) and num_negative >= self.min_negative(
            num_generations
        )


BALANCE = QuotaRule(
    "balance",
    min_positive=lambda n: n // 2,
    min_negative=lambda n: n - n // 2,
    description="at least ⌊n/2⌋ positives and n − ⌊n/2⌋ negatives (the paper's best variant)",
)
POS = QuotaRule(
    "pos",
    min_positive=lambda n: 1,
    min_negative=lambda n: 0,
    description="at least one positive",
)
MIXED = QuotaRule(
    "mixed",
    min_positive=lambda n: 1,
    min_negative=lambda n: 1,
    description="at least one positive and one negative (DAPO's filter: the group is effective)",
)
NONE = QuotaRule(
    "none",
    min_positive=lambda n: 0,
    min_negative=lambda n: 0,
    description="always met: plain GRPO's one round of exactly n completions per prompt (not registered)",
)

_EXIT_RULES: dict[str, ExitRule] = {rule.name: rule for rule in (BALANCE, POS, MIXED)}


def register_exit_rule(rule: ExitRule, *, overwrite: bool = False) -> ExitRule:
    """Make `rule` available by its name, e.g. as `ReinforceAdaConfig(exit_rule=rule.name)`."""
    if not callable(getattr(rule, "is_met", None)) or not isinstance(getattr(rule, "name", None), str):
        raise TypeError(f"An exit rule needs a `name: str` and an `is_met(pos, neg, n)` method; got {rule!r}.")
    if rule.name in _EXIT_RULES and not overwrite:
        raise ValueError(f"exit_rule {rule.name!r} is already registered; pass overwrite=True to replace it.")
    _EXIT_RULES[rule.name] = rule
    return rule


def exit_rule_names() -> list[str]:
    """Names of the registered exit rules."""
    return sorted(_EXIT_RULES)


def get_exit_rule(name: str) -> ExitRule:
    """The registered rule called `name`; a ValueError lists the valid names otherwise."""
    if name not in _EXIT_RULES:
        close = closest_name(name, _EXIT_RULES)
        hint = f" Did you mean {close!r}?" if close else ""
        raise ValueError(f"exit_rule={name!r} is not a known exit rule; choose one of {exit_rule_names()}.{hint}")
    return _EXIT_RULES[name]
