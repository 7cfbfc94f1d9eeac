r"""Properties of `math_reward` against math-verify itself, on generated golds and completions.

1. `math_reward` never scores 1 where math-verify, asked directly about the same extracted answer and gold (as
   `extract_answer`, `normalize_answer` and `comparable_pair` hand them over), says 0: batching, de-duplication,
   caches and the settings in the cache key add no positive.
2. A number written with digit grouping or a decimal comma scores 1 exactly when math-verify's own reading of it as
   a bare number (its `ExprExtractionConfig`) equals the gold.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from math_verify import ExprExtractionConfig, parse, verify

from trl_ada.rewards import (
    MathVerifySettings,
    clear_caches,
    extract_answer,
    make_math_reward,
    normalize_answer,
)
from trl_ada.rewards.answers import comparable_pair

ATOMS = st.sampled_from(
    [
        *("0", "1", "-1", "2", "3", "13", "1000", "0.5", "1.22", "0.333333", "2i", "x = 2", "B", r"x^2", r"50\%"),
        *(r"\frac{1}{2}", r"\frac{1}{3}", r"\sqrt{2}", r"\pi", "e", r"\mathrm{e}", r"1 + \frac{1}{\mathrm{e}}"),
        *(r"\frac{1}{\mathrm{e}}", r"2\mathrm{i}", "(1, 2)", "[1, 2)", r"\{1, 2\}", r"\text{(B)}"),
        *("1 000", r"1\,000", "1,000", "1,22", "3,5", "2, 3", r"\operatorname{ln} 2", r"\ln 2"),
    ]
)
GAPS = st.sampled_from([", ", " and ", "$ or $", r" \quad ", "; ", ". So the answer is ", ", wait: ", "\n\n"])


@st.composite
def completions(draw: st.DrawFn) -> str:
    """Prose and one to four boxes, each pair of boxes separated by a separator or by prose."""
    boxes = draw(st.lists(ATOMS, min_size=1, max_size=4))
    text = rf"$\boxed{{{boxes[0]}}}$"
    for box in boxes[1:]:
        text += draw(GAPS) + rf"$\boxed{{{box}}}$"
    return "We compute step by step. " + text + "."


@st.composite
def golds(draw: st.DrawFn) -> str:
    """A gold answer as datasets store it: bare, in `$...$`, or in one or more boxes."""
    atoms = draw(st.lists(ATOMS, min_size=1, max_size=3))
    style = draw(st.sampled_from(["bare", "dollars", "boxes"]))
    if style == "boxes":
        return ", ".join(rf"\boxed{{{atom}}}" for atom in atoms)
    text = ", ".join(atoms)
    return f"${text}$" if style == "dollars" else text


OPTIONS = st.sampled_from(
    [{}, {"float_rounding": 2}, {"strict": False}, {"allow_set_relation_comp": True}, {"numeric_precision": 5}]
)


def math_verify_says_equal(completion: str, gold: str, options: dict) -> bool:
    """math-verify, called directly, on the answer and gold exactly as the reward hands them over."""
    prediction, gold_text = comparable_pair(extract_answer(completion), normalize_answer(gold))
    options = MathVerifySettings(**options)
    return verify(
        parse(f"${gold_text}$"),
        parse(f"${prediction}$"),
        float_rounding=options.float_rounding,
        numeric_precision=options.numeric_precision,
        strict=options.strict,
        allow_set_relation_comp=options.allow_set_relation_comp,
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, dict]:
    """(completion, gold, reward options): half the completions box the gold's own atom, so that the property is
    tested where the reward pays, not only where it does not."""
    gold = draw(golds())
    completion = draw(completions())
    atom = gold.removeprefix("$").removesuffix("$")
    if atom.startswith(r"\boxed{") and atom.endswith("}"):
        atom = atom[len(r"\boxed{") : -1]
    if draw(st.booleans()) and ", " not in atom:
        completion = rf"We compute step by step. $\boxed{{{atom}}}$."
    return completion, gold, draw(OPTIONS)


def test_math_reward_never_scores_1_where_math_verify_says_0():
    paid: list[tuple[str, str]] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batch=st.lists(cases(), min_size=1, max_size=6), data=st.data())
    def holds(batch, data):
        clear_caches()
        # the batch twice in one call (de-duplication) and again in another order (the score cache)
        order = data.draw(st.permutations(range(len(batch))))
        for indices in (list(range(len(batch))) * 2, order):
            for index in indices:
                completion, gold, options = batch[index]
                if make_math_reward(**options)([completion], [gold]) == [1.0]:
                    paid.append((completion, gold))
                    assert math_verify_says_equal(completion, gold, options), (completion, gold, options)

    holds()
    assert len(paid) >= 10, f"only {len(paid)} paying cases: the property was hardly tested"


SEPARATORS = st.sampled_from([" ", r"\,", r"\ ", "~", "{,}", ","])


@st.composite
def grouped_numbers(draw: st.DrawFn) -> tuple[str, str]:
    """(LaTeX with digit grouping or a decimal comma, the same text as math-verify reads bare numbers)."""
    if draw(st.booleans()):
        digits = str(draw(st.integers(1000, 10**9)))
        head, groups = (
            digits[: len(digits) % 3 or 3],
            [digits[i : i + 3] for i in range(len(digits) % 3 or 3, len(digits), 3)],
        )
        separator = draw(SEPARATORS)
        text = separator.join([head, *groups])
        bare = text.replace(separator, " " if separator != "," else ",")
    else:  # up to three digits after the comma (math-verify drops the fourth: it reads `1,0000` as 1000)
        whole, part = draw(st.integers(0, 999)), draw(st.integers(0, 999))
        text = bare = f"{whole},{part:0{draw(st.integers(len(str(part)), 3))}d}"
    sign = draw(st.sampled_from(["", "-"]))
    return sign + text, sign + bare


@settings(max_examples=60, deadline=None)
@given(number=grouped_numbers(), offset=st.sampled_from([0, 0, 1, -1000]))
def test_grouped_numbers_score_as_math_verify_reads_bare_numbers(number, offset):
    text, bare = number
    (value, *_) = parse(bare, [ExprExtractionConfig()])
    gold = str(value + offset)
    reward = make_math_reward()([rf"\boxed{{{text}}}"], [gold])[0]
    assert reward == float(verify(parse(gold, [ExprExtractionConfig()]), value)), (text, gold)


PROSE_AFTER = st.sampled_from(["", " Check: 4 + 9 = 13.", "\n\nSo 2 + 2 = 5, and x = 7.", " The answer is 12."])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(completion=completions(), gold=golds(), after=PROSE_AFTER, options=OPTIONS)
def test_final_extraction_agrees_with_boxed_on_every_completion_with_a_box(completion, gold, after, options):
    text = completion + after  # numbers after the box do not matter: the box decides
    boxed = make_math_reward(**options)([text], [gold])
    assert make_math_reward(**options, extraction="final")([text], [gold]) == boxed


OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(0, 999),
    b=st.integers(0, 999),
    op=st.sampled_from(sorted(OPERATIONS)),
    offset=st.sampled_from([0, 0, 1, -1]),
    lead=st.sampled_from(["", "To find the answer, ", "Let me compute. "]),
)
def test_final_extraction_reads_the_computed_number_never_the_restated_question(a, b, op, offset, lead):
    result = OPERATIONS[op](a, b)
    gold = str(result + offset)
    final = make_math_reward(extraction="final")
    assert final([f"{lead}{a} {op} {b} = {result}."], [gold]) == [float(offset == 0)]
    assert final([f"{lead}{a} {op} {b} is {result}"], [gold]) == [float(offset == 0)]
    # the question restated, cut at the length limit: no positive (unless an operand is the result, as in 5 * 1:
    # after the word "answer", math-verify reads the first number)
    if result not in (a, b):
        assert final([f"{lead}To find {a} {op} {b}, we"], [str(result)]) == [0.0]
        assert final([f"{lead}{a} {op} {b} ="], [str(result)]) == [0.0]
