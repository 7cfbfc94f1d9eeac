"""Listing or hedging answers must not pay, and a reward must not depend on the other rows of its call (issue 35):
`short_answer` in the synchronous and the asynchronous trainer, with and without a candidate set, and `math_final`
on hedged numbers and percentages."""

from __future__ import annotations

import pytest
from test_async_worker import tiny, worker_for  # noqa: F401  (the fixture is used by name)

from trl_ada.real.tasks import task_reward
from trl_ada.rewards import get_reward_funcs, make_short_answer_reward, math_final_reward, short_answer_reward

CAPITAL_LIST = "Berlin, Madrid, Rome, Paris, Canberra, Tokyo, Ottawa, Cairo."
LISTED_GOLDS = ["Berlin", "Madrid", "Rome", "Paris", "Canberra", "Tokyo", "Ottawa", "Cairo"]
SHORT_REWARDS = {
    "short_answer": short_answer_reward,
    "with candidates": make_short_answer_reward(LISTED_GOLDS + ["Sydney", "Lyon"]),
    "capitals task": task_reward("capitals"),
}


# --------------------------------------------------------------------------- short_answer: listing never pays


@pytest.mark.parametrize("reward", SHORT_REWARDS.values(), ids=SHORT_REWARDS)
def test_a_list_of_capitals_scores_zero_for_every_listed_country_alone_and_in_a_batch(reward):
    for gold in LISTED_GOLDS:  # the asynchronous worker scores one prompt's completions per call
        assert reward([CAPITAL_LIST], [gold]) == [0.0], gold
    assert reward([CAPITAL_LIST] * len(LISTED_GOLDS), LISTED_GOLDS) == [0.0] * len(LISTED_GOLDS)


@pytest.mark.parametrize("reward", SHORT_REWARDS.values(), ids=SHORT_REWARDS)
def test_a_completion_scores_the_same_whatever_shares_its_call(reward):
    completions = [
        CAPITAL_LIST,
        "The capital of France is Paris.",
        "It is Berlin. No: Paris.",
        "Paris or Lyon, I think.",
        "The capital of Australia is Canberra, not Sydney.",
        "Sydney, then Canberra.",
    ]
    golds = ["Paris", "Paris", "Paris", "Paris", "Canberra", "Canberra"]
    alone = [reward([completion], [gold])[0] for completion, gold in zip(completions, golds, strict=True)]
    assert reward(completions, golds) == alone
    assert reward(completions[::-1], golds[::-1]) == alone[::-1]
    with_others = reward([*completions, "x", "x"], [*golds, "Berlin", "Sydney"])
    assert with_others[: len(completions)] == alone


def test_the_shipped_completions_score_the_same_one_by_one_as_in_one_call():
    from benchmarks import reward_real_model as bench

    rows = [row for row in bench.load(bench.DATA) if row["family"] == "capitals"]
    completions, golds = [row["completion"] for row in rows], [row["answer"] for row in rows]
    for reward in SHORT_REWARDS.values():
        assert [reward([c], [g])[0] for c, g in zip(completions, golds, strict=True)] == reward(completions, golds)


def test_the_asynchronous_worker_pays_nothing_for_a_list(tmp_path, tiny):  # noqa: F811
    reward = get_reward_funcs(["short_answer"])[0]
    row = {"prompt": [{"role": "user", "content": "What is the capital of France?"}], "answer": "Paris"}
    worker = worker_for(tmp_path, tiny, [row], reward=reward)
    scores = worker._score([row, row], [[11], [12]], [CAPITAL_LIST, "The capital of France is Paris."])
    assert scores.tolist() == [[0.0], [1.0]]


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("Paris or Lyon.", "Paris"),
        ("Lyon or maybe Paris.", "Paris"),
        ("Paris and Lyon.", "Paris"),
        ("Paris/Lyon", "Paris"),
        ("It could be Rio de Janeiro, Paris, or Lyon.", "Paris"),
        ("It's home to cities like Hoi An, Hanoi, and Ha Long", "Hanoi"),
    ],
)
def test_hedged_and_listed_answers_score_zero(completion, gold):
    assert short_answer_reward([completion], [gold]) == [0.0]
    assert make_short_answer_reward(["Paris", "Berlin", "Rome"])([completion], [gold]) == [0.0]


def test_a_list_in_lower_case_is_seen_through_the_candidates():
    listing = "paris, berlin, rome"
    assert make_short_answer_reward(["Paris", "Berlin", "Rome"])([listing], ["Paris"]) == [0.0]
    assert short_answer_reward([listing], ["Paris"]) == [1.0]  # a known limit: unknown lower-case names


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("The capital of France is Paris.", "Paris"),
        ("The capital of Italy is Rome, Italy.", "Rome"),
        ("Yes, Paris, of course.", "Paris"),
        ("It is Paris and it is lovely.", "Paris"),
        ("Kyiv or Kiev, depending on the spelling.", "Kyiv|Kiev"),
        ("The capital of Australia is Canberra, not Sydney.", "Canberra"),
        ("Paris. Other big cities are Lyon, Marseille and Nice.", "Paris"),
    ],
)
def test_one_answer_beside_other_words_still_scores_one(completion, gold):
    assert short_answer_reward([completion], [gold]) == [1.0]
    assert make_short_answer_reward(["Paris", "Lyon", "Sydney", "Rome"])([completion], [gold]) == [1.0]


