"""A short-answer reward for fact prompts ("What is the capital of France?"): is the gold answer the one named?

The gold `answer` is a name with optional aliases, written as one `|`-separated string (`"Kyiv|Kiev"`: it survives
CSV, JSONL and `trl_ada.data.format_dataset`, which turns answers into strings) or given as a list of names. Names
are matched as whole words, case- and accent-insensitively: a text is read as its words ([`words`]), so `"São
Tomé"` matches "sao tome", and `"Washington, D.C."` matches "Washington D.C.".

A completion's score depends on the completion, its own gold answer and the fixed `candidates` of
`make_short_answer_reward` only, never on the other rows of the call:

- **The answer is the first known name the completion names**, the known names being the row's own aliases and
  the `candidates`: the earliest (the longest at the same word), skipping a name negated by the word before it or
  by "not"/"n't" and one word ("not Paris", "don't know Paris"). It must be one of the row's aliases.
- **Listing or hedging does not pay**: the answer scores 0 when it is one item of a list of names
  ([`listed`]): two distinct names joined by "or", "and", "/" or "&" ("Paris or Lyon"), or three joined by anything
  a list is written with: commas, semicolons, periods, pipes, brackets, bullets, list numbers, new lines or spaces
  ("Berlin, Madrid, Paris", "1. Berlin 2. Madrid 3. Paris"). A name here is a known name or 1 to 4 capitalised
  words ("Hoi An", "Rio de Janeiro") none of which is a word that starts no name (`NOT_NAMES`: "The Capital Is
  Paris" lists nothing).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .answers import completion_text
from .scoring import RewardFunc

__all__ = [
    "ALIAS_SEPARATOR",
    "Token",
    "answer_aliases",
    "find_answer",
    "listed",
    "make_short_answer_reward",
    "name_index",
    "score_short_answer",
    "score_short_answers",
    "short_answer_reward",
    "tokens",
    "words",
]

ALIAS_SEPARATOR = "|"
"""Separates the accepted names of one gold answer in a string (`"Kyiv|Kiev"`)."""

Name = tuple[str, ...]
"""A name as its words (see `words`)."""

NEGATIONS = frozenset({"not", "never", "t"})
"""Words that negate the name right after them ("t" is the end of "n't", as `words` splits it)."""
NEGATIONS_ONE_WORD_BEFORE = frozenset({"not", "t"})
"""Words that negate a name one word after them ("don't know Paris")."""
JOINS = frozenset({"or", "and"})
"""Words that join two items of a list into a hedge ("Paris or Lyon")."""
HEDGES = frozenset({"maybe", "perhaps", "possibly", "probably", "either", "also", "even"})
"""Words that may stand between the items of a list ("Paris or maybe Lyon")."""
CONNECTORS = frozenset(
    {"de", "del", "da", "do", "dos", "das", "di", "du", "des", "au", "es", "la", "le", "el", "al", "of", "the", "and"}
    | {"van", "von", "der", "den"}
)
"""Lower-case words inside a capitalised name ("Rio de Janeiro", "Dar es Salaam", "Port-au-Prince")."""
NOT_NAMES = frozenset(
    {"i", "the", "a", "an", "it", "its", "this", "that", "he", "she", "we", "they", "you", "my", "our", "yes", "no"}
    | {"well", "so", "oh", "hmm", "ok", "okay", "however", "but", "then", "there", "here", "in", "on", "at", "for"}
    | {"is", "are", "was", "were", "be", "has", "have", "had", "which", "who", "what", "where", "answer"}
)
"""Capitalised words that are no part of a name ("Yes, Paris, of course" and "The Capital Is Paris" list nothing)."""
MAX_NAME_WORDS = 4
"""Most capitalised words of a name that is not a known one (connectors between them not counted)."""
_JOINT_CHARS = re.compile(r"[\s\"'*_`\u2018\u2019\u201c\u201d\u00ab\u00bb,;/&|.()\[\]\-\u2022\u00b7\u2013\u2014]*")
"""What may stand between two list items: spacing, quotes, emphasis, commas and the like, periods, pipes, brackets,
bullets and dashes."""
_STRONG_CHARS = re.compile(r"[/&]")
_INSIDE_NAME = re.compile(r"\s+|[-'\u2019]")
_GOLD: Name = ()
"""The gold's aliases as one list item (no name is empty)."""


