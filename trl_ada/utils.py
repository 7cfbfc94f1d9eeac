"""Small dependency-free helpers shared by the library, the toy experiments, the command line and the benchmarks.

Pure Python at import time (no numpy, torch or TRL; matplotlib only inside [`pyplot`]), so that the pure sampling
core can import it too.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["closest_name", "format_table", "is_int", "is_number", "json_safe", "mean", "pyplot", "save_figure"]


def is_int(value: Any) -> bool:
    """An integer, not a boolean (bool is an int subclass: True would pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite real number, not a boolean."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The name in `known` closest to `name` (for "did you mean ...?" hints), or None when none is close enough."""
    matches = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def mean(values: Iterable[float], default: float = math.nan) -> float:
    """Arithmetic mean of the values that are not NaN (a NaN means "not measured"); `default` when none is left.

    Every average in the package uses this: a step without a metric (NaN) does not pull a mean to NaN, and an empty
    set of problems scores `default` (NaN unless the caller says otherwise).
    """
    finite = [float(value) for value in values if not math.isnan(value)]
    return sum(finite) / len(finite) if finite else default


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    title: str = "",
    footer: Sequence[Sequence[object]] = (),
) -> str:
    """A fixed-width text table: first column left-aligned, the others right-aligned, a rule under the headers.

    `footer` rows (e.g. an average) follow the body after a second rule.
    """
    body = [[str(cell) for cell in row] for row in rows]
    tail = [[str(cell) for cell in row] for row in footer]
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *body, *tail, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    rule = "-" * len(line(headers))
    lines = [*([title] if title else []), line(headers), rule, *(line(r) for r in body)]
    if tail:
        lines += [rule, *(line(r) for r in tail)]
    return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinity replaced by None (JSON has neither), through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, numbers.Real) and not math.isfinite(value):  # floats and numpy scalars
        return None
    return value


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported on use, so that scripts start fast)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure (PNG by the suffix) creating parent directories, close it, and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path
