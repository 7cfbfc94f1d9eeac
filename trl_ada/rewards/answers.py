r"""Answer extraction, normalisation and verification for math rewards.

`extract_answer` reads the final answer of a completion: its last `\boxed{...}` together with the boxes joined to
it by separators only (several boxes are one answer, an earlier box followed by prose is an intermediate result).
With `extraction="final"` a completion without a box is read as plain text ([`PlainText`]): its final number, as
math-verify's own extraction finds it ([`final_value`]).
`normalize_answer` turns a gold answer into bare LaTeX the same way. Before `math_verify` compares them, both sides
are made comparable (`comparable_pair`): `\mathrm{e}`-style wrappers are unwrapped and numbers written with digit
grouping or a decimal comma are read as one number. `_verify_pair` has no time bound of its own:
[`~trl_ada.rewards.score_math`] runs it under a timer (see `trl_ada.rewards.scoring`).
"""

from __future__ import annotations

import functools
import logging
import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from sympy import Add, Mul, Pow, Rational, UnevaluatedExpr
from sympy.core.relational import Relational

from ..utils import is_int

__all__ = [
    "EXTRACTIONS",
    "MAX_ANSWER_BOXES",
    "MAX_BOX_CHARS",
    "MAX_PROPORTION_PERCENT",
    "MAX_TEXT_CHARS",
    "MathVerifySettings",
    "PlainText",
    "check_extraction",
    "comparable_pair",
    "completion_text",
    "extract_answer",
    "extract_boxed",
    "final_value",
    "hedged",
    "normalize_answer",
    "plain_answer",
    "reference_answer",
]

MAX_BOX_CHARS = 1000
"""Longest boxed answer that is scored; longer ones get 0.0."""

MAX_ANSWER_BOXES = 16
"""Most boxes read as one answer; earlier ones are ignored."""
_MAX_GAP_CHARS = 70
"""Longest text between two boxes of one answer."""
MAX_TEXT_CHARS = 2000
"""With `extraction="final"`, how much of the end of a completion without a box is read for its final answer."""

EXTRACTIONS = {
    "boxed": "the final \\boxed{} answer; a completion without one scores 0",
    "final": "the boxed answer when there is one, else the final number of the plain text",
}
"""The ways a math reward reads a completion's answer (`extraction`), with what each reads."""

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
# What may stand between two boxes of one answer: spacing, math delimiters, `,` `;` `&`, line breaks `\\`, the words
# "and"/"or" (plain or in `\text{}`), and a variable label such as `y =` or `x_2=`. One character or token at a time,
# so that a failed match cannot backtrack badly.
_ANSWER_GAP = re.compile(
    r"(?:\s|[,;&~]|\$|\\[()\[\]\\,;:! ]|\\q?quad\b|\b(?:and|or)\b"
    r"|\\(?:text|mathrm|textrm|mbox)\s*\{\s*(?:and|or|,)?\s*\}|[A-Za-z](?:_\{?\w{1,3}\}?)?\s*=)*"
)
_CONJUNCTION = re.compile(r"\b(?:and|or)\b")
_LETTERS = re.compile(r"[^\W\d_]")
_SENTENCE_END = re.compile(r"[.!?:](?:\s|\$|$)|\n\s*\n")
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


def extract_answer(text: str, max_chars: int = MAX_BOX_CHARS) -> str | None:
    r"""The final answer of `text`: its last box, with the boxes before it that are joined to it.

    Two boxes are joined when nothing but spacing, math delimiters, `,` `;`, the words "and"/"or" or a variable label
    (`y =`) stands between them (`\boxed{-2} \text{ and } \boxed{1}` gives `"-2, 1"`), or when the text between
    them is shorter than 70 characters, holds no word or the word "and" or "or", and ends no sentence
    (`\boxed{1} for (a) and \boxed{2}`, `\boxed{2} + \boxed{3}`). Any other text ends the answer, so a box followed
    by prose is an intermediate result: `\boxed{12}. So the perimeter is \boxed{14}` and `\boxed{12}, so it is
    \boxed{14}` give `"14"`. Repeated boxes count once. Returns None when there is no box, or when the last one is
    unclosed or longer than `max_chars`; earlier boxes are read while their contents fit in `max_chars` in all, up
    to `MAX_ANSWER_BOXES`.
    """
    opens = list(_BOX_OPEN.finditer(text))
    contents: list[str] = []
    budget, later_start = max_chars, None
    for match in reversed(opens[-MAX_ANSWER_BOXES:]):
        end = _closing_brace(text, match.end(), budget)
        if later_start is not None and (end is None or end >= later_start or not _joins(text[end + 1 : later_start])):
            break  # unclosed, enclosing the later box (`\boxed{\boxed{5}}`), or prose in between
        if end is None:
            return None
        content = _clean_latex(text[match.end() : end])
        if content and (not contents or contents[-1] != content):
            contents.append(content)
        budget -= end - match.end()
        later_start = match.start()
    return ", ".join(reversed(contents)) if opens else None


