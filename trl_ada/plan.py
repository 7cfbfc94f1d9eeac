"""The sampling plan: a small shared part and one section per generation schedule, whose type is the schedule.

Pure Python (no numpy, no torch, no TRL).

    SamplingPlan(section, num_generations, positive_threshold, advantage_baseline, memory, objective)

The shared part is what every schedule reads: the group size n, what counts as positive, the advantage baseline, the
pass-rate memory (`Memory`) and the objective (`Objective`). The section is the schedule's own, a frozen dataclass in
the schedule's module: `Rounds` (`schedules/rounds.py`), `Streaming` (`schedules/streaming.py`), `Est`
(`schedules/est.py`); `schedules.SCHEDULES` registers them by the name `generation_schedule` takes. Sections that
decide exits derive from `Seq` (here): the exit rule, M samples per round, the round cap N and the futility stop,
which `AdaptiveSampler` reads. A plan is the *resolved* view: with `exit_rule="none"` it samples one round of exactly
n (`samples_per_round = n`, `max_rounds = 1`).

Every field carries its default, its help and its flat name (the spelling of the config, the recipes and the command
line) as dataclass metadata (`option`). `flat_fields()` lists them; the config's fields, `--help` and the table in
`docs/configuration.md` are built from that list. `resolve` turns flat fields (a config's, `SamplingPlan.from_fields`,
a preset's) into a plan and refuses, in one line, a field the resolved schedule has no use for, whatever its value
(explicit is explicit): the section knows its fields, so no list of refusals exists outside it.

Every check raises one `ValueError` that names the field (or both fields of a pair that cannot work together), the
value and the fix.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .exit_rules import exit_rule_names, get_exit_rule
from .utils import closest_name

__all__ = [
    "ADVANTAGE_BASELINES",
    "CANDIDATES",
    "GROUPS",
    "MEMORY",
    "OBJECTIVE",
    "SAMPLING",
    "SCHEDULING",
    "OBJECTIVES",
    "OBJECTIVE_WEIGHTINGS",
    "PRESETS",
    "PRESET_FIELDS",
    "ROUND_SIZINGS",
    "FlatField",
    "Host",
    "Memory",
    "Objective",
    "Preset",
    "PriorSizing",
    "SamplingPlan",
    "Section",
    "Seq",
    "check_field_types",
    "check_group_size",
    "check_integer",
    "check_preset",
    "budget_option",
    "check_type",
    "fields_markdown",
    "flat_fields",
    "given_fields",
    "is_int",
    "is_number",
    "option",
    "preset_fields",
    "resolve",
    "validate_estimation",
    "validate_objective",
    "validate_sampling",
]

ADVANTAGE_BASELINES = ("pool", "group")
ROUND_SIZINGS = ("fixed", "prior")  # "fixed": samples_per_round per round; "prior": sized from the posterior
OBJECTIVES = ("linear", "log", "power")  # f(p) = p, log p, p^alpha (`objectives.py`)
OBJECTIVE_WEIGHTINGS = ("explicit", "implicit", "hybrid", "variance")  # where f'(p) goes (`objectives.py`)

GROUPS = (
    "adaptive sampling (Reinforce-Ada, arXiv 2510.04996)",
    "the pass-rate memory and budgeted rounds (all off by default)",
    "dynamic sampling: candidates, refill and pre-rollout skipping (all off by default)",
    "how generation is scheduled",
    "the objective (arXiv 2510.04996v3: J_f = E[f(p)], prompt weight f'(p))",
)
"""The groups of the sampling fields, in the order `--help` and `docs/configuration.md` show them."""
SAMPLING, MEMORY, CANDIDATES, SCHEDULING, OBJECTIVE = GROUPS


def option(default: Any, help: str, *, flat: str | None = None, group: str | None = None, off: bool = False) -> Any:
    """A plan field: its default and `help`, its `flat` name where the config spells it otherwise (`memory_decay`
    for `Memory.decay`), its `group` (default: its record's) and whether the default means "off" (`off`: an explicit
    default is accepted by a schedule that has no use for the field, since it asks for nothing)."""
    return field(default=default, metadata={"help": help, "flat": flat, "group": group, "off": off})


# ------------------------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------------------------


def check_integer(name: str, value: Any, minimum: int, fix: str) -> None:
    if isinstance(value, bool):  # bool is an int subclass: True would pass as 1
        raise ValueError(f"{name}={value!r}: must be an integer, not a boolean.")
    if not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}{fix}")


def check_group_size(num_generations: Any) -> None:
    """n must be an integer >= 2: checked first, since every other check and every preset reads it."""
    if isinstance(num_generations, bool):
        raise ValueError(f"num_generations={num_generations!r}: must be an integer, not a boolean.")
    if not is_int(num_generations) or num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations!r}: the group size n must be an integer >= 2, since a group of one "
            "completion has no baseline."
        )


_KINDS: dict[type, tuple[str, Callable[[Any], bool]]] = {
    int: ("an integer", lambda value: is_int(value)),
    float: ("a number", lambda value: isinstance(value, numbers.Real) and not isinstance(value, bool)),
    bool: ("True or False", lambda value: isinstance(value, bool)),
    str: ("a string", lambda value: isinstance(value, str)),
}


def check_field_types(values: Mapping[str, Any]) -> None:
    """A ValueError naming the first flat field in `values` whose value is not of its type (an integer, a number,
    True/False or a string; or None where allowed), its value and how to write it."""
    specs = {f.name: f for f in flat_fields()}
    for name, value in values.items():
        spec = specs.get(name)
        if spec is None:
            close = closest_name(name, specs)
            hint = f" Did you mean {close!r}?" if close else ""
            raise ValueError(f"{name}={value!r}: not a sampling field (`trl_ada.plan.flat_fields()`).{hint}")
        check_type(name, value, spec.kind, spec.optional, spec.default)


def check_type(name: str, value: Any, kind: type, optional: bool = False, example: Any = None) -> None:
    """A ValueError naming `name`, its value and how to write it unless `value` is a `kind` (int, float, bool or
    str; an int is a float, a bool is not an int) or, when `optional`, None. `example` is shown as a valid value."""
    described, accepts = _KINDS[kind]
    if (value is None and optional) or accepts(value):
        return
    if kind is bool:
        raise ValueError(f"{name}={value!r}: must be True or False.")
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: must be {described}, not a boolean.")
    or_none = " or None" if optional else ""
    how = _how_to_write(name, value, kind, example)
    raise ValueError(f"{name}={value!r}: must be {described}{or_none}, not a {type(value).__name__}{how}.")


def _how_to_write(name: str, value: Any, kind: type, example: Any) -> str:
    """`; write name=8` when `value` reads as the right type (the string '8', the float 8.0), else an example."""
    try:
        number = float(value) if kind in (int, float) and isinstance(value, (str, float)) else None
    except ValueError:
        number = None
    if number is not None and math.isfinite(number) and (kind is float or number.is_integer()):
        return f"; write {name}={kind(number)!r}"
    return "" if example is None else f" (e.g. {name}={example!r})"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # bool is an int subclass: True would pass as 1


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


MAX_SAMPLES_PER_ROUND = 4096
"""The most completions one prompt may draw in one round: a sane bound, far above the paper's 8."""


