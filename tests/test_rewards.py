r"""Tests for trl_ada.rewards: boxed-answer extraction, math_verify equivalence, time bounds, the reward registry.

Every expected score below was checked against math_verify 0.9. Cases marked "math_verify limitation" document
behaviour a user may not expect; they pin it so that a change shows up here.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import sys
import threading
import time
from fractions import Fraction

import pytest
from refusals import names, refusal

from trl_ada.rewards import (
    MAX_BOX_CHARS,
    REWARD_FUNCS,
    clear_caches,
    completion_text,
    extract_boxed,
    format_reward,
    get_reward_funcs,
    make_math_reward,
    math_final_reward,
    math_reward,
    normalize_answer,
    register_reward,
    score_math,
    scoring,
    short_answer_reward,
    workers,
)
from trl_ada.rewards import registry as reward_registry


def boxed(answer: str) -> str:
    return rf"Some reasoning first. The answer is $\boxed{{{answer}}}$."


# (gold answer, completion, expected reward)
EQUIVALENCE_CASES = [
    # fractions and decimals
    pytest.param(r"\frac{1}{2}", boxed("0.5"), 1.0, id="frac-vs-decimal"),
    pytest.param(r"\frac{1}{2}", boxed("1/2"), 1.0, id="frac-vs-slash"),
    pytest.param("0.5", boxed(r"\frac{1}{2}"), 1.0, id="decimal-gold-vs-frac"),
    pytest.param(r"\frac{1}{2}", boxed(r"\frac{2}{4}"), 1.0, id="unreduced-frac"),
    pytest.param(r"\frac{1}{2}", boxed(r"\dfrac{1}{2}"), 1.0, id="dfrac"),
    pytest.param(r"\frac{7}{2}", boxed("3.5"), 1.0, id="improper-frac-vs-decimal"),
    pytest.param("3.14", boxed("3.1400"), 1.0, id="trailing-zeros"),
    pytest.param("1/3", boxed("0.333333"), 1.0, id="decimal-to-6-places"),
    pytest.param("1/3", boxed("0.333"), 0.0, id="decimal-too-coarse"),  # floats are compared rounded to 6 places
    # percent: math_verify accepts both readings of 50% (50 and 0.5), whichever side carries the % sign
    pytest.param(r"50\%", boxed("50"), 1.0, id="percent-gold-vs-number"),
    pytest.param("50", boxed(r"50\%"), 1.0, id="number-gold-vs-percent"),
    pytest.param(r"50\%", boxed("0.5"), 1.0, id="percent-vs-fraction"),
    pytest.param(r"50\%", boxed("5"), 0.0, id="percent-wrong"),
    # roots
    pytest.param(r"2\sqrt{2}", boxed(r"\sqrt{8}"), 1.0, id="sqrt"),
    pytest.param(r"\frac{\sqrt{2}}{2}", boxed(r"\frac{1}{\sqrt{2}}"), 1.0, id="rationalised-sqrt"),
    pytest.param(r"2\sqrt{2}", boxed(r"\sqrt{2}"), 0.0, id="sqrt-wrong"),
    # intervals and sets
    pytest.param("(1, 2]", boxed("(1,2]"), 1.0, id="interval"),
    pytest.param("(1, 2]", boxed("(1,2)"), 0.0, id="interval-open-end"),
    pytest.param("(1, 2]", boxed("[1,2]"), 0.0, id="interval-closed-start"),
    pytest.param(r"(-\infty, 1) \cup (2, \infty)", boxed(r"(2,\infty)\cup(-\infty,1)"), 1.0, id="interval-union"),
    pytest.param(r"\{1,2\}", boxed(r"\{2,1\}"), 1.0, id="set-order"),
    pytest.param(r"\{1,2\}", boxed(r"\{1,3\}"), 0.0, id="set-wrong"),
    pytest.param("2, -3", boxed("-3, 2"), 1.0, id="list-of-roots-order"),
    pytest.param(r"\pm 2", boxed("-2, 2"), 1.0, id="plus-minus"),
    pytest.param("3", boxed("1,2,3,4,5"), 0.0, id="hedging-with-a-list"),
    # matrices
    pytest.param(r"\begin{pmatrix}1\\2\end{pmatrix}", boxed(r"\begin{pmatrix}1\\2\end{pmatrix}"), 1.0, id="matrix"),
    pytest.param(r"\begin{pmatrix}1\\2\end{pmatrix}", boxed(r"\begin{bmatrix}1\\2\end{bmatrix}"), 1.0, id="bmatrix"),
    pytest.param(
        r"\begin{pmatrix}1\\2\end{pmatrix}", boxed(r"\begin{pmatrix}2\\1\end{pmatrix}"), 0.0, id="matrix-wrong"
    ),
    # units and text
    pytest.param("5", boxed(r"5\text{ cm}"), 1.0, id="unit-in-prediction"),
    pytest.param(r"5\text{ cm}", boxed("5"), 1.0, id="unit-in-gold"),
    pytest.param("5", boxed(r"5 \mbox{ cm}"), 1.0, id="mbox-unit"),
    pytest.param("90", boxed(r"90^\circ"), 1.0, id="degrees"),
    pytest.param("5", boxed(r"\$5"), 1.0, id="dollar-sign"),
    pytest.param("1000", boxed("1{,}000"), 1.0, id="thousands-separator"),
    pytest.param(r"\text{(B)}", boxed("B"), 1.0, id="multiple-choice"),
    pytest.param(r"\text{(B)}", boxed("C"), 0.0, id="multiple-choice-wrong"),
    pytest.param("2", boxed("x=2"), 1.0, id="assignment"),
    pytest.param("7", boxed("7."), 1.0, id="trailing-period"),
    pytest.param("x^2-1", boxed("(x-1)(x+1)"), 1.0, id="factored-polynomial"),
    # math_verify limitations: units are dropped, not compared; text-wrapped numbers, repeating decimals and
    # e^{i pi} (i is read as a variable) are not recognised; "(2,3)" is also read as the point a=2, b=3.
    pytest.param(r"5\text{ cm}", boxed(r"5\text{ m}"), 1.0, id="limitation-units-ignored"),
    pytest.param("5", boxed(r"\text{5 cm}"), 0.0, id="limitation-number-inside-text"),
    pytest.param("1/3", boxed(r"0.\overline{3}"), 0.0, id="limitation-repeating-decimal"),
    pytest.param("-1", boxed(r"e^{i\pi}"), 0.0, id="limitation-euler-identity"),
    pytest.param("(2,3)", boxed("a=2, b=3"), 1.0, id="limitation-interval-as-point"),
    # nesting and several boxes
    pytest.param(r"\frac{\sqrt{3}}{3}", boxed(r"\frac{1}{\sqrt{3}}"), 1.0, id="nested-braces"),
    pytest.param(r"\frac{1}{2}", r"\boxed{\frac{\frac{1}{1}}{2}}", 1.0, id="deeply-nested"),
    pytest.param("1", r"\boxed{{{1}}}", 1.0, id="redundant-braces"),
    pytest.param(r"\frac{1}{2}", r"\boxed{3}, no wait: \boxed{1/2}", 1.0, id="last-box-wins"),
    pytest.param("3", r"\boxed{3}, no wait: \boxed{1/2}", 0.0, id="earlier-box-ignored"),
    pytest.param("12", r"\fbox{12}", 1.0, id="fbox"),
    pytest.param("12", r"\boxed {12}", 1.0, id="space-before-brace"),
    pytest.param("12", r"\boxed{$12$}", 1.0, id="dollars-inside-box"),
    # missing, empty and malformed answers
    pytest.param("5", "The answer is 5.", 0.0, id="no-box"),
    pytest.param("5", r"\boxed{}", 0.0, id="empty-box"),
    pytest.param("5", r"\boxed{  }", 0.0, id="blank-box"),
    pytest.param("1", r"\boxed{\frac{1}{", 0.0, id="unclosed-frac"),
    pytest.param("1", r"\boxed{\frac{1}{2}", 0.0, id="unclosed-box"),
    pytest.param("1", r"\boxed{\left(}", 0.0, id="lone-left"),
    pytest.param("1", r"\boxed{\frac{1}{}}", 0.0, id="empty-denominator"),
    pytest.param("1", r"\boxed{)(}", 0.0, id="bad-parentheses"),
    pytest.param("1", r"\boxed{^^^}", 0.0, id="carets"),
    pytest.param("1", r"\boxed{\begin{pmatrix}1\\2}", 0.0, id="unclosed-environment"),
    pytest.param("1", "\\boxed{\\", 0.0, id="trailing-backslash"),
    # wrong answers
    pytest.param("5", boxed("6"), 0.0, id="wrong-integer"),
    pytest.param("5", boxed("-5"), 0.0, id="wrong-sign"),
    pytest.param(r"\frac{1}{2}", boxed(r"\frac{1}{3}"), 0.0, id="wrong-fraction"),
    # gold answers as datasets store them
    pytest.param(12, boxed("12"), 1.0, id="int-gold"),
    pytest.param(12, boxed("12.0"), 1.0, id="int-gold-float-prediction"),
    pytest.param(-3, boxed("-3"), 1.0, id="negative-int-gold"),
    pytest.param(0.5, boxed(r"\frac12"), 1.0, id="float-gold"),
    pytest.param(1e-05, boxed("10^{-5}"), 1.0, id="float-gold-in-exponent-notation"),
    pytest.param(r"\boxed{\frac{1}{2}}", boxed("0.5"), 1.0, id="boxed-gold"),
    pytest.param(r"$\frac{1}{2}$", boxed("0.5"), 1.0, id="dollar-gold"),
    pytest.param(r"\(\frac{1}{2}\)", boxed("0.5"), 1.0, id="paren-delimited-gold"),
    pytest.param("", boxed("5"), 0.0, id="empty-gold"),
    pytest.param(None, boxed("None"), 0.0, id="missing-gold"),
]


@pytest.mark.parametrize(("gold", "completion", "expected"), EQUIVALENCE_CASES)
def test_math_reward(gold, completion, expected):
    assert math_reward([completion], [gold]) == [expected]


def test_batch_matches_one_by_one_and_repeats():
    golds = [p.values[0] for p in EQUIVALENCE_CASES]
    completions = [p.values[1] for p in EQUIVALENCE_CASES]
    expected = [p.values[2] for p in EQUIVALENCE_CASES]
    clear_caches()
    assert math_reward(completions, golds) == expected
    assert math_reward(completions, golds) == expected  # now from the score cache


def test_accepts_trl_keyword_arguments_and_conversational_completions():
    completions = [
        [{"role": "assistant", "content": r"So $\boxed{\frac{1}{2}}$."}],
        [{"role": "user", "content": r"\boxed{3}"}, {"role": "assistant", "content": r"\boxed{0.5}"}],
        [{"role": "assistant", "content": [{"type": "text", "text": r"\boxed{1/2}"}]}],
        [{"role": "assistant", "content": r"\boxed{3}"}],
        [{"role": "assistant", "content": None}],
        [],
    ]
    scores = math_reward(
        prompts=[[{"role": "user", "content": "?"}]] * 6,
        completions=completions,
        completion_ids=[[1, 2]] * 6,
        answer=[r"\frac{1}{2}"] * 6,
        problem=["?"] * 6,
        trainer_state=None,
        log_extra=lambda *a: None,
        log_metric=lambda *a: None,
    )
    assert scores == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_exotic_inputs_score_zero_without_raising():
    completions = [None, 42, {"content": r"\boxed{1}"}, {"no": "content"}, r"\boxed{1}", r"\boxed{1}"]
    answers = ["1", "1", "1", "1", Unprintable(), float("nan")]
    assert math_reward(completions, answers) == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"a \boxed{1} b \boxed{2} c", "2"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # escaped braces do not count
        (r"\boxed{\boxed{5}}", "5"),
        (r"\fbox{x}", "x"),
        (r"\boxed  {x}", "x"),
        (r"\boxed{3} and \boxed 5", "3"),  # a box without braces is not a box
        (r"\boxed{", None),
        ("no box", None),
        (r"\boxed{" + "1" * MAX_BOX_CHARS + "}", "1" * MAX_BOX_CHARS),
        (r"\boxed{" + "1" * (MAX_BOX_CHARS + 1) + "}", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(12, "12"), (2.0, "2"), (1e-05, "0.00001"), (r" $\frac12$ ", r"\frac12"), (r"\boxed{3}", "3"), (None, "")],
)
def test_normalize_answer(answer, expected):
    assert normalize_answer(answer) == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ([2, 3], "2, 3"),
        ((2, 3), "2, 3"),
        (["x = 1", "y = 2"], "x = 1, y = 2"),
        ([5], "5"),
        ([[1, 2], 3], "1, 2, 3"),
        (42.0, "42"),
        (1.5, "1.5"),
        (7, "7"),
        (-1e-05, "-0.00001"),  # plain decimals, never an exponent
        (2.5e-07, "0.00000025"),
        (1e20, "100000000000000000000"),
        (Fraction(1, 4), "0.25"),
        (r"\frac{1}{2}", r"\frac{1}{2}"),
        (True, None),
        (False, None),
        (float("nan"), None),
        (float("-inf"), None),
        ({"value": 2}, None),
        ([2, None], None),
        ([2, True], None),
        ([], None),
        (None, None),
    ],
)
def test_a_reference_answer_is_converted_where_its_meaning_is_clear(value, text):
    from trl_ada.rewards import reference_answer

    assert reference_answer(value) == text


def test_a_list_answer_is_matched_by_the_boxed_list_and_an_unclear_one_never_scores():
    completions = [r"So \boxed{2, 3}.", r"So \boxed{3,2}.", r"So \boxed{2}.", r"So \boxed{True}."]
    assert math_reward(completions=completions, answer=[[2, 3]] * 4) == [1.0, 1.0, 0.0, 0.0]
    assert math_reward(completions=completions[:1], answer=["[2, 3]"]) == [0.0]  # the string a list used to become
    assert math_reward(completions=completions[3:], answer=[True]) == [0.0]
    assert normalize_answer(True) == normalize_answer(float("nan")) == ""


def test_completion_text_joins_message_contents() -> None:
    """One `completion_text` for every reward: the toy reward counts letters in the same text math_reward reads."""
    assert completion_text("ab") == "ab"
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": None}]) == "a"


def test_format_reward():
    completions = [
        r"\boxed{1}",
        r"\boxed{}",
        "none",
        r"\boxed{\frac{1}{",
        [{"role": "assistant", "content": r"\fbox{x}"}],
    ]
    assert format_reward(completions, answer=["1"] * 5, trainer_state=None) == [1.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("timeout_s", float("inf")),  # setitimer overflowed on the first scored pair
        ("timeout_s", 0),
        ("timeout_s", True),
        ("batch_timeout_s", float("nan")),
        ("num_workers", 1.0),
        ("num_workers", False),
        ("min_parallel_batch", 0),
        ("float_rounding", True),
    ],
)
def test_a_bad_scoring_setting_is_refused_when_the_reward_is_made(setting, value):
    with pytest.raises(ValueError) as refused:
        make_math_reward(**{setting: value})
    assert f"{setting}={value!r}" in str(refused.value)
    make_math_reward(**{setting: None if setting == "batch_timeout_s" else 1})  # a value the message allows


# --------------------------------------------------------------------------- time bounds


FAST_TIMEOUT_S = 0.3


@pytest.fixture
def fast_reward():
    """A math_reward with a short per-pair timeout, so that slow cases stay cheap to test."""
    return make_math_reward(timeout_s=FAST_TIMEOUT_S)


ADVERSARIAL = [
    r"\boxed{9^{9^{9^{9}}}}",
    r"\boxed{10^{10^{8}}}",
    r"\boxed{(10^{6})!}",
    r"\boxed{" + "(" * 300 + ")" * 300 + "}",
]


def test_one_megabyte_completions_return_quickly():
    huge = [
        "x" * (1 << 20) + r"\boxed{2}",
        "{" * (1 << 20),
        r"\boxed{" + "{" * (1 << 20),
        r"\boxed{" * (1 << 17),
        r"\boxed{" + "1" * (1 << 20) + "}",
        "\\" * (1 << 20),
    ]
    start = time.monotonic()
    assert math_reward(huge, ["2"] * len(huge)) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert time.monotonic() - start < 3.0


def test_adversarial_latex_is_cut_off_in_the_main_thread(fast_reward):
    clear_caches()
    start = time.monotonic()
    assert fast_reward(ADVERSARIAL, ["5"] * len(ADVERSARIAL)) == [0.0] * len(ADVERSARIAL)
    assert time.monotonic() - start < FAST_TIMEOUT_S * len(ADVERSARIAL) + 1.0


def test_alarm_swallowed_in_a_weakref_callback_still_cuts_off_quietly(monkeypatch):
    """Python swallows an exception raised inside a weakref callback (sympy's caches use them): the alarm must fire
    again, and the swallowed one must not print "Exception ignored" to the user's terminal."""
    import weakref

    landed_in_callback: list[bool] = []

    def verify_with_a_slow_weakref_callback(prediction, gold, settings):
        class Cached:
            pass

        def on_collect(_ref):
            try:
                time.sleep(10)  # the first alarm lands here
            finally:
                landed_in_callback.append(True)

        value = Cached()
        ref = weakref.ref(value, on_collect)
        del value  # runs on_collect now; its _PairTimeout is swallowed by Python
        time.sleep(10)  # without a second alarm this would run to the end
        return 1.0 if ref is not None else 0.0

    monkeypatch.setattr(workers, "_verify_pair", verify_with_a_slow_weakref_callback)
    printed: list = []  # what Python would print as "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    start = time.monotonic()
    assert workers._score_pair_with_alarm("1", "1", 0.2) == (0.0, False)
    assert time.monotonic() - start < 2.0
    assert landed_in_callback == [True]
    assert printed == []


def test_timer_restores_signal_state():
    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        math_reward([r"\boxed{1}"], ["1"])
        remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        assert 90.0 < remaining <= 100.0
        assert signal.getsignal(signal.SIGALRM) == signal.SIG_IGN
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", autouse=True)
def stop_workers():
    yield
    scoring.shutdown_workers()


def run_in_thread(fn, *args):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)))
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    return out[0]