def _joins(gap: str) -> bool:
    """Whether two boxes with `gap` between them belong to one answer."""
    if len(gap) >= _MAX_GAP_CHARS:
        return False
    if _ANSWER_GAP.fullmatch(gap) is not None:
        return True
    words = _LETTERS.search(gap) is not None
    return (not words or _CONJUNCTION.search(gap) is not None) and _SENTENCE_END.search(gap) is None


def _closing_brace(text: str, start: int, max_chars: int) -> int | None:
    """Index of the brace closing an already-open `{` at `start`, within `max_chars`, skipping escapes like `\\{`."""
    content = _braced_content(text, start, max_chars)
    return None if content is None else start + len(content)


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
    """Plain decimal text of a finite float (`1e-05` -> `0.00001`), which LaTeX parsing reads correctly."""
    if value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def reference_answer(value: object) -> str | None:
    r"""A dataset's reference answer as text, or None when it has no clear meaning.

    A string stays as it is; a finite number is written plainly (`42.0` -> `42`); a list or tuple of several answers
    is one comma-separated LaTeX answer (`[2, 3]` -> `2, 3`, which `oxed{2, 3}` matches) and a one-element list is
    its element. None, a boolean, NaN or infinity, a mapping, anything else, and a list holding one of them: None.
    """
    if isinstance(value, (list, tuple)):
        parts = [reference_answer(part) for part in value]
        return None if not parts or None in parts else ", ".join(parts)
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return str(int(value)) if isinstance(value, numbers.Integral) else _number_text(float(value))
    return None


def normalize_answer(answer: object) -> str:
    r"""Gold answer as bare LaTeX: numbers formatted, math delimiters removed, boxes read as `extract_answer` does.

    The answer is first read by [`reference_answer`]; one without a clear meaning (None, a boolean, NaN) gives "",
    which scores 0.0.
    """
    text = reference_answer(answer)
    if text is None:
        return ""
    text = text.strip()
    boxed = extract_answer(text, max_chars=max(len(text), 1))
    if boxed is not None:
        return boxed
    return _clean_latex(_strip_delimiters(text))


@dataclass(frozen=True)
class PlainText:
    """The end of a completion without a box, whose final answer math-verify's extraction reads (`final_value`)."""

    text: str


def check_extraction(extraction: object) -> str:
    """`extraction` when it is one of `EXTRACTIONS`; otherwise a ValueError naming the option, the value and the
    choices."""
    if isinstance(extraction, str) and extraction in EXTRACTIONS:
        return extraction
    choices = "; ".join(f"{name!r} ({meaning})" for name, meaning in EXTRACTIONS.items())
    raise ValueError(f"extraction={extraction!r} is not an answer extraction; use one of {choices}.")


def _prediction(completion: Any, extraction: str = "boxed") -> str | PlainText | None:
    """What a math reward verifies for `completion`, or None when there is nothing to score.

    The final boxed answer (see `extract_answer`) when the completion has a box it can read; without one, with
    `extraction="final"`, its last `MAX_TEXT_CHARS` characters as `PlainText`.
    """
    text = completion_text(completion)
    boxed = extract_answer(text)
    if boxed is not None or extraction == "boxed":
        return boxed or None
    end = text[-MAX_TEXT_CHARS:]
    return PlainText(end) if end.strip() else None


# --------------------------------------------------------------------------- making both sides comparable

