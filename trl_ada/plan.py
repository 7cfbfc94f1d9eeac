"""The sampling plan: a small shared part and one section per generation schedule, whose type is the schedule.

    SamplingPlan(section, num_generations, positive_threshold, advantage_baseline, memory, objective)

Pure Python; it imports nothing of the package but `utils`. The shared part is what every schedule reads (n, what
counts as positive, the baseline, the pass-rate memory, the objective); a section is a frozen dataclass in its
schedule's own module, which registers it here (`register`) under the name `generation_schedule` takes.

Every field is declared once, with its default, help and flat name (the config's, the recipes' and the command line's
spelling) as metadata (`option`), and is type-checked from that declaration when its record is built. `flat_fields()`
lists the fields with the schedules that own them; `resolve` turns flat fields into a plan and refuses, in one line,
a field the resolved schedule does not own, whatever its value (explicit is explicit).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .records import Record, build, check_integer, flat_name, leaf_fields, leaf_values, option
from .utils import closest_name

ADVANTAGE_BASELINES = ("pool", "group")
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


def check_group_size(num_generations: Any) -> None:
    """n must be an integer >= 2: checked first, since every other check and every preset reads it."""
    check_integer("num_generations", num_generations, 2, " (the group size n: a group of one has no baseline).")


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
        within="(0, 1]",
    )
    prior_alpha: float = option(
        1.0,
        "α of the Beta(α, β) prior of a prompt the memory has not seen: p̂ = (N_pos + α) / (N_total + α + β).",
        flat="memory_prior_alpha",
        within="(0, inf)",
    )
    prior_beta: float = option(
        1.0,
        "β of that prior. Beta(1, 16) (most prompts hard) is the reference code's experimental choice, for data "
        "filtered to hard prompts.",
        flat="memory_prior_beta",
        within="(0, inf)",
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
        choices=OBJECTIVES,
    )
    alpha: float = option(0.5, 'α > 0 of `objective="power"`.', flat="objective_alpha", within="(0, inf)")
    weighting: str = option(
        "explicit",
        '`"explicit"`: the advantages of a prompt are multiplied by its weight at the pass rate of its samples in '
        'the step (every schedule; with `balance` and `"log"` this is Reinforce-Ada-Seq\'s 1/p̂). Est only: '
        '`"implicit"` (samples ∝ weight), `"hybrid"` (samples and advantages ∝ √weight) and `"variance"` (log '
        "objective: the variance-optimal split). Advantage weights are normalised so that their mean over the "
        "step's trained samples with signal is 1.",
        flat="objective_weighting",
        choices=OBJECTIVE_WEIGHTINGS,
    )
    epsilon: float = option(
        0.05,
        'The floor ε in (0, 1] added to a pass rate before weighting: no weight exceeds f′(ε) (20 under `"log"`).',
        flat="objective_epsilon",
        within="(0, 1]",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weighting == "variance" and self.function != "log":
            raise ValueError(
                f"objective_weighting='variance' splits the log objective's weight 1/p, but objective="
                f"{self.function!r}. Set objective='log', or choose another objective_weighting."
            )

    @property
    def weights_gradients(self) -> bool:
        """True when the objective puts a weight other than 1 on some prompt's advantages."""
        return self.function != "linear" and self.weighting != "implicit"


