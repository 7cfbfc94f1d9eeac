"""Reward names resolved like the CLI, their columns and answers checked, overflowing rewards named, a threshold no
reward reaches flagged, an output_dir that is a file refused."""

from __future__ import annotations

import asyncio
import inspect
import logging

import numpy as np
import pytest
import torch
from datasets import Dataset
from refusals import names, refusal
from trl.trainer.utils import is_async_callable

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.checks import (
    THRESHOLD_CHECK_STEPS,
    RewardGuard,
    check_reward_columns,
    check_rewards,
    checked_reward_funcs,
    resolve_reward_funcs,
)
from trl_ada.plan import SYNCHRONOUS
from trl_ada.rewards import format_reward, math_reward
from trl_ada.run_dir import RunDirectoryError

pytestmark = pytest.mark.xdist_group("trainer")


def test_registry_names_and_import_paths_resolve_other_strings_stay_model_ids():
    assert resolve_reward_funcs("math") is math_reward
    assert resolve_reward_funcs(["math", "trl_ada.rewards:format_reward", "org/reward-model", len]) == [
        math_reward,
        format_reward,
        "org/reward-model",
        len,
    ]
    names(refusal(resolve_reward_funcs, "trl_ada.rewards:nope"), "'trl_ada.rewards:nope'", "AttributeError")


def _guard(**kwargs) -> RewardGuard:
    fields = dict(reward_func_names=["accuracy", "length"], reward_weights=[1.0, 0.5], positive_threshold=0.7)
    return RewardGuard(**{**fields, **kwargs})


def test_weighted_sum_as_trl_with_none_as_no_opinion():
    rewards = _guard().aggregate(np.array([[1.0, 2.0], [np.nan, 1.0], [0.0, np.nan]]), ["a", "b", "c"])
    assert rewards.tolist() == [2.0, 0.5, 0.0]


def test_an_infinite_reward_names_the_function_and_the_completion():
    completions = [[{"role": "assistant", "content": "The answer is \\boxed{7}"}], "other"]
    per_func = np.array([[0.0, 1.0], [0.0, 0.0], [np.inf, 0.0]], dtype=np.float32)  # 1e300 as TRL hands it
    here = refusal(_guard().aggregate, per_func, completions, offset=2)  # this process holds rows 2 and 3
    names(here, "'accuracy' returned inf", "'The answer is \\\\boxed{7}'", "[0, 1]")
    names(refusal(_guard().aggregate, per_func, completions, offset=0), "'accuracy' returned inf", "completion 2 ")


def test_a_weighted_sum_that_overflows_names_the_terms():
    per_func = np.array([[3e38, 3e38]])
    overflow = refusal(_guard(reward_weights=[1.0, 2.0]).aggregate, per_func, ["x"])  # 9e38: beyond float32
    names(overflow, "accuracy=3e+38 x 1", "length=3e+38 x 2", "reward_weights")


def test_threshold_warning_after_the_first_steps_only_when_nothing_beat_it(caplog):
    guard = _guard(positive_threshold=2.0)
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        for _ in range(THRESHOLD_CHECK_STEPS - 1):
            guard.aggregate(np.array([[1.0, 1.0]]), ["x"])
            guard.end_step()
        assert caplog.text == ""
        guard.aggregate(np.array([[1.0, 0.0]]), ["x"])
        guard.end_step()
        guard.end_step()
    assert caplog.text.count("positive_threshold=2,") == 1
    names(caplog.text, "first 3 training steps", "highest weighted reward: 1.5")

    caplog.clear()
    quiet = _guard(positive_threshold=0.7)
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        quiet.aggregate(np.array([[1.0, 0.0]]), ["x"])
        for _ in range(THRESHOLD_CHECK_STEPS):
            quiet.end_step()
    assert caplog.text == ""


def _three_steps(guard: RewardGuard, per_func: np.ndarray) -> None:
    for _ in range(THRESHOLD_CHECK_STEPS):
        guard.aggregate(per_func, ["x"] * len(per_func))
        guard.end_step()


def all_negative(schedule: str) -> str:
    """What a step without positives does under `schedule`, as its section says it (the refill schedule's: rounds')."""
    return SYNCHRONOUS.registry["rounds" if schedule == "refill" else schedule].all_negative


@pytest.mark.parametrize("schedule", ["rounds", "refill", "streaming"])
def test_the_threshold_warning_describes_rounds_and_its_advice_silences_it(caplog, schedule):
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        _three_steps(_guard(all_negative=all_negative(schedule)), np.array([[0.6, 0.0]]))
    names(caplog.text, "positive_threshold=0.7", "samples_per_round * max_rounds", "(e.g. 0.5")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        _three_steps(_guard(all_negative=all_negative(schedule), positive_threshold=0.5), np.array([[0.6, 0.0]]))
    assert caplog.text == ""


