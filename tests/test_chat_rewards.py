"""Rewards for a chat model's answers: `make_math_reward(extraction="final")` / `math_final` and `short_answer`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from refusals import names

from trl_ada.rewards import (
    EXTRACTIONS,
    clear_caches,
    get_reward_funcs,
    make_math_reward,
    make_short_answer_reward,
    math_final_reward,
    math_reward,
    score_math,
    short_answer_reward,
)
from trl_ada.rewards import short_answer as sa

# --------------------------------------------------------------------------- math: extraction="final"

# (completion, gold, "final" reward); the boxed reward scores every one of these as today (see the next test)
FINAL_CASES = [
    pytest.param("To add 4 + 9, we first add the ones: 4 + 9 = 13.", "13", 1.0, id="prose-equation"),
    pytest.param("To add 4 + 9, we first add the ones: 4 + 9 = 13.", "12", 0.0, id="prose-equation-wrong"),
    pytest.param("The sum of 4 and 9 is 13", "13", 1.0, id="no-full-stop"),
    pytest.param("#### 13", "13", 1.0, id="gsm8k-marker"),
    pytest.param("The answer is: 13. I hope it is correct.", "13", 1.0, id="final-answer-phrase"),
    # math-verify reads the number after the last `=` within 100 characters of "answer" on the same line ...
    pytest.param("The answer is 13. Let me check: 13 - 4 = 9.", "13", 0.0, id="check-after-answer-reads-9"),
    pytest.param("The answer is 13. Let me check: 13 - 4 = 9.", "9", 1.0, id="check-after-answer-is-9"),
    # ... and on a new line, the anchored "answer is 13" wins over the later check
    pytest.param("The answer is 13.\n\nLet me check: 13 - 4 = 9.", "13", 1.0, id="check-on-next-line"),
    # arithmetic left uncomputed is skipped: the reading goes on after it
    pytest.param("The answer to 4 + 9 is 13.", "13", 1.0, id="answer-to-the-question-is"),
    pytest.param("The answer to 4 + 9 is 13.", "4", 0.0, id="answer-to-the-question-is-not-an-operand"),
    pytest.param("4 + 9 = 13. To find 4 + 9", "13", 0.0, id="restated-after-the-result"),
    pytest.param("So 7 \u00d7 8 = 56.", "56", 1.0, id="times-sign"),
    pytest.param("15 - 22 = -7", "-7", 1.0, id="negative"),
    pytest.param("The answer is \u22127.", "-7", 1.0, id="unicode-minus"),
    pytest.param("The answer is \u22127.", "7", 0.0, id="unicode-minus-is-not-dropped"),
    pytest.param("The total is 1,234 dollars.", "1234", 1.0, id="digit-grouping"),
    pytest.param("The result is 3,5.", "3.5", 1.0, id="decimal-comma"),
    pytest.param("That is 50%.", "50", 1.0, id="percentage"),
    pytest.param(r"So the value is $\frac{1}{2}$.", "0.5", 1.0, id="latex-fraction"),
    pytest.param(r"\[ 4 + 9 = 13 \]", "13", 1.0, id="latex-equation-rhs"),
    pytest.param(r"It equals $2\sqrt{2}$.", r"\sqrt{8}", 1.0, id="latex-irrational"),
    # cut at the length limit mid-reasoning: the last item is the question restated or unfinished working
    pytest.param("To find 4 + 9, we", "13", 0.0, id="truncated-restated-question"),
    pytest.param("To add 4 + 9, we first add 4 and", "13", 0.0, id="truncated-last-number"),
    pytest.param("Let's compute: 15 - 2 =", "13", 0.0, id="truncated-at-equals"),
    pytest.param("x = 4 + 9", "13", 0.0, id="uncomputed-rhs"),
    pytest.param("The answer is 1/2", "0.5", 0.0, id="plain-fraction-is-uncomputed"),
    pytest.param("I cannot answer that.", "13", 0.0, id="no-number"),
    # a box decides whenever there is one, whatever the text around it says
    pytest.param(r"So the answer is $\boxed{12}$. Then 4 + 9 = 13.", "13", 0.0, id="box-wins-over-text"),
    pytest.param(r"It is 12, so the answer is $\boxed{13}$.", "13", 1.0, id="box-right"),
    pytest.param(r"\boxed{} and then 13", "13", 0.0, id="empty-box-decides"),
    pytest.param(r"The answer is \boxed{13", "13", 0.0, id="unclosed-box-read-as-text-without-number"),
    pytest.param(r"4 + 9 = 13, so the answer is \boxed{13", "13", 1.0, id="unclosed-box-text-before"),
    pytest.param("", "13", 0.0, id="empty"),
    pytest.param("   \n", "13", 0.0, id="blank"),
    pytest.param(None, "13", 0.0, id="none"),
    pytest.param("4 + 9 = 13", None, 0.0, id="no-gold"),
    pytest.param([{"role": "assistant", "content": "4 + 9 = 13."}], "13", 1.0, id="conversational"),
    pytest.param(
        [{"role": "user", "content": "What is 4 + 9?"}, {"role": "assistant", "content": "It is 13."}],
        "13",
        1.0,
        id="conversation-reads-the-assistant",
    ),
]


@pytest.mark.parametrize(("completion", "gold", "expected"), FINAL_CASES)
def test_final_extraction(completion, gold, expected):
    assert math_final_reward([completion], [gold]) == [expected]
    assert make_math_reward(extraction="final")(completions=[completion], answer=[gold]) == [expected]


@pytest.mark.parametrize(("completion", "gold", "expected"), FINAL_CASES)
def test_boxed_extraction_is_unchanged_by_the_final_mode(completion, gold, expected):
    boxed = 1.0 if completion and r"\boxed{13}$" in str(completion) and gold == "13" else 0.0
    assert math_reward([completion], [gold]) == [boxed]
    assert make_math_reward(extraction="boxed")([completion], [gold]) == [boxed]


def test_boxed_and_final_scores_of_one_text_do_not_share_a_cache_entry():
    clear_caches()
    assert score_math(["13"], ["13"]) == [0.0]
    assert score_math(["13"], ["13"], extraction="final") == [1.0]
    assert score_math(["13"], ["13"]) == [0.0]


def test_final_mode_in_worker_processes_matches_in_process():
    completions = [f"Adding them, {n} + 1 = {n + 1}." for n in range(6)] + [r"So $\boxed{3}$.", "To find 4 + 9"]
    answers = [str(n + 1) for n in range(6)] + ["3", "13"]
    serial = make_math_reward(extraction="final")(completions, answers)
    clear_caches()
    parallel = make_math_reward(num_workers=2, min_parallel_batch=1, extraction="final")(completions, answers)
    assert serial == parallel == [1.0] * 7 + [0.0]


def test_final_mode_reads_the_end_of_a_megabyte_completion_quickly():
    text = "Let me think. " * 80_000 + "So 4 + 9 = 13."
    start = time.monotonic()
    assert math_final_reward([text, text], ["13", "14"]) == [1.0, 0.0]
    assert time.monotonic() - start < 5.0


def test_final_reward_has_its_own_name_for_trl_logs():
    assert math_final_reward.__name__ == "math_final_reward"
    assert make_math_reward(extraction="final").__name__ == "math_final_reward"
    assert make_math_reward().__name__ == "math_reward"


@pytest.mark.parametrize("bad", ["Final", "last", "", None, 1])
def test_bad_extraction_is_one_line_naming_option_value_and_choices(bad):
    for build in (lambda: make_math_reward(extraction=bad), lambda: score_math(["13"], ["13"], extraction=bad)):
        with pytest.raises(ValueError) as info:
            build()
        message = str(info.value)
        names(message, f"extraction={bad!r}", "'boxed'", "'final'")
        assert "\n" not in message
    assert set(EXTRACTIONS) == {"boxed", "final"}


# --------------------------------------------------------------------------- short answers

CAPITALS = ["Paris", "Berlin", "Rome", "Canberra", "Kyiv|Kiev", "Bogotá", "Panama City", "Sydney"]

# (completion, gold, reward with the call's golds only, reward with the family's answer set CAPITALS)
SHORT_CASES = [
    pytest.param("The capital of France is Paris.", "Paris", 1.0, 1.0, id="sentence"),
    pytest.param("paris", "Paris", 1.0, 1.0, id="lower-case"),
    pytest.param("PARIS!", "Paris", 1.0, 1.0, id="upper-case"),
    pytest.param("The capital of Colombia is Bogota.", "Bogotá", 1.0, 1.0, id="gold-accented-text-plain"),
    pytest.param("The capital of Colombia is BOGOTÁ.", "Bogota", 1.0, 1.0, id="text-accented-gold-plain"),
    pytest.param("It is Kiev.", "Kyiv|Kiev", 1.0, 1.0, id="alias-string"),
    pytest.param("It is Kiev.", ["Kyiv", "Kiev"], 1.0, 1.0, id="alias-list"),
    pytest.param("It is Kyiv.", "Kyiv|", 1.0, 1.0, id="blank-alias-ignored"),
    pytest.param("Parisian cafes are famous.", "Paris", 0.0, 0.0, id="whole-words-only"),
    pytest.param("Romeo and Juliet", "Rome", 0.0, 0.0, id="whole-words-prefix"),
    pytest.param("It is Panama City.", "Panama City", 1.0, 1.0, id="several-words"),
    pytest.param("It is Panama.", "Panama City", 0.0, 0.0, id="part-of-a-name"),
    pytest.param("Canberra, not Sydney.", "Canberra", 1.0, 1.0, id="right-then-wrong"),
    # listing does not pay, wherever the gold stands in the list
    pytest.param("Paris, Berlin or Rome.", "Berlin", 0.0, 0.0, id="list-gold-second"),
    pytest.param("Berlin, Paris or Rome.", "Berlin", 0.0, 0.0, id="list-gold-first"),
    # a wrong city the reward does not know as a candidate cannot stop a later right one
    pytest.param("It is Sydney. Canberra is also nice.", "Canberra", 1.0, 0.0, id="unknown-wrong-city-first"),
    pytest.param("Bern", "Paris", 0.0, 0.0, id="other-name"),
    pytest.param("", "Paris", 0.0, 0.0, id="empty"),
    pytest.param(None, "Paris", 0.0, 0.0, id="none"),
    pytest.param("Paris", None, 0.0, 0.0, id="no-gold"),
    pytest.param("Paris", "", 0.0, 0.0, id="empty-gold"),
    pytest.param([{"role": "assistant", "content": "Paris."}], "Paris", 1.0, 1.0, id="conversational"),
]


@pytest.mark.parametrize(("completion", "gold", "alone", "with_family"), SHORT_CASES)
def test_short_answer(completion, gold, alone, with_family):
    # the other golds of the call ("Paris" and "Rome" below) change nothing
    completions, answers = [completion, "x", "x"], [gold, "Paris", "Rome"]
    assert short_answer_reward(completions=completions, answer=answers)[0] == alone
    assert make_short_answer_reward(CAPITALS)(completions, answers)[0] == with_family


def test_listing_never_pays_with_or_without_the_family_answer_set():
    listing = "It could be Rome, Paris or Berlin."
    family = make_short_answer_reward(["Paris", "Berlin", "Rome"])
    assert family([listing] * 3, ["Rome", "Paris", "Berlin"]) == [0.0, 0.0, 0.0]
    assert short_answer_reward([listing] * 3, ["Rome", "Paris", "Berlin"]) == [0.0, 0.0, 0.0]
    assert short_answer_reward([listing], ["Paris"]) == [0.0]  # a call that knows no other name


def test_the_longest_name_at_the_first_word_wins():
    family = make_short_answer_reward(["Panama", "Panama City"])
    assert family(["Panama City, of course."], ["Panama City"]) == [1.0]
    assert family(["Panama, of course."], ["Panama City"]) == [0.0]


def test_words_fold_case_accents_and_punctuation():
    assert sa.words("São Tomé, Washington D.C. and N'Djamena") == (
        *("sao", "tome", "washington", "d", "c", "and", "n", "djamena"),
    )
    assert sa.answer_aliases("Kyiv | Kiev|") == (("kyiv",), ("kiev",))
    assert sa.answer_aliases(None) == ()


def test_exotic_answers_and_completions_score_zero_without_raising():
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no text")

    completions = [Unprintable(), 3, {"content": "Rome"}, "Rome"]
    assert short_answer_reward(completions, [Unprintable(), "3", "Rome", Unprintable()]) == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("bad", "fragments"),
    [
        ("Paris", ["candidates='Paris'", "a list of names", "candidates=['Paris', 'Berlin', 'Rome']"]),
        (3, ["candidates=3", "a list of names"]),
        (["Paris", 1], ["candidates holds 1", "not a name", "non-empty text"]),
        (["Paris", " , "], ["candidates holds ' , '", "not a name"]),
    ],
)
def test_bad_candidates_name_the_option(bad, fragments):
    with pytest.raises(ValueError) as refused:
        make_short_answer_reward(bad)
    names(str(refused.value), *fragments)


# --------------------------------------------------------------------------- registry


def test_registry_names_build_the_chat_rewards_with_options():
    assert get_reward_funcs(["math_final", "short_answer"]) == [math_final_reward, short_answer_reward]
    final, short = get_reward_funcs(
        ["math_final", "short_answer"], {"math_final": {"num_workers": 0}, "short_answer": {"candidates": ["Rome"]}}
    )
    assert final.__name__ == "math_final_reward" and final(["4 + 9 = 13"], ["13"]) == [1.0]
    assert short(["Rome or Paris"], ["Paris"]) == [0.0]
    boxed_again = get_reward_funcs(["math_final"], {"math_final": {"extraction": "boxed"}})[0]
    assert boxed_again(["4 + 9 = 13"], ["13"]) == [0.0]


@pytest.mark.parametrize(
    ("name", "options", "fragments"),
    [
        ("math_final", {"extraction": "last"}, ["reward_kwargs['math_final']: ", "extraction='last'", "'boxed'"]),
        ("math", {"extraction": "Final"}, ["reward_kwargs['math']: ", "extraction='Final'", "'final'"]),
        ("short_answer", {"candidate": ["Rome"]}, ["'candidate'", "Did you mean 'candidates'?"]),
        ("short_answer", {"candidates": "Rome"}, ["reward_kwargs['short_answer']: ", "candidates='Rome'"]),
    ],
)
def test_bad_reward_options_through_the_registry(name, options, fragments):
    with pytest.raises(ValueError) as refused:
        get_reward_funcs([name], {name: options})
    names(str(refused.value), *fragments)


# --------------------------------------------------------------------------- the shipped hand-labelled sets

REPO = Path(__file__).resolve().parents[1]


def test_final_extraction_on_the_math_cases_in_prose_has_no_false_positive():
    """benchmarks/math_agreement.py's cases: boxed, "final" scores as "boxed"; in prose, never 1 on a wrong answer."""
    from benchmarks.math_agreement import as_completion, as_prose, load_cases

    cases = load_cases(REPO / "benchmarks" / "data" / "math_cases.jsonl")
    golds = [case["gold"] for case in cases]
    boxed = [as_completion(case["prediction"]) for case in cases]
    assert math_final_reward(boxed, golds) == math_reward(boxed, golds)
    prose = math_final_reward([as_prose(case["prediction"]) for case in cases], golds)
    assert [c["id"] for c, s in zip(cases, prose, strict=True) if s > c["label"]] == []
    assert sum(s < c["label"] for c, s in zip(cases, prose, strict=True)) <= 10


