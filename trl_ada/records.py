"""Records whose fields are declared once: a frozen dataclass field with its default, help, flat name and group
(`option`), checked from its declaration when the record is built (`Record`: its type, its choices or its
interval, through one helper, `check_value`), read back as flat values (`leaves`, `values`) and built from them
(`build`).

Pure Python. The plan (`plan.py`), its sections and their sub-records are such records.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .utils import closest_name, is_int

__all__ = [
    "KINDS",
    "Record",
    "build",
    "check_integer",
    "check_type",
    "check_value",
    "flat_name",
    "leaf_fields",
    "leaf_values",
    "option",
]


def option(
    default: Any,
    help: str,
    *,
    flat: str | None = None,
    group: str | None = None,
    choices: tuple[Any, ...] | None = None,
    within: str | None = None,
) -> Any:
    """A plan field: its default and `help`, its `flat` name where the config spells it otherwise (`memory_decay`
    for `Memory.decay`), its `group` (default: its record's), and the values it takes: `choices`, or the interval it
    lies `within`, written `"(0, 1]"` (a bound may be `inf`; NaN lies in no interval)."""
    metadata = {"help": help, "flat": flat, "group": group, "choices": choices, "within": within}
    return field(default=default, metadata=metadata)


KINDS: dict[type, tuple[str, Callable[[Any], bool]]] = {
    int: ("an integer", is_int),
    float: ("a number", lambda value: isinstance(value, numbers.Real) and not isinstance(value, bool)),
    bool: ("True or False", lambda value: isinstance(value, bool)),
    str: ("a string", lambda value: isinstance(value, str)),
}


def check_type(name: str, value: Any, kind: type, optional: bool = False, example: Any = None) -> None:
    """A ValueError naming `name`, its value and how to write it unless `value` is a `kind` (int, float, bool or
    str; an int is a float, a bool is not an int) or, when `optional`, None. `example` is shown as a valid value."""
    described, accepts = KINDS[kind]
    if (value is None and optional) or accepts(value):
        return
    if kind is bool:
        raise ValueError(f"{name}={value!r}: must be True or False.")
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: must be {described}, not a boolean.")
    or_none = " or None" if optional else ""
    raise ValueError(
        f"{name}={value!r}: must be {described}{or_none}, not a {type(value).__name__}"
        f"{_how_to_write(name, value, kind, example)}."
    )


def _how_to_write(name: str, value: Any, kind: type, example: Any) -> str:
    """`; write name=8` when `value` reads as the right type (the string '8', the float 8.0), else an example."""
    try:
        number = float(value) if kind in (int, float) and isinstance(value, (str, float)) else None
    except ValueError:
        number = None
    if number is not None and math.isfinite(number) and (kind is float or number.is_integer()):
        return f"; write {name}={kind(number)!r}"
    return _example(name, example)


def _example(name: str, example: Any) -> str:
    """` (e.g. name=example)`, or nothing when there is no example to show."""
    return "" if example is None else f" (e.g. {name}={example!r})"


def _bound(interval: str, kind: type) -> Any:
    """A value of `interval` to show as an example: its closed lower bound, else its closed upper one (None: both
    open or infinite)."""
    low, high = (float(bound) for bound in interval[1:-1].split(","))
    for bracket, bound in ((interval[0], low), (interval[-1], high)):
        if bracket in "[]" and math.isfinite(bound):
            return kind(bound)
    return None


def in_interval(value: float, interval: str) -> bool:
    """Whether `value` lies in `interval`, written `"(0, 1]"`, `"[1, inf)"`: a round bracket excludes its bound."""
    low, high = (float(bound) for bound in interval[1:-1].split(","))
    above = value > low if interval[0] == "(" else value >= low
    return above and (value < high if interval[-1] == ")" else value <= high)


def check_value(
    name: str,
    value: Any,
    kind: type,
    *,
    optional: bool = False,
    example: Any = None,
    choices: tuple[Any, ...] | None = None,
    within: str | None = None,
) -> None:
    """`check_type`, then a ValueError naming `name`, its value and the values it takes unless it is one of
    `choices` or lies `within` its interval (`in_interval`); None passes where it is `optional`."""
    if example is None and within is not None:
        example = _bound(within, kind)
    check_type(name, value, kind, optional, example)
    if value is None and optional:
        return
    if choices is not None and value not in choices:
        close = closest_name(value, [c for c in choices if isinstance(c, str)]) if isinstance(value, str) else None
        hint = f" Did you mean {close!r}?" if close else ""
        raise ValueError(f"{name}={value!r}: choose one of {list(choices)}.{hint}")
    if within is not None and not in_interval(value, within):
        described = "a finite number" if within == "(-inf, inf)" else f"in {within}"
        raise ValueError(f"{name}={value!r}: must be {described}{_example(name, example)}.")


def check_integer(name: str, value: Any, minimum: int, fix: str) -> None:
    """An integer (not a boolean) >= `minimum`; `fix` ends the refusal."""
    check_type(name, value, int)
    if value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}{fix}")


def flat_name(f: dataclasses.Field) -> str:
    """The config's name of a record's field."""
    return f.metadata.get("flat") or f.name


@functools.cache
def _record_kinds(record: type) -> tuple[tuple[dataclasses.Field, Any, bool], ...]:
    """Each field of a record with its type (int, float, bool or str; a record type for a sub-record) and whether it
    may be None, read from the declarations."""
    hints = typing.get_type_hints(record)
    kinds = []
    for f in dataclasses.fields(record):
        members = typing.get_args(hints[f.name]) or (hints[f.name],)
        kinds.append((f, next(m for m in members if m is not type(None)), type(None) in members))
    return tuple(kinds)


@dataclass(frozen=True)
class Record:
    """A frozen part of the plan. Its fields are checked against their declarations when it is built (an integer, a
    number, True/False, a string, or None where the type allows it; one of its `choices`, `within` its interval),
    naming the flat field. `group`: the `--help` group of its fields."""

    group: ClassVar[str]

    def __post_init__(self) -> None:
        for f, kind, optional in _record_kinds(type(self)):
            if kind in KINDS:
                limits = {key: f.metadata.get(key) for key in ("choices", "within")}
                check_value(flat_name(f), getattr(self, f.name), kind, optional=optional, example=f.default, **limits)


def leaf_fields(record: type) -> Iterator[tuple[dataclasses.Field, type, bool, type]]:
    """(field, type, optional, owning record) of every leaf field of a record type, sub-records flattened; a plan's
    section is left out."""
    for f, kind, optional in _record_kinds(record):
        if kind in KINDS:
            yield f, kind, optional, record
        elif f.name != "section":
            yield from leaf_fields(kind)


def leaf_values(record: Record) -> Iterator[tuple[str, Any]]:
    """(flat name, value) of every leaf of a record."""
    for f, kind, _ in _record_kinds(type(record)):
        if kind in KINDS:
            yield flat_name(f), getattr(record, f.name)
        elif f.name != "section":
            yield from leaf_values(getattr(record, f.name))


def build(record: type, values: Mapping[str, Any]) -> Any:
    """A record (and its sub-records) from flat values; a field absent from `values` takes its default."""
    kwargs = {}
    for f, kind, _ in _record_kinds(record):
        if kind not in KINDS:
            kwargs[f.name] = build(kind, values)
        elif flat_name(f) in values:
            kwargs[f.name] = values[flat_name(f)]
    return record(**kwargs)