def validate_sampling(
    num_generations: int, samples_per_round: int, max_rounds: int, positive_threshold: float, rounds: bool = True
) -> None:
    """Raise a ValueError naming the parameter, the value and the fix for an impossible sampling plan (`rounds`:
    the plan samples in rounds, so M·N must fill a group)."""
    check_group_size(num_generations)
    check_integer("samples_per_round", samples_per_round, 1, " (the paper uses 8).")
    if samples_per_round > MAX_SAMPLES_PER_ROUND:
        raise ValueError(
            f"samples_per_round={samples_per_round}: at most {MAX_SAMPLES_PER_ROUND} completions per prompt and round "
            "(the paper uses 8); more would not fit one generation call. Lower it."
        )
    check_integer("max_rounds", max_rounds, 1, " (the paper uses 4).")
    if rounds and samples_per_round * max_rounds < num_generations:
        raise ValueError(
            f"samples_per_round * max_rounds = {samples_per_round} * {max_rounds} = {samples_per_round * max_rounds} "
            f"is smaller than num_generations={num_generations}: a prompt could never fill its group. Raise "
            f"samples_per_round or max_rounds so that their product is at least {num_generations}."
        )
    if not is_number(positive_threshold):
        raise ValueError(
            f"positive_threshold={positive_threshold!r}: must be a finite number (0.7 for 0/1 rewards; a "
            "completion is positive when its reward is strictly greater)."
        )


def validate_estimation(
    num_generations: int,
    exit_rule: str,
    first_round: str,
    later_rounds: str,
    round_confidence: float,
    futility_threshold: float,
    sample_budget: float | None,
) -> None:
    """Raise a ValueError naming the parameter, the value and what is valid for an impossible budgeted plan."""
    for name, value in (("first_round", first_round), ("later_rounds", later_rounds)):
        if value not in ROUND_SIZINGS:
            raise ValueError(
                f"{name}={value!r}: choose one of {list(ROUND_SIZINGS)} ('fixed': rounds of samples_per_round; "
                "'prior': rounds sized from the pass-rate posterior)."
            )
    if not is_number(round_confidence) or not 0.0 < round_confidence < 1.0:
        raise ValueError(
            f"round_confidence={round_confidence!r}: must be in (0, 1), the probability with which a prior-sized "
            "round should meet the exit rule (e.g. 0.5)."
        )
    if not is_number(futility_threshold) or not 0.0 <= futility_threshold < 1.0:
        raise ValueError(
            f"futility_threshold={futility_threshold!r}: must be in [0, 1); 0 turns the futility stop off, e.g. 0.05 "
            "stops a prompt whose chance to meet its exit rule within its remaining cap is below 5%."
        )
    if sample_budget is not None and (not is_number(sample_budget) or sample_budget < num_generations):
        raise ValueError(
            f"sample_budget={sample_budget!r}: the average completions per prompt a step may draw must be a number >= "
            f"num_generations={num_generations} (every prompt keeps n completions), or None for no budget."
        )
    budgeted = "prior" in (first_round, later_rounds) or futility_threshold > 0 or sample_budget is not None
    if budgeted and exit_rule == "none":
        raise ValueError(
            "exit_rule='none' samples one round of n per prompt, so first_round/later_rounds='prior', "
            "futility_threshold and sample_budget have nothing to act on: use an adaptive exit rule ('balance')."
        )


def validate_objective(objective: Any, alpha: Any, weighting: Any, epsilon: Any) -> None:
    """The objective f, its exponent, how its weight is split, and the floor ε of the pass rate it reads."""
    if objective not in OBJECTIVES:
        raise ValueError(
            f"objective={objective!r}: choose one of {list(OBJECTIVES)} ('linear': GRPO's E[p]; 'log': E[log p], "
            "weight 1/p; 'power': E[p^objective_alpha])."
        )
    if objective == "power" and (not is_number(alpha) or alpha <= 0):
        raise ValueError(
            f"objective_alpha={alpha!r}: objective='power' maximises E[p^alpha] and needs alpha > 0 (0 < alpha < 1 "
            "favours hard prompts, e.g. 0.5; 1 is the linear objective)."
        )
    if weighting not in OBJECTIVE_WEIGHTINGS:
        raise ValueError(
            f"objective_weighting={weighting!r}: choose one of {list(OBJECTIVE_WEIGHTINGS)} ('explicit': the weight "
            "multiplies the advantages; 'implicit': it sizes the samples; 'hybrid': its square root does both; "
            "'variance': the variance-optimal split of the log weight)."
        )
    if weighting == "variance" and objective != "log":
        raise ValueError(
            f"objective_weighting='variance' splits the log objective's weight 1/p, but objective={objective!r}. "
            "Set objective='log', or choose another objective_weighting."
        )
    if not is_number(epsilon) or not 0.0 < epsilon <= 1.0:
        raise ValueError(
            f"objective_epsilon={epsilon!r}: the floor added to a pass rate before weighting must be in (0, 1] "
            "(e.g. 0.05: the log objective's weight is then at most 1/0.05 = 20)."
        )


