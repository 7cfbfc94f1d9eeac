"""The keyed toy task: every prompt has its own secret code, so what the model learns on one prompt may not help
another.

Each prompt names an item, e.g. `"Recall the code of AH"`, and never its answer. The answer is a code character
that the completion must contain at least k times (the reward is [`~trl_ada.toy.task.toy_reward`] on the `answer`
and `min_count` columns, as in the letters task). Unlike the letters task, where one skill ("repeat the letter you
are asked for") solves every prompt, the code of an item has to be learned for that item.

- **Transfer.** `transfer` in [0, 1] sets how many prompts share a code: [`num_codes`] = round(1 + (1 - transfer)
  * (P - 1)) distinct codes for P prompts. transfer=1: one code for all (learning transfers fully, like the
  letters task); transfer=0: a code per prompt (no transfer).
- **Difficulty.** The codes come from `KEYED_CODES`, sorted from the most to the least common character in the tiny
  tokenizer's vocabulary (`e` is in 65 of its 384 tokens, each digit in one), and the counts k cycle through
  `counts`. Under the random model the pass rates range from about 0.9 (`e`, k=1) to 0 (a digit, k >= 2); the
  codes in use are spread evenly over that order ([`used_codes`]), so every transfer setting mixes easy and hard.
- **Filter.** Like the paper's data, the prompts can be filtered on the base model's pass rate from k samples
  ([`filter_rows`], [`estimate_row_pass_rates`]), keeping a band (low, high]; the paper keeps (0, 0.375] from 16.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from pathlib import Path

from datasets import Dataset

from .task import TOY_MAX_COMPLETION_LENGTH, estimate_pass_rates

__all__ = [
    "FILTER_SAMPLES",
    "KEYED_CODES",
    "KEYED_COUNTS",
    "KEYED_PROMPT",
    "MAX_KEYED_PROMPTS",
    "PAPER_PASS_RATE_BAND",
    "check_band",
    "check_keyed_settings",
    "check_transfer",
    "estimate_row_pass_rates",
    "filter_rows",
    "in_band",
    "item_name",
    "keyed_prompt",
    "keyed_rows",
    "num_codes",
    "rows_dataset",
    "used_codes",
]

KEYED_CODES = "etsriaonhldmgpuwfvbckyxjqz" + string.digits
"""Code characters, from the most to the least common in the tiny tokenizer's vocabulary (tokens containing it:
e 65, t 46, s 30, r 27, i 26, a 24, o 23, n 22, h 19, l 15, d 12, m 12, g 10 ... b 4, c 3, x 2, j q z and each
digit 1)."""
MAX_KEYED_PROMPTS = len(KEYED_CODES)
"""At most one prompt per code, so that transfer=0 gives every prompt its own code."""
KEYED_PROMPT = "Recall the code of {name}"
PAPER_PASS_RATE_BAND = (0.0, 0.375)
"""The paper's filter: base pass rate in (0, 0.375] from 16 samples (1 to 6 right)."""
FILTER_SAMPLES = 16
KEYED_COUNTS = (1, 2, 3)
"""Recommended counts: with 4 and 5 most codes would start at a pass rate of 0."""


def num_codes(num_prompts: int, transfer: float) -> int:
    """Distinct codes among `num_prompts` prompts: 1 at transfer=1, one per prompt at transfer=0, linear between."""
    return round(1 + (1 - transfer) * (num_prompts - 1))