@dataclass(frozen=True)
class Section(Record):
    """A schedule's own parameters; a subclass is one schedule, registered by `register`. The first paragraph of its
    docstring is the schedule's help. `name`: the value of `generation_schedule`; `sampler`: the step's sampler
    (None: `AdaptiveSampler`); `allocates_samples`: it sizes prompts' samples by the objective's weight;
    `all_negative`: what a step without positives does (the `positive_threshold` warning)."""

    group: ClassVar[str] = SAMPLING
    name: ClassVar[str]
    sampler: ClassVar[type | None] = None
    allocates_samples: ClassVar[bool] = False
    samples_adaptively: ClassVar[bool] = True
    all_negative: ClassVar[str] = "every trained group is flat."

    def schedule_class(self) -> type:
        """The `schedules.base.Schedule` subclass that runs this section in `ReinforceAdaTrainer`."""
        raise NotImplementedError(f"{type(self).__name__} runs in no synchronous trainer.")

    def check(self, plan: SamplingPlan) -> None:
        """Refuse what this section cannot do with the shared plan (one ValueError)."""

    def check_trainer(self, plan: SamplingPlan, config: Any) -> None:
        """Refuse what the trainer's config cannot give this section (a backend, the pass-rate memory)."""


@dataclass
class Host:
    """A trainer as the resolution sees it: its name in refusals, its default schedule and its sections by name.
    `load` imports the modules whose sections register here (set by the package for its built-in schedules)."""

    trainer: str
    default: str
    schedules: dict[str, type[Section]] = field(default_factory=dict)
    load: Callable[[], Any] = lambda: None

    @property
    def registry(self) -> dict[str, type[Section]]:
        self.load()
        return self.schedules


SYNCHRONOUS = Host("ReinforceAdaTrainer", "rounds")
ASYNCHRONOUS = Host("the asynchronous trainer", "streaming")


def register(section: type[Section] | None = None, *, host: Host = SYNCHRONOUS) -> Any:
    """Register `section` under its name with `host` (a decorator: `@register`, `@register(host=ASYNCHRONOUS)`);
    its fields become flat fields, its name a value of `generation_schedule`."""
    if section is None:
        return functools.partial(register, host=host)
    host.schedules[section.name] = section
    return section


def section_fields(section: type[Record]) -> set[str]:
    """The flat names of a section's fields (its sub-sections' included)."""
    return {flat_name(f) for f, *_ in leaf_fields(section)}


@dataclass(frozen=True)
class SamplingPlan(Record):
    """Every parameter of a step's sampling decisions: the shared part and the schedule's `section`."""

    group: ClassVar[str] = SAMPLING

    section: Section
    num_generations: int = 4
    positive_threshold: float = option(
        0.7,
        "A completion is positive when its weighted reward is strictly greater than this value (0.7 suits 0/1 "
        "rewards; with several reward functions it applies to their weighted sum).",
        within="(-inf, inf)",
    )
    advantage_baseline: str = option(
        "pool",
        '`"pool"`: A = r − mean of every reward drawn for the prompt in the step (the paper\'s estimator). '
        '`"group"`: A = r − mean of the n kept rewards (GRPO\'s baseline). With `scale_rewards="group"` the '
        "matching std divides the advantage.",
        choices=ADVANTAGE_BASELINES,
    )
    memory: Memory = Memory()
    objective: Objective = Objective()

    def __post_init__(self) -> None:
        check_group_size(self.num_generations)
        if not isinstance(self.section, Section):
            raise ValueError(f"section={self.section!r}: must be a schedule's section (`trl_ada.plan.register`).")
        super().__post_init__()
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
    def from_config(
        cls, config: Any, given: Mapping[str, Any] | None = None, host: Host = SYNCHRONOUS
    ) -> SamplingPlan:
        """The plan of an object with the config's attributes (`given`, default `given_fields(config)`), the trainer's
        needs checked too (`Section.check_trainer`)."""
        given = given_fields(config) if given is None else given
        sampling, n = getattr(config, "sampling", None), config.num_generations
        plan = resolve(given, sampling=sampling, num_generations=n, host=host)
        plan.section.check_trainer(plan, config)
        return plan

    def replace(self, **changes: Any) -> SamplingPlan:
        """This plan with some flat fields changed: `changes` are explicit (None sets a field to None), this plan's
        fields are the base they win over, so `replace(generation_schedule="grpo")` of a balance plan is plain GRPO."""
        base = self.fields() | {name: value for name, value in changes.items() if value is None}
        explicit = {name: value for name, value in changes.items() if value is not None}
        host = next((h for h in (ASYNCHRONOUS, SYNCHRONOUS) if type(self.section) in h.registry.values()), SYNCHRONOUS)
        return resolve(explicit, num_generations=changes.get("num_generations", self.n), host=host, base=base)

    @property
    def n(self) -> int:
        return self.num_generations

    @property
    def generation_schedule(self) -> str:
        return self.section.name

    def fields(self) -> dict[str, Any]:
        """The plan by flat names: the section's fields, `generation_schedule`, then the shared ones; only fields the
        schedule uses."""
        values = dict(leaf_values(self.section))
        values["generation_schedule"] = self.generation_schedule
        return values | {name: value for name, value in leaf_values(self) if name != "num_generations"}


