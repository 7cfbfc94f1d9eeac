"""The real-model task families (`trl_ada.real.tasks`): disjoint train and test prompts, the shipped capitals table,
a data file with missing answers, and the rewards that read the model's prose answers."""

from __future__ import annotations

import logging
import re

import pytest
from refusals import names, refusal

from trl_ada.real import tasks
from trl_ada.real.tasks import ARITHMETIC_KINDS, arithmetic_task, capitals_task, load_capitals, task_reward

OPERANDS = re.compile(r"Compute (\d+) ([-+*]) (\d+)\. Reply with just the result\.")


def operands(row) -> tuple[int, str, int]:
    a, symbol, b = OPERANDS.fullmatch(row["prompt"][0]["content"]).groups()
    return int(a), symbol, int(b)


def test_arithmetic_splits_have_the_asked_sizes_and_correct_answers():
    task = arithmetic_task(train_per_kind=5, test_per_kind=3, seed=1)
    assert len(task["train"]) == 5 * len(ARITHMETIC_KINDS) and len(task["test"]) == 3 * len(ARITHMETIC_KINDS)
    for split in ("train", "test"):
        for row in task[split]:
            a, symbol, b = operands(row)
            assert row["answer"] == str({"+": a + b, "-": a - b, "*": a * b}[symbol])
            kind = ARITHMETIC_KINDS[row["kind"]]
            assert kind.symbol == symbol and row["family"] == "arithmetic"
            assert row["prompt"][0]["role"] == "user" and len(row["prompt"]) == 1


def test_arithmetic_test_pairs_are_disjoint_from_the_train_pairs_in_either_order():
    task = arithmetic_task(train_per_kind=20, test_per_kind=16, seed=3)
    train = {(row["kind"], pair(row)) for row in task["train"]}
    test = {(row["kind"], pair(row)) for row in task["test"]}
    assert len(train) == len(task["train"]) and len(test) == len(task["test"])  # no pair twice in a split
    assert not train & test


def pair(row):
    """The operands as a fact: unordered for + and *."""
    a, symbol, b = operands(row)
    return frozenset((a, b)) if symbol in "+*" else (a, b)


def test_one_digit_pairs_are_unordered_for_addition_and_multiplication():
    assert len(ARITHMETIC_KINDS["add_1d"].pairs()) == 45  # 9 * 10 / 2
    assert len(ARITHMETIC_KINDS["mul_1d"].pairs()) == 36  # 8 * 9 / 2
    assert len(ARITHMETIC_KINDS["sub_20"].pairs()) == 11 * 9
    assert len(ARITHMETIC_KINDS["add_2d_1d"].pairs()) == 90 * 9


def test_arithmetic_is_deterministic_for_a_seed_and_varies_across_seeds():
    first, again, other = (arithmetic_task(4, 2, seed=s) for s in (7, 7, 8))
    assert first["train"]["prompt"] == again["train"]["prompt"] and first["test"]["prompt"] == again["test"]["prompt"]
    assert first["train"]["prompt"] != other["train"]["prompt"]


def test_too_many_arithmetic_prompts_name_the_kind_and_the_fix():
    refused = refusal(arithmetic_task, train_per_kind=30, test_per_kind=10)
    names(refused, "mul_1d has 36 operand pairs", "train_per_kind + test_per_kind = 30 + 10", "lower them")


def test_the_shipped_capitals_table():
    table = load_capitals()
    assert 100 <= len(table) <= 190
    countries = table["country"]
    assert len(set(countries)) == len(countries)
    by_country = dict(zip(countries, table["capital"], strict=True))
    assert by_country["France"] == "Paris" and by_country["Japan"] == "Tokyo" and by_country["Kenya"] == "Nairobi"
    assert by_country["Ukraine"] == "Kyiv|Kiev" and by_country["United States"] == "Washington, D.C.|Washington"
    # a capital named like its country would be answered by repeating the question
    restated = [f"The capital of {country} is" for country in countries]
    scores = task_reward("capitals")(completions=restated, answer=table["capital"])
    assert scores == [0.0] * len(table)
    assert tasks.default_capitals_file().name == "capitals.csv"


