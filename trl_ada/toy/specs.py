"""The experiments' vocabulary: a training method (`MethodSpec`) and the toy task's shared settings (`TaskSettings`).

Plain dataclasses, so that the runner (`experiment.py`) and the tables and figures (`results.py`) share them without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from .task import PROMPT_TEMPLATES, toy_prompt

__all__ = ["TRAINERS", "MethodSpec", "TaskSettings", "with_rounds"]

TRAINERS = ("grpo", "reinforce_ada")


# ----------------------------------------------------------------------------------------------------------------
# Methods and task
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    """One training method.

    `trainer="grpo"` is TRL's own [`~trl.GRPOTrainer`] (n completions per prompt, `exit_rule` must stay None);
    `trainer="reinforce_ada"` is [`~trl_ada.ReinforceAdaTrainer`] with `exit_rule` (`"balance"`, `"pos"`, or
    `"none"`: plain GRPO sampling through our rounds code), `samples_per_round` (M) and `max_rounds` (N), or with a
    preset `sampling` (e.g. `"est"`) instead of the three.
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
    """The toy task and the training settings shared by every method (see `trl_ada.toy.task`).

    The default task asks for the letters `a` and `o` (not `e`) 1 to 5 times. Under the random model the initial
    pass rates are about 0.5 (k=1), 0.15 (k=2), 0.05 (k=3) and 0.01 or less (k=4, 5): half of the prompts are near
    zero, so GRPO at n=4 sees mostly all-wrong groups (the mean pass rate is about 0.15). With `e` in the mix (the
    toy default) the easy `e` prompts alone give GRPO enough signal and the methods learn at the same pace per step;
    see `docs/demo.md`.

    `eval_every` > 0 adds a [`PassRateProbe`] every `eval_every` steps (`eval_samples` completions per distinct
    prompt); its completions are a measurement and are not counted as generated samples.
    """

    prompts_per_step: int = 8
    max_completion_length: int = 12
    learning_rate: float = 5e-3
    targets: str = "ao"
    counts: tuple[int, ...] = (1, 2, 3, 4, 5)
    eval_every: int = 0
    eval_samples: int = 16

    def task_rows(self) -> list[tuple[str, int, str]]:
        """Every distinct prompt of the task as (target letter, count, user message)."""
        return [
            (t, k, toy_prompt(t, k, template))
            for template in PROMPT_TEMPLATES
            for t in self.targets
            for k in self.counts
        ]