# ------------------------------------------------------------------------------------------------------------------
# Reading records
# ------------------------------------------------------------------------------------------------------------------


def flat_name(f: dataclasses.Field) -> str:
    """The config's name of a record's field."""
    return f.metadata.get("flat") or f.name


@functools.cache
def _record_kinds(record: type) -> tuple[tuple[dataclasses.Field, type | None, bool], ...]:
    """Each field of a record with its type (int, float, bool or str; None for a sub-record) and whether it may be
    None, read from the type hints."""
    hints = typing.get_type_hints(record)
    kinds = []
    for f in dataclasses.fields(record):
        members = typing.get_args(hints[f.name]) or (hints[f.name],)
        kind = next(m for m in members if m is not type(None))
        kinds.append((f, kind if kind in _KINDS else None, type(None) in members))
    return tuple(kinds)


# ------------------------------------------------------------------------------------------------------------------
# Records: frozen dataclasses whose fields are type-checked at construction
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """A frozen part of the plan. Its fields are checked against their types when it is built (an integer, a
    number, True/False, a string; or None where the type allows it), naming the flat field."""

    group: ClassVar[str] = SAMPLING

    def __post_init__(self) -> None:
        for f, kind, optional in _record_kinds(type(self)):
            if kind is not None:
                check_type(flat_name(f), getattr(self, f.name), kind, optional, f.default)