@dataclass(frozen=True)
class Token:
    """A word of a text: folded (`words`), whether it was written capitalised, and the text before it."""

    word: str
    capital: bool
    gap: str


def tokens(text: str) -> list[Token]:
    """The words of `text` with their capitalisation and the text between them: accents dropped (NFKD), split at
    every character that is not a letter or a digit, each word case-folded."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    found, end = [], 0
    for match in re.finditer(r"[^\W_]+", plain):  # casefolding keeps a word one word (checked for every code point)
        found.append(Token(match[0].casefold(), match[0][0].isupper(), plain[end : match.start()]))
        end = match.end()
    return found


def words(text: str) -> Name:
    """The words of `text`, case- and accent-insensitive: accents dropped (NFKD), case folded, split at every
    character that is not a letter or a digit."""
    return tuple(token.word for token in tokens(text))


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
    """`names` by their first word, the longest first, for `find_answer`."""
    index: NameIndex = {}
    for name in set(names):
        index.setdefault(name[0], []).append(name)
    for group in index.values():
        group.sort(key=len, reverse=True)
    return index


def _name_at(text: Sequence[Token], start: int, index: NameIndex) -> Name | None:
    """The longest name of `index` that `text` names from word `start`, or None."""
    for name in index.get(text[start].word, ()):
        if tuple(token.word for token in text[start : start + len(name)]) == name:
            return name
    return None


def _negated(text: Sequence[Token], start: int) -> bool:
    """Whether a negation stands right before word `start`, or one word before it ("not Paris", "don't know
    Paris"), with only spaces between."""
    for i, negations in ((start - 1, NEGATIONS), (start - 2, NEGATIONS_ONE_WORD_BEFORE)):
        if i < 0 or not text[i + 1].gap.isspace():
            return False
        if text[i].word in negations:
            return True
    return False


def find_answer(text: Sequence[Token], index: NameIndex) -> tuple[Name, int] | None:
    """The first name of `index` that `text` names and does not negate, with the word it starts at; None if none."""
    start = 0
    while start < len(text):
        name = _name_at(text, start, index)
        if name is not None and not _negated(text, start):
            return name, start
        start += len(name) if name else 1
    return None


def _joint(text: Sequence[Token], start: int, step: int) -> tuple[int, bool] | None:
    """The words joining two list items from word `start` on, walking by `step` (+1 right, -1 left): where the
    next item begins (right) or ends (left), and whether the joint is strong ("or", "and", "/", "&") rather than
    soft (list punctuation, list numbers, spacing); None when no list joint is there."""
    i, marks = start, ""
    gap_of = (lambda j: text[j].gap) if step > 0 else (lambda j: text[j + 1].gap)
    while 0 <= i < len(text):
        gap = gap_of(i)
        if _JOINT_CHARS.fullmatch(gap) is None:
            return None
        marks += gap
        if text[i].capital or not (text[i].word in JOINS | HEDGES or text[i].word.isdigit()):
            break
        marks += f" {text[i].word} "
        i += step
    else:
        return None
    return i, bool(_STRONG_CHARS.search(marks)) or any(f" {word} " in marks for word in JOINS)


def _item(text: Sequence[Token], at: int, step: int, index: NameIndex) -> tuple[Name, int] | None:
    """The name-like item that begins (step +1) or ends (step -1) at word `at`, and the word past it; None when
    none. An item is a known name, or 1 to `MAX_NAME_WORDS` capitalised words (lower-case `CONNECTORS` between
    them), none of them one of `NOT_NAMES`."""
    if step > 0 and (known := _name_at(text, at, index)):
        return known, at + len(known)
    if step < 0 and (ending := _name_ending_at(text, at, index)):
        return ending
    if not text[at].capital or text[at].word in NOT_NAMES:
        return None
    span, capitals = [at], 1
    while 0 <= (nxt := span[-1] + step) < len(text):
        word = text[nxt]
        if _INSIDE_NAME.fullmatch(text[max(nxt, span[-1])].gap) is None:
            break
        if word.capital and (capitals == MAX_NAME_WORDS or word.word in NOT_NAMES):
            break
        if not word.capital and word.word not in CONNECTORS:
            break
        span.append(nxt)
        capitals += word.capital
    past = span[-1] + step  # connectors at the far end are read past ("Port au | Prince" cut at four words)
    span.sort()  # `at` is capitalised, so it stays at its end of the span
    while not text[span[-1]].capital:
        span.pop()
    while not text[span[0]].capital:
        span.pop(0)
    return tuple(text[i].word for i in span), past


def _name_ending_at(text: Sequence[Token], at: int, index: NameIndex) -> tuple[Name, int] | None:
    """A name of `index` that ends at word `at`, and the word before it; None if none."""
    longest = max(len(name) for names in index.values() for name in names)  # the index holds the gold
    for start in range(at, max(at - longest, -1), -1):
        for name in index.get(text[start].word, ()):
            if len(name) == at - start + 1 and tuple(token.word for token in text[start : at + 1]) == name:
                return name, start - 1
    return None


def listed(text: Sequence[Token], start: int, end: int, gold: Iterable[Name], index: NameIndex) -> bool:
    """Whether the name at words `start:end` is one item of a list of names: with its neighbours joined to it,
    at least two distinct names with a strong joint ("or", "and", "/", "&") among the joints, or at least three.
    The gold's aliases count as one name."""
    gold = set(gold)
    items, strong = {_GOLD}, False
    for step, at in ((1, end), (-1, start - 1)):
        while (joint := _joint(text, at, step)) and (item := _item(text, joint[0], step, index)):
            items.add(_GOLD if item[0] in gold else item[0])
            strong = strong or joint[1]
            if len(items) >= 3 or (len(items) == 2 and strong):
                return True
            at = item[1]  # each item moves the walk on by a word at least, so the walk ends
    return False


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


def score_short_answer(completion: Any, gold: tuple[Name, ...], candidates: frozenset[Name] = frozenset()) -> float:
    """1.0 when the first name `completion` answers (`find_answer`, among `gold` and `candidates`) is one of the
    `gold` aliases and is not one item of a list (`listed`), else 0.0."""
    if not gold:
        return 0.0
    text = tokens(completion_text(completion))
    index = name_index(candidates.union(gold))
    found = find_answer(text, index)
    if found is None or found[0] not in gold:
        return 0.0
    name, start = found
    return 0.0 if listed(text, start, start + len(name), gold, index) else 1.0


def score_short_answers(
    completions: Sequence[Any], answers: Sequence[object], candidates: frozenset[Name] = frozenset()
) -> list[float]:
    """`score_short_answer` of each completion against its own gold answer. Never raises for any content of
    `completions`/`answers`."""
    return [
        score_short_answer(completion, _safe_aliases(answer), candidates)
        for completion, answer in zip(completions, answers, strict=True)
    ]


def _safe_aliases(answer: object) -> tuple[Name, ...]:
    """`answer_aliases`, or none for an exotic object whose text cannot be read."""
    try:
        return answer_aliases(answer)
    except Exception:
        return ()


def short_answer_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    """TRL reward for fact prompts: 1.0 when a completion answers its gold `answer` (one of its `|`-separated
    aliases) and lists no other name beside it, else 0.0; each completion is scored on its own. Knows no wrong
    answers: `make_short_answer_reward` adds the family's answer set. Other TRL keyword arguments are ignored."""
    return score_short_answers(completions, answer)


def make_short_answer_reward(candidates: Iterable[str] | None = None) -> RewardFunc:
    """`short_answer_reward` that also knows the family's answer set `candidates` (a list of names, each may hold
    `|`-separated aliases): a completion naming any of them before the gold scores 0. Raises ValueError for a bad
    `candidates`, naming the option."""
    names = _candidate_names(candidates)

    def short_answer_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
        """TRL reward: 1.0 when a completion answers its gold `answer` first and lists no other name, else 0.0."""
        return score_short_answers(completions, answer, names)

    return short_answer_reward