# --------------------------------------------------------------------------- short_answer: negations, corrections


@pytest.mark.parametrize(
    "completion", ["The capital is not Paris, it is Lyon.", "I don't know Paris well.", "It isn't Paris."]
)
def test_a_negated_gold_is_not_the_answer(completion):
    assert short_answer_reward([completion], ["Paris"]) == [0.0]


def test_corrections_are_read_alike_whether_or_not_the_call_knows_the_first_city():
    corrections = ["Sydney. Just kidding, Canberra.", "Berlin. No: Paris."]
    golds = ["Canberra", "Paris"]
    # the first answer counts when the reward knows it; the other row's gold (Paris, Canberra) changes nothing
    assert short_answer_reward(corrections, golds) == [1.0, 1.0]
    assert [short_answer_reward([c], [g])[0] for c, g in zip(corrections, golds, strict=True)] == [1.0, 1.0]
    assert make_short_answer_reward(["Sydney", "Berlin"])(corrections, golds) == [0.0, 0.0]


@pytest.mark.parametrize(("completion", "country"), [("Delhi.", "India"), ("It is Nursultan.", "Kazakhstan")])
def test_common_other_names_of_a_capital_count(completion, country):
    from trl_ada.real.tasks import load_capitals

    table = load_capitals()
    gold = table["capital"][table["country"].index(country)]
    assert task_reward("capitals")([completion], [gold]) == [1.0]


# --------------------------------------------------------------------------- math_final: hedges and percentages


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("13 or 14", "14"),
        ("13 or 14", "13"),
        ("12, 13, 14", "14"),
        ("12, 13, 14", "13"),
        ("It is 13 or maybe 14.", "14"),
        ("The answer is 13 or 14.", "13"),
        ("It is 13, 14 or 15.", "15"),
        ("It is 13% or 14%.", "14"),
        ("The answer is 6 (or 5)", "6"),
        ("The answer is 5 (or 6).", "6"),
        ("It is 6 [or maybe 5].", "6"),
    ],
)
def test_math_final_pays_nothing_for_a_hedged_number(completion, gold):
    assert math_final_reward([completion], [gold]) == [0.0]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("1300%", "13", 0.0),
        ("The answer is 1300%.", "13", 0.0),
        ("That is 25%.", "25", 1.0),
        ("The answer is 25%.", "25\\%", 1.0),
        ("The answer is 25%.", "0.25", 1.0),  # a proportion, up to 100%
        ("It is 200%.", "2", 0.0),
        ("4 + 9 = 13.", "13", 1.0),
        ("Results: 12, 13.", "13", 1.0),
        ("The total is 1,234 dollars.", "1234", 1.0),
        ("13 or 13", "13", 1.0),
    ],
)
def test_math_final_reads_a_percentage_above_100_as_its_number_and_one_answer_as_one(completion, gold, expected):
    assert math_final_reward([completion], [gold]) == [expected]


@pytest.mark.parametrize("reward", SHORT_REWARDS.values(), ids=SHORT_REWARDS)
@pytest.mark.parametrize(
    "completion",
    [
        "Buenos Aires or New Delhi.",
        "New Delhi or Buenos Aires.",
        "Kuala Lumpur, Buenos Aires, New Delhi.",
    ],
)
def test_a_list_of_names_of_several_words_pays_nothing_wherever_the_gold_stands(reward, completion):
    """The walk along a list reads names of two words on both sides of the gold (the gold first, last, in the
    middle)."""
    for gold in ("New Delhi", "Buenos Aires"):
        if gold in completion:
            assert reward([completion], [gold]) == [0.0], (completion, gold)


@pytest.mark.parametrize(
    "completion",
    ["buenos aires or new delhi.", "new delhi or buenos aires.", "kuala lumpur, buenos aires, new delhi."],
)
def test_a_list_of_lower_case_names_of_several_words_is_seen_through_the_capitals_candidates(completion):
    """In lower case only the candidates tell a name of two words from other words, before the gold and after it."""
    reward = task_reward("capitals")
    for gold in ("New Delhi", "Buenos Aires"):
        if gold.lower() in completion:
            assert reward([completion], [gold]) == [0.0], (completion, gold)


