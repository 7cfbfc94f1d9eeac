"""Prompt families for SmolLM2-135M-Instruct with a spread of base pass rates: arithmetic (learning transfers) and
capital cities (it does not).

Each family is a `DatasetDict` of chat prompts (`[{"role": "user", "content": ...}]`) with an `answer` column and
`family`, `kind` and `fact` columns (`fact` names what a prompt asks, e.g. `"3+4"` or `"France"`). Train and test
prompts are kept apart:

- **arithmetic** ([`arithmetic_task`]): one skill, four kinds (`ARITHMETIC_KINDS`): one-digit addition, two-digit plus
  one-digit, subtraction within 20, one-digit multiplication. Operand pairs are drawn without replacement from each
  kind's range by a seeded generator; the test pairs are disjoint from the train pairs (for + and × the order of the
  operands does not make a new pair). What the model learns on the train pairs (the format, the procedure) carries
  over to the test pairs.
- **capitals** ([`capitals_task`]): facts, from the country → capital table `data/capitals.csv` shipped with the
  package (171 countries; the capital with its common other spellings as `|`-separated aliases, `Kyiv|Kiev`, as
  `short_answer_reward` reads them; countries with several or disputed capitals, or whose capital is named like the
  country, are left out). The train countries are asked in the train phrasing; the `test` split
  asks the *same* countries in a held-out phrasing, so it measures the fact learned and not the string trained; the
  `control` split asks countries never trained on (held-out phrasing): knowledge of one capital does not carry over
  to another, so learning should not move it.

The rewards that read this model's prose answers are [`task_reward`]'s: the final number or expression for arithmetic
(`math_final`), for capitals the capital (or an alias) named first among every capital of the table
(`make_short_answer_reward`: listing cities does not pay).
"""

from __future__ import annotations

import csv
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..utils import is_int

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

__all__ = [
    "ARITHMETIC_KINDS",
    "ARITHMETIC_PROMPT",
    "CAPITAL_PROMPTS",
    "FAMILIES",
    "ArithmeticKind",
    "arithmetic_task",
    "capitals_task",
    "load_capitals",
    "task_reward",
]

logger = logging.getLogger(__name__)

FAMILIES = ("arithmetic", "capitals")
"""The families, with transfer (arithmetic) and without (capitals)."""

ARITHMETIC_PROMPT = "Compute {a} {symbol} {b}. Reply with just the result."
"""Of four wordings tried, the one with the widest spread of base pass rates and the shortest answers (~22 tokens)."""

CAPITAL_PROMPTS = {
    "train": "What is the capital of {country}? Answer with the city name only.",
    "test": "Which city is the capital of {country}? Answer with the city name only.",
}
"""The trained phrasing, and the held-out phrasing the `test` and `control` splits ask in."""


@dataclass(frozen=True)
class ArithmeticKind:
    """One kind of arithmetic prompt: `a symbol b` with `a` in `first` and `b` in `second` (inclusive ranges)."""

    symbol: str
    first: tuple[int, int]
    second: tuple[int, int]
    operation: Callable[[int, int], int]

    @property
    def commutative(self) -> bool:
        return self.symbol in ("+", "*")

    def pairs(self) -> list[tuple[int, int]]:
        """Every distinct operand pair (one order only for + and *), sorted."""
        pairs = {
            tuple(sorted((a, b))) if self.commutative and _in(b, self.first) and _in(a, self.second) else (a, b)
            for a in range(self.first[0], self.first[1] + 1)
            for b in range(self.second[0], self.second[1] + 1)
        }
        return sorted(pairs)


def _in(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


ARITHMETIC_KINDS: dict[str, ArithmeticKind] = {
    "add_1d": ArithmeticKind("+", (1, 9), (1, 9), lambda a, b: a + b),
    "add_2d_1d": ArithmeticKind("+", (10, 99), (1, 9), lambda a, b: a + b),
    "sub_20": ArithmeticKind("-", (10, 20), (1, 9), lambda a, b: a - b),
    "mul_1d": ArithmeticKind("*", (2, 9), (2, 9), lambda a, b: a * b),
}
"""Base pass rates at temperature 1 (16 samples, 32 tokens; docs/benchmarks_real.md): about 0.26, 0.05, 0.18, 0.32."""


def arithmetic_task(train_per_kind: int = 12, test_per_kind: int = 8, seed: int = 0) -> DatasetDict:
    """`train` and `test` splits of `train_per_kind` and `test_per_kind` prompts of every kind, operand pairs
    disjoint between the splits, drawn by `random.Random(seed)`."""
    from datasets import Dataset, DatasetDict

    _check_sizes(train_per_kind=train_per_kind, test_per_kind=test_per_kind)
    rng = random.Random(seed)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for name, kind in ARITHMETIC_KINDS.items():
        pairs = kind.pairs()
        if train_per_kind + test_per_kind > len(pairs):
            raise ValueError(
                f"{name} has {len(pairs)} operand pairs, fewer than train_per_kind + test_per_kind = "
                f"{train_per_kind} + {test_per_kind}; lower them."
            )
        drawn = rng.sample(pairs, train_per_kind + test_per_kind)
        for split, chosen in (("test", drawn[:test_per_kind]), ("train", drawn[test_per_kind:])):
            for a, b in chosen:
                if kind.commutative and rng.random() < 0.5:
                    a, b = b, a  # either order may be asked; the pair is the same fact
                splits[split].append(_arithmetic_row(name, kind, a, b))
    return DatasetDict({split: Dataset.from_list(rows) for split, rows in splits.items()})


def _check_sizes(**sizes: Any) -> None:
    """Refuse a split size that is not a positive count of prompts (an empty split has no columns to read, and a
    negative size would act as a slice index)."""
    for name, size in sizes.items():
        if not is_int(size) or size < 1:
            raise ValueError(f"{name}={size!r}: must be an integer >= 1 (a number of prompts), e.g. {name}=8.")


def _arithmetic_row(name: str, kind: ArithmeticKind, a: int, b: int) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": ARITHMETIC_PROMPT.format(a=a, symbol=kind.symbol, b=b)}],
        "answer": str(kind.operation(a, b)),
        "family": "arithmetic",
        "kind": name,
        "fact": f"{a}{kind.symbol}{b}",
    }