def test_capitals_splits_ask_the_trained_countries_in_another_phrasing_and_control_ones_never_trained():
    task = capitals_task(train_countries=10, control_countries=5, seed=2)
    train, test, control = task["train"], task["test"], task["control"]
    assert train["fact"] == test["fact"] and train["answer"] == test["answer"]
    assert not set(control["fact"]) & set(train["fact"]) and len(control) == 5
    for row, held_out in zip(train, test, strict=True):
        assert row["prompt"][0]["content"] == tasks.CAPITAL_PROMPTS["train"].format(country=row["fact"])
        assert held_out["prompt"][0]["content"] == tasks.CAPITAL_PROMPTS["test"].format(country=row["fact"])
    assert tasks.CAPITAL_PROMPTS["train"] != tasks.CAPITAL_PROMPTS["test"]


def test_a_capitals_file_row_without_a_capital_is_dropped_with_a_count(tmp_path, caplog):
    path = tmp_path / "capitals.csv"
    path.write_text("country,capital\nFrance,Paris\nAtlantis,\nUkraine,Kyiv|Kiev\nNowhere,  \n")
    with caplog.at_level(logging.WARNING):
        table = load_capitals(path)
    assert table["country"] == ["France", "Ukraine"]
    assert table["capital"] == ["Paris", "Kyiv|Kiev"]
    names(caplog.text, "dropped 2 of 4 rows", "column 'capital'")
    assert str(path) in caplog.text


def test_a_capitals_file_without_its_columns_is_refused_in_one_line(tmp_path):
    path = tmp_path / "capitals.csv"
    path.write_text("nation,city\nFrance,Paris\n")
    names(refusal(load_capitals, path), f"{path}: ", "no country or capital column", "country,capital")


def test_too_many_countries_are_refused():
    refused = refusal(capitals_task, train_countries=150, control_countries=50)
    names(refused, "train_countries + control_countries = 150 + 50", "lower them")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: arithmetic_task(train_per_kind=0, test_per_kind=0), "train_per_kind=0"),
        (lambda: arithmetic_task(train_per_kind=2, test_per_kind=-1), "test_per_kind=-1"),
        (lambda: arithmetic_task(train_per_kind=2.5, test_per_kind=1), "train_per_kind=2.5"),
        (lambda: capitals_task(train_countries=4, control_countries=-2), "control_countries=-2"),
        (lambda: capitals_task(train_countries=0, control_countries=0), "train_countries=0"),
        (lambda: capitals_task(train_countries=4, control_countries=0), "control_countries=0"),
    ],
)
def test_an_empty_or_negative_split_is_refused_naming_the_size(build, field):
    name = field.split("=")[0]
    names(refusal(build), field, f"{name}=8")
    assert len(capitals_task(train_countries=4, control_countries=8)["control"]) == 8  # the fix builds


def test_a_directory_as_the_capitals_file_is_one_line(tmp_path):
    names(refusal(load_capitals, tmp_path), f"{tmp_path}: is a directory", "CSV file")


def test_task_rewards_read_prose_answers():
    arithmetic = task_reward("arithmetic")
    completions = [[{"role": "assistant", "content": text}] for text in ("To add 4 + 9: 4 + 9 = 13.", "It is 12.")]
    assert arithmetic(completions=completions, answer=["13", "13"]) == [1.0, 0.0]
    capitals = task_reward("capitals")
    texts = ("The capital is Kiev.", "Paris.", "Maybe Rome, or Kyiv.", "It is Kyiv, not Rome.")
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    # listing cities does not pay: the first capital of the table named is the answer
    assert capitals(completions=completions, answer=["Kyiv|Kiev", "Berlin", "Kyiv|Kiev", "Kyiv|Kiev"]) == [1, 0, 0, 1]
    names(refusal(task_reward, "poems"), "family='poems'", "['arithmetic', 'capitals']")