_CONSTANT_OR_FUNCTION = "|".join(
    ("e", "i", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "arccot", "arcsec", "arccsc")
    + ("sinh", "cosh", "tanh", "coth", "ln", "log", "exp", "gcd", "lcm", "max", "min")
)
# `\mathrm{e}`, `\operatorname{arccot}`, `{\rm e}`, `\rm e`: upright wrappers math_verify cannot read.
_UPRIGHT = re.compile(
    rf"\\(?:mathrm|mathit|textrm|operatorname)\s*\{{\s*({_CONSTANT_OR_FUNCTION})\s*\}}"
    rf"|\{{\s*\\rm\s+({_CONSTANT_OR_FUNCTION})\s*\}}|\\rm\s+({_CONSTANT_OR_FUNCTION})\b"
)
_OTHER_DIGITS = {chr(zero + d): str(d) for zero in (0xFF10, 0x0660, 0x06F0, 0x0966) for d in range(10)}
"""Fullwidth, Arabic-Indic, Eastern Arabic-Indic and Devanagari digits, read as ASCII digits."""
_UNICODE = str.maketrans(
    {"\u2212": "-", "\uff0d": "-", "\u2009": " ", "\u202f": " ", "\u00a0": " ", "\u00ad": None, **_OTHER_DIGITS}
)
_GROUP_SEPARATOR = r"(?:\s|\\[,;: ]|~|\{,\})"
# A whole answer that is one number written with digit grouping: `1 000`, `1\,000\,000.5`, `-12~345`.
_GROUPED_NUMBER = re.compile(rf"([+-]?\d{{1,3}}(?:{_GROUP_SEPARATOR}\d{{3}})+(?:\.\d+)?)(\s*\\?%)?")
# A whole answer that is two runs of digits joined by one comma: `1,22` or `3,5` (a number or a list?).
_COMMA_NUMBER = re.compile(r"([+-]?\d+),(\d+)(\s*\\?%)?")


def _unwrap(match: re.Match) -> str:
    name = next(group for group in match.groups() if group)
    return name if len(name) == 1 else f"\\{name} "


def _read_grouped_number(text: str) -> str:
    """`1 000` -> `1000`: digit groups of three separated by spaces or thin spaces are one number."""
    match = _GROUPED_NUMBER.fullmatch(text)
    if match is None:
        return text
    return re.sub(_GROUP_SEPARATOR, "", match[1]) + (match[2] or "")


def _read_comma_number(text: str) -> str:
    """`1,22` -> `1.22` and `12,345` -> `12345`: a comma inside one number (decimal comma or thousands separator)."""
    match = _COMMA_NUMBER.fullmatch(text)
    if match is None:
        return text
    whole, part, percent = match[1], match[2], match[3] or ""
    thousands = len(part) == 3 and 1 <= len(whole.lstrip("+-")) <= 3 and not whole.lstrip("+-").startswith("0")
    return f"{whole}{'' if thousands else '.'}{part}{percent}"


def _tidy(text: str) -> str:
    """Unicode minus signs, spaces and digits to ASCII (soft hyphens dropped), upright wrappers unwrapped, grouped
    digits read as one number."""
    return _read_grouped_number(_UPRIGHT.sub(_unwrap, text.translate(_UNICODE)).strip())


def _one_value(text: str) -> bool:
    """Whether `text` reads as one value: no `,` `;` `\\pm`, nor the words "and"/"or"."""
    return not any(mark in text for mark in (",", ";", "\\pm", "\\mp")) and _CONJUNCTION.search(text) is None