def default_capitals_file() -> Path:
    """The country → capital table shipped with the package."""
    return Path(str(resources.files("trl_ada.real").joinpath("data", "capitals.csv")))


def load_capitals(path: str | Path | None = None) -> Dataset:
    """The country → capital table (`country`, `capital` with its `|`-separated aliases), default
    `default_capitals_file()`.

    The file is read as UTF-8 (a byte-order mark is skipped). A row without a country or a capital is dropped with a
    warning giving the count (`trl_ada.data.drop_unposed`, `drop_unanswered`), as every data path of the package
    does, and a country listed twice with the same capital is kept once. A file that is not UTF-8, lacks the
    `country` or `capital` column, or gives one country two different capitals is a one-line ValueError.
    """
    from datasets import Dataset

    from ..data import drop_unanswered, drop_unposed

    path = Path(path) if path is not None else default_capitals_file()
    try:
        rows = _read_capitals(path)
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}: is not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}); save it as "
            f"UTF-8, e.g. `iconv -f latin1 -t utf-8 {path} > capitals-utf8.csv`."
        ) from None
    if not rows:
        raise ValueError(f"{path}: has no rows.")
    table = drop_unanswered(drop_unposed(Dataset.from_list(rows), "country", str(path)), "capital", str(path))
    return Dataset.from_list(_unique_countries(table.to_list(), path))


def _read_capitals(path: Path) -> list[dict[str, str]]:
    """The (country, capital) rows of the CSV file, stripped; a ValueError when either column is missing."""
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; pass the CSV file of countries and capitals inside it.")
    with open(path, newline="", encoding="utf-8-sig") as file:
        reader = csv.DictReader(file)
        missing = [column for column in ("country", "capital") if column not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no {' or '.join(missing)} column; the header must be country,capital.")
        return [
            {"country": (row["country"] or "").strip(), "capital": (row["capital"] or "").strip()} for row in reader
        ]


def _unique_countries(rows: list[dict[str, str]], path: Path) -> list[dict[str, str]]:
    """`rows` with each country once (compared without case): a repeat with the same capital and aliases is dropped
    with a warning, one with another capital is a ValueError naming the country."""
    kept: dict[str, dict[str, str]] = {}
    repeats: list[str] = []
    for row in rows:
        first = kept.setdefault(row["country"].casefold(), row)
        if first is row:
            continue
        if _aliases(first["capital"]) != _aliases(row["capital"]):
            raise ValueError(
                f"{path}: {row['country']} is listed twice, with the capitals {first['capital']!r} and "
                f"{row['capital']!r}; keep one row (other spellings go after a |, e.g. Kyiv|Kiev)."
            )
        repeats.append(row["country"])
    if repeats:
        logger.warning(
            "%s: dropped %d repeated rows of a country already listed with the same capital (%s).",
            path,
            len(repeats),
            ", ".join(repeats),
        )
    return list(kept.values())


def _aliases(capital: str) -> frozenset[str]:
    """A capital's `|`-separated spellings, without case or surrounding spaces."""
    return frozenset(name.strip().casefold() for name in capital.split("|"))


def capitals_task(
    train_countries: int = 48, control_countries: int = 16, seed: int = 0, path: str | Path | None = None
) -> DatasetDict:
    """`train` (the train countries, train phrasing), `test` (the same countries, held-out phrasing) and `control`
    (`control_countries` other countries, held-out phrasing), the countries drawn by `random.Random(seed)`."""
    from datasets import Dataset, DatasetDict

    _check_sizes(train_countries=train_countries, control_countries=control_countries)
    table = load_capitals(path)
    if train_countries + control_countries > len(table):
        raise ValueError(
            f"The table has {len(table)} countries, fewer than train_countries + control_countries = "
            f"{train_countries} + {control_countries}; lower them."
        )
    order = random.Random(seed).sample(range(len(table)), train_countries + control_countries)
    trained, control = [table[i] for i in order[:train_countries]], [table[i] for i in order[train_countries:]]
    return DatasetDict(
        {
            "train": Dataset.from_list([_capital_row(row, "train") for row in trained]),
            "test": Dataset.from_list([_capital_row(row, "test") for row in trained]),
            "control": Dataset.from_list([_capital_row(row, "test") for row in control]),
        }
    )


def _capital_row(row: dict[str, Any], phrasing: str) -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": CAPITAL_PROMPTS[phrasing].format(country=row["country"])}],
        "answer": row["capital"],
        "family": "capitals",
        "kind": "capital",
        "fact": row["country"],
    }


def task_reward(family: str) -> Callable[..., list[float]]:
    """The reward that reads the model's prose answers for `family`: `math_final` for arithmetic (the boxed answer
    if any, else the final number or expression), for capitals `make_short_answer_reward` knowing every capital of
    the table (the first capital a completion names must be the gold or one of its aliases)."""
    from ..rewards import get_reward_funcs, make_short_answer_reward

    if family == "arithmetic":
        return get_reward_funcs(["math_final"])[0]
    if family == "capitals":
        return make_short_answer_reward(load_capitals()["capital"])
    raise ValueError(f"family={family!r} is not a task family; choose one of {list(FAMILIES)}.")