@dataclass(frozen=True)
class Memory(Record):
    """The pass-rate memory across steps: a decayed Beta posterior of each prompt's pass rate (Ada-EMA)."""

    group: ClassVar[str] = MEMORY

    enabled: bool = option(
        False,
        "Keep a Beta posterior of each prompt's pass rate across steps, keyed by a hash of the prompt, saved in "
        "every checkpoint (`pass_rate_memory.npz`) and restored on resume: the paper's Ada-EMA estimator. It feeds "
        'Est\'s allocation, `first_round="prior"`, `later_rounds="prior"`, skipping, the futility stop and the '
        "budget's priorities.",
        flat="pass_rate_memory",
    )
    decay: float = option(
        0.5,
        "λ in (0, 1]: at each visit the evidence of a prompt's earlier visits is multiplied by λ (1 keeps "
        'everything; the policy moves). `sampling="est"` sets 0.9.',
        flat="memory_decay",
    )
    prior_alpha: float = option(
        1.0,
        "α of the Beta(α, β) prior of a prompt the memory has not seen: p̂ = (N_pos + α) / (N_total + α + β).",
        flat="memory_prior_alpha",
    )
    prior_beta: float = option(
        1.0,
        "β of that prior. Beta(1, 16) (most prompts hard) is the reference code's experimental choice, for data "
        "filtered to hard prompts.",
        flat="memory_prior_beta",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not is_number(self.decay) or not 0.0 < self.decay <= 1.0:
            raise ValueError(
                f"memory_decay={self.decay!r}: must be in (0, 1] (a number); 1 keeps all past evidence, 0.5 halves "
                "the weight of earlier visits at each visit."
            )
        for name, value in (("memory_prior_alpha", self.prior_alpha), ("memory_prior_beta", self.prior_beta)):
            if not is_number(value) or value <= 0:
                raise ValueError(
                    f"{name}={value!r}: the Beta prior of an unseen prompt's pass rate needs positive parameters "
                    "(e.g. 1 and 1: uniform; 1 and 16: most prompts are hard)."
                )

    @property
    def prior(self) -> tuple[float, float]:
        """The Beta prior (α, β) of a prompt the memory has not seen."""
        return self.prior_alpha, self.prior_beta


@dataclass(frozen=True)
class Objective(Record):
    """What training maximises, J_f = E[f(p)], and where the prompt weight f'(p) goes (`objectives.py`)."""

    group: ClassVar[str] = OBJECTIVE

    function: str = option(
        "linear",
        '`"linear"`: E[p], GRPO\'s (weight 1). `"log"`: E[log p] (weight 1/p). `"power"`: E[p^α] (weight '
        "α·p^(α−1), α = `objective_alpha`). Every weight reads p + `objective_epsilon`.",
        flat="objective",
    )
    alpha: float = option(0.5, 'α > 0 of `objective="power"`.', flat="objective_alpha")
    weighting: str = option(
        "explicit",
        '`"explicit"`: the advantages of a prompt are multiplied by its weight at the pass rate of its samples in '
        'the step (every schedule; with `balance` and `"log"` this is Reinforce-Ada-Seq\'s 1/p̂). Est only: '
        '`"implicit"` (samples ∝ weight), `"hybrid"` (samples and advantages ∝ √weight) and `"variance"` (log '
        "objective: the variance-optimal split). Advantage weights are normalised so that their mean over the "
        "step's trained samples with signal is 1.",
        flat="objective_weighting",
    )
    epsilon: float = option(
        0.05,
        'The floor ε in (0, 1] added to a pass rate before weighting: no weight exceeds f′(ε) (20 under `"log"`).',
        flat="objective_epsilon",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        validate_objective(self.function, self.alpha, self.weighting, self.epsilon)

    @property
    def weights_gradients(self) -> bool:
        """True when the objective puts a weight other than 1 on some prompt's advantages."""
        return self.function != "linear" and self.weighting != "implicit"


# ------------------------------------------------------------------------------------------------------------------
# Sections: one per schedule
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section(Record):
    """A schedule's own parameters. A subclass is one schedule: it is registered in `schedules.SCHEDULES` by `name`
    and names the class that runs it (`schedule_class`); the config builds it from the flat fields it owns."""

    name: ClassVar[str]
    """The value of `generation_schedule` that selects it."""
    summary: ClassVar[str]
    """What the schedule does, as refusals of a field it has no use for explain it."""
    choose: ClassVar[str]
    """How to select this schedule, as the fix of a refusal of one of its fields."""
    allocates_samples: ClassVar[bool] = False
    """The schedule sizes each prompt's samples by the objective's weight (weightings other than explicit)."""

    @property
    def schedule(self) -> str:
        """The schedule that runs a step (the refill schedule is rounds over candidates)."""
        return self.name

    @property
    def samples_adaptively(self) -> bool:
        """False when the schedule is plain GRPO sampling (one round of exactly n per prompt)."""
        return True

    def schedule_class(self) -> type:
        """The `schedules.base.Schedule` subclass that runs this section in `ReinforceAdaTrainer`."""
        raise NotImplementedError(f"{type(self).__name__} runs in no synchronous trainer.")

    def check(self, plan: SamplingPlan) -> None:
        """Refuse what this section cannot do with the shared plan (one ValueError)."""

    def check_trainer(self, plan: SamplingPlan, config: Any) -> None:
        """Refuse what the trainer's config cannot give this section (a backend, the pass-rate memory)."""

    def unused(self, num_generations: int) -> dict[str, Any]:
        """Fields of the section that these values leave without use, each with the one value that says what the
        schedule does anyway (plain GRPO: `samples_per_round=n`, `max_rounds=1`)."""
        return {}

    def unused_message(self, name: str, value: Any, agrees: Any, context: Context) -> str:
        """The refusal of a field `unused` names."""
        raise NotImplementedError


@dataclass(frozen=True)
class PriorSizing(Record):
    """Rounds sized from the pass-rate posterior instead of `samples_per_round` (off by default)."""

    group: ClassVar[str] = MEMORY

    first_round: str = option(
        "fixed",
        '`"fixed"`: the first round draws `samples_per_round` per prompt. `"prior"`: the smallest size in [n, '
        "M·N] that meets the exit rule with probability `round_confidence` under the prompt's posterior. Needs "
        "`pass_rate_memory=True`.",
    )
    later_rounds: str = option(
        "fixed",
        "The same choice for rounds 2…N, from the memory (if on) plus the step's pool.",
    )
    round_confidence: float = option(
        0.5, "In (0, 1): the probability with which a prior-sized round should meet the exit rule."
    )

    @property
    def from_prior(self) -> bool:
        """True when some round is sized from the pass-rate posterior."""
        return "prior" in (self.first_round, self.later_rounds)


FIXED_ROUNDS = PriorSizing()


@dataclass(frozen=True)
class Seq(Section):
    """Sequential sampling with exits (the paper's Reinforce-Ada-Seq), the part `AdaptiveSampler` reads: a prompt
    samples until its pool meets the exit rule, M completions at a time, at most M·N, or until it is futile.

    Sections that also size rounds from a prior or cap a step by a budget declare `sizing` and `sample_budget` as
    fields; here they are off."""

    exit_rule: str = option(
        "balance",
        'When a prompt stops sampling. `"balance"`: its pool holds at least ⌊n/2⌋ positives and n − ⌊n/2⌋ '
        'negatives (the paper\'s best variant). `"pos"`: at least one positive. `"mixed"`: at least one positive '
        'and one negative (DAPO\'s filter). `"none"`: plain GRPO sampling, one round of exactly n per prompt, '
        "through the same code path. Rules registered with `trl_ada.register_exit_rule` are accepted by name.",
    )
    samples_per_round: int = option(
        8, "M: completions drawn for every still-active prompt in each round (one batched generation call per round)."
    )
    max_rounds: int = option(4, "N: the round cap. A prompt draws at most M·N completions per step.")
    futility_threshold: float = option(
        0.0,
        "In [0, 1); 0 = off. A prompt whose pool can fill its group and whose posterior chance to meet its exit rule "
        "within its remaining cap is below this value stops sampling; its group is formed like any unresolved one.",
        group=MEMORY,
        off=True,
    )

    sizing: ClassVar[PriorSizing] = FIXED_ROUNDS
    sample_budget: ClassVar[float | None] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.exit_rule not in exit_rule_names():
            get_exit_rule(self.exit_rule)  # a ValueError listing the valid names

    @property
    def cap(self) -> int:
        """M·N: the most completions one prompt may draw in a step."""
        return self.samples_per_round * self.max_rounds

    @property
    def samples_adaptively(self) -> bool:
        """True unless `exit_rule="none"` (plain GRPO: one round of exactly n per prompt)."""
        return self.exit_rule != "none"

    def check(self, plan: SamplingPlan) -> None:
        validate_sampling(plan.num_generations, self.samples_per_round, self.max_rounds, plan.positive_threshold)
        validate_estimation(
            plan.num_generations,
            self.exit_rule,
            self.sizing.first_round,
            self.sizing.later_rounds,
            self.sizing.round_confidence,
            self.futility_threshold,
            self.sample_budget,
        )

    def unused(self, num_generations: int) -> dict[str, Any]:
        return {} if self.samples_adaptively else {"samples_per_round": num_generations, "max_rounds": 1}

    def unused_message(self, name: str, value: Any, agrees: Any, context: Context) -> str:
        source = "exit_rule='none'" if context.given("exit_rule") else "sampling='grpo' (exit_rule='none')"
        return (
            f"{name}={value!r} has no effect with {source}: plain GRPO samples one round of exactly "
            f"num_generations={context.num_generations} per prompt. Remove {name} (or set it to {agrees!r}), or "
            "choose an adaptive exit rule (e.g. sampling='balance') to sample in rounds."
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
    )


# ------------------------------------------------------------------------------------------------------------------
# The plan
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingPlan(Record):
    """Every parameter of a step's sampling decisions: the shared part and the schedule's `section`."""

    section: Section
    num_generations: int = 4
    positive_threshold: float = option(
        0.7,
        "A completion is positive when its weighted reward is strictly greater than this value (0.7 suits 0/1 "
        "rewards; with several reward functions it applies to their weighted sum).",
    )
    advantage_baseline: str = option(
        "pool",
        '`"pool"`: A = r − mean of every reward drawn for the prompt in the step (the paper\'s estimator). '
        '`"group"`: A = r − mean of the n kept rewards (GRPO\'s baseline). With `scale_rewards="group"` the '
        "matching std divides the advantage.",
    )
    memory: Memory = Memory()
    objective: Objective = Objective()

    def __post_init__(self) -> None:
        check_group_size(self.num_generations)
        if not isinstance(self.section, Section):
            raise ValueError(f"section={self.section!r}: must be a schedule's section (schedules.SCHEDULES).")
        super().__post_init__()
        if self.advantage_baseline not in ADVANTAGE_BASELINES:
            raise ValueError(
                f"advantage_baseline={self.advantage_baseline!r} is not supported; choose one of "
                f"{list(ADVANTAGE_BASELINES)}."
            )
        if not is_number(self.positive_threshold):
            raise ValueError(
                f"positive_threshold={self.positive_threshold!r}: must be a finite number (0.7 for 0/1 rewards; a "
                "completion is positive when its reward is strictly greater)."
            )
        if not self.section.samples_adaptively:  # plain GRPO: one round of exactly n, whatever M and N said
            one_round = dataclasses.replace(self.section, samples_per_round=self.num_generations, max_rounds=1)
            object.__setattr__(self, "section", one_round)
        self.section.check(self)
        if self.objective.weighting != "explicit" and not self.section.allocates_samples:
            raise ValueError(
                f"objective_weighting={self.objective.weighting!r} sizes each prompt's samples by its weight, but "
                f"generation_schedule={self.generation_schedule!r} does not allocate samples (its rounds realise the "
                "implicit part by their exit rule). Use objective_weighting='explicit' (the weight on the advantages: "
                "the paper's 1/p for Seq under objective='log'), or generation_schedule='est'."
            )

    @classmethod
    def from_fields(cls, sampling: str | None = None, **fields: Any) -> SamplingPlan:
        """The plan of flat fields, as a config would build it (`resolve`): `sampling` a preset, `fields` explicit."""
        return resolve(fields, sampling=sampling)

    @classmethod
    def from_config(cls, config: Any) -> SamplingPlan:
        """The plan of an object with the config's attributes (absent or unset: not given, `given_fields`), the
        trainer's needs checked too (`Section.check_trainer`)."""
        given = given_fields(config)
        plan = resolve(given, sampling=getattr(config, "sampling", None), num_generations=config.num_generations)
        plan.section.check_trainer(plan, config)
        return plan

    def replace(self, **changes: Any) -> SamplingPlan:
        """This plan with some flat fields changed: `changes` are explicit (None sets a field to None), this plan's
        fields are the base they win over, so `replace(exit_rule="none")` of a balance plan is plain GRPO."""
        base = {**self.fields(), **{name: value for name, value in changes.items() if value is None}}
        explicit = {name: value for name, value in changes.items() if value is not None}
        return resolve(explicit, num_generations=changes.get("num_generations", self.n), host=Host(base=base))

    @property
    def n(self) -> int:
        """The group size (`num_generations`)."""
        return self.num_generations

    @property
    def generation_schedule(self) -> str:
        """The registered name of the section's schedule (`"rounds"`, `"streaming"`, `"est"`)."""
        return self.section.name

    @property
    def schedule(self) -> str:
        """The schedule that runs a step: `"rounds"`, `"refill"` (rounds over candidates), `"streaming"` or `"est"`."""
        return self.section.schedule

    @property
    def samples_adaptively(self) -> bool:
        """False for plain GRPO sampling (`exit_rule="none"`)."""
        return self.section.samples_adaptively

    @property
    def weights_gradients(self) -> bool:
        """True when the objective puts a weight other than 1 on some prompt's advantages."""
        return self.objective.weights_gradients

    def fields(self) -> dict[str, Any]:
        """The plan by flat names: the section's fields, `generation_schedule`, then the shared ones."""
        values = {flat_name(f): value for f, value in _leaves(self.section)}
        values["generation_schedule"] = self.generation_schedule
        return values | {flat_name(f): value for f, value in _leaves(self) if f.name != "num_generations"}

    def __getattr__(self, name: str) -> Any:
        """Deprecated: a flat field read off the plan (`plan.samples_per_round`), as before sections existed."""
        defaults = {} if name.startswith("_") or name == "section" else _defaults()
        if name not in defaults:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        warnings.warn(
            f"SamplingPlan.{name} is deprecated: read plan.fields()[{name!r}], or the field of its section.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.fields().get(name, defaults[name])


def _flat_init(init: Callable[..., None]) -> Callable[..., None]:
    """`SamplingPlan(**flat_fields)`, deprecated: the plan of `SamplingPlan.from_fields(**flat_fields)`."""

    @functools.wraps(init)
    def __init__(self: SamplingPlan, *args: Any, **kwargs: Any) -> None:
        if args or "section" in kwargs:
            return init(self, *args, **kwargs)
        warnings.warn(
            "SamplingPlan(**flat_fields) is deprecated: write SamplingPlan.from_fields(**flat_fields), or build the "
            "schedule's section (e.g. SamplingPlan(Rounds(exit_rule='balance'), num_generations=4)).",
            DeprecationWarning,
            stacklevel=2,
        )
        plan = resolve(kwargs)
        return init(self, **{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)})

    return __init__


SamplingPlan.__init__ = _flat_init(SamplingPlan.__init__)  # type: ignore[method-assign]


# ------------------------------------------------------------------------------------------------------------------
# Flat fields: the config's, the recipes' and the command line's spelling of the plan
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlatField:
    """One field as the config spells it: its type (`kind`, and whether None is a value), default, help and group,
    and the sections (`owners`, by registered name) that have a use for it; shared fields have none."""

    name: str
    kind: type
    optional: bool
    default: Any
    help: str
    group: str
    off: bool = False
    owners: tuple[str, ...] = ()

    @property
    def shared(self) -> bool:
        """Every schedule has a use for it."""
        return not self.owners

    @property
    def unset(self) -> Any:
        """What a config holds while the field is not given: None, except where None is a value of its own
        (`skip_unsolvable_draws=None`: never), where it is the default."""
        return self.default if self.optional and self.default is not None else None


GENERATION_SCHEDULE_HELP = (
    'Which schedule runs a step (`schedules.SCHEDULES`). `"rounds"`: each round is one batched generation call '
    'for the active prompts, and the next round waits for its longest completion; every backend. `"streaming"` '
    '(`use_vllm=True`, `vllm_mode="server"`): completions are requested a chunk at a time, up to '
    "`streaming_window` of each active prompt in flight; exits are decided as results arrive, in request order, and "
    'the requests of a prompt that exits are cancelled. `"est"` (Reinforce-Ada-Est, every backend): one batched '
    "call per step, the step's B·n samples split over its prompts by the memory's estimates, every sample trained. "
    '`"pilot_commit"` (Pilot-Commit, every backend): a pilot round over candidates beyond the batch, then a commit '
    "round for the B chosen by their pilot pass rates."
)


@functools.cache
def flat_fields(schedules: tuple[tuple[str, type[Section]], ...] | None = None) -> tuple[FlatField, ...]:
    """Every flat field of the plan and of the registered sections (default: `schedules.SCHEDULES`), in the order
    of their groups (`GROUPS`), then of their declaration: the schedules' fields first, then the shared ones."""
    registry = tuple(_registry().items()) if schedules is None else schedules
    found: dict[str, FlatField] = {
        "generation_schedule": FlatField(
            "generation_schedule", str, False, "rounds", GENERATION_SCHEDULE_HELP, SCHEDULING
        )
    }
    for name, section in registry:
        for leaf in _flat_leaves(section):
            known = found.get(leaf.name)
            if known is not None and (known.kind, known.default) != (leaf.kind, leaf.default):
                raise TypeError(
                    f"{leaf.name} is declared twice with different types or defaults ({section.__name__})."
                )
            owners = (known.owners if known else ()) + (name,)
            found[leaf.name] = dataclasses.replace(known or leaf, owners=owners)
    for leaf in _flat_leaves(SamplingPlan):
        if leaf.name not in ("section", "num_generations"):
            found[leaf.name] = leaf
    return tuple(sorted(found.values(), key=lambda f: GROUPS.index(f.group)))


def _flat_leaves(record: type) -> Iterator[FlatField]:
    for f, kind, optional in _record_kinds(record):
        if kind is None:  # a sub-record (the section, `Memory`, `PriorSizing`, ...)
            hint = typing.get_type_hints(record)[f.name]
            if hint is not Section:
                yield from _flat_leaves(hint)
            continue
        metadata = f.metadata
        group = metadata.get("group") or record.group
        help_text, off = metadata.get("help", ""), metadata.get("off", False)
        yield FlatField(flat_name(f), kind, optional, f.default, help_text, group, off)


def _leaves(record: Record) -> Iterator[tuple[dataclasses.Field, Any]]:
    """(field, value) of every leaf of a record, sub-records flattened; a plan's section is left out."""
    for f, kind, _ in _record_kinds(type(record)):
        if kind is not None:
            yield f, getattr(record, f.name)
        elif f.name != "section":
            yield from _leaves(getattr(record, f.name))


def build(record: type, values: Mapping[str, Any]) -> Any:
    """A record (and its sub-records) from flat values; a field absent from `values` takes its default."""
    kwargs = {}
    for f, kind, _ in _record_kinds(record):
        if kind is None:
            kwargs[f.name] = build(typing.get_type_hints(record)[f.name], values)
        elif flat_name(f) in values:
            kwargs[f.name] = values[flat_name(f)]
    return record(**kwargs)


def _registry() -> dict[str, type[Section]]:
    from .schedules import SCHEDULES  # the schedules import this module

    return SCHEDULES


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for f in flat_fields()}


# ------------------------------------------------------------------------------------------------------------------
# Presets: constructors of a plan
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """A named variant: the fields it sets, as a function of the group size n. Calling it builds its plan:
    `PRESETS["dapo"](num_generations=8, samples_per_round=8)`, explicit fields winning over the preset's."""

    name: str
    description: str
    fields: Callable[[int], dict[str, Any]]

    def __call__(self, num_generations: int = 4, **fields: Any) -> SamplingPlan:
        return resolve(fields, sampling=self.name, num_generations=num_generations)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "grpo",
            "plain GRPO sampling through the trainer's code path: one round of exactly n per prompt",
            lambda n: {"exit_rule": "none"},
        ),
        Preset(
            "balance",
            "Reinforce-Ada-Seq, balance (the paper's best variant): rounds of M=8 up to N=4 until ⌊n/2⌋ positives "
            "and n − ⌊n/2⌋ negatives",
            lambda n: {"exit_rule": "balance", "samples_per_round": 8, "max_rounds": 4},
        ),
        Preset(
            "pos",
            "Reinforce-Ada-Seq, pos: rounds of M=8 up to N=4 until one positive",
            lambda n: {"exit_rule": "pos", "samples_per_round": 8, "max_rounds": 4},
        ),
        Preset(
            "dapo",
            "DAPO's dynamic sampling: one round of n per candidate, 3x candidates, groups without signal refilled "
            "for up to 4 rounds",
            lambda n: {
                "exit_rule": "mixed",
                "samples_per_round": n,
                "max_rounds": 4,
                "prompt_oversampling": 3.0,
                "rounds_per_prompt": 1,
            },
        ),
        Preset(
            "budgeted_balance",
            "balance rounds on a budget (this package's design): rounds sized from a pass-rate memory across steps, "
            "futile prompts stopped, at most 2n completions per prompt on average",
            lambda n: {
                "exit_rule": "balance",
                "samples_per_round": 8,
                "max_rounds": 3,
                "pass_rate_memory": True,
                "sample_budget": float(2 * n),
                "first_round": "prior",
                "later_rounds": "prior",
                "futility_threshold": 0.05,
            },
        ),
        Preset(
            "est",
            "Reinforce-Ada-Est (the paper's Algorithm 1): one round per step, n·B samples split over the prompts "
            "∝ 1/√(p̂ + ε) from an Ada-EMA estimate (λ = 0.9, Beta(1, 1) prior), every sample trained, advantages "
            "weighted by 1/√(p + ε): the log objective, hybrid weighting",
            lambda n: {
                "generation_schedule": "est",
                "pass_rate_memory": True,
                "memory_decay": 0.9,
                "objective": "log",
                "objective_weighting": "hybrid",
            },
        ),
        Preset(
            "pilot_commit",
            "Pilot-Commit (arXiv 2605.26606): a pilot of max(2, ⌊n/2⌋) completions for 2B candidates, then the rest "
            "of a group of n committed to the B whose pilot pass rate is inside (0, 1), largest p(1 − p) first",
            lambda n: {"generation_schedule": "pilot_commit"},
        ),
    )
}

