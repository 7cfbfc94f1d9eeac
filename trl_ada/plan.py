"""`SamplingPlan`: every parameter of a step's sampling decisions, validated once, and the presets that fill it.

Pure Python (no numpy, no torch, no TRL). A `ReinforceAdaConfig` builds its plan in one place
(`ReinforceAdaConfig.sampling_plan`); the samplers, the streaming scheduler, the simulation, the toy experiments and
the benchmarks all take a plan, so no other module lists these parameters again. A plan is the *resolved* view: with
`exit_rule="none"` it samples one round of exactly n (`samples_per_round = n`, `max_rounds = 1`), whatever the
fields of the config said.

Every check here raises one `ValueError` that names the field (or both fields of a pair that cannot work together),
the value and the fix.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .exit_rules import exit_rule_names, get_exit_rule

__all__ = [
    "ADVANTAGE_BASELINES",
    "GENERATION_SCHEDULES",
    "OBJECTIVES",
    "OBJECTIVE_WEIGHTINGS",
    "PLAN_DEFAULTS",
    "PRESETS",
    "PRESET_FIELDS",
    "ROUND_SIZINGS",
    "Preset",
    "SamplingPlan",
    "check_field_types",
    "check_group_size",
    "check_preset",
    "check_type",
    "config_fields",
    "preset_fields",
    "require_memory",
    "unused_fields",
    "validate_estimation",
    "validate_objective",
    "validate_refill",
    "validate_sampling",
    "validate_transport",
]

ADVANTAGE_BASELINES = ("pool", "group")
GENERATION_SCHEDULES = ("rounds", "streaming", "est")
ROUND_SIZINGS = ("fixed", "prior")  # "fixed": samples_per_round per round; "prior": sized from the posterior
OBJECTIVES = ("linear", "log", "power")  # f(p) = p, log p, p^alpha (`objectives.py`)
OBJECTIVE_WEIGHTINGS = ("explicit", "implicit", "hybrid", "variance")  # where f'(p) goes (`objectives.py`)


@dataclass(frozen=True)
class SamplingPlan:
    """The parameters of every sampling decision of a step (see `ReinforceAdaConfig` for each field's meaning)."""

    num_generations: int = 4
    exit_rule: str = "balance"
    samples_per_round: int = 8
    max_rounds: int = 4
    positive_threshold: float = 0.7
    advantage_baseline: str = "pool"
    # Budgeted rounds: a pass-rate memory across steps, rounds sized from it, futility stop, step budget
    pass_rate_memory: bool = False
    memory_decay: float = 0.5
    memory_prior_alpha: float = 1.0
    memory_prior_beta: float = 1.0
    first_round: str = "fixed"
    later_rounds: str = "fixed"
    round_confidence: float = 0.5
    futility_threshold: float = 0.0
    sample_budget: float | None = None
    # Candidates beyond the batch: refill and pre-rollout skipping
    prompt_oversampling: float = 1.0
    rounds_per_prompt: int | None = None
    skip_threshold: float | None = None
    skip_exploration: float = 0.05
    skip_unsolvable_draws: int | None = 64
    skip_max_consecutive: int = 4
    # How generation is scheduled
    generation_schedule: str = "rounds"
    streaming_chunk: int = 1
    streaming_window: int | None = None
    # Reinforce-Ada-Est: one round allocated from the memory's estimates (generation_schedule="est")
    est_min_samples: int = 2
    est_max_samples: int | None = None
    # The objective: each prompt's weight f'(p), realised in the advantages and/or the allocation
    objective: str = "linear"
    objective_alpha: float = 0.5
    objective_weighting: str = "explicit"
    objective_epsilon: float = 0.05

    def __post_init__(self) -> None:
        check_group_size(self.num_generations)
        check_field_types({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        if self.exit_rule not in exit_rule_names():
            get_exit_rule(self.exit_rule)  # a ValueError listing the valid names
        if self.advantage_baseline not in ADVANTAGE_BASELINES:
            raise ValueError(
                f"advantage_baseline={self.advantage_baseline!r} is not supported; choose one of "
                f"{list(ADVANTAGE_BASELINES)}."
            )
        if not self.samples_adaptively:  # plain GRPO: one round of exactly n, whatever M and N said
            object.__setattr__(self, "samples_per_round", self.num_generations)
            object.__setattr__(self, "max_rounds", 1)
        if self.generation_schedule == "est":
            _validate_est(self)  # before the round checks, which do not apply to one allocated round
        validate_sampling(
            self.num_generations,
            self.samples_per_round,
            self.max_rounds,
            self.positive_threshold,
            rounds=self.generation_schedule != "est",
        )
        _validate_memory(self)
        validate_objective(self.objective, self.objective_alpha, self.objective_weighting, self.objective_epsilon)
        validate_estimation(
            self.num_generations,
            self.exit_rule,
            self.first_round,
            self.later_rounds,
            self.round_confidence,
            self.futility_threshold,
            self.sample_budget,
        )
        validate_refill(
            self.prompt_oversampling,
            self.skip_threshold,
            self.skip_exploration,
            self.rounds_per_prompt,
            self.skip_unsolvable_draws,
            self.skip_max_consecutive,
        )
        _validate_candidates(self)
        _validate_schedule(self)
        _validate_weighting(self)

    @classmethod
    def from_config(cls, config: Any) -> SamplingPlan:
        """The plan of a `ReinforceAdaConfig` (or any object with the same attributes), with the trainer's needs
        checked too: the priors of prior-sized first rounds and of skipping come from its pass-rate memory. A
        preset-settable field the config holds as None (unset, or unused by its schedule) takes the base default."""
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
        values.update({name: BASE_FIELDS[name] for name in PRESET_FIELDS if values[name] is None})
        plan = cls(**values)
        require_memory(plan)
        return plan

    def replace(self, **changes: Any) -> SamplingPlan:
        """This plan with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def samples_adaptively(self) -> bool:
        """True unless `exit_rule="none"` (plain GRPO: one round of exactly n per prompt)."""
        return self.exit_rule != "none"

    @property
    def uses_candidates(self) -> bool:
        """True when a step samples over candidates beyond its batch or may skip some (the refill schedule)."""
        return self.prompt_oversampling > 1.0 or self.skip_threshold is not None or self.rounds_per_prompt is not None

    @property
    def sizes_rounds_from_prior(self) -> bool:
        """True when some round is sized from the pass-rate posterior instead of `samples_per_round`."""
        return "prior" in (self.first_round, self.later_rounds)

    @property
    def estimates(self) -> bool:
        """True when a step reads a pass-rate posterior: memory, prior-sized rounds, futility stop or a budget."""
        return (
            self.pass_rate_memory
            or self.sizes_rounds_from_prior
            or self.futility_threshold > 0
            or self.sample_budget is not None
        )

    @property
    def cap(self) -> int:
        """M·N: the most completions one prompt may draw in a step."""
        return self.samples_per_round * self.max_rounds

    @property
    def candidate_rounds(self) -> int:
        """Rounds one candidate may sample: `rounds_per_prompt`, or `max_rounds` when it is None."""
        return self.max_rounds if self.rounds_per_prompt is None else min(self.rounds_per_prompt, self.max_rounds)

    @property
    def window(self) -> int:
        """Streaming: completions of one prompt in flight at most (`streaming_window`, default M)."""
        return self.samples_per_round if self.streaming_window is None else self.streaming_window

    @property
    def schedule(self) -> str:
        """The generation schedule that runs a step: `"rounds"`, `"refill"` (rounds over candidates), `"streaming"`
        or `"est"` (one round allocated from the pass-rate estimates)."""
        if self.generation_schedule in ("streaming", "est"):
            return self.generation_schedule
        return "refill" if self.uses_candidates else "rounds"

    @property
    def est_bounds(self) -> tuple[int, int]:
        """[N_min, N_max]: the fewest and most samples Est allocates to one prompt (N_max defaults to 4n)."""
        high = 4 * self.num_generations if self.est_max_samples is None else self.est_max_samples
        return self.est_min_samples, high

    @property
    def weights_gradients(self) -> bool:
        """True when the objective puts a weight other than 1 on some prompt's advantages."""
        return self.objective != "linear" and self.objective_weighting != "implicit"


# ------------------------------------------------------------------------------------------------------------------
# Presets
# ------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """A named variant: the plan fields it sets, as a function of the group size n."""

    description: str
    fields: Callable[[int], dict[str, Any]]


PRESETS: dict[str, Preset] = {
    "grpo": Preset(
        "plain GRPO sampling through the trainer's code path: one round of exactly n per prompt",
        lambda n: {"exit_rule": "none"},
    ),
    "balance": Preset(
        "Reinforce-Ada-Seq, balance (the paper's best variant): rounds of M=8 up to N=4 until ⌊n/2⌋ positives "
        "and n − ⌊n/2⌋ negatives",
        lambda n: {"exit_rule": "balance", "samples_per_round": 8, "max_rounds": 4},
    ),
    "pos": Preset(
        "Reinforce-Ada-Seq, pos: rounds of M=8 up to N=4 until one positive",
        lambda n: {"exit_rule": "pos", "samples_per_round": 8, "max_rounds": 4},
    ),
    "dapo": Preset(
        "DAPO's dynamic sampling: one round of n per candidate, 3x candidates, groups without signal refilled "
        "for up to 4 rounds",
        lambda n: {
            "exit_rule": "mixed",
            "samples_per_round": n,
            "max_rounds": 4,
            "rounds_per_prompt": 1,
            "prompt_oversampling": 3.0,
        },
    ),
    "budgeted_balance": Preset(
        "balance rounds on a budget (this package's design): rounds sized from a pass-rate memory across steps, "
        "futile prompts stopped, at most 2n completions per prompt on average",
        lambda n: {
            "exit_rule": "balance",
            "samples_per_round": 8,
            "max_rounds": 3,
            "pass_rate_memory": True,
            "first_round": "prior",
            "later_rounds": "prior",
            "futility_threshold": 0.05,
            "sample_budget": float(2 * n),
        },
    ),
    "est": Preset(
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
}

PLAN_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(SamplingPlan)}
"""Every plan field's base default: the one place they are written (`SamplingPlan`'s own defaults)."""

PRESET_FIELDS: tuple[str, ...] = (
    "exit_rule",
    "samples_per_round",
    "max_rounds",
    "pass_rate_memory",
    "first_round",
    "later_rounds",
    "futility_threshold",
    "sample_budget",
    "prompt_oversampling",
    "rounds_per_prompt",
    "memory_decay",
    "generation_schedule",
    "objective",
    "objective_weighting",
)
"""The fields a preset may set. A config holds them as None until they are resolved: None means "unset"."""

BASE_FIELDS: dict[str, Any] = {name: PLAN_DEFAULTS[name] for name in PRESET_FIELDS}
"""What a preset-settable field resolves to when neither the user nor a preset sets it (today's balance rounds)."""


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
    defaults = {**BASE_FIELDS, **(base or {})}
    return {
        name: given[name] if given.get(name) is not None else preset.get(name, defaults[name])
        for name in PRESET_FIELDS
    }


def unused_fields(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The preset-settable fields that the schedule of `resolved` (resolved fields and `num_generations`) has no
    use for, each with the one value that says what the schedule does anyway (None: no value does)."""
    if resolved["generation_schedule"] == "est":  # one allocated round, every sample kept
        return {name: _EST_AGREES.get(name) for name in _EST_UNUSED}
    if resolved["exit_rule"] == "none":  # plain GRPO: one round of exactly n
        return {"samples_per_round": resolved["num_generations"], "max_rounds": 1}
    return {}


_EST_UNUSED = ("exit_rule", "samples_per_round", "max_rounds", "first_round", "later_rounds", "futility_threshold")
_EST_UNUSED += ("sample_budget", "prompt_oversampling", "rounds_per_prompt")
_EST_AGREES = {"futility_threshold": 0.0, "prompt_oversampling": 1.0}  # "off": what one allocated round does anyway


def config_fields(
    sampling: str | None, num_generations: int, given: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The preset-settable fields as a config holds them: [`preset_fields`], with None for the fields the resolved
    schedule has no use for ([`unused_fields`]).

    Explicit is explicit: a field given (not None) that the schedule has no use for is refused, whatever its value
    (unless it says what the schedule does anyway), with one line naming the field, what sets the schedule, and
    the fix.
    """
    resolved = preset_fields(sampling, num_generations, given, base)
    unused = unused_fields({**resolved, "num_generations": num_generations})
    for name, agrees in unused.items():
        value = given.get(name)
        if value is not None and value != agrees:
            raise ValueError(_unused_message(name, value, agrees, resolved, given, num_generations))
    return {name: None if name in unused else value for name, value in resolved.items()}


def _unused_message(
    name: str, value: Any, agrees: Any, resolved: Mapping[str, Any], given: Mapping[str, Any], n: int
) -> str:
    alternative = "" if agrees is None else f" (or set it to {agrees!r})"
    if resolved["generation_schedule"] == "est":
        source = "" if given.get("generation_schedule") is not None else " (set by sampling='est')"
        return (
            f"{name}={value!r} has no effect under generation_schedule='est'{source}: Est samples one allocated "
            f"round per step and trains every sample (no exit rule, rounds or candidates). Remove {name}"
            f"{alternative}, or sample in rounds (sampling='balance', or generation_schedule='rounds')."
        )
    source = "exit_rule='none'" if given.get("exit_rule") is not None else "sampling='grpo' (exit_rule='none')"
    return (
        f"{name}={value!r} has no effect with {source}: plain GRPO samples one round of exactly "
        f"num_generations={n} per prompt. Remove {name}{alternative}, or choose an adaptive exit rule (e.g. "
        "sampling='balance') to sample in rounds."
    )


# ------------------------------------------------------------------------------------------------------------------
# Validation: single fields
# ------------------------------------------------------------------------------------------------------------------


def _check_integer(name: str, value: Any, minimum: int, fix: str) -> None:
    if isinstance(value, bool):  # bool is an int subclass: True would pass as 1
        raise ValueError(f"{name}={value!r}: must be an integer, not a boolean.")
    if not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}{fix}")


def check_group_size(num_generations: Any) -> None:
    """n must be an integer >= 2: checked first, since every other check and every preset reads it."""
    if isinstance(num_generations, bool):
        raise ValueError(f"num_generations={num_generations!r}: must be an integer, not a boolean.")
    if not _is_int(num_generations) or num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations!r}: the group size n must be an integer >= 2, since a group of one "
            "completion has no baseline."
        )


@functools.cache
def _field_kinds() -> dict[str, tuple[type, bool]]:
    """Each plan field's type (int, float, bool or str) and whether it may be None, read from `SamplingPlan`."""
    kinds = {}
    for name, hint in typing.get_type_hints(SamplingPlan).items():
        members = typing.get_args(hint) or (hint,)
        kinds[name] = (next(m for m in members if m is not type(None)), type(None) in members)
    return kinds


_KINDS: dict[type, tuple[str, Callable[[Any], bool]]] = {
    int: ("an integer", lambda value: _is_int(value)),
    float: ("a number", lambda value: isinstance(value, numbers.Real) and not isinstance(value, bool)),
    bool: ("True or False", lambda value: isinstance(value, bool)),
    str: ("a string", lambda value: isinstance(value, str)),
}


def check_field_types(values: Mapping[str, Any]) -> None:
    """A ValueError naming the first plan field in `values` whose value is not of its type (an integer, a number,
    True/False or a string; or None where allowed), its value and how to write it."""
    kinds = _field_kinds()
    for name, value in values.items():
        kind, optional = kinds[name]
        check_type(name, value, kind, optional, PLAN_DEFAULTS[name])


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # bool is an int subclass: True would pass as 1


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def validate_sampling(
    num_generations: int, samples_per_round: int, max_rounds: int, positive_threshold: float, rounds: bool = True
) -> None:
    """Raise a ValueError naming the parameter, the value and the fix for an impossible sampling plan (`rounds`:
    the plan samples in rounds, so M·N must fill a group)."""
    check_group_size(num_generations)
    _check_integer("samples_per_round", samples_per_round, 1, " (the paper uses 8).")
    _check_integer("max_rounds", max_rounds, 1, " (the paper uses 4).")
    if rounds and samples_per_round * max_rounds < num_generations:
        raise ValueError(
            f"samples_per_round * max_rounds = {samples_per_round} * {max_rounds} = {samples_per_round * max_rounds} "
            f"is smaller than num_generations={num_generations}: a prompt could never fill its group. Raise "
            f"samples_per_round or max_rounds so that their product is at least {num_generations}."
        )
    if not _is_number(positive_threshold):
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
    if not _is_number(round_confidence) or not 0.0 < round_confidence < 1.0:
        raise ValueError(
            f"round_confidence={round_confidence!r}: must be in (0, 1), the probability with which a prior-sized "
            "round should meet the exit rule (e.g. 0.5)."
        )
    if not _is_number(futility_threshold) or not 0.0 <= futility_threshold < 1.0:
        raise ValueError(
            f"futility_threshold={futility_threshold!r}: must be in [0, 1); 0 turns the futility stop off, e.g. 0.05 "
            "stops a prompt whose chance to meet its exit rule within its remaining cap is below 5%."
        )
    if sample_budget is not None and (not _is_number(sample_budget) or sample_budget < num_generations):
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


def validate_refill(
    prompt_oversampling: float,
    skip_threshold: float | None,
    skip_exploration: float,
    rounds_per_prompt: int | None,
    skip_unsolvable_draws: int | None,
    skip_max_consecutive: int,
) -> None:
    """Raise a ValueError naming the field, the value and the fix for an impossible candidate plan."""
    if not _is_number(prompt_oversampling) or prompt_oversampling < 1.0:
        raise ValueError(
            f"prompt_oversampling={prompt_oversampling!r}: must be >= 1.0 (a number); it is how many candidate "
            "prompts a step draws per prompt it trains on (1.0 = none beyond the batch, 3.0 = DAPO's usual refill "
            "reserve)."
        )
    if skip_threshold is not None and (not _is_number(skip_threshold) or not 0.0 < skip_threshold <= 1):
        raise ValueError(
            f"skip_threshold={skip_threshold!r}: must be in (0, 1] (e.g. 0.9 skips a candidate whose posterior chance "
            "of a group all right, or of skip_unsolvable_draws completions all wrong, is at least 90%), or None to "
            "never skip."
        )
    if not _is_number(skip_exploration) or not 0.0 <= skip_exploration <= 1.0:
        raise ValueError(
            f"skip_exploration={skip_exploration!r}: must be a probability in [0, 1] (e.g. 0.05: one skippable "
            "candidate in 20 is sampled anyway)."
        )
    if skip_unsolvable_draws is not None and (not _is_int(skip_unsolvable_draws) or skip_unsolvable_draws < 1):
        raise ValueError(
            f"skip_unsolvable_draws={skip_unsolvable_draws!r}: must be an integer >= 1 (e.g. 64: a prompt counts as "
            "unsolvable when 64 more completions would all be wrong with probability skip_threshold), or None to "
            "never skip a prompt for being hard."
        )
    if not _is_int(skip_max_consecutive) or skip_max_consecutive < 1:
        raise ValueError(
            f"skip_max_consecutive={skip_max_consecutive!r}: must be an integer >= 1 (e.g. 4: a prompt skipped 4 "
            "times in a row is sampled at its next turn, so the memory sees it again)."
        )
    if rounds_per_prompt is not None and (not _is_int(rounds_per_prompt) or rounds_per_prompt < 1):
        raise ValueError(
            f"rounds_per_prompt={rounds_per_prompt!r}: must be an integer >= 1 (1 = DAPO: one round per candidate), "
            "or None for max_rounds."
        )


def validate_transport(max_retries: Any, request_timeout: Any) -> None:
    """Streaming's request settings: retries an integer >= 0, the timeout a number of seconds > 0."""
    if not _is_int(max_retries) or max_retries < 0:
        raise ValueError(f"streaming_max_retries={max_retries!r}: must be an integer >= 0 (e.g. 2).")
    if not _is_number(request_timeout) or request_timeout <= 0:
        raise ValueError(
            f"streaming_request_timeout={request_timeout!r}: must be a number of seconds > 0 (e.g. 600.0), not a "
            f"{type(request_timeout).__name__}."
        )


def validate_objective(objective: Any, alpha: Any, weighting: Any, epsilon: Any) -> None:
    """The objective f, its exponent, how its weight is split, and the floor ε of the pass rate it reads."""
    if objective not in OBJECTIVES:
        raise ValueError(
            f"objective={objective!r}: choose one of {list(OBJECTIVES)} ('linear': GRPO's E[p]; 'log': E[log p], "
            "weight 1/p; 'power': E[p^objective_alpha])."
        )
    if objective == "power" and (not _is_number(alpha) or alpha <= 0):
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
    if not _is_number(epsilon) or not 0.0 < epsilon <= 1.0:
        raise ValueError(
            f"objective_epsilon={epsilon!r}: the floor added to a pass rate before weighting must be in (0, 1] "
            "(e.g. 0.05: the log objective's weight is then at most 1/0.05 = 20)."
        )


def _validate_memory(plan: SamplingPlan) -> None:
    if not isinstance(plan.pass_rate_memory, bool):
        raise ValueError(f"pass_rate_memory={plan.pass_rate_memory!r}: must be True or False.")
    if not _is_number(plan.memory_decay) or not 0.0 < plan.memory_decay <= 1.0:
        raise ValueError(
            f"memory_decay={plan.memory_decay!r}: must be in (0, 1] (a number); 1 keeps all past evidence, 0.5 halves "
            "the weight of earlier visits at each visit."
        )
    for name in ("memory_prior_alpha", "memory_prior_beta"):
        value = getattr(plan, name)
        if not _is_number(value) or value <= 0:
            raise ValueError(
                f"{name}={value!r}: the Beta prior of an unseen prompt's pass rate needs positive parameters (e.g. "
                "1 and 1: uniform; 1 and 16: most prompts are hard)."
            )


# ------------------------------------------------------------------------------------------------------------------
# Validation: options that cannot work together
# ------------------------------------------------------------------------------------------------------------------


def require_memory(plan: SamplingPlan) -> None:
    """A trainer's priors come from its pass-rate memory: prior-sized first rounds and skipping need it on. (A sampler
    built directly takes its priors from the caller instead.)"""
    if plan.first_round == "prior" and not plan.pass_rate_memory:
        raise ValueError(
            "first_round='prior' sizes the first round from the pass-rate memory, but pass_rate_memory=False. Set "
            "pass_rate_memory=True, or use first_round='fixed'."
        )
    if plan.skip_threshold is not None and not plan.pass_rate_memory:
        raise ValueError(
            f"skip_threshold={plan.skip_threshold!r} skips candidates from the pass-rate memory, but "
            "pass_rate_memory=False. Set pass_rate_memory=True, or skip_threshold=None."
        )


def _validate_candidates(plan: SamplingPlan) -> None:
    if plan.rounds_per_prompt is None:
        return
    if not plan.samples_adaptively:
        raise ValueError(
            f"rounds_per_prompt={plan.rounds_per_prompt!r} with exit_rule='none': plain GRPO samples one round per "
            "prompt, so there are no rounds to cap. Remove rounds_per_prompt, or use an adaptive exit rule."
        )
    if plan.rounds_per_prompt > plan.max_rounds:
        raise ValueError(
            f"rounds_per_prompt={plan.rounds_per_prompt} is more than max_rounds={plan.max_rounds}, the rounds of "
            "the whole step. Lower rounds_per_prompt, or raise max_rounds."
        )
    if plan.samples_per_round * plan.rounds_per_prompt < plan.num_generations:
        raise ValueError(
            f"samples_per_round * rounds_per_prompt = {plan.samples_per_round} * {plan.rounds_per_prompt} is "
            f"smaller than num_generations={plan.num_generations}: a candidate could never fill its group. Raise "
            "rounds_per_prompt or samples_per_round."
        )


def _validate_est(plan: SamplingPlan) -> None:
    """Est samples one allocated round from the memory: bounds that can meet the total, nothing it would ignore."""
    n = plan.num_generations
    if not plan.pass_rate_memory:
        raise ValueError(
            "generation_schedule='est' allocates each step from the pass-rate memory's estimates, but "
            "pass_rate_memory=False. Set pass_rate_memory=True (sampling='est' does), or use "
            "generation_schedule='rounds'."
        )
    for name, value in ((name, getattr(plan, name)) for name in _EST_UNUSED):
        if value != BASE_FIELDS[name]:  # a plan holds resolved values: one that differs from the default was set
            raise ValueError(
                f"generation_schedule='est' samples one allocated round and keeps every sample, so {name}={value!r} "
                f"would be ignored. Remove {name} (Est has no exit rule, rounds or candidates), or use "
                "generation_schedule='rounds'."
            )
    for name, value in (("skip_threshold", plan.skip_threshold), ("streaming_window", plan.streaming_window)):
        if value is not None:
            raise ValueError(
                f"generation_schedule='est' with {name}={value!r}: Est samples every prompt of the batch in one "
                f"allocated round. Remove {name}, or use generation_schedule='rounds'."
            )
    low, high = plan.est_min_samples, plan.est_max_samples
    _check_integer("est_min_samples", low, 2, " (a prompt's samples need a baseline: 2 or more).")
    if high is not None:
        _check_integer("est_max_samples", high, 2, ", or None for 4 * num_generations.")
    if low > n:
        raise ValueError(
            f"est_min_samples={low} is more than num_generations={n}: a step allocates n samples per prompt on "
            f"average, so B prompts cannot all get {low}. Lower est_min_samples to at most {n}."
        )
    if plan.est_bounds[1] < n:
        raise ValueError(
            f"est_max_samples={high} is less than num_generations={n}: a step allocates n samples per prompt on "
            f"average, so B prompts with at most {high} each cannot meet the total. Raise est_max_samples to at least "
            f"{n}, or leave it None (4 * num_generations)."
        )


def _validate_weighting(plan: SamplingPlan) -> None:
    """Only Est sizes samples per prompt: the other schedules realise a weight in the advantages alone."""
    if plan.objective_weighting != "explicit" and plan.schedule != "est":
        raise ValueError(
            f"objective_weighting={plan.objective_weighting!r} sizes each prompt's samples by its weight, but "
            f"generation_schedule={plan.generation_schedule!r} does not allocate samples (its rounds realise the "
            "implicit part by their exit rule). Use objective_weighting='explicit' (the weight on the advantages: "
            "the paper's 1/p for Seq under objective='log'), or generation_schedule='est'."
        )


def _validate_schedule(plan: SamplingPlan) -> None:
    schedule = plan.generation_schedule
    if schedule not in GENERATION_SCHEDULES:
        raise ValueError(f"generation_schedule={schedule!r}: choose one of {list(GENERATION_SCHEDULES)}.")
    if schedule in ("rounds", "est"):
        if plan.streaming_window is not None:
            raise ValueError(
                f"streaming_window={plan.streaming_window!r} with generation_schedule='rounds': the window only "
                "applies to streaming. Set generation_schedule='streaming', or remove streaming_window."
            )
        return
    if not _is_int(plan.streaming_chunk) or not 1 <= plan.streaming_chunk <= plan.samples_per_round:
        raise ValueError(
            f"streaming_chunk={plan.streaming_chunk!r}: completions per request must be an integer in [1, "
            f"samples_per_round={plan.samples_per_round}]."
        )
    window = plan.streaming_window
    if window is not None and (not _is_int(window) or not plan.streaming_chunk <= window <= plan.cap):
        raise ValueError(
            f"streaming_window={window!r}: completions of a prompt in flight must be an integer in "
            f"[streaming_chunk={plan.streaming_chunk}, samples_per_round * max_rounds={plan.cap}], or None for "
            f"samples_per_round={plan.samples_per_round}."
        )
    for name in ("first_round", "later_rounds"):
        if getattr(plan, name) != "fixed":
            raise ValueError(
                f"{name}={getattr(plan, name)!r} sizes rounds, but generation_schedule='streaming' has none: it keeps "
                f"samples_per_round completions of each active prompt in flight. Use {name}='fixed', or "
                "generation_schedule='rounds'."
            )
    conflicts = {
        "prompt_oversampling": plan.prompt_oversampling != 1.0,
        "rounds_per_prompt": plan.rounds_per_prompt is not None,
        "skip_threshold": plan.skip_threshold is not None,
    }
    for name, conflicting in conflicts.items():
        if conflicting:
            raise ValueError(
                f"generation_schedule='streaming' with {name}={getattr(plan, name)!r}: candidates, refill and "
                "pre-rollout skipping run on the round schedule only. Use generation_schedule='rounds', or remove "
                f"{name}."
            )