@dataclass(frozen=True)
class FlatField:
    """One field as the config spells it: its type (`kind`, and whether None is a value), default, help and group,
    and the schedules (`owners`, by registered name) that use it; a shared field has none."""

    name: str
    kind: type
    optional: bool
    default: Any
    help: str
    group: str
    owners: tuple[str, ...] = ()

    @property
    def unset(self) -> Any:
        """What a config holds while the field is not given: None, except where None is a value of its own
        (`skip_unsolvable_draws=None`: never), where it is the default."""
        return self.default if self.optional and self.default is not None else None


def flat_fields(host: Host = SYNCHRONOUS) -> tuple[FlatField, ...]:
    """Every flat field of the plan and of `host`'s sections, in the order of their groups (`GROUPS`), then of their
    declaration: the schedules' fields first, then the shared ones."""
    return _flat_fields(tuple(host.registry.items()))


@functools.cache
def _flat_fields(registry: tuple[tuple[str, type[Section]], ...]) -> tuple[FlatField, ...]:
    schedules = " ".join(f'`"{name}"`: {_summary(section)}' for name, section in registry)
    help_text = f"Which schedule runs a step. {schedules}"
    found = {"generation_schedule": FlatField("generation_schedule", str, False, "rounds", help_text, SCHEDULING)}
    for name, section in registry:
        for leaf in _flat_leaves(section):
            known = found.get(leaf.name)
            if known is not None and (known.kind, known.default) != (leaf.kind, leaf.default):
                raise TypeError(
                    f"{leaf.name} is declared twice with different types or defaults ({section.__name__})."
                )
            found[leaf.name] = dataclasses.replace(known or leaf, owners=(known.owners if known else ()) + (name,))
    found |= {leaf.name: leaf for leaf in _flat_leaves(SamplingPlan) if leaf.name != "num_generations"}
    return tuple(sorted(found.values(), key=lambda f: GROUPS.index(f.group)))


def _summary(section: type[Section]) -> str:
    """The first paragraph of a section's docstring, on one line: its schedule's help."""
    return " ".join(inspect.getdoc(section).split("\n\n")[0].split())


def _flat_leaves(record: type) -> Iterator[FlatField]:
    for f, kind, optional, owner in leaf_fields(record):
        group = f.metadata.get("group") or owner.group
        yield FlatField(flat_name(f), kind, optional, f.default, f.metadata.get("help", ""), group)


def defaults() -> dict[str, Any]:
    """Every flat field's default."""
    return {f.name: f.default for f in flat_fields()}


def given_fields(config: Any) -> dict[str, Any]:
    """The flat fields an object with the config's attributes holds at a value other than `FlatField.unset`."""
    return {f.name: getattr(config, f.name) for f in flat_fields() if getattr(config, f.name, f.unset) != f.unset}