PRESET_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(name for p in PRESETS.values() for name in p.fields(4)))
"""The fields some preset sets, in the order the presets name them."""


def __getattr__(name: str) -> Any:
    """`PLAN_DEFAULTS` and `BASE_FIELDS`, computed from the sections on first use (they import this module)."""
    if name == "PLAN_DEFAULTS":
        return _defaults()
    if name == "BASE_FIELDS":
        defaults = _defaults()
        return {field_name: defaults[field_name] for field_name in PRESET_FIELDS}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_preset(sampling: Any) -> None:
    """A ValueError naming the presets unless `sampling` is one of their names or None."""
    if sampling is None:
        return
    if not isinstance(sampling, str):
        raise ValueError(
            f"sampling={sampling!r}: must be the name of one preset (a string), one of {sorted(PRESETS)}, e.g. "
            "sampling='est'; or None for no preset."
        )
    if sampling not in PRESETS:
        raise ValueError(
            f"sampling={sampling!r} is not a preset; choose one of {sorted(PRESETS)}, or leave it unset (None) and "
            "set the fields yourself."
        )


def preset_fields(
    sampling: str | None, num_generations: int, given: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resolved values of the preset-settable fields: `given` (a user's explicit value; None means not given)
    wins over the preset `sampling`, which wins over `base` (a trainer's own defaults), then the base defaults."""
    check_preset(sampling)
    check_group_size(num_generations)
    check_field_types({name: value for name, value in given.items() if value is not None})
    preset = PRESETS[sampling].fields(num_generations) if sampling is not None else {}
    defaults = {**_defaults(), **(base or {})}
    return {
        name: given[name] if given.get(name) is not None else preset.get(name, defaults[name])
        for name in PRESET_FIELDS
    }


# ------------------------------------------------------------------------------------------------------------------
# Resolution: flat fields -> a plan, with the refusals of fields the schedule has no use for
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """A trainer as the resolution sees it: the sections it runs (`schedules`, by name), its own defaults (`base`)
    and, for a trainer other than `ReinforceAdaTrainer`, how its refusals name it (`trainer`, `instead`)."""

    schedules: Mapping[str, type[Section]] | None = None  # None: schedules.SCHEDULES
    base: Mapping[str, Any] = field(default_factory=dict)
    trainer: str | None = None  # "the asynchronous trainer"
    instead: str = ""  # the alternative its refusals name ("train with the synchronous ReinforceAdaTrainer")
    why: str = ""  # why a field of a schedule it does not run cannot work there

    @property
    def registry(self) -> Mapping[str, type[Section]]:
        return _registry() if self.schedules is None else self.schedules

    def unknown_schedule(self, value: Any) -> str:
        """The refusal of a `generation_schedule` this trainer does not run."""
        names = list(self.registry)
        if self.trainer is None or value not in _registry():
            return f"generation_schedule={value!r}: choose one of {names}."
        return (
            f"generation_schedule={value!r} is not supported by {self.trainer} ({self.why}). Use "
            f"generation_schedule={names[0]!r} (the default) or sampling='est'."
        )

    def owners(self, name: str) -> list[type[Section]]:
        """The sections this trainer runs that have a use for the flat field `name`."""
        return [section for section in self.registry.values() if name in section_fields(section)]


SYNCHRONOUS = Host()


@dataclass(frozen=True)
class Context:
    """How a plan was asked for, as its refusals name it."""

    sampling: str | None
    explicit: Mapping[str, Any]
    num_generations: int
    host: Host

    def given(self, name: str) -> bool:
        """The field was given explicitly (not by the preset, the host's base or a default)."""
        return name in self.explicit


def given_fields(config: Any) -> dict[str, Any]:
    """The flat fields an object with the config's attributes holds at a value other than unset (`FlatField.unset`:
    None, or the default where None is a value of its own); an absent attribute is not given."""
    return {
        spec.name: getattr(config, spec.name)
        for spec in flat_fields()
        if getattr(config, spec.name, spec.unset) != spec.unset
    }


def explicit_fields(given: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `given` that say something: None means "not given", except for a field where None is a value
    of its own (`FlatField.unset`: `skip_unsolvable_draws=None`, never skip a prompt for being hard)."""
    specs = {f.name: f for f in flat_fields()}
    return {
        name: value
        for name, value in given.items()
        if name != "num_generations" and (value is not None or (name in specs and specs[name].unset is not None))
    }


_FROM_GIVEN: Any = object()
"""`resolve`'s default group size: `given`'s `num_generations` (default 4), where a caller passes none of its own."""


def resolve(
    given: Mapping[str, Any],
    *,
    sampling: str | None = None,
    num_generations: Any = _FROM_GIVEN,
    host: Host = SYNCHRONOUS,
) -> SamplingPlan:
    """The plan of flat fields: `given` (explicit: `explicit_fields`) wins over the preset `sampling`, which wins
    over the host's `base`, then the defaults of the sections.

    Explicit is explicit: a field given that the resolved schedule has no use for is refused whatever its value
    (unless its default means "off" and it is given at that default), in one line naming the field, what set the
    schedule and the fix; a field the preset sets that the schedule has no use for is refused by the preset's name.
    """
    check_preset(sampling)
    n = given.get("num_generations", 4) if num_generations is _FROM_GIVEN else num_generations
    check_group_size(n)
    explicit = explicit_fields(given)
    check_field_types(explicit)
    preset = PRESETS[sampling].fields(n) if sampling is not None else {}
    context = Context(sampling, explicit, n, host)
    values = {**host.base, **preset, **explicit}
    schedule = values.get("generation_schedule", "rounds")
    if schedule not in host.registry:
        raise ValueError(host.unknown_schedule(schedule))
    section_type = host.registry[schedule]
    owned = section_fields(section_type) | shared_fields()
    _refuse_preset_fields(preset, owned, section_type, context)
    specs = {f.name: f for f in flat_fields()}
    for name, value in explicit.items():
        if name not in owned and not (specs[name].off and value == specs[name].default):
            raise ValueError(_unused_message(name, value, section_type, context))
    section = build(section_type, values)
    for name, agrees in section.unused(n).items():
        if context.given(name) and explicit[name] != agrees:
            raise ValueError(section.unused_message(name, explicit[name], agrees, context))
    shared = {f.name: values[f.name] for f, kind, _ in _record_kinds(SamplingPlan) if kind and f.name in values}
    shared.pop("num_generations", None)
    return SamplingPlan(section, n, **shared, memory=build(Memory, values), objective=build(Objective, values))


def section_fields(section: type[Record]) -> set[str]:
    """The flat names of a section's fields (its sub-sections' included)."""
    return {leaf.name for leaf in _flat_leaves(section)}


def shared_fields() -> set[str]:
    """The flat names every schedule has a use for: the shared plan's and `generation_schedule`."""
    return {f.name for f in flat_fields() if f.shared}


def _refuse_preset_fields(
    preset: Mapping[str, Any], owned: set[str], section: type[Section], context: Context
) -> None:
    """A preset that sets a field the resolved schedule has no use for is refused by its name."""
    unused = [name for name in preset if name not in owned and not context.given(name)]
    if not unused:
        return
    host, sampling, sets = context.host, context.sampling, ", ".join(unused)
    if host.trainer is not None:
        supported = [name for name in sorted(PRESETS) if not preset_unused_fields(name, context.num_generations, host)]
        raise ValueError(
            f"sampling={sampling!r} is not supported by {host.trainer}: the preset sets {sets} ({host.why}). Choose "
            f"one of {supported}, or {host.instead}."
        )
    raise ValueError(
        f"sampling={sampling!r} sets {sets}, which generation_schedule={section.name!r} has no use for: "
        f"{section.summary}. Remove generation_schedule, or choose a preset that samples so."
    )


def preset_unused_fields(sampling: str, num_generations: int, host: Host = SYNCHRONOUS) -> list[str]:
    """The fields the preset `sampling` sets that the schedule it resolves to under `host` has no use for."""
    preset = PRESETS[sampling].fields(num_generations)
    section = host.registry.get({**host.base, **preset}.get("generation_schedule", "rounds"))
    if section is None:
        return ["generation_schedule"]
    owned = section_fields(section) | shared_fields()
    return [name for name in preset if name not in owned]


def _unused_message(name: str, value: Any, section: type[Section], context: Context) -> str:
    """The one-line refusal of an explicit field the resolved schedule has no use for: why (what the schedule
    does) and the fix (remove it, or choose a schedule that uses it)."""
    host = context.host
    spec = next(f for f in flat_fields() if f.name == name)
    alternative = f" (or set it to {spec.default!r})" if spec.off else ""
    owners = host.owners(name)
    if not owners:
        return (
            f"{name}={value!r} is not supported by {host.trainer} ({host.why}). Remove {name}{alternative}, or "
            f"{host.instead}."
        )
    source = ""
    preset = PRESETS[context.sampling].fields(context.num_generations) if context.sampling is not None else {}
    if not context.given("generation_schedule") and "generation_schedule" in preset:
        source = f" (set by sampling={context.sampling!r})"
    return (
        f"{name}={value!r} has no effect under generation_schedule={section.name!r}{source}: {section.summary}. "
        f"Remove {name}{alternative}, or {owners[0].choose}."
    )


# ------------------------------------------------------------------------------------------------------------------
# The docs' table
# ------------------------------------------------------------------------------------------------------------------


def fields_markdown() -> str:
    """The sampling fields as Markdown tables, one per group (`docs/configuration.md` includes this text)."""
    lines = []
    for group in GROUPS:
        lines += [f"**{group[0].upper()}{group[1:]}**", "", "| field | type | default | schedules | meaning |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for spec in (f for f in flat_fields() if f.group == group):
            kind = f"`{spec.kind.__name__}`" + (" or `None`" if spec.optional else "")
            schedules = ", ".join(f"`{owner}`" for owner in spec.owners) if spec.owners else "all"
            lines.append(f"| `{spec.name}` | {kind} | `{spec.default!r}` | {schedules} | {spec.help} |")
        lines.append("")
    return "\n".join(lines)


FIELDS_BEGIN = "<!-- sampling fields: begin (generated by `python -m trl_ada.plan`) -->"
FIELDS_END = "<!-- sampling fields: end -->"


def with_fields_markdown(page: str) -> str:
    """`page` (the text of `docs/configuration.md`) with `fields_markdown()` between its two markers."""
    begin, end = page.index(FIELDS_BEGIN) + len(FIELDS_BEGIN), page.index(FIELDS_END)
    return f"{page[:begin]}\n\n{fields_markdown()}\n{page[end:]}"


if __name__ == "__main__":  # `python -m trl_ada.plan [PAGE]`: print the tables, or write them into PAGE
    import sys

    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as page:
            text = with_fields_markdown(page.read())
        with open(sys.argv[1], "w", encoding="utf-8") as page:
            page.write(text)
    else:
        print(fields_markdown())
