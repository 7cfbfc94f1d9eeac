r"""STAND-IN until the prose rewards of issue 28 land in main (they replace this module): a `math_final` reward and
`short_answer_reward`, with the names and signatures the real-model tasks use.

- `math_final`: the final `\boxed{}` answer when there is one, else the last number of the plain text, compared with
  the gold by `score_math`.
- `short_answer_reward(completions, answer, **kwargs)`: 1.0 when the gold, or one of the `aliases` column's names,
  appears as a whole word in the completion.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from .answers import completion_text, extract_answer
from .registry import register_reward
from .scoring import score_math

__all__ = ["math_final_reward", "short_answer_reward"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _final(text: str) -> str:
    """The text with its final answer boxed: its own last box, else its last number boxed."""
    if extract_answer(text):
        return text
    numbers = _NUMBER.findall(text.replace(",", ""))
    return f"\\boxed{{{numbers[-1]}}}" if numbers else ""


def math_final_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    """1.0 when the final answer (boxed, else the last number) equals the gold `answer`."""
    return score_math([_final(completion_text(c)) for c in completions], answer, log_metric=kwargs.get("log_metric"))


def _folded(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(_folded(name))}(?!\w)", _folded(text)) is not None


def short_answer_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    """1.0 when the gold `answer` or one of its `aliases` is named in the completion, else 0.0."""
    aliases = kwargs.get("aliases") or [[] for _ in completions]
    return [
        float(any(_names(completion_text(c), str(n)) for n in [gold, *(names or [])] if str(n).strip()))
        for c, gold, names in zip(completions, answer, aliases, strict=True)
    ]


register_reward("math_final", math_final_reward)
