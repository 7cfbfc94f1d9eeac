r"""Answer extraction, normalisation and verification for math rewards.

`extract_boxed` finds the last `\boxed{...}` of a completion (linear scan, content capped at `MAX_BOX_CHARS`),
`normalize_answer` turns a gold answer into bare LaTeX, and `_verify_pair` asks `math_verify` whether a prediction
and a gold answer are equivalent. `_verify_pair` has no time bound of its own: [`~trl_ada.rewards.score_math`]
runs it under a timer (see `trl_ada.rewards.scoring`).
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from math_verify import parse, verify

__all__ = ["MAX_BOX_CHARS", "completion_text", "extract_boxed", "normalize_answer"]

MAX_BOX_CHARS = 1000
"""Longest boxed answer that is scored; longer ones get 0.0."""

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


class _DropDisabledTimeoutWarning(logging.Filter):
    """We disable math_verify's signal timeouts on purpose (`trl_ada.rewards.scoring` bounds the time); hide its
    warning about that."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropDisabledTimeoutWarning())


# --------------------------------------------------------------------------- text extraction


def completion_text(completion: Any) -> str:
    """Text of a completion: a plain string, or what the model wrote in a conversational completion.

    For a list of messages that is the text of its assistant messages, joined (messages without text, such as a
    tool call, add nothing); without any assistant message, the last message's text. Never raises.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence) and completion:
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role") == "assistant"]
        return "".join(_content_text(m.get("content")) for m in assistant or messages[-1:])
    return ""


def _content_text(content: Any) -> str:
    """Message content as text; multimodal content lists are joined from their text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def extract_boxed(text: str, max_chars: int = MAX_BOX_CHARS) -> str | None:
    r"""Content of the last `\boxed{...}` / `\fbox{...}` in `text`, with nested braces matched.

    Returns None when there is no box, when the last box is unclosed, or when its content is longer than
    `max_chars`. Linear in `len(text)`.
    """
    last = None
    for match in _BOX_OPEN.finditer(text):
        last = match
    return None if last is None else _braced_content(text, last.end(), max_chars)


def _braced_content(text: str, start: int, max_chars: int) -> str | None:
    """Text from `start` up to the brace closing an already-open `{`, skipping escapes like `\\{`."""
    depth, i, stop = 1, start, min(len(text), start + max_chars + 1)
    while i < stop:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


def _clean_latex(text: str) -> str:
    """Strip whitespace and unescaped `$` signs (models sometimes write `\\boxed{$x$}`)."""
    return _UNESCAPED_DOLLAR.sub("", text).strip()


def _strip_delimiters(text: str) -> str:
    """Remove one pair of surrounding math delimiters (`$..$`, `$$..$$`, `\\(..\\)`, `\\[..\\]`)."""
    for left, right in _DELIMITERS:
        if len(text) >= len(left) + len(right) and text.startswith(left) and text.endswith(right):
            return text[len(left) : len(text) - len(right)].strip()
    return text


def _number_text(value: float) -> str:
    """Plain decimal text of a float (`1e-05` -> `0.00001`), which LaTeX parsing reads correctly."""
    if not math.isfinite(value):
        return str(value)
    if value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def normalize_answer(answer: object) -> str:
    r"""Gold answer as bare LaTeX: numbers formatted, math delimiters and an enclosing `\boxed{}` removed.

    A missing answer (None) gives "", which scores 0.0.
    """
    if answer is None:
        return ""
    if isinstance(answer, float):
        return _number_text(answer)
    text = str(answer).strip()
    boxed = extract_boxed(text, max_chars=max(len(text), 1))
    if boxed is not None:
        text = boxed
    return _clean_latex(_strip_delimiters(text.strip()))


def _prediction(completion: Any) -> str | None:
    """Cleaned content of the completion's last box, or None when there is nothing to score."""
    boxed = extract_boxed(completion_text(completion))
    cleaned = _clean_latex(boxed) if boxed is not None else ""
    return cleaned or None


# --------------------------------------------------------------------------- verification


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple:
    """Parsed gold answer, cached: in GRPO every completion of a prompt shares the same gold."""
    return tuple(parse(f"${gold}$", parsing_timeout=None))


def _verify_pair(prediction: str, gold: str) -> float:
    """1.0 when math_verify finds `prediction` equivalent to `gold`, else 0.0. No timeout of its own."""
    gold_parsed = list(_parse_gold(gold))
    if not gold_parsed:
        return 0.0
    pred_parsed = parse(f"${prediction}$", parsing_timeout=None)
    return 1.0 if pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=None) else 0.0