def explicit_fields(given: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `given` that say something (None means "not given", except where None is a value of its own:
    `FlatField.unset`), the group size left out; a name that is no flat field is refused."""
    specs = {f.name: f for f in flat_fields()}
    for name, value in given.items():
        if name not in specs and name != "num_generations":
            close = closest_name(name, specs)
            hint = f" Did you mean {close!r}?" if close else ""
            raise ValueError(f"{name}={value!r}: not a sampling field (`trl_ada.plan.flat_fields()`).{hint}")
    return {
        name: value
        for name, value in given.items()
        if name != "num_generations" and (value is not None or specs[name].unset is not None)
    }


@dataclass(frozen=True)
class Preset:
    """A named variant: the fields it sets, as a function of the group size n. Calling it builds its plan:
    `PRESETS["dapo"](num_generations=8, samples_per_round=8)`, explicit fields winning over the preset's."""

    name: str
    fields: Callable[[int], dict[str, Any]]

    def __call__(self, num_generations: int = 4, **fields: Any) -> SamplingPlan:
        return resolve(fields, sampling=self.name, num_generations=num_generations)


_SEQ = {"samples_per_round": 8, "max_rounds": 4}  # the paper's M and N
PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("grpo", lambda n: {"generation_schedule": "grpo"}),  # plain GRPO: one round of exactly n
        Preset("balance", lambda n: {"exit_rule": "balance", **_SEQ}),  # Reinforce-Ada-Seq, the paper's best
        Preset("pos", lambda n: {"exit_rule": "pos", **_SEQ}),  # Reinforce-Ada-Seq: until one positive
        Preset(  # DAPO's dynamic sampling: one round of n per candidate, 3x candidates, refilled for up to 4 rounds
            "dapo",
            lambda n: {
                "exit_rule": "mixed",
                "samples_per_round": n,
                "max_rounds": 4,
                "prompt_oversampling": 3.0,
                "rounds_per_prompt": 1,
            },
        ),
        Preset(  # balance rounds sized from the memory, futile prompts stopped, 2n completions per prompt on average
            "budgeted_balance",
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
        Preset(  # Reinforce-Ada-Est (Algorithm 1): Ada-EMA with λ = 0.9, the log objective, hybrid weighting
            "est",
            lambda n: {
                "generation_schedule": "est",
                "pass_rate_memory": True,
                "memory_decay": 0.9,
                "objective": "log",
                "objective_weighting": "hybrid",
            },
        ),
        Preset("pilot_commit", lambda n: {"generation_schedule": "pilot_commit"}),  # Pilot-Commit, arXiv 2605.26606
    )
}

PRESET_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(name for p in PRESETS.values() for name in p.fields(4)))
"""The fields some preset sets, in the order the presets name them."""


def check_preset(sampling: Any) -> None:
    """A ValueError naming the presets unless `sampling` is one of their names or None."""
    if sampling is not None and (not isinstance(sampling, str) or sampling not in PRESETS):
        close = closest_name(sampling, PRESETS) if isinstance(sampling, str) else None
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ValueError(
            f"sampling={sampling!r} is not a preset{hint}: choose one of {sorted(PRESETS)}, or leave it unset (None) "
            "and set the fields yourself."
        )


