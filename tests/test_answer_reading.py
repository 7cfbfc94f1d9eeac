"""How a math reward reads an answer, case by case: the cases the mutation run of the rewards showed untested
(docs/lab/mutation.md). Torch-free, part of the mutation run's test set."""

from __future__ import annotations

import logging
import signal

import pytest
from refusals import names, refusal

from trl_ada.rewards import completion_text, extract_answer, math_final_reward, math_reward, normalize_answer
from trl_ada.rewards.answers import MathVerifySettings, _verify_pair, final_value

# --------------------------------------------------------------------------- what a completion's text is


def test_a_conversation_without_an_assistant_message_reads_as_its_last_message():
    users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}]
    assert completion_text(users) == "c"
    assert completion_text(None) == completion_text(42) == completion_text([]) == ""
    parts = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    assert completion_text([{"role": "assistant", "content": parts}]) == "ab"


# --------------------------------------------------------------------------- boxes and gold answers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{1\}}", r"1\}"),  # an escaped brace does not close the box
        (r"\boxed{1}.\boxed{2}", "2"),  # a full stop ends an answer: the first box was working
        (r"\boxed{1}" + " " * 69 + r"\boxed{2}", "1, 2"),  # spacing joins boxes up to 69 characters
        (r"\boxed{1}" + " " * 70 + r"\boxed{2}", "2"),
    ],
)
def test_boxes_are_read_where_a_reader_reads_them(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        ("12$", "12"),  # one stray dollar is not a pair of delimiters
        (r"\(\)", ""),
        (r"\boxed{" + "1" * 1500 + "}", "1" * 1500),  # a long boxed gold is read whole (the completions' cap is 1000)
        (2**60 + 1, "1152921504606846977"),  # an integer stays exact (a float would round it)
    ],
)
def test_a_gold_answer_is_read_as_written(gold, expected):
    assert normalize_answer(gold) == expected


def test_an_unreadable_gold_pays_nothing():
    assert math_reward([r"\boxed{1}", "\\"], ["\\", "\\"]) == [0.0, 0.0]


# --------------------------------------------------------------------------- numbers with commas


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        (r"\boxed{1234,567}", "1234.567"),  # four digits before the comma: a decimal comma
        (r"\boxed{-0,125}", "-0.125"),  # a leading zero, signed: a decimal comma
        (r"\boxed{1,3}", r"2 \pm 1"),  # against a gold of several values the comma separates values
        (r"\boxed{1,3}", r"2 \mp 1"),
        (r"\boxed{1,22}", "1; 22"),
    ],
)
def test_a_comma_is_read_against_what_the_gold_is(completion, gold):
    assert math_reward([completion], [gold]) == [1.0]


# --------------------------------------------------------------------------- plain-text answers


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("4 + 9 is what? The answer to 4 + 9 is 13.", "13", 1.0),  # the restated question opens the text
        ("The answer is 2x = 4 + 9, so x = 6.5.", "6.5", 1.0),  # an equation with uncomputed sides is working
        ("The answer is 13 or 13.", "13", 1.0),  # repeating the answer is not hedging
        ("The answer is 13, 14, 15.", "13", 0.0),  # a list after the answer hedges it
        ("The answer is 13, 14 was my first guess.", "13", 1.0),  # two numbers and a comma are no list
        ("The final answer is 4 + 9. So the answer is 13. Recall 4 + 9.", "13", 1.0),  # read on past the first one
        ("The answer is $x = 4 + 9$.", "13", 0.0),  # an equation whose right side is left uncomputed is working
        ("The answer is $x = 4 + 9$, so $x = 13$.", "13", 1.0),
        (r"\boxed{" + "x + " * 300 + "1} So the answer is 13.", "13", 1.0),  # a box too long to read is skipped
        ("The answer is 100%.", "1", 1.0),  # up to 100 %, a percentage is also its proportion
        ("The answer is 1300%.", r"1300\%", 1.0),
    ],
)
def test_a_plain_text_answer_is_its_final_value_unless_hedged(completion, gold, expected):
    assert math_final_reward([completion], [gold]) == [expected]


def test_reading_an_answer_leaves_the_rewards_timer_running():
    """math-verify's own timeouts would reset SIGALRM and cancel the per-pair timer of `rewards.scoring`."""
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        assert final_value("The answer is 13")[0] == 13
        assert _verify_pair("13", "13") == 1.0
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 50.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def test_only_math_verifys_disabled_timeout_warning_is_hidden():
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger, handler = logging.getLogger("math_verify.grader"), Keep()
    logger.addHandler(handler)
    try:
        logger.warning("Timeout is disabled as timeout_seconds is None")
        logger.warning("Some other warning")
    finally:
        logger.removeHandler(handler)
    assert seen == ["Some other warning"]


def test_numeric_precision_decides_expressions_compared_numerically():
    assert _verify_pair(r"\pi x", "3.14 x", MathVerifySettings(numeric_precision=2)) == 1.0  # 2 digits: π is 3.1
    assert _verify_pair(r"\pi x", "3.14 x") == 0.0


def test_the_comparison_settings_take_their_lowest_values():
    assert MathVerifySettings(float_rounding=0, numeric_precision=1).float_rounding == 0
    names(refusal(MathVerifySettings, numeric_precision=0), "numeric_precision=0", ">= 1", "numeric_precision=15")