def comparable_pair(prediction: str, gold: str) -> tuple[str, str]:
    r"""`(prediction, gold)` rewritten so that `math_verify` reads them as a reader would.

    - `\mathrm{e}`, `\mathrm{i}`, `{\rm e}`, and `\operatorname{...}` / `\mathrm{...}` around a function name
      (`\operatorname{arccot}`, `\mathrm{ln}`) become `e`, `i`, `\arccot`, `\ln`.
    - A number written with digit groups of three separated by spaces, thin spaces (`\,`, `\ `, `~`) or `{,}` is one
      number: `1 000` is 1000, not `1*000`.
    - An answer made of two runs of digits joined by one comma (`1,22`, `3,5`, `12,345`) is ambiguous. When the
      other side is one value (no `,` `;` `\\pm`, nor "and"/"or"), it is one number: a thousands separator before
      exactly three digits (`12,345` is 12345, as `1,000` always is), else a decimal comma (`1,22` is 1.22).
      Otherwise the comma separates values (`3,5` against `3, 5` or `3 \text{ and } 5` is the list 3, 5).
    """
    prediction, gold = _tidy(prediction), _tidy(gold)
    if _one_value(gold):
        prediction = _read_comma_number(prediction)
    if _one_value(prediction):
        gold = _read_comma_number(gold)
    return prediction, gold


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class MathVerifySettings:
    """How `math_verify.verify` compares a prediction with the gold answer; the defaults are math_verify's.

    Parameters:
        float_rounding (`int`, *optional*, defaults to `6`):
            Decimal places floats are rounded to before they are compared (`0.333333` equals `1/3`).
        numeric_precision (`int`, *optional*, defaults to `15`):
            Significant digits used when expressions are evaluated numerically.
        strict (`bool`, *optional*, defaults to `True`):
            Variables must match and a set never equals a tuple. With `False`, variables are matched by position
            and `{1, 2}` equals `(1, 2)`.
        allow_set_relation_comp (`bool`, *optional*, defaults to `False`):
            Also compare a gold set with a predicted relation (gold `(1, 2)` and `1 < x < 2`); the other way round
            is always allowed.
    """

    float_rounding: int = 6
    numeric_precision: int = 15
    strict: bool = True
    allow_set_relation_comp: bool = False

    def __post_init__(self) -> None:
        for name, low in (("float_rounding", 0), ("numeric_precision", 1)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(
                    f"{name}={value!r} must be an integer >= {low}, e.g. {name}={getattr(type(self), name)}."
                )
        for name in ("strict", "allow_set_relation_comp"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"{name}={value!r} must be true or false.")


DEFAULT_SETTINGS = MathVerifySettings()


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple:
    """Parsed gold answer, cached: in GRPO every completion of a prompt shares the same gold."""
    return tuple(parse(f"${gold}$", parsing_timeout=None))


# math-verify's extraction of an answer from free text: its LaTeX (`$13$`, `\\(\\frac{1}{2}\\)`) and plain-number
# configurations, boxes off (a completion that has a readable box is scored by it).
_PLAIN_TEXT_TARGETS = (LatexExtractionConfig(boxed_match_priority=-1), ExprExtractionConfig())
_PERCENT = UnevaluatedExpr(Rational(1, 100))
"""The factor of a percentage as math-verify writes it (`50%` is `50 * (1/100)`)."""
_MAX_SKIPS = 16
"""Most uncomputed expressions `final_value` reads past before it gives up."""


def final_value(text: str) -> list:
    r"""The final answer of plain `text` as math-verify's `parse` finds it, or [] when it finds no value.

    math-verify tries its patterns by priority: "final answer is X", then the first X after the word "answer" (or
    the X after the last `=` within 100 characters of it: "The answer is 13. Check: 13 - 4 = 9." gives 9), then the
    last number, LaTeX value or expression of the text. A value is a number (`13`, `-5`, `1,234`, `3.5`), a
    percentage, a LaTeX value (`$\frac{1}{2}$`, `$2\sqrt{2}$`, `$x + 1$`) or an equation, which math-verify compares
    by its right side. Arithmetic on numbers left uncomputed (`4 + 9`, `15 - 2`, `2^{10}`, and `1/2` written in
    plain text) is not a value: in prose it is the working or the question restated ("The answer to 4 + 9 is 13",
    or "To find 4 + 9, we" cut at the length limit), and it equals the gold of "What is 4 + 9?". The reading skips
    past it and goes on with the text after it, up to `_MAX_SKIPS` times.
    """
    text = text.translate(_UNICODE)  # a Unicode minus sign or thin space, as in a boxed answer
    for _ in range(_MAX_SKIPS):
        parsed = parse(text, _PLAIN_TEXT_TARGETS, parsing_timeout=None)
        if not parsed or not _uncomputed(parsed[0]):
            return parsed
        written = parsed[-1] if isinstance(parsed[-1], str) else ""
        at = text.find(written) if written else -1
        if at < 0:
            return []
        text = text[at + len(written) :]
    return []


def _uncomputed(value: Any) -> bool:
    """Whether `value` is arithmetic on numbers left as written (`4 + 9`, `3 - 2.`, `1/2`, `2^{10}`); a relation is
    judged by its right side. Percentages (`50%` is `50 * (1/100)`), irrational values (`\\sqrt{2}`, `2\\pi`) and
    expressions with variables are values."""
    if isinstance(value, Relational):
        value = value.rhs
    if not isinstance(value, (Add, Mul, Pow)) or not all(atom.is_Number for atom in value.atoms()):
        return False
    return _percentage_number(value) is None and value.is_rational is not False


def _percentage_number(value: Any) -> Any:
    """The number of a percentage as math-verify parses it (`50%` is `50 * (1/100)`: 50), else None."""
    if isinstance(value, Mul) and len(value.args) == 2 and value.args[1] == _PERCENT:
        return value.args[0]
    return None


_HEDGE_NUMBER = r"-?\d+(?:\.\d+)?"
_HEDGE_JOINT = r"\\?%?\s*[(\[]?\s*(?:,\s+(?:or\s+)?|(?:,\s*)?\bor\s+)(?:(?:maybe|perhaps|possibly|probably)\s+)?"
_HEDGE_RIGHT = re.compile(rf"({_HEDGE_JOINT})({_HEDGE_NUMBER})(?!\w|\.\d)")
_HEDGE_LEFT = re.compile(rf"(?<![\w.])({_HEDGE_NUMBER})({_HEDGE_JOINT})$")
_MAX_HEDGE_ITEMS = 16
MAX_PROPORTION_PERCENT = 100
"""A plain-text percentage up to this also matches its fraction (`25%` equals 0.25); above it only its number."""


def hedged(text: str, written: str) -> bool:
    """Whether the number `written`, at its last occurrence in `text`, is one item of a list of numbers: two
    distinct numbers joined by "or" ("13 or 14", "13, or maybe 14", "13 (or 14)") or three joined by commas
    ("12, 13, 14")."""
    occurrences = list(re.finditer(rf"(?<![\w.]){re.escape(written)}(?!\w|\.\d)", text)) if written else []
    if not occurrences:
        return False
    numbers, strong = {written}, False
    start, end = occurrences[-1].span()
    for _ in range(_MAX_HEDGE_ITEMS):
        right = _HEDGE_RIGHT.match(text, end)
        if right is None:
            break
        numbers.add(right[2])
        strong, end = strong or "or" in right[1], right.end()
    for _ in range(_MAX_HEDGE_ITEMS):
        left = _HEDGE_LEFT.search(text, 0, start)
        if left is None:
            break
        numbers.add(left[1])
        strong, start = strong or "or" in left[2], left.start()
    return len(numbers) >= 3 or (len(numbers) == 2 and strong)


def plain_answer(text: str) -> list:
    """The answer `_verify_pair` compares for plain `text`: its `final_value`, or [] when that value is hedged
    (`hedged`). math-verify matches a percentage with its number and with its fraction (`25%` equals 25 and 0.25);
    above `MAX_PROPORTION_PERCENT` it is read as its number only (`1300%` is 1300, not 13)."""
    parsed = final_value(text)
    written = parsed[-1] if parsed and isinstance(parsed[-1], str) else ""
    if not parsed or hedged(text.translate(_UNICODE), written):
        return []
    number = _percentage_number(parsed[0])
    if number is not None and abs(number) > MAX_PROPORTION_PERCENT:
        return [number, *parsed[1:]]
    return parsed


def _verify_pair(prediction: str | PlainText, gold: str, settings: MathVerifySettings = DEFAULT_SETTINGS) -> float:
    """1.0 when math_verify finds `prediction` equivalent to `gold` (see `comparable_pair`), else 0.0.

    A `PlainText` prediction is its `final_value`, compared with the gold read as math-verify reads numbers in text
    (`1,234` is 1234, `3,5` is 3.5). No timeout of its own."""
    plain = isinstance(prediction, PlainText)
    if plain:
        gold = _read_comma_number(_tidy(gold))
    else:
        prediction, gold = comparable_pair(prediction, gold)
    gold_parsed = list(_parse_gold(gold))
    if not gold_parsed:
        return 0.0
    pred_parsed = plain_answer(prediction.text) if plain else parse(f"${prediction}$", parsing_timeout=None)
    equal = pred_parsed and verify(
        gold_parsed,
        pred_parsed,
        float_rounding=settings.float_rounding,
        numeric_precision=settings.numeric_precision,
        strict=settings.strict,
        allow_set_relation_comp=settings.allow_set_relation_comp,
        timeout_seconds=None,
    )
    return 1.0 if equal else 0.0
