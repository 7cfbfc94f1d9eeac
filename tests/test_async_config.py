"""`AsyncReinforceAdaConfig`'s refusals of bad input: one line naming the field (or the preset), its value and a
fix that is itself accepted."""

from __future__ import annotations

import pytest
from refusals import names

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
    ("fields", "fragments", "advice"),
    [
        ({"max_staleness": "2"}, ["max_staleness='2'", "not a str", "max_staleness=2."], {"max_staleness": 2}),
        (
            {"reward_timeout": "10"},
            ["reward_timeout='10'", "not a str", "reward_timeout=10.0"],
            {"reward_timeout": 10.0},
        ),
        (
            {"max_prompts_in_flight": 2.0},
            ["max_prompts_in_flight=2.0", "not a float", "max_prompts_in_flight=2."],
            {"max_prompts_in_flight": 2},
        ),
        (
            {"max_inflight_tasks": "many"},
            ["max_inflight_tasks='many'", "not a str", "max_inflight_tasks=-1"],
            {"max_inflight_tasks": -1},
        ),
        (
            {"streaming_window": "4"},
            ["streaming_window='4'", "not a str", "streaming_window=4."],
            {"streaming_window": 4},
        ),
    ],
)
def test_a_number_of_the_wrong_type_is_refused_in_one_line_and_the_advice_works(tmp_path, fields, fragments, advice):
    message = refusal(tmp_path, **fields)
    names(message, *fragments)  # "not a str": the type check's refusal, not a comparison's TypeError
    assert "\n" not in message
    config(tmp_path, **advice)


@pytest.mark.parametrize(
    ("preset", "fields"),
    [("budgeted_balance", ["sample_budget", "first_round", "later_rounds"]), ("dapo", ["prompt_oversampling"])],
)
def test_a_preset_the_worker_cannot_run_is_refused_by_name_and_the_presets_it_names_build(tmp_path, preset, fields):
    message = refusal(tmp_path, sampling=preset)
    for fragment in (f"sampling={preset!r}", *fields, "['balance', 'est', 'grpo', 'pos']", "Remove sampling"):
        assert fragment in message and "\n" not in message
    assert "sample_budget=8.0" not in message  # it names what the preset sets, not a value the user did not give
    for supported in ("balance", "est", "grpo", "pos"):
        assert config(tmp_path, sampling=supported).sampling == supported
    assert config(tmp_path).sampling_plan.generation_schedule == "streaming"  # the fix: no preset
    assert sorted(PRESETS) == ["balance", "budgeted_balance", "dapo", "est", "grpo", "pilot_commit", "pos"]


def test_explicit_is_explicit_asynchronously_too(tmp_path):
    message = refusal(tmp_path, sampling="est", samples_per_round=8)
    names(message, "samples_per_round=8", "generation_schedule='est' (set by sampling='est')", "Remove samples_per")
    assert config(tmp_path, sampling="est").sampling_plan.generation_schedule == "est"
    assert config(tmp_path).sampling_plan.generation_schedule == "streaming"  # the asynchronous default
    message = refusal(tmp_path, prompt_oversampling=1.0)  # a field no asynchronous schedule uses, even at "off"
    assert "prompt_oversampling=1.0" in message and "Remove prompt_oversampling" in message


def test_plain_grpo_runs_asynchronously_with_a_window_of_n(tmp_path):
    grpo = config(tmp_path, sampling="grpo", max_inflight_tasks=64)
    assert grpo.sampling_plan.generation_schedule == "grpo" and grpo.prompts_in_flight == 64 // 4


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
    names(str(refused.value), "train_dataset row 1 ('Compute the sum", "`max_prompt_tokens: 504`")
    kept = filter_by_prompt_length(dataset, AutoTokenizer.from_pretrained(tiny_model_dir), 504)
    with pytest.raises(Built):
        AsyncReinforceAdaTrainer(tiny_model_dir, reward, args=args, train_dataset=kept)
