"""Every sampling field's range and choices, read from its declaration (`option(..., within=..., choices=...)`), under
the synchronous and the asynchronous host: each numeric or fixed-choice field declares one; a value just outside
each finite bound, NaN, and a value of the wrong type are refused in one line naming the field and the value; a
closed bound, every choice and the default (the example a refusal offers as the fix) are accepted. Torch-free."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from refusals import names, refusal

from trl_ada.plan import ASYNCHRONOUS, SYNCHRONOUS, Host, SamplingPlan, flat_fields, resolve
from trl_ada.records import flat_name, in_interval, leaf_fields

REGISTRY_CHECKED = {"exit_rule"}  # checked against the user-extensible registry (`register_exit_rule`)
HOSTS = {"sync": SYNCHRONOUS, "async": ASYNCHRONOUS}
COMPANIONS = {"est": {"pass_rate_memory": True}}  # what a schedule needs besides its field to resolve at all
CHOICE_COMPANIONS = {  # what a choice needs to be accepted (cross-field checks that stay in the sections)
    ("objective_weighting", "implicit"): {"generation_schedule": "est", "pass_rate_memory": True},
    ("objective_weighting", "hybrid"): {"generation_schedule": "est", "pass_rate_memory": True},
    ("objective_weighting", "variance"): {"generation_schedule": "est", "pass_rate_memory": True, "objective": "log"},
}
REFUSED_UNDER = 4  # the group size refusals are checked with
SMALLEST_GROUP = 2  # bounds are accepted under it, so that a bound a section holds to n (at least n) is reachable


@dataclass(frozen=True)
class Declared:
    """A flat field as declared: its type, default, `within` / `choices`, and a schedule that owns it (None: the
    shared plan's, which every schedule owns)."""

    host: str
    name: str
    kind: type
    optional: bool
    default: Any
    within: str | None
    choices: tuple[Any, ...] | None
    schedule: str | None

    def given(self, value: Any, **extra: Any) -> dict[str, Any]:
        """The flat fields that give this field `value` to a schedule that owns it."""
        owner = (
            {}
            if self.schedule is None
            else {"generation_schedule": self.schedule, **COMPANIONS.get(self.schedule, {})}
        )
        return {**owner, **extra, self.name: value}

    def plan(self, value: Any, num_generations: int, **extra: Any) -> SamplingPlan:
        return resolve(self.given(value, **extra), num_generations=num_generations, host=HOSTS[self.host])

    def refused(self, value: Any) -> str:
        return refusal(resolve, self.given(value), num_generations=REFUSED_UNDER, host=HOSTS[self.host])


def declared(host_name: str, host: Host) -> list[Declared]:
    """Every leaf field of `host`'s sections and of the shared plan, from the records' declarations."""
    found: dict[str, Declared] = {}
    shared = [(None, f, kind, optional) for f, kind, optional, _ in leaf_fields(SamplingPlan)]
    owned = [
        (name, f, kind, optional)
        for name, section in host.registry.items()
        for f, kind, optional, _ in leaf_fields(section)
    ]
    for schedule, f, kind, optional in owned + shared:
        name = flat_name(f)
        if name == "num_generations" or name in found:
            continue
        within, choices = f.metadata.get("within"), f.metadata.get("choices")
        found[name] = Declared(host_name, name, kind, optional, f.default, within, choices, schedule)
    return list(found.values())


FIELDS = [field for host_name, host in HOSTS.items() for field in declared(host_name, host)]


def bounds(within: str) -> tuple[float, float]:
    low, high = (float(bound) for bound in within[1:-1].split(","))
    return low, high


def outside(field: Declared) -> list[Any]:
    """Values just outside each bound of the field's interval: an open bound itself (an infinite one only for a
    float), one step beyond a closed finite one."""
    low, high = bounds(field.within)
    values = []
    for bound, is_open, away in ((low, field.within[0] == "(", -math.inf), (high, field.within[-1] == ")", math.inf)):
        if math.isinf(bound):
            if is_open and field.kind is float:
                values.append(bound)
        elif is_open:
            values.append(field.kind(bound))
        elif field.kind is int:
            values.append(int(bound) + (1 if away > 0 else -1))
        else:
            values.append(math.nextafter(bound, away))
    return values


def closed(field: Declared) -> list[Any]:
    """The finite closed bounds of the field's interval, which lie inside it."""
    low, high = bounds(field.within)
    ends = ((low, field.within[0] == "["), (high, field.within[-1] == "]"))
    return [field.kind(bound) for bound, is_closed in ends if is_closed and math.isfinite(bound)]


def case_id(field: Declared, value: Any = None) -> str:
    return f"{field.host}-{field.name}" + ("" if value is None else f"={value!r}")


NUMERIC = [field for field in FIELDS if field.kind in (int, float)]
WITH_INTERVAL = [field for field in NUMERIC if field.within is not None]
WITH_CHOICES = [field for field in FIELDS if field.choices is not None]
OUTSIDE = [(field, value) for field in WITH_INTERVAL for value in outside(field)]
CLOSED = [(field, value) for field in WITH_INTERVAL for value in closed(field)]
CHOICES = [(field, choice) for field in WITH_CHOICES for choice in field.choices]
WRONG_TYPE = [(field, 1 if field.kind is str else "x") for field in FIELDS]


# ------------------------------------------------------------------------------------------------------------------
# The declarations
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host_name", list(HOSTS))
def test_the_walk_finds_every_flat_field(host_name):
    walked = {field.name for field in FIELDS if field.host == host_name}
    assert walked == {f.name for f in flat_fields(HOSTS[host_name])} - {"generation_schedule"}


def test_every_numeric_or_fixed_choice_field_declares_its_range_or_its_choices():
    """One declaration path: a number declares its interval, a fixed-choice string its choices (`exit_rule` keeps its
    registry, a boolean's type is its range)."""
    ranged = [f for f in FIELDS if f.kind is not bool and f.name not in REGISTRY_CHECKED]
    missing = sorted({f.name for f in ranged if (f.within if f.kind in (int, float) else f.choices) is None})
    total = len({f.name for f in ranged})
    assert not missing, (
        f"{total - len(missing)} of {total} fields declare their range or choices; declare within= (a number) or "
        f"choices= (a string) where these are declared: {missing}"
    )


@pytest.mark.parametrize("field", WITH_INTERVAL + WITH_CHOICES, ids=case_id)
def test_a_declaration_is_well_formed_and_holds_its_default(field):
    if field.within is not None:
        assert field.within[0] in "([" and field.within[-1] in ")]", field.within
        low, high = bounds(field.within)
        assert low < high, field.within
        assert (field.default is None and field.optional) or in_interval(field.default, field.within)
    if field.choices is not None:
        assert field.kind is str and field.default in field.choices, field.choices


# ------------------------------------------------------------------------------------------------------------------
# Refused: outside the interval, NaN, the wrong type, not a choice
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), OUTSIDE, ids=[case_id(f, v) for f, v in OUTSIDE])
def test_a_value_just_outside_a_bound_is_refused_naming_the_field_the_value_and_the_interval(field, value):
    message = field.refused(value)
    interval = "a finite number" if field.within == "(-inf, inf)" else field.within  # how `check_value` says it
    names(message, f"{field.name}={value!r}", interval)
    if field.default is not None:  # the example the refusal offers is the default, which is accepted
        names(message, f"{field.name}={field.default!r}")
        assert field.plan(field.default, REFUSED_UNDER).fields()[field.name] == field.default


