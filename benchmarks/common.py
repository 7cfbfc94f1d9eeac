"""Shared helpers for the benchmark scripts: command line, seeds, progress, numbers and result files.

Every benchmark is run from the repository root as `python -m benchmarks.<name> [--smoke] [--out DIR]`,
prints fixed-width tables, and writes its numbers (JSON and CSV) and a PNG figure under `--out`. Tables, figures
(matplotlib's non-interactive Agg backend) and NaN-free JSON are the library's (`trl_ada.utils`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from trl_ada.utils import format_table, json_safe, pyplot
from trl_ada.utils import save_figure as _save_figure

__all__ = [
    "add_common_arguments",
    "derive_seed",
    "format_table",
    "machine_description",
    "make_parser",
    "markdown",
    "mean_and_std",
    "progress",
    "pyplot",
    "save_figure",
    "seed_stats",
    "stable_id",
    "write_csv",
    "write_json",
]

T = TypeVar("T")

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def add_common_arguments(
    parser: argparse.ArgumentParser, default_out: str | Path, default_seeds: int | None = 5
) -> None:
    """Add the options every benchmark shares: `--smoke`, `--out DIR`, `--seeds K`, `--seed S`, `--quiet`.

    With `default_seeds=None` the script picks the number of seeds itself (e.g. fewer under `--smoke`).
    """
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes that finish in a few seconds (for tests and CI); still writes the table and figure",
    )
    parser.add_argument("--out", type=Path, default=Path(default_out), help="output directory (default: %(default)s)")
    seeds_help = "number of seeds; spread is the std over seeds" + (
        "" if default_seeds is None else " (default: %(default)s)"
    )
    parser.add_argument("--seeds", type=int, default=default_seeds, help=seeds_help)
    parser.add_argument("--seed", type=int, default=0, help="first seed; seeds are seed, seed+1, ... (default: 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def make_parser(
    description: str | None, default_out: str | Path, default_seeds: int | None = 5
) -> argparse.ArgumentParser:
    """An argument parser with the common benchmark options already added."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, default_out, default_seeds)
    return parser


# --------------------------------------------------------------------------------------------
# Seeds and progress
# --------------------------------------------------------------------------------------------


def stable_id(name: str) -> int:
    """A process-independent integer for a name (Python's `hash` of a str is salted per process)."""
    return zlib.crc32(name.encode("utf-8"))


def derive_seed(*keys: int | str) -> int:
    """One 63-bit seed from a tuple of keys (ints and names), stable across processes and platforms."""
    entropy = [stable_id(key) if isinstance(key, str) else int(key) for key in keys]
    return int(np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


def progress(items: Iterable[T], total: int | None = None, desc: str = "", enabled: bool = True) -> Iterator[T]:
    """Iterate with a progress bar on stderr: tqdm when installed, otherwise a line every ~10%."""
    if not enabled:
        yield from items
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        yield from tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False)
        return
    every = max(1, (total or 0) // 10)
    for k, item in enumerate(items, start=1):
        yield item
        if k % every == 0 or k == total:
            print(f"{desc}: {k}/{total if total is not None else '?'}", file=sys.stderr, flush=True)


def machine_description() -> str:
    """A one-line description of the machine, for result files."""
    cpu = platform.processor() or platform.machine()
    return f"{platform.system()} {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


# --------------------------------------------------------------------------------------------
# Numbers and tables
# --------------------------------------------------------------------------------------------


def markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table (for the docs): the headers, a separator row, one row per item."""
    lines = [list(headers), ["---"] * len(headers), *([str(cell) for cell in row] for row in rows)]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def mean_and_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std (ddof 0) of finite values; (nan, nan) if there are none. The tables of the toy and
    modelled benchmarks say "population std"; the real-model benchmark uses the sample std (ddof 1)."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if finite.size == 0:
        return float("nan"), float("nan")
    return float(finite.mean()), float(finite.std())


def seed_stats(values: Sequence[float]) -> dict[str, Any]:
    """Mean and std over the finite values (`mean_and_std`), how many there are (`reached`), and the raw values
    (NaN: a seed without one, e.g. a target it did not reach)."""
    mean, std = mean_and_std(values)
    finite = sum(v is not None and math.isfinite(v) for v in values)
    return {"mean": mean, "std": std, "reached": int(finite), "values": list(values)}


# --------------------------------------------------------------------------------------------
# Files and figures
# --------------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"Cannot write {type(value).__name__} to JSON.")


def write_json(path: str | Path, data: Any) -> Path:
    """Write `data` as indented JSON (NaN and infinity become null); creates parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(data), indent=2, default=_json_default, allow_nan=False) + "\n")
    return path


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write a list of flat dicts as CSV, columns in first-seen order; creates parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def save_figure(fig: Any, path: str | Path, dpi: int = 150) -> Path:
    """Save a matplotlib figure (PNG by the suffix) at the benchmarks' resolution, close it, return the path."""
    return _save_figure(fig, path, dpi=dpi)
