"""The experiments' vocabulary: a training method (`MethodSpec`) and the toy task's shared settings (`TaskSettings`).

Plain dataclasses, so that the runner (`experiment.py`) and the tables and figures (`results.py`) share them without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from .keyed import (
    FILTER_SAMPLES,
    KEYED_COUNTS,
    MAX_KEYED_PROMPTS,
    PAPER_PASS_RATE_BAND,
    check_band,
    check_keyed_settings,
    check_transfer,
    keyed_rows,
)
from .task import PROMPT_TEMPLATES, toy_prompt

__all__ = ["FAMILIES", "TRAINERS", "MethodSpec", "TaskSettings", "keyed_task", "with_rounds"]

TRAINERS = ("grpo", "reinforce_ada")
FAMILIES = ("letters", "keyed")


# ----------------------------------------------------------------------------------------------------------------
# Methods and task
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    """One training method.

    `trainer="grpo"` is TRL's own [`~trl.GRPOTrainer`] (n completions per prompt, `exit_rule` must stay None);
    `trainer="reinforce_ada"` is [`~trl_ada.ReinforceAdaTrainer`] with `exit_rule` (`"balance"`, `"pos"`),
    `samples_per_round` (M) and `max_rounds` (N), or with a preset `sampling` instead of the three (e.g. `"est"`, or
    `"grpo"`: plain GRPO sampling through our rounds code).
    """

    name: str
    label: str
    num_generations: int = 4
    trainer: Literal["grpo", "reinforce_ada"] = "grpo"
    exit_rule: str | None = None
    samples_per_round: int = 0
    max_rounds: int = 0
    options: tuple[tuple[str, Any], ...] = ()  # more `ReinforceAdaConfig` fields, e.g. (("sample_budget", 8),)
    sampling: str | None = None  # a `ReinforceAdaConfig.sampling` preset, in place of exit_rule, M and N

    def __post_init__(self) -> None:
        if self.trainer not in TRAINERS:
            raise ValueError(
                f"MethodSpec {self.name!r}: trainer must be one of {list(TRAINERS)}, got {self.trainer!r}."
            )
        if self.exit_rule is not None and self.sampling is not None:
            raise ValueError(
                f"MethodSpec {self.name!r}: exit_rule={self.exit_rule!r} and sampling={self.sampling!r}; set one."
            )
        if self.uses_reinforce_ada == (self.exit_rule is None and self.sampling is None):
            fix = (
                "set exit_rule or sampling"
                if self.uses_reinforce_ada
                else "drop exit_rule and sampling, or use trainer='reinforce_ada'"
            )
            raise ValueError(
                f"MethodSpec {self.name!r}: trainer={self.trainer!r} with exit_rule={self.exit_rule!r}, "
                f"sampling={self.sampling!r}; {fix}."
            )

    @property
    def uses_reinforce_ada(self) -> bool:
        """True for Reinforce-Ada (adaptive rounds), False for TRL's plain GRPO."""
        return self.trainer == "reinforce_ada"


def with_rounds(spec: MethodSpec, samples_per_round: int, max_rounds: int) -> MethodSpec:
    """`spec` with another M and N (and the label to match)."""
    label = f"{spec.exit_rule} M={samples_per_round} N={max_rounds}"
    return replace(spec, label=label, samples_per_round=samples_per_round, max_rounds=max_rounds)


@dataclass(frozen=True)
class TaskSettings:
    """The toy task and the training settings shared by every method.

    `family="letters"` (default) is `trl_ada.toy.task`: the default asks for the letters `a` and `o` (not `e`) 1 to
    5 times. Under the random model the initial pass rates are about 0.5 (k=1), 0.15 (k=2), 0.05 (k=3) and 0.01 or
    less (k=4, 5): half of the prompts are near zero, so GRPO at n=4 sees mostly all-wrong groups (the mean pass rate
    is about 0.15). With `e` in the mix (the toy default) the easy `e` prompts alone give GRPO enough signal and the
    methods learn at the same pace per step; see `docs/lab/demo.md`.

    `family="keyed"` is `trl_ada.toy.keyed`: `num_prompts` items, each with a secret code to write at least k times
    (k cycles through `counts`); `transfer` in [0, 1] sets how many items share a code (1: all, 0: none). See
    [`keyed_task`] for its recommended settings.

    `pass_rate_band=(low, high)` keeps only the prompts (of either family) whose base pass rate from
    `filter_samples` completions is in (low, high], like the paper's data (`PAPER_PASS_RATE_BAND`).

    `eval_every` > 0 adds a [`PassRateProbe`] every `eval_every` steps (`eval_samples` completions per distinct
    prompt); its completions are a measurement and are not counted as generated samples.

    Settings outside their range raise a ValueError naming the option, its value and the fix.
    """

    prompts_per_step: int = 8
    max_completion_length: int = 12
    learning_rate: float = 5e-3
    targets: str = "ao"
    counts: tuple[int, ...] = (1, 2, 3, 4, 5)
    eval_every: int = 0
    eval_samples: int = 16
    family: str = "letters"
    num_prompts: int = MAX_KEYED_PROMPTS
    transfer: float = 0.0
    pass_rate_band: tuple[float, float] | None = None
    filter_samples: int = FILTER_SAMPLES

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} is not a task family; use one of {list(FAMILIES)}.")
        check_transfer(self.transfer)
        if self.family == "keyed":
            check_keyed_settings(self.num_prompts, self.counts, self.max_completion_length)
        if self.pass_rate_band is not None:
            check_band(self.pass_rate_band)
        if self.filter_samples < 1:
            raise ValueError(f"filter_samples={self.filter_samples!r} must be at least 1; use e.g. 16 (the paper).")

    def task_rows(self) -> list[tuple[str, int, str]]:
        """Every distinct prompt of the task, before any filter, as (answer, count, user message)."""
        if self.family == "keyed":
            return keyed_rows(self.num_prompts, self.transfer, self.counts)
        return [
            (t, k, toy_prompt(t, k, template))
            for template in PROMPT_TEMPLATES
            for t in self.targets
            for k in self.counts
        ]


def keyed_task(**overrides: Any) -> TaskSettings:
    """The keyed family with its recommended counts (1, 2, 3) and the paper's filter band (0, 0.375]."""
    defaults: dict[str, Any] = {"family": "keyed", "counts": KEYED_COUNTS, "pass_rate_band": PAPER_PASS_RATE_BAND}
    return TaskSettings(**{**defaults, **overrides})