def test_real_model_sample_is_labelled_and_scored_as_documented(tmp_path):
    """SmolLM2's own completions, read by hand (docs/rewards.md): the counts the docs quote."""
    from benchmarks import reward_real_model as bench

    rows = bench.score(bench.load(bench.DATA))
    arithmetic = [row for row in rows if row["family"] == "arithmetic"]
    capitals = [row for row in rows if row["family"] == "capitals"]
    assert (len(arithmetic), len(capitals)) == (180, 100) and all(row["label"] in (0, 1) for row in rows)
    expected = {  # reward: (reward 1, false positives, false negatives)
        "math (boxed)": (0, 0, 14),
        "math_final": (14, 2, 2),
        "math-verify as is": (25, 13, 2),
    }
    for name, (ones, false_positives, false_negatives) in expected.items():
        c = bench.counts(arithmetic, name)
        assert (c["reward 1"], c["false positives"], c["false negatives"]) == (ones, false_positives, false_negatives)
    for name in ("short_answer", "short_answer + answer set"):
        c = bench.counts(capitals, name)
        assert (c["right"], c["reward 1"], c["false positives"], c["false negatives"]) == (44, 44, 1, 1)


def test_real_model_benchmark_prompts_have_right_answers():
    import random

    from benchmarks import reward_real_model as bench

    prompts = bench.arithmetic_prompts(30, random.Random(0))
    symbols = [p["question"].split()[3] for p in prompts]
    assert [symbols.count(s) for s in ("+", "-")] == [10, 10] and symbols.count("*") + symbols.count("\u00d7") == 10
    for prompt in prompts:
        a, symbol, b = prompt["question"][len("What is ") : -1].split()
        assert int(prompt["answer"]) == bench.OPERATIONS["*" if symbol == "\u00d7" else symbol](int(a), int(b)) >= 0
    capitals = bench.capital_prompts()
    assert len(capitals) == len(bench.CAPITALS) and capitals[0]["question"] == "What is the capital of France?"
