"""A short-answer reward for fact prompts ("What is the capital of France?"): is the gold answer the one named?

The gold `answer` is a name with optional aliases, written as one `|`-separated string (`"Kyiv|Kiev"`: it survives
CSV, JSONL and `trl_ada.data.format_dataset`, which turns answers into strings) or given as a list of names. Names
are matched as whole words, case- and accent-insensitively: a text is read as its words ([`words`]), so `"São
Tomé"` matches "sao tome", and `"Washington, D.C."` matches "Washington D.C.".

Listing candidates must not pay ("Paris, Berlin or Rome"), so the completion's answer is **the first candidate it
names**: the earliest name (the longest at the same word) among the row's own aliases, the family's answer set
(`candidates`, e.g. every capital of the data file) and the gold answers of the other rows in the call. It scores 1.0
when that is one of the row's aliases. "The capital of Australia is Canberra, not Sydney." names Canberra first; a
completion listing cities is scored by the first one it lists, as if it had answered only that.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from .answers import completion_text
from .scoring import RewardFunc

__all__ = [
    "ALIAS_SEPARATOR",
    "answer_aliases",
    "first_named",
    "make_short_answer_reward",
    "name_index",
    "score_short_answers",
    "short_answer_reward",
    "words",
]

ALIAS_SEPARATOR = "|"
"""Separates the accepted names of one gold answer in a string (`"Kyiv|Kiev"`)."""

Name = tuple[str, ...]
"""A name as its words (see `words`)."""


def words(text: str) -> Name:
    """The words of `text`, case- and accent-insensitive: accents dropped (NFKD), case folded, split at every
    character that is not a letter or a digit."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()
    return tuple("".join(char if char.isalnum() else " " for char in plain).split())


def answer_aliases(answer: object) -> tuple[Name, ...]:
    """The accepted names of a gold answer, as words: a `|`-separated string or a list of names; blank names (and a
    missing answer) give none."""
    if answer is None:
        return ()
    names = answer if isinstance(answer, (list, tuple)) else str(answer).split(ALIAS_SEPARATOR)
    return tuple(name for name in (words(str(n)) for n in names if n is not None) if name)


NameIndex = dict[str, list[Name]]
"""Names by their first word, the longest first."""


def name_index(names: Iterable[Name]) -> NameIndex:
    """`names` by their first word, the longest first, for `first_named`."""
    index: NameIndex = {}
    for name in set(names):
        index.setdefault(name[0], []).append(name)
    for group in index.values():
        group.sort(key=len, reverse=True)
    return index


def first_named(text: Name, index: NameIndex) -> Name | None:
    """The name of `index` that `text` (as words) names first; at the same word the longest; None if none."""
    for start, word in enumerate(text):
        for name in index.get(word, ()):
            if text[start : start + len(name)] == name:
                return name
    return None


def _candidate_names(candidates: Iterable[str] | None) -> frozenset[Name]:
    """The family's answer set as names; a ValueError naming the option for anything but a list of strings."""
    if candidates is None:
        return frozenset()
    if isinstance(candidates, str) or not isinstance(candidates, Iterable):
        raise ValueError(
            f"candidates={candidates!r} must be a list of names (each may hold aliases as 'Kyiv|Kiev'), e.g. "
            "candidates=['Paris', 'Berlin', 'Rome']."
        )
    candidates = list(candidates)
    bad = [c for c in candidates if not isinstance(c, str) or not words(c)]
    if bad:
        raise ValueError(f"candidates holds {bad[0]!r}, which is not a name: give each candidate as a non-empty text.")
    return frozenset(name for c in candidates for name in answer_aliases(c))


def score_short_answers(
    completions: Sequence[Any], answers: Sequence[object], candidates: frozenset[Name] = frozenset()
) -> list[float]:
    """1.0/0.0 per completion: is the first candidate it names one of its gold answer's aliases? The candidates are
    `candidates` and every row's aliases. Never raises for any content of `completions`/`answers`."""
    golds = [_safe_aliases(answer) for answer in answers]
    index = name_index(candidates.union(*golds))
    scores = []
    for completion, gold in zip(completions, golds, strict=True):
        first = first_named(words(completion_text(completion)), index) if gold else None
        scores.append(1.0 if first in gold else 0.0)
    return scores


def _safe_aliases(answer: object) -> tuple[Name, ...]:
    """`answer_aliases`, or none for an exotic object whose text cannot be read."""
    try:
        return answer_aliases(answer)
    except Exception:
        return ()


def short_answer_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    """TRL reward for fact prompts: 1.0 when the first candidate a completion names is its gold `answer` (one of its
    `|`-separated aliases), else 0.0. The candidates are the call's gold answers; `make_short_answer_reward` adds
    the family's answer set. Other TRL keyword arguments are ignored."""
    return score_short_answers(completions, answer)


def make_short_answer_reward(candidates: Iterable[str] | None = None) -> RewardFunc:
    """`short_answer_reward` that also knows the family's answer set `candidates` (a list of names, each may hold
    `|`-separated aliases): a completion naming any of them before the gold scores 0, whatever else the call holds.
    Raises ValueError for a bad `candidates`, naming the option."""
    names = _candidate_names(candidates)

    def short_answer_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
        """TRL reward: 1.0 when the first candidate a completion names is its gold `answer`, else 0.0."""
        return score_short_answers(completions, answer, names)

    return short_answer_reward