@pytest.mark.parametrize("reward", SHORT_REWARDS.values(), ids=SHORT_REWARDS)
def test_one_name_of_several_words_pays(reward):
    assert reward(["The capital of India is New Delhi."], ["New Delhi"]) == [1.0]
    assert reward(["Buenos Aires."], ["Buenos Aires"]) == [1.0]


# --------------------------------------------------------------------------- short_answer: the walk along a list
# The answer is the first known name that is not negated, so the only known names to its left are negated ones; the
# walk reads them through the candidates (in lower case too), and a negation ends the walk on its side.

NEGATED_ON_THE_LEFT = [
    ("it is not berlin or paris", ["Paris", "Berlin"], 0.0),  # "(not berlin) or paris" hedges
    ("it is not new delhi or paris", ["Paris", "New Delhi"], 0.0),  # a known name of two words, lower case
    ("it is not berlin, paris", ["Paris", "Berlin"], 1.0),  # a rejected name and the answer: one answer
    ("Not Rome, not Berlin, Paris", ["Paris", "Berlin", "Rome"], 1.0),  # the walk stops at "not", before Rome
]


@pytest.mark.parametrize(("completion", "candidates", "expected"), NEGATED_ON_THE_LEFT)
def test_a_negated_known_name_left_of_the_answer_is_a_list_item_up_to_its_negation(completion, candidates, expected):
    assert make_short_answer_reward(candidates)([completion], ["Paris"]) == [expected]


@pytest.mark.parametrize(
    ("completion", "named_nowhere"),
    [
        ("it is not new delhi or paris", "New York"),  # shares the first word and the length of a text's name
        ("it is not berlin, paris", "Berlin Wall"),
        ("Saint Petersburg or Paris", "Saint Denis"),
        ("The city of Lyon or Paris", "Lyon Nord"),
    ],
)
def test_a_candidate_the_completion_does_not_name_changes_no_score(completion, named_nowhere):
    without = make_short_answer_reward(["Paris"])([completion], ["Paris"])
    assert make_short_answer_reward(["Paris", named_nowhere])([completion], ["Paris"]) == without


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("Paris, maybe Lyon, Nice", "Paris"),  # a comma ends a name: three items, not "Paris" and "Lyon Nice"
        ("Saint Petersburg, Moscow, Petersburg", "Moscow"),  # a name that starts the text is read whole
        ("The city of Lyon or Paris", "Paris"),  # a connector before a name is not part of it
        ("I Think It Is Lyon or Paris", "Paris"),  # title case: at most four words make a name, "Think It Is Lyon"
    ],
)
def test_names_are_cut_where_a_reader_cuts_them(completion, gold):
    assert short_answer_reward([completion], [gold]) == [0.0]


def test_the_words_of_a_negated_name_are_not_read_again_as_an_answer():
    reward = make_short_answer_reward(["Rio de Janeiro", "Janeiro"])
    assert reward(["It is not rio de janeiro."], ["Janeiro"]) == [0.0]


@pytest.mark.parametrize(
    "completion",
    ["Paris Is The Capital Of France", "The Capital Of France Is Paris", "Paris (France)", "Paris\nFrance"],
)
def test_title_case_prose_and_a_name_with_its_country_are_not_a_list(completion):
    assert short_answer_reward([completion], ["Paris"]) == [1.0]


def _every_capital(separate):
    from trl_ada.real.tasks import load_capitals

    golds = load_capitals()["capital"]
    return separate([gold.split("|")[0] for gold in golds]), golds


LIST_STYLES = {
    "one per line": "\n".join,
    "bullets": lambda names: "\n".join(f"- {name}" for name in names),
    "stars": lambda names: "\n".join(f"* {name}" for name in names),
    "numbered": lambda names: "\n".join(f"{i}. {name}" for i, name in enumerate(names, 1)),
    "numbered inline": lambda names: " ".join(f"{i}) {name}" for i, name in enumerate(names, 1)),
    "spaces": " ".join,
    "periods": ". ".join,
    "pipes": " | ".join,
    "parentheses": lambda names: " ".join(f"({name})" for name in names),
    "dots": " \u2022 ".join,
}


@pytest.mark.parametrize("separate", LIST_STYLES.values(), ids=LIST_STYLES)
def test_a_list_of_every_capital_pays_for_no_country_however_it_is_written(separate):
    """The registered reward knows no wrong answer; a list of all 171 capitals must still pay nothing, in every way
    a list is written."""
    listing, golds = _every_capital(separate)
    assert len(golds) == 171
    assert short_answer_reward([listing] * len(golds), golds) == [0.0] * len(golds)


def test_completions_and_answers_of_different_lengths_are_refused():
    with pytest.raises(ValueError):
        short_answer_reward(["Paris", "Rome"], ["Paris"])


def test_a_name_said_twice_is_one_list_item():
    assert short_answer_reward(["Paris, Lyon, Lyon."], ["Paris"]) == [1.0]  # two names and a comma: no list