def test_under_est_the_threshold_warning_describes_one_allocated_round(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        _three_steps(_guard(all_negative=all_negative("est")), np.array([[0.6, 0.0]]))
    warning = caplog.text
    names(warning, "positive_threshold=0.7", "pass-rate memory", "one round", "num_generations", "(e.g. 0.5")
    assert "samples_per_round" not in warning and "max_rounds" not in warning and "exit rule" not in warning


@pytest.mark.parametrize("schedule", ["rounds", "est"])
def test_when_no_completion_was_scored_the_warning_says_so_without_minus_infinity(caplog, schedule):
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):
        _three_steps(_guard(all_negative=all_negative(schedule)), np.array([[np.nan, np.nan], [np.nan, np.nan]]))
    warning = caplog.text
    names(warning, "first 3 training steps", "(each returned None", "`answer`")
    assert "inf" not in warning and "highest weighted reward" not in warning
    assert ("one round" in warning) == (schedule == "est")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trl_ada.checks"):  # the advice: a reward that scores them
        _three_steps(_guard(all_negative=all_negative(schedule)), np.array([[1.0, np.nan], [0.0, np.nan]]))
    assert caplog.text == ""


# --------------------------------------------------------------------------- in the trainer


def _config(tmp_path, **overrides) -> ReinforceAdaConfig:
    fields = dict(
        output_dir=str(tmp_path / "out"),
        num_generations=2,
        samples_per_round=2,
        max_rounds=2,
        per_device_train_batch_size=4,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
    )
    return ReinforceAdaConfig(**{**fields, **overrides})


def _dataset() -> Dataset:
    return Dataset.from_dict({"prompt": ["one plus one", "two plus two"] * 2, "answer": ["2", "4"] * 2})


def test_trainer_accepts_registry_names_like_the_cli(tiny_model_dir, tmp_path):
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs="math", args=_config(tmp_path), train_dataset=_dataset()
    )
    assert [inspect.unwrap(f) for f in trainer.reward_funcs] == [math_reward]
    assert trainer.reward_func_names == ["math_reward"]


def test_trainer_reports_an_overflowing_reward_by_function_and_completion(tiny_model_dir, tmp_path):
    def huge(completions, **kwargs):
        return [1e300] * len(completions)

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=["format", huge], args=_config(tmp_path), train_dataset=_dataset()
    )
    names(refusal(trainer.train), "'huge' returned inf", "the completion '", "[0, 1]")


@pytest.mark.parametrize(("prompts", "have"), [(0, "is empty"), (3, "has 3 prompts")])
def test_a_dataset_smaller_than_one_batch_is_refused_before_the_model_loads(tmp_path, prompts, have):
    dataset = Dataset.from_dict({"prompt": ["one plus one"] * prompts, "answer": ["2"] * prompts})
    args = _config(tmp_path, per_device_train_batch_size=8)  # 8 / num_generations=2 = 4 prompts per batch
    refused = refusal(
        ReinforceAdaTrainer, model="no/such-model", reward_funcs="math", args=args, train_dataset=dataset
    )
    names(refused, f"train_dataset {have}", "4 distinct prompts", "0 steps", "per_device_train_batch_size")


def test_a_reward_needing_a_column_the_dataset_lacks_is_refused_before_the_model_loads(tmp_path):
    dataset = Dataset.from_dict({"prompt": ["one plus one", "two plus two"] * 2, "solution": ["2", "4"] * 2})
    with pytest.raises(ValueError) as refused:
        ReinforceAdaTrainer(
            model="no/such-model", reward_funcs=["math"], args=_config(tmp_path), train_dataset=dataset
        )
    names(str(refused.value), "'math_reward'", "column 'answer'", "['prompt', 'solution']", "format_dataset")


def test_reward_columns_accept_trl_arguments_columns_defaults_and_models():
    def graded(prompts, completions, completion_ids, trainer_state, answer, difficulty=1, **kwargs):
        return [0.0] * len(completions)

    check_reward_columns([graded, len, "org/reward-model"], Dataset.from_dict({"prompt": ["p"], "answer": ["1"]}))


def test_a_reward_returning_strings_is_named_with_what_it_returned(tiny_model_dir, tmp_path):
    def as_text(completions, **kwargs):
        return ["1"] * len(completions)

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=["format", as_text], args=_config(tmp_path), train_dataset=_dataset()
    )
    names(refusal(trainer.train), "'as_text'", "a str ('1')", "completion 0", "float(score)")


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (0.5, r"returned a float \(0.5\), not a list with one reward per completion"),
        ("1", r"returned a str \('1'\), not a list"),
        ([1.0, [1.0]], r"returned a list \(\[1.0\]\) for completion 1"),
        ([b"1"], r"returned a bytes \(b'1'\) for completion 0"),
    ],
)
def test_check_rewards_names_the_function_and_the_bad_value(returned, message):
    with pytest.raises(ValueError, match=rf"Reward function 'f' {message}"):
        check_rewards("f", returned)