def resolve(
    given: Mapping[str, Any],
    *,
    sampling: str | None = None,
    num_generations: Any = ...,
    host: Host = SYNCHRONOUS,
    base: Mapping[str, Any] | None = None,
) -> SamplingPlan:
    """The plan of flat fields: `given` (explicit: `explicit_fields`) wins over the preset `sampling`, which wins
    over `base`, then the sections' defaults. `num_generations` defaults to `given`'s, else 4.

    Explicit is explicit: a field given that the resolved schedule does not own is refused whatever its value, and
    so is a preset that sets one (`unused_refusal`). `exit_rule="none"`, plain GRPO's former alias, is refused with
    its replacement, `sampling="grpo"`.
    """
    check_preset(sampling)
    n = given.get("num_generations", 4) if num_generations is ... else num_generations
    check_group_size(n)
    explicit = explicit_fields(given)
    if explicit.get("exit_rule") == "none":  # plain GRPO's former alias: this refusal for one release, then gone
        raise ValueError(
            "exit_rule='none': plain GRPO is sampling='grpo' now; remove exit_rule and set sampling='grpo'."
        )
    preset = PRESETS[sampling].fields(n) if sampling is not None else {}
    chosen = explicit.get("generation_schedule", preset.get("generation_schedule"))
    if chosen != preset.get("generation_schedule", chosen):
        raise ValueError(
            f"sampling={sampling!r} runs generation_schedule={preset['generation_schedule']!r}, but "
            f"generation_schedule={chosen!r} is given too. Remove generation_schedule, or remove sampling."
        )
    values = {**(base or {}), **preset, **explicit}
    layers = ((explicit, ""), (preset, f" (set by sampling={sampling!r})"), (base or {}, ""))
    name, chosen_by = choose_schedule(host, layers)
    if name not in host.registry:
        close = closest_name(name, host.registry)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ValueError(f"generation_schedule={name!r}{hint}: {host.trainer} runs one of {list(host.registry)}.")
    section = host.registry[name]
    owned = _owned(section)
    unused_preset = [field for field in preset if field not in owned and field not in explicit]
    if unused_preset:
        usable = [other for other in sorted(PRESETS) if not preset_unused_fields(other, n, host)]
        raise ValueError(
            f"sampling={sampling!r} sets {', '.join(unused_preset)}, which generation_schedule={name!r}{chosen_by} "
            f"does not use. Remove {'generation_schedule' if 'generation_schedule' in explicit else 'sampling'}, or "
            f"choose another preset (those {host.trainer} runs: {usable})."
        )
    for field_name, value in explicit.items():
        if field_name not in owned:
            raise ValueError(unused_refusal(field_name, value, f"{name!r}{chosen_by}", host))
    own = {flat_name(f) for f, _, _, owner in leaf_fields(SamplingPlan) if owner is SamplingPlan}
    shared = {name: values[name] for name in own - {"num_generations"} if name in values}
    memory, objective = build(Memory, values), build(Objective, values)
    return SamplingPlan(build(section, values), n, **shared, memory=memory, objective=objective)


def choose_schedule(host: Host, layers: tuple[tuple[Mapping[str, Any], str], ...]) -> tuple[str, str]:
    """The schedule's name and what chose it (`" (set by ...)"`, for refusals): `generation_schedule` of the first
    layer of values that sets it (explicit, preset, base, each with how a refusal names it); else the host's
    default."""
    for layer, source in layers:
        if "generation_schedule" in layer:
            return layer["generation_schedule"], source
    return host.default, ""


def unused_refusal(name: str, value: Any, schedule: str, host: Host) -> str:
    """The one refusal of an explicit field the resolved `schedule` does not use: it names the field, its value, the
    schedule, the schedules of `host` that use it (`FlatField.owners`) and the fix."""
    owners = [owner for owner, section in host.registry.items() if name in section_fields(section)]
    users = (
        f"generation_schedule {', '.join(map(repr, owners))} do" if owners else f"no schedule of {host.trainer} does"
    )
    choose = ", or choose a schedule that uses it" if owners else ""
    return f"{name}={value!r}: generation_schedule={schedule} does not use it ({users}). Remove {name}{choose}."


def _owned(section: type[Section]) -> set[str]:
    """The flat fields a schedule uses: its section's and the shared ones."""
    return section_fields(section) | section_fields(SamplingPlan) | {"generation_schedule"}


def preset_unused_fields(sampling: str, num_generations: int, host: Host = SYNCHRONOUS) -> list[str]:
    """The fields the preset `sampling` sets that the schedule it resolves to under `host` does not use."""
    preset = PRESETS[sampling].fields(num_generations)
    section = host.registry.get(choose_schedule(host, ((preset, ""),))[0])
    return ["generation_schedule"] if section is None else [name for name in preset if name not in _owned(section)]
