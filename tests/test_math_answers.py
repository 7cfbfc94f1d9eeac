r"""How `math_reward` reads answers where a plain "last box, wrapped in `$...$`" reading goes wrong.

One group of tests per cause: several boxes in a completion, several boxes in a gold answer, upright wrappers such
as `\mathrm{e}`, numbers with digit grouping or a decimal comma, and the comparison settings (from Python and from a
recipe). The cases marked "false positive" scored 1.0 before these rules existed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refusals import names, refusal

from trl_ada.data import ReinforceAdaScriptArguments
from trl_ada.rewards import (
    MathVerifySettings,
    clear_caches,
    extract_answer,
    get_reward_funcs,
    make_math_reward,
    math_reward,
    normalize_answer,
    score_math,
)
from trl_ada.rewards.answers import comparable_pair

REPO = Path(__file__).resolve().parents[1]


def score(gold: object, completion: str) -> float:
    return math_reward([completion], [gold])[0]


# --------------------------------------------------------------------------- several boxes in a completion


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{-3} \quad\text{and}\quad \boxed{4}", "-3, 4"),
        (r"\boxed{(1, 5)} \text{ and } \boxed{(5, 1)}", "(1, 5), (5, 1)"),
        (r"\boxed{2},\boxed{4},\boxed{6}", "2, 4, 6"),
        (r"$\boxed{7}$ or $\boxed{-7}$.", "7, -7"),
        (r"\(\boxed{0}\); \(\boxed{1}\)", "0, 1"),
        ("\\[\n\\boxed{1}, \\\\\n\\boxed{2}\n\\]", "1, 2"),
        (r"$a = \boxed{3}$, $b = \boxed{4}$", "3, 4"),  # a variable label joins
        (r"\boxed{9} \qquad \boxed{9}", "9"),  # a repeated box counts once
        (r"\boxed{(2, 5)} \text{ for part (i) and } \boxed{(4, 1)}", "(2, 5), (4, 1)"),  # short, with "and"
        (r"\boxed{4} apples and \boxed{9} pears", "4, 9"),
        (r"\boxed{2} + \boxed{3} = \boxed{5}", "2, 3, 5"),  # short, without words
        (r"We get $\boxed{2}$. And then $2 + 3 = \boxed{5}$.", "5"),  # a sentence ends in between
        (
            r"\boxed{12} and then, once the rest of the algebra is worked through in full detail, \boxed{14}",
            "14",
        ),  # long
        (r"The base is $\boxed{6}$. Hence the area is $\boxed{18}$.", "18"),  # prose: the earlier box is intermediate
        (r"\boxed{6}, so the area is \boxed{18}", "18"),
        (r"\boxed{3}, no wait: \boxed{1/2}", "1/2"),
        (r"\boxed{\boxed{5}}", "5"),
        (r"\boxed{1} and \boxed{", None),  # the last box is unclosed
        ("no box at all", None),
    ],
)
def test_extract_answer_joins_boxes_separated_only_by_separators(text, expected):
    assert extract_answer(text) == expected


def test_extract_answer_bounds_the_boxes_it_reads():
    many = ", ".join(rf"\boxed{{{i}}}" for i in range(40))
    assert extract_answer(many) == ", ".join(str(i) for i in range(24, 40))  # MAX_ANSWER_BOXES = 16
    long_gap = r"\boxed{1}" + " " * 100 + r"\boxed{2}"
    assert extract_answer(long_gap) == "2"
    assert extract_answer(r"\boxed{" + "1" * 600 + r"}, \boxed{" + "2" * 600 + "}") == "2" * 600  # 1000 chars in all


@pytest.mark.parametrize(
    ("gold", "completion", "expected"),
    [
        ("4, -3", r"\boxed{-3} \quad\text{and}\quad \boxed{4}", 1.0),
        ("(5,1),(1,5)", r"\boxed{(1, 5)} \text{ and } \boxed{(5, 1)}", 1.0),
        (r"\{2,4,6\}", r"\boxed{2},\boxed{4},\boxed{6}", 1.0),
        (r"\{2,4,6\}", r"\boxed{2},\boxed{4},\boxed{8}", 0.0),
        ("a = 3, b = 4", r"So $a = \boxed{3}$ and $b = \boxed{4}$.", 1.0),
        ("18", r"The base is $\boxed{6}$. Hence the area is $\boxed{18}$.", 1.0),
        ("6", r"The base is $\boxed{6}$. Hence the area is $\boxed{18}$.", 0.0),
        ("18", r"\boxed{6}, so the area is \boxed{18}", 1.0),
        # false positives: a hedge of several answers used to score by its last box
        ("8", r"\boxed{5}, \boxed{8}", 0.0),
        ("8", r"It is $\boxed{5}$ or $\boxed{8}$.", 0.0),
    ],
)
def test_several_boxes_in_a_completion_are_one_answer(gold, completion, expected):
    assert score(gold, completion) == expected


# --------------------------------------------------------------------------- several boxes in a gold answer


GOLD_PRIMES = r"\boxed{2}, \boxed{3}, \boxed{5}"


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (r"\boxed{5}", 0.0),  # false positive: only the gold's last box used to be kept
        (r"\boxed{2, 3, 5}", 1.0),
        (r"\boxed{5, 3, 2}", 1.0),
        (r"$\boxed{2}$, $\boxed{3}$ and $\boxed{5}$", 1.0),
        (r"\boxed{3, 5}", 0.0),
        (r"\boxed{2, 3, 5, 7}", 0.0),
    ],
)
def test_several_boxes_in_a_gold_answer_are_one_answer(completion, expected):
    assert normalize_answer(GOLD_PRIMES) == "2, 3, 5"
    assert score(GOLD_PRIMES, completion) == expected


# --------------------------------------------------------------------------- upright wrappers


@pytest.mark.parametrize(
    ("gold", "completion", "expected"),
    [
        ("1", r"\boxed{1 + \frac{1}{\mathrm{e}}}", 0.0),  # false positive: math_verify stopped at \mathrm{e}
        ("3", r"\boxed{3+\mathrm{e}}", 0.0),  # false positive
        (r"1 + \frac{1}{e}", r"\boxed{1 + \frac{1}{\mathrm{e}}}", 1.0),
        (r"3+\mathrm{e}", r"\boxed{e + 3}", 1.0),
        (r"3+\mathrm{e}", r"\boxed{3}", 0.0),  # the gold used to be read as 3
        (r"\frac{1}{\mathrm{e}}", r"\boxed{e^{-1}}", 1.0),  # the gold used not to parse at all
        (r"\frac{1}{\mathrm{e}}", r"\boxed{-e}", 0.0),
        (r"{\rm e}^{2}", r"\boxed{e^2}", 1.0),
        (r"\mathit{e} - 2", r"\boxed{e-2}", 1.0),
        (r"1 + 2\mathrm{i}", r"\boxed{1 + 2i}", 1.0),
        (r"1 + 2\mathrm{i}", r"\boxed{1}", 0.0),  # false positive: \mathrm{i} was dropped
        (r"\arctan\frac{1}{3}", r"\boxed{\operatorname{arccot} 3}", 1.0),
        (r"\ln 5", r"\boxed{\mathrm{ln}\,5}", 1.0),
        (r"\ln 5", r"\boxed{\operatorname{ln} 4}", 0.0),
        (r"\cos 2", r"\boxed{\operatorname{cos}(2)}", 1.0),
    ],
)
def test_upright_wrappers_are_read(gold, completion, expected):
    assert score(gold, completion) == expected


def test_upright_wrappers_become_plain_latex():
    assert comparable_pair(r"2\mathrm{e}+\operatorname{arccot}x", r"\rm e") == (r"2e+\arccot x", "e")
    assert comparable_pair(r"\mathrm{cm}", r"\mathrm{C}") == (r"\mathrm{cm}", r"\mathrm{C}")  # not a constant


# --------------------------------------------------------------------------- grouped numbers and decimal commas


@pytest.mark.parametrize(
    ("gold", "completion", "expected"),
    [
        ("2000", r"\boxed{2 000}", 1.0),
        ("0", r"\boxed{2 000}", 0.0),  # false positive: `2 000` was read as 2*000 = 0
        ("2000", r"\boxed{2\,000}", 1.0),
        ("2000", r"\boxed{2\ 000}", 1.0),
        ("2000", r"\boxed{2~000}", 1.0),
        ("2000", "\\boxed{2\u2009000}", 1.0),  # a Unicode thin space
        ("3000000", r"\boxed{3\,000\,000}", 1.0),
        ("3000000", r"\boxed{3,000,000}", 1.0),
        ("-4500.25", r"\boxed{-4 500.25}", 1.0),
        ("45", r"\boxed{4 500}", 0.0),
        (r"2\,000", r"\boxed{2000}", 1.0),  # the gold is read the same way
        ("2.75", r"\boxed{2,75}", 1.0),  # one value on the other side: a decimal comma
        ("2,75", r"\boxed{2.75}", 1.0),
        (r"\frac{11}{4}", r"\boxed{2,75}", 1.0),
        ("2.75", r"\boxed{2,57}", 0.0),
        ("31415", r"\boxed{31,415}", 1.0),  # three digits after the comma: a thousands separator
        ("31.415", r"\boxed{31,415}", 0.0),
        ("0.125", r"\boxed{0,125}", 1.0),  # a leading 0 is never a thousands group
        ("4, 7", r"\boxed{4,7}", 1.0),  # a list on the other side: the comma separates values
        (r"\{4, 7\}", r"\boxed{4,7}", 1.0),
        ("4.7", r"\boxed{4, 7}", 0.0),  # a comma followed by a space always separates values
    ],
)
def test_numbers_with_grouping_or_a_decimal_comma(gold, completion, expected):
    assert score(gold, completion) == expected


# --------------------------------------------------------------------------- comparison settings


def test_settings_change_the_comparison():
    cases = [
        ("1/3", r"\boxed{0.33}", {"float_rounding": 2}),
        ("x + 1", r"\boxed{y + 1}", {"strict": False}),
        ("(1, 2)", r"\boxed{1 < x < 2}", {"allow_set_relation_comp": True}),
    ]
    for gold, completion, options in cases:
        clear_caches()
        assert make_math_reward()([completion], [gold]) == [0.0]
        assert make_math_reward(**options)([completion], [gold]) == [1.0], options
        assert make_math_reward()([completion], [gold]) == [0.0]  # the cache keeps settings apart


def test_workers_use_the_settings():
    clear_caches()
    loose = MathVerifySettings(float_rounding=2)
    completions, golds = [r"\boxed{0.33}", r"\boxed{0.5}"], ["1/3", "1/3"]
    assert score_math(completions, golds, num_workers=1, min_parallel_batch=1, settings=loose) == [1.0, 0.0]
    assert score_math(completions, golds, num_workers=1, min_parallel_batch=1) == [0.0, 0.0]


def test_default_settings_are_math_verify_defaults():
    assert MathVerifySettings() == MathVerifySettings(
        float_rounding=6, numeric_precision=15, strict=True, allow_set_relation_comp=False
    )


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        ({"float_rounding": -1}, ["float_rounding=-1", ">= 0", "float_rounding=6"]),
        ({"float_rounding": 2.5}, ["float_rounding=2.5", "an integer"]),
        ({"numeric_precision": 0}, ["numeric_precision=0", ">= 1"]),
        ({"strict": "no"}, ["strict='no'", "true or false"]),
        ({"allow_set_relation_comp": 1}, ["allow_set_relation_comp=1", "true or false"]),
        ({"num_workers": -2}, ["num_workers=-2", ">= 0"]),
        ({"timeout_s": 0}, ["timeout_s=0", "positive number of seconds"]),
        ({"min_parallel_batch": 0}, ["min_parallel_batch=0", ">= 1"]),
    ],
)
def test_bad_settings_are_rejected_when_the_reward_is_made(options, fragments):
    with pytest.raises(ValueError) as refused:
        make_math_reward(**options)
    names(str(refused.value), *fragments)


def test_reward_kwargs_build_the_math_reward_with_options():
    strict_math, fmt = get_reward_funcs(["math", "format"], {"math": {"float_rounding": 2}})
    assert fmt is get_reward_funcs(["format"])[0]
    assert strict_math.__name__ == "math_reward"  # TRL names the logged reward after it
    clear_caches()
    assert strict_math([r"\boxed{0.33}"], ["1/3"]) == [1.0]
    assert get_reward_funcs(["math"])[0]([r"\boxed{0.33}"], ["1/3"]) == [0.0]


def test_reward_kwargs_accept_an_import_path_as_factory():
    (reward,) = get_reward_funcs(["trl_ada.rewards:make_math_reward"], {"trl_ada.rewards:make_math_reward": {}})
    assert reward([r"\boxed{2}"], ["2"]) == [1.0]


@pytest.mark.parametrize(
    ("reward_kwargs", "fragments"),
    [
        ({"math": {"strictt": False}}, ["'strictt'", "reward_kwargs['math']", "Did you mean 'strict'?"]),
        ({"format": {"x": 1}}, ["'format'", "no options", "math, math_final, short_answer"]),
        ({"maths": {}}, ["'maths'", "reward_funcs ['math', 'format']"]),
        ({"math": {"float_rounding": -1}}, ["reward_kwargs['math']: ", "float_rounding=-1", ">= 0"]),
        ({"math": 3}, ["reward_kwargs['math']", "option names to values", "got 3"]),
        (["math"], ["reward_kwargs", "reward names to options"]),
    ],
)
def test_bad_reward_kwargs_are_rejected(reward_kwargs, fragments):
    with pytest.raises(ValueError) as refused:
        get_reward_funcs(["math", "format"], reward_kwargs)
    names(str(refused.value), *fragments)


def test_recipe_reward_kwargs_from_yaml_mapping_or_json_flag():
    from_yaml = ReinforceAdaScriptArguments(reward_kwargs={"math": {"strict": False}})
    from_flag = ReinforceAdaScriptArguments(reward_kwargs='{"math": {"strict": false}}')
    assert from_yaml.reward_kwargs == from_flag.reward_kwargs == {"math": {"strict": False}}
    assert ReinforceAdaScriptArguments().reward_kwargs is None
    refused = refusal(ReinforceAdaScriptArguments, reward_kwargs="{math: 1}")
    names(refused, "reward_kwargs='{math: 1}'", "not valid JSON", """'{"math": {"strict": false}}'""")


def test_recipe_reward_kwargs_reach_the_math_reward(tmp_path):
    from trl_ada.cli.train import parse_train_args

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "model_name_or_path: m\ndataset_name: d\noutput_dir: out\nuse_cpu: true\nbf16: false\n"
        "reward_funcs: [math]\nreward_kwargs:\n  math: {float_rounding: 2}\n"
    )
    script_args, _, _ = parse_train_args(["--config", str(recipe)])
    (reward,) = get_reward_funcs(script_args.reward_funcs, script_args.reward_kwargs)
    clear_caches()
    assert reward([r"\boxed{0.33}"], ["1/3"]) == [1.0]
    script_args, _, _ = parse_train_args(["--config", str(recipe), "--reward_kwargs", '{"math": {}}'])
    (reward,) = get_reward_funcs(script_args.reward_funcs, script_args.reward_kwargs)
    assert reward([r"\boxed{0.33}"], ["1/3"]) == [0.0]


# --------------------------------------------------------------------------- the benchmark's case set


def test_shipped_case_set_scores_as_labelled():
    """The benchmark's hand-labelled cases: no false positive, and at most 1% of labels contradicted."""
    lines = (REPO / "benchmarks" / "data" / "math_cases.jsonl").read_text().splitlines()
    cases = [json.loads(line) for line in lines]
    assert len({case["id"] for case in cases}) == len(cases) >= 250
    from benchmarks.math_agreement import as_completion

    clear_caches()
    scores = math_reward([as_completion(c["prediction"]) for c in cases], [c["gold"] for c in cases])
    false_positives = [c["id"] for c, s in zip(cases, scores, strict=True) if s > c["label"]]
    wrong = [c["id"] for c, s in zip(cases, scores, strict=True) if s != c["label"]]
    assert false_positives == []
    assert len(wrong) <= len(cases) // 100, wrong


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        (r"\boxed{12}", "\uff11\uff12"),  # fullwidth digits in the gold
        (r"\boxed{12}", "\u0661\u0662"),  # Arabic-Indic
        (r"\boxed{12}", "\u06f1\u06f2"),  # Eastern Arabic-Indic
        (r"\boxed{-12}", "\u221212"),  # a Unicode minus sign
        (r"\boxed{12}", "1\u00ad2"),  # a soft hyphen inside the number
        ("\\boxed{\uff11\uff12}", "12"),  # and in the completion
        ("The answer is \u0661\u0662.", "12"),
    ],
)
def test_digits_of_other_scripts_and_soft_hyphens_read_as_the_number(completion, gold):
    from trl_ada.rewards import math_final_reward, math_reward

    reward = math_final_reward if "\\boxed" not in completion else math_reward
    assert reward([completion], [gold]) == [1.0]
    assert reward([completion], ["13"]) == [0.0]