def test_check_rewards_accepts_numbers_none_and_numpy_and_torch_scalars():
    rewards = [1, 0.5, None, True, np.float32(0.25), torch.tensor(1.0)]
    assert check_rewards("f", rewards) is rewards


def test_checked_rewards_keep_the_name_and_the_async_kind():
    async def judge(completions, **kwargs):
        return ["yes"] * len(completions)

    def plain(completions, **kwargs):
        return [1.0] * len(completions)

    checked_judge, checked_plain, model_id = checked_reward_funcs([judge, plain, "org/reward-model"])
    assert (checked_judge.__name__, checked_plain.__name__, model_id) == ("judge", "plain", "org/reward-model")
    assert is_async_callable(checked_judge) and not is_async_callable(checked_plain)
    assert checked_plain(completions=["a", "b"]) == [1.0, 1.0]
    names(refusal(asyncio.run, checked_judge(completions=["a"])), "'judge'", "a str ('yes')", "float(score)")


def test_an_output_dir_that_is_a_file_is_refused_before_the_model_loads(tmp_path):
    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(RunDirectoryError) as refused:
        ReinforceAdaTrainer(
            model="no/such-model", reward_funcs="math", args=_config(tmp_path, output_dir=str(tmp_path / "out"))
        )
    names(str(refused.value), f"output_dir {str(tmp_path / 'out')!r}", "is a file", "another output_dir")


def test_samples_per_round_true_is_rejected(tmp_path):
    names(refusal(_config, tmp_path, samples_per_round=True), "samples_per_round=True", "an integer", "not a boolean")


# --------------------------------------------------------------------------- prompts longer than the model's context

LONG_PROMPT = "Compute the sum of the next numbers: " + "one two three four five six seven eight nine ten " * 60
"""About 1300 tokens of the tiny model's tokenizer, whose context is 512 (max_position_embeddings)."""


def _with_a_long_prompt() -> Dataset:
    prompts = ["one plus one", LONG_PROMPT, "two plus two", "three plus three"]
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts], "answer": ["2"] * 4})


def test_a_prompt_longer_than_the_context_is_refused_in_one_line_and_the_advice_works(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from trl_ada.data import PromptTooLongError, filter_by_prompt_length

    reward = [lambda completions, **_: [0.0] * len(completions)]
    args = _config(tmp_path, max_completion_length=8)
    with pytest.raises(PromptTooLongError) as refused:
        ReinforceAdaTrainer(model=tiny_model_dir, reward_funcs=reward, args=args, train_dataset=_with_a_long_prompt())
    message = str(refused.value)
    assert "\n" not in message
    names(
        message, "train_dataset row 1 ('Compute the sum", "max_position_embeddings is 512", "max_completion_length=8"
    )
    names(message, "`max_prompt_tokens: 504`", "--max_prompt_tokens 504", "trl_ada.data.filter_by_prompt_length")
    kept = filter_by_prompt_length(_with_a_long_prompt(), AutoTokenizer.from_pretrained(tiny_model_dir), 504)
    assert len(kept) == 3
    ReinforceAdaTrainer(model=tiny_model_dir, reward_funcs=reward, args=args, train_dataset=kept)


def test_the_train_command_refuses_a_prompt_longer_than_the_context_and_its_filter_admits_the_rest(
    tiny_model_dir, tmp_path, capsys
):
    import json

    from trl_ada.cli.train import build_trainer, main, parse_train_args

    data = tmp_path / "problems.jsonl"
    problems = ["Compute 1 + 1.", LONG_PROMPT, "Compute 2 + 2.", "Compute 3 + 3."]
    data.write_text("".join(json.dumps({"problem": p, "answer": "2"}) + "\n" for p in problems))
    flags = ["--model_name_or_path", tiny_model_dir, "--dataset_name", str(data), "--output_dir", str(tmp_path / "o")]
    flags += ["--use_cpu", "1", "--report_to", "none", "--num_generations", "2", "--per_device_train_batch_size", "4"]
    flags += ["--max_completion_length", "8", "--max_steps", "1"]
    assert main(flags) == 2
    error = capsys.readouterr().err.split("trl-ada train: error: ")[1].strip()
    assert "\n" not in error
    names(error, "train_dataset row 1 ('Compute the sum", "`max_prompt_tokens: 504`", "--max_prompt_tokens 504")
    trainer = build_trainer(*parse_train_args([*flags, "--max_prompt_tokens", "504"]))
    assert len(trainer.train_dataset) == 3