def test_worker_threads_score_like_the_main_thread():
    golds = [p.values[0] for p in EQUIVALENCE_CASES]
    completions = [p.values[1] for p in EQUIVALENCE_CASES]
    clear_caches()
    expected = math_reward(completions, golds)
    clear_caches()
    assert run_in_thread(math_reward, completions, golds) == expected
    clear_caches()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        chunks = [pool.submit(math_reward, completions[i::4], golds[i::4]) for i in range(4)]
        results = [c.result(timeout=60) for c in chunks]
    assert [results[i % 4][i // 4] for i in range(len(golds))] == expected


def test_adversarial_latex_is_cut_off_in_a_worker_thread(fast_reward):
    clear_caches()
    start = time.monotonic()
    assert run_in_thread(fast_reward, ADVERSARIAL, ["5"] * len(ADVERSARIAL)) == [0.0] * len(ADVERSARIAL)
    assert time.monotonic() - start < (FAST_TIMEOUT_S + workers.HARD_GRACE_S) * len(ADVERSARIAL) + 5.0


def test_parallel_scoring_matches_serial():
    golds = [p.values[0] for p in EQUIVALENCE_CASES]
    completions = [p.values[1] for p in EQUIVALENCE_CASES]
    clear_caches()
    expected = score_math(completions, golds, num_workers=0)
    clear_caches()
    assert score_math(completions, golds, num_workers=2, min_parallel_batch=1) == expected


def test_hung_worker_is_killed_and_replaced():
    """A worker that stops answering (here: SIGSTOP) costs one pair timeout_s + HARD_GRACE_S, then is replaced."""
    clear_caches()
    assert score_math([r"\boxed{1}"], ["1"], num_workers=1, min_parallel_batch=1) == [1.0]
    pool = workers._get_pool(1)
    hung = pool._workers[0].process
    os.kill(hung.pid, signal.SIGSTOP)
    start = time.monotonic()
    assert score_math([r"\boxed{2}"], ["2"], num_workers=1, min_parallel_batch=1, timeout_s=0.5) == [0.0]
    assert time.monotonic() - start < 0.5 + workers.HARD_GRACE_S + 1.0
    assert hung.poll() is not None  # killed
    assert score_math([r"\boxed{2}"], ["2"], num_workers=1, min_parallel_batch=1) == [1.0]  # not cached, rescored


def test_dead_worker_is_replaced():
    clear_caches()
    assert score_math([r"\boxed{1}"], ["1"], num_workers=1, min_parallel_batch=1) == [1.0]
    workers._get_pool(1)._workers[0].process.kill()
    score_math([r"\boxed{3}"], ["3"], num_workers=1, min_parallel_batch=1)  # this pair may be lost (0.0)
    assert score_math([r"\boxed{4}", r"\boxed{5}"], ["4", "6"], num_workers=1, min_parallel_batch=1) == [1.0, 0.0]


def test_scoring_inside_a_worker_process():
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        # the first scoring in a fresh interpreter imports sympy's lazy parts, which can take longer than
        # FAST_TIMEOUT_S on a loaded machine: warm up with the default budget first
        assert pool.submit(score_math, [boxed("2")], ["2"]).result(timeout=60) == [1.0]
        future = pool.submit(score_math, [boxed("0.5"), ADVERSARIAL[0]], [r"\frac12", "5"], timeout_s=FAST_TIMEOUT_S)
        assert future.result(timeout=60) == [1.0, 0.0]


# --------------------------------------------------------------------------- registry


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry, so that registrations in a test do not leak."""
    monkeypatch.setattr(reward_registry, "REWARD_FUNCS", dict(REWARD_FUNCS))
    monkeypatch.setattr(reward_registry, "REWARD_FACTORIES", dict(reward_registry.REWARD_FACTORIES))
    return reward_registry.REWARD_FUNCS


def test_builtin_rewards_are_registered():
    assert get_reward_funcs(["math", "format"]) == [math_reward, format_reward]
    assert get_reward_funcs(["math_final", "short_answer"]) == [math_final_reward, short_answer_reward]
    assert get_reward_funcs("math") == [math_reward]


def test_unknown_reward_lists_known_names_and_suggests(registry):
    known = "format, math, math_final, short_answer"
    names(refusal(get_reward_funcs, ["maths"]), "'maths'", "Did you mean 'math'?", known)
    names(refusal(get_reward_funcs, ["math", "xyz"]), "'xyz'", known, "'package.module:function'")


def test_register_with_decorator_and_directly(registry):
    @register_reward("length")
    def length_reward(completions, **kwargs):
        return [float(len(c)) for c in completions]

    register_reward("constant", lambda completions, **kwargs: [1.0] * len(completions))
    funcs = get_reward_funcs(["length", "constant", "math"])
    assert funcs[0] is length_reward
    assert [f(completions=["ab"]) for f in funcs[:2]] == [[2.0], [1.0]]
    assert sorted(registry) == ["constant", "format", "length", "math", "math_final", "short_answer"]


def test_duplicate_registration_is_an_error_unless_overwritten(registry):
    with pytest.raises(ValueError, match=r"Reward 'math' is already registered"):
        register_reward("math", format_reward)

    def replacement(completions, **kwargs):
        return [0.5] * len(completions)

    register_reward("math", replacement, overwrite=True)
    assert get_reward_funcs(["math"]) == [replacement]
    with pytest.raises(ValueError, match=r"Reward 'math' takes no options"):  # the old factory went with it
        get_reward_funcs(["math"], {"math": {"strict": False}})


@pytest.mark.parametrize("name", ["", "pkg:func", 3])
def test_invalid_names_are_rejected(registry, name):
    with pytest.raises(ValueError, match="Reward name must be"):
        register_reward(name, format_reward)


def test_import_paths():
    assert get_reward_funcs(["trl_ada.rewards:format_reward"]) == [format_reward]
    assert get_reward_funcs(["os.path:join"]) == [os.path.join]
    names(refusal(get_reward_funcs, ["no_such_module:f"]), "'no_such_module:f'", "ModuleNotFoundError")
    names(refusal(get_reward_funcs, ["os:no_such_func"]), "'os:no_such_func'", "AttributeError")
    names(refusal(get_reward_funcs, ["os:sep"]), "'os:sep'", repr(os.sep), "not callable")


def test_callables_pass_through():
    assert get_reward_funcs([math_reward, "format"]) == [math_reward, format_reward]