def used_codes(count: int) -> str:
    """`count` codes spread evenly over `KEYED_CODES` (the middle one alone; all of them at the maximum)."""
    return "".join(KEYED_CODES[(2 * j + 1) * MAX_KEYED_PROMPTS // (2 * count)] for j in range(count))


def item_name(index: int) -> str:
    """Two capital letters naming item `index` (0 -> "AA", 1 -> "AB", ...): no code character appears in it."""
    return string.ascii_uppercase[index // 26] + string.ascii_uppercase[index % 26]


def keyed_prompt(index: int) -> str:
    """The user message of item `index`."""
    return KEYED_PROMPT.format(name=item_name(index))


def keyed_rows(num_prompts: int, transfer: float, counts: Sequence[int]) -> list[tuple[str, int, str]]:
    """Every prompt of the task as (code, count, user message), item 0 first.

    Consecutive items share a code (item i gets code i * K // P of [`used_codes`]`(K)`, K = [`num_codes`]) and
    the counts cycle (item i needs `counts[i % len(counts)]` copies).
    """
    codes = used_codes(num_codes(num_prompts, transfer))
    return [
        (codes[i * len(codes) // num_prompts], counts[i % len(counts)], keyed_prompt(i)) for i in range(num_prompts)
    ]


def check_transfer(transfer: float) -> None:
    """ValueError unless 0 <= transfer <= 1."""
    if not 0.0 <= transfer <= 1.0:
        raise ValueError(f"transfer={transfer!r} is outside [0, 1]; use 0 (a code per prompt) to 1 (one shared code).")


def check_keyed_settings(num_prompts: int, counts: Sequence[int], max_count: int) -> None:
    """ValueError naming the option, its value and the fix, for a prompt number or counts outside their range."""
    if not 1 <= num_prompts <= MAX_KEYED_PROMPTS:
        raise ValueError(f"num_prompts={num_prompts!r} is outside [1, {MAX_KEYED_PROMPTS}]; pick a value in it.")
    if not counts or any(not 1 <= k <= max_count for k in counts):
        raise ValueError(
            f"counts={tuple(counts)!r} must be non-empty, each in [1, {max_count}] (max_completion_length); "
            "use e.g. (1, 2, 3)."
        )


def check_band(band: tuple[float, float]) -> None:
    """ValueError unless 0 <= low < high <= 1."""
    low, high = band
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(
            f"pass_rate_band={tuple(band)!r} must satisfy 0 <= low < high <= 1; "
            f"use e.g. the paper's {PAPER_PASS_RATE_BAND}."
        )


def in_band(pass_rate: float, band: tuple[float, float]) -> bool:
    """True when `pass_rate` is in (low, high]."""
    low, high = band
    return low < pass_rate <= high


def filter_rows(
    rows: Sequence[tuple[str, int, str]], pass_rates: Sequence[float], band: tuple[float, float], needed: int
) -> list[tuple[str, int, str]]:
    """The rows whose pass rate is in `band`, in order; ValueError when fewer than `needed` are left."""
    kept = [row for row, rate in zip(rows, pass_rates, strict=True) if in_band(rate, band)]
    if len(kept) < needed:
        raise ValueError(
            f"pass_rate_band={tuple(band)!r} keeps {len(kept)} of {len(rows)} prompts, fewer than one step needs "
            f"(prompts_per_step={needed}); widen the band, raise num_prompts or lower prompts_per_step."
        )
    return kept


def estimate_row_pass_rates(
    model_dir: str | Path,
    rows: Sequence[tuple[str, int, str]],
    num_samples: int = FILTER_SAMPLES,
    max_new_tokens: int = TOY_MAX_COMPLETION_LENGTH,
    seed: int = 0,
) -> list[float]:
    """The base model's pass rate of every row from `num_samples` completions (deterministic for a `seed`)."""
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": text}] for _, _, text in rows],
            "answer": [code for code, _, _ in rows],
            "min_count": [count for _, count, _ in rows],
        }
    )
    return estimate_pass_rates(model_dir, dataset, num_samples, max_new_tokens=max_new_tokens, seed=seed)


def rows_dataset(rows: Sequence[tuple[str, int, str]], num_prompts: int, seed: int = 0) -> Dataset:
    """`num_prompts` rows cycling through seeded shuffles of `rows` (each appears once before any repeats).

    Columns: `prompt` (a one-message user conversation), `answer` and `min_count`, for [`~trl_ada.toy.toy_reward`].
    """
    rng = random.Random(seed)
    chosen: list[tuple[str, int, str]] = []
    while rows and len(chosen) < num_prompts:
        cycle = list(rows)
        rng.shuffle(cycle)
        chosen += cycle
    chosen = chosen[:num_prompts]
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": text}] for _, _, text in chosen],
            "answer": [answer for answer, _, _ in chosen],
            "min_count": [count for _, count, _ in chosen],
        }
    )