@pytest.mark.parametrize("field", [f for f in WITH_INTERVAL if f.kind is float], ids=case_id)
def test_nan_lies_in_no_interval(field):
    names(field.refused(math.nan), f"{field.name}=nan")


@pytest.mark.parametrize(("field", "value"), WRONG_TYPE, ids=[case_id(f, v) for f, v in WRONG_TYPE])
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(field, value):
    names(field.refused(value), f"{field.name}={value!r}")


@pytest.mark.parametrize("field", WITH_CHOICES, ids=case_id)
def test_a_value_that_is_no_choice_is_refused_listing_the_choices(field):
    names(field.refused("no-such-choice"), f"{field.name}='no-such-choice'", *map(repr, field.choices))


# ------------------------------------------------------------------------------------------------------------------
# Accepted: a closed bound, every choice, the default
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), CLOSED, ids=[case_id(f, v) for f, v in CLOSED])
def test_a_closed_bound_is_accepted(field, value):
    assert field.plan(value, SMALLEST_GROUP).fields()[field.name] == value


@pytest.mark.parametrize(("field", "choice"), CHOICES, ids=[case_id(f, c) for f, c in CHOICES])
def test_every_choice_is_accepted(field, choice):
    extra = CHOICE_COMPANIONS.get((field.name, choice), {})
    assert field.plan(choice, REFUSED_UNDER, **extra).fields()[field.name] == choice


@pytest.mark.parametrize("field", FIELDS, ids=case_id)
def test_the_default_is_accepted(field):
    assert field.plan(field.default, REFUSED_UNDER).fields()[field.name] == field.default
