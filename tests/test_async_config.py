"""`AsyncReinforceAdaConfig`'s refusals of bad input: one line naming the field (or the preset), its value and a
fix that is itself accepted."""

from __future__ import annotations

import pytest

from trl_ada.async_grpo import AsyncReinforceAdaConfig
from trl_ada.plan import PRESETS

RUN = dict(use_cpu=True, bf16=False, per_device_train_batch_size=8, report_to=[], save_strategy="no")


def config(tmp_path, **fields) -> AsyncReinforceAdaConfig:
    return AsyncReinforceAdaConfig(output_dir=str(tmp_path / "out"), **RUN, **fields)


def refusal(tmp_path, **fields) -> str:
    with pytest.raises(ValueError) as refused:
        config(tmp_path, **fields)
    return str(refused.value)


@pytest.mark.parametrize(
    ("fields", "message", "advice"),
    [
        (
            {"max_staleness": "2"},
            "max_staleness='2': must be an integer, not a str; write max_staleness=2.",
            {"max_staleness": 2},
        ),
        (
            {"reward_timeout": "10"},
            "reward_timeout='10': must be a number, not a str; write reward_timeout=10.0.",
            {"reward_timeout": 10.0},
        ),
        (
            {"max_prompts_in_flight": 2.0},
            "max_prompts_in_flight=2.0: must be an integer or None, not a float; write max_prompts_in_flight=2.",
            {"max_prompts_in_flight": 2},
        ),
        (
            {"max_inflight_tasks": "many"},
            "max_inflight_tasks='many': must be an integer, not a str (e.g. max_inflight_tasks=-1).",
            {"max_inflight_tasks": -1},
        ),
        (
            {"streaming_window": "4"},
            "streaming_window='4': must be an integer or None, not a str; write streaming_window=4.",
            {"streaming_window": 4},
        ),
    ],
)
def test_a_number_of_the_wrong_type_is_refused_in_one_line_and_the_advice_works(tmp_path, fields, message, advice):
    assert refusal(tmp_path, **fields) == message
    config(tmp_path, **advice)


@pytest.mark.parametrize("preset", ["budgeted_balance", "dapo"])
def test_a_preset_the_worker_cannot_run_is_refused_by_name_and_the_presets_it_names_build(tmp_path, preset):
    from trl_ada.async_grpo.config import unsupported_preset_fields

    message = refusal(tmp_path, sampling=preset)
    fields = unsupported_preset_fields(preset, 4)
    assert message.startswith(
        f"sampling={preset!r} is not supported by the asynchronous trainer: the preset sets {', '.join(fields)} ("
    )
    assert message.endswith(
        "Choose one of ['balance', 'est', 'grpo', 'pos'], or train with the synchronous ReinforceAdaTrainer."
    )
    for supported in ("balance", "est", "grpo", "pos"):
        assert config(tmp_path, sampling=supported).sampling == supported
    assert sorted(PRESETS) == ["balance", "budgeted_balance", "dapo", "est", "grpo", "pilot_commit", "pos"]


def test_budgeted_balance_names_what_its_preset_sets_not_what_the_user_did_not(tmp_path):
    from trl_ada.async_grpo.config import unsupported_preset_fields

    assert unsupported_preset_fields("budgeted_balance", 4) == ["sample_budget", "first_round", "later_rounds"]
    assert unsupported_preset_fields("dapo", 4) == ["prompt_oversampling", "rounds_per_prompt"]
    assert "sample_budget=8.0" not in refusal(tmp_path, sampling="budgeted_balance")


def test_explicit_is_explicit_asynchronously_too(tmp_path):
    assert refusal(tmp_path, sampling="est", samples_per_round=8).startswith(
        "samples_per_round=8 has no effect under generation_schedule='est' (set by sampling='est')"
    )
    assert config(tmp_path, sampling="est").sampling_plan.generation_schedule == "est"
    assert config(tmp_path).sampling_plan.generation_schedule == "streaming"  # the asynchronous base default
    off = config(tmp_path, prompt_oversampling=1.0).sampling_plan  # off, stated: accepted, nothing to turn off
    assert off.generation_schedule == "streaming" and "prompt_oversampling" not in off.fields()


def test_the_asynchronous_trainer_refuses_a_prompt_longer_than_the_context_before_the_model_loads(
    tiny_model_dir, tmp_path, monkeypatch
):
    from datasets import Dataset
    from transformers import AutoTokenizer

    from trl_ada.async_grpo import AsyncReinforceAdaTrainer
    from trl_ada.async_grpo import trainer as async_trainer
    from trl_ada.data import PromptTooLongError, filter_by_prompt_length

    class Built(Exception):
        """Raised by the rollout worker, which is built before the model loads: the check has passed."""

    long = "Compute the sum of the next numbers: " + "one two three four five six seven eight nine ten " * 60
    prompts = ["one plus one", long, "two plus two"]
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})

    def built(*args, **kwargs):
        raise Built

    monkeypatch.setattr(async_trainer, "AdaptiveRolloutWorker", built)
    args = config(tmp_path, max_completion_length=8)
    reward = [lambda completions, **_: [0.0] * len(completions)]
    with pytest.raises(PromptTooLongError) as refused:
        AsyncReinforceAdaTrainer(tiny_model_dir, reward, args=args, train_dataset=dataset)
    assert str(refused.value).startswith("train_dataset row 1 ('Compute the sum of the next numbers: one two three")
    assert "e.g. `max_prompt_tokens: 504`" in str(refused.value)
    kept = filter_by_prompt_length(dataset, AutoTokenizer.from_pretrained(tiny_model_dir), 504)
    with pytest.raises(Built):
        AsyncReinforceAdaTrainer(tiny_model_dir, reward, args=args, train_dataset=kept)
