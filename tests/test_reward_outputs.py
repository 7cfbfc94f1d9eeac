"""What a reward function returns is checked the same way on every path (issue 35): training (`CheckedReward`), the
asynchronous worker, `evaluate` and `select-prompts` (`score_completions`). A bad answer is one `RewardError` line
naming the function and what it returned; None (no opinion) counts as not correct in evaluation."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from refusals import names

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada.async_grpo import AdaptiveRolloutWorker  # noqa: E402
from trl_ada.checks import CheckedReward, RewardError, check_rewards  # noqa: E402
from trl_ada.cli import evaluate, select_prompts  # noqa: E402
from trl_ada.evaluation import generation, score_completions  # noqa: E402

COMPLETIONS = [["4 + 9 = 13", "12"], ["2 + 2 = 4", "4"]]
ANSWERS = ["13", "4"]


def one_too_few(completions, **kwargs):
    return [1.0] * (len(completions) - 1)


def one_too_many(completions, **kwargs):
    return [1.0] * (len(completions) + 1)


def as_strings(completions, **kwargs):
    return ["1"] * len(completions)


def a_scalar(completions, **kwargs):
    return 1.0


def a_string(completions, **kwargs):
    return "1.0"


def a_matrix(completions, **kwargs):
    return np.ones((len(completions), 2))


def a_zero_d_array(completions, **kwargs):
    return np.array(1.0)


def a_generator(completions, **kwargs):
    return (1.0 for _ in completions)


BAD = {  # reward function: what the one-line error says it returned
    one_too_few: "returned 3 rewards for 4 completions",
    one_too_many: "returned 5 rewards for 4 completions",
    as_strings: "returned a str ('1') for completion 0",
    a_scalar: "returned a float (1.0), not a list",
    a_string: "returned a str ('1.0'), not a list",
    a_matrix: "returned a ndarray (array([1., 1.])) for completion 0",
    a_zero_d_array: "returned a ndarray (array(1.)), not a list",
    a_generator: "returned a generator",
}


def abstains_on_the_first(completions, **kwargs):
    return [None] + [1.0] * (len(completions) - 1)


def as_numpy(completions, answer, **kwargs):
    return np.array([float(text.endswith(gold)) for text, gold in zip(completions, answer, strict=True)])


def assert_one_line_naming(error: BaseException, func, returned: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert f"{func.__name__!r} {returned}" in message
    assert f"Make {func.__name__!r} return" in message or "one per completion" in message


# --------------------------------------------------------------------------- one check, every path


@pytest.mark.parametrize("func", BAD, ids=lambda f: f.__name__)
def test_check_rewards_refuses_every_bad_answer_in_one_line(func):
    completions = ["a", "b", "c", "d"]
    with pytest.raises(RewardError) as info:
        check_rewards(func.__name__, func(completions), len(completions))
    assert_one_line_naming(info.value, func, BAD[func])


@pytest.mark.parametrize("func", BAD, ids=lambda f: f.__name__)
def test_training_refuses_every_bad_answer(func):
    """The trainer hands TRL `CheckedReward`s (`checked_reward_funcs`), called as TRL calls a reward."""
    completions = ["a", "b", "c", "d"]
    with pytest.raises(RewardError) as info:
        CheckedReward(func)(prompts=["p"] * 4, completions=completions, completion_ids=[[1]] * 4)
    assert_one_line_naming(info.value, func, BAD[func])


@pytest.mark.parametrize("func", BAD, ids=lambda f: f.__name__)
def test_the_asynchronous_worker_refuses_every_bad_answer(func):
    worker = SimpleNamespace(settings=SimpleNamespace(reward_timeout=30.0), _heartbeat=0.0)
    completions = ["a", "b", "c", "d"]
    with pytest.raises(RewardError) as info:
        AdaptiveRolloutWorker._call_reward(worker, func, func.__name__, ["p"] * 4, completions, [[1]] * 4, {})
    assert_one_line_naming(info.value, func, BAD[func])


@pytest.mark.parametrize("func", BAD, ids=lambda f: f.__name__)
def test_evaluation_scoring_refuses_every_bad_answer(func):
    completions = [["a", "b"], ["c", "d"]]
    with pytest.raises(RewardError) as info:
        score_completions(completions, ["x", "y"], reward_func=func)
    assert_one_line_naming(info.value, func, BAD[func])


def test_each_scoring_chunk_is_checked_against_its_own_size():
    with pytest.raises(RewardError) as info:
        score_completions([["a", "b", "c"], ["d", "e", "f"]], ["x", "y"], chunk_size=3, reward_func=one_too_few)
    names(str(info.value), "'one_too_few'", "2 rewards for 3 completions", "one per completion")


def test_good_answers_score_as_before():
    expected = [[True, False], [True, True]]
    assert score_completions(COMPLETIONS, ANSWERS, reward_func=as_numpy) == expected
    for good in ([1.0, None, np.float32(0.5)], (0, 1, None), np.array([1.0, 0.0, np.nan])):
        assert check_rewards("f", good, 3) is good


def test_an_abstention_counts_as_not_correct_and_is_counted(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_ada.evaluation.scoring"):
        correct = score_completions(COMPLETIONS, ANSWERS, reward_func=abstains_on_the_first)
    assert correct == [[False, True], [True, True]]
    names(caplog.text, "'abstains_on_the_first'", "(None or NaN", "1 of 4 samples", "not correct")


# --------------------------------------------------------------------------- the commands


def write_data(tmp_path: Path) -> str:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"problem": f"What is {a} + 9?", "answer": str(a + 9)}) + "\n" for a in (4, 5)))
    return str(path)


@pytest.fixture
def sampled(monkeypatch):
    """Both commands sample two completions per prompt, right then wrong, without a model."""
    monkeypatch.setattr(
        generation, "generate_completions", lambda model, prompts, k, **kw: [["It is 13.", "It is 12."]] * len(prompts)
    )
    for command in (evaluate, select_prompts):
        monkeypatch.setattr(command, "check_model", lambda *a, **kw: None)
        monkeypatch.setattr(command, "fitting_prompts", lambda datasets, *a, **kw: datasets)


def command_line(command, tmp_path: Path, reward: str) -> list[str]:
    data = write_data(tmp_path)
    source = ["--datasets", data] if command is evaluate else ["--dataset", data, "--output", str(tmp_path / "o")]
    return ["--model", "m", *source, "--k" if command is evaluate else "--num_samples", "2", "--reward", reward]


@pytest.mark.parametrize("command", [evaluate, select_prompts], ids=["evaluate", "select-prompts"])
@pytest.mark.parametrize("func", [one_too_few, one_too_many, a_scalar], ids=lambda f: f.__name__)
def test_the_commands_refuse_a_bad_reward_in_one_line(command, func, tmp_path, sampled, capsys):
    assert command.main(command_line(command, tmp_path, f"test_reward_outputs:{func.__name__}")) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"{func.__name__!r} {BAD[func]}" in errors[0]
    assert "Traceback" not in captured.err
    assert "avg@" not in captured.out and not (tmp_path / "o").exists()


def test_evaluate_counts_an_abstention_as_not_correct(tmp_path, sampled, capsys):
    argv = command_line(evaluate, tmp_path, "test_reward_outputs:abstains_on_the_first")
    assert evaluate.main([*argv, "--output", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    # the first of the 4 samples gets None (not correct), the other 3 get 1.0: avg@2 = (1/2 + 2/2) / 2
    assert report["average"]["avg_at_k"] == pytest.approx(0.75)
