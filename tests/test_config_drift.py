"""What the user sets is what trains: a field assigned after the config is built (as TRL scripts adjust a config
before building the trainer) reaches the plan the trainer trains with, or is refused when the trainer is built, in
one line naming the field, its value and a fix that works. For both trainers."""

from __future__ import annotations

import pytest
from streaming_fake import ScriptedCompletions
from test_async import (
    NoTransfer,
    async_config,
    parity_reward,
    tiny,  # noqa: F401 (the module-scoped model)
)
from tiny import tiny_config

from trl_ada import ReinforceAdaTrainer
from trl_ada.async_grpo import AsyncReinforceAdaTrainer
from trl_ada.toy import make_toy_dataset


def never_right(completions, **kwargs) -> list[float]:
    return [0.0] * len(completions)


def sync_trainer(tiny_model_dir, args) -> ReinforceAdaTrainer:
    return ReinforceAdaTrainer(tiny_model_dir, [never_right], args=args, train_dataset=make_toy_dataset(4))


def async_trainer(model_dir, tokenizer, args) -> AsyncReinforceAdaTrainer:
    return AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[parity_reward],
        args=args,
        train_dataset=make_toy_dataset(8),
        processing_class=tokenizer,
        weight_transfer=NoTransfer(),
        connect=lambda settings: ScriptedCompletions(len(tokenizer), max_length=4, seed=2),
    )


def test_sampling_fields_assigned_after_construction_train_in_the_synchronous_trainer(tmp_path, tiny_model_dir):
    """balance with M = 6, N = 9 assigned after construction, a reward that never pays: no prompt exits, so each of
    the step's 2 prompts draws every one of its M·N = 54 samples (the preset's 8 x 4 would draw 32)."""
    args = tiny_config(tmp_path, sampling="balance", num_generations=2, per_device_train_batch_size=4)
    args.max_rounds = 9
    args.samples_per_round = 6
    trainer = sync_trainer(tiny_model_dir, args)
    fields = trainer.args.sampling_plan.fields()
    assert (fields["max_rounds"], fields["samples_per_round"]) == (9, 6)
    assert (args.max_rounds, args.samples_per_round) == (9, 6)
    trainer.train()
    (step,) = [h for h in trainer.state.log_history if "loss" in h]
    assert step["reinforce_ada/samples"] == 2 * 54


def test_sampling_fields_assigned_after_construction_reach_the_asynchronous_worker(tmp_path, tiny):  # noqa: F811
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, sampling="balance")
    args.max_rounds, args.samples_per_round = 9, 6
    trainer = async_trainer(model_dir, tokenizer, args)
    fields = trainer.worker.settings.plan.fields()
    assert (fields["max_rounds"], fields["samples_per_round"]) == (9, 6)


def test_a_preset_assigned_after_construction_is_the_one_trained(tmp_path, tiny_model_dir):
    args = tiny_config(tmp_path, sampling="balance", num_generations=2, per_device_train_batch_size=4)
    args.sampling = "grpo"
    assert sync_trainer(tiny_model_dir, args).args.sampling_plan.generation_schedule == "grpo"


def test_an_invalid_assignment_is_refused_when_the_plan_is_read_naming_the_field_and_value(tmp_path):
    args = tiny_config(tmp_path, sampling="balance")
    args.max_rounds = -1
    with pytest.raises(ValueError) as refused:
        args.sampling_plan  # noqa: B018 (the read resolves the plan again)
    assert "max_rounds" in str(refused.value) and "-1" in str(refused.value)
    args.max_rounds = 3  # the fix the message asks for works
    assert args.sampling_plan.fields()["max_rounds"] == 3


def test_a_field_the_schedule_does_not_use_is_refused_after_construction_too(tmp_path):
    args = tiny_config(tmp_path, sampling="balance")
    args.est_min_samples = 3
    with pytest.raises(ValueError) as refused:
        args.sampling_plan  # noqa: B018
    assert "est_min_samples" in str(refused.value) and "3" in str(refused.value)
    args.est_min_samples = None  # unset again: the construction's plan
    assert args.sampling_plan.generation_schedule == "rounds"


@pytest.mark.parametrize(("field", "value"), [("beta", 0.5), ("top_entropy_quantile", 0.5)])
def test_a_loss_field_assigned_beside_row_skipping_is_refused_when_the_trainer_is_built(
    tmp_path, tiny_model_dir, field, value
):
    """The forbidden combination trained silently before (row skipping changes the update when a term acts on every
    row): now refused before the model loads, naming the field, its value and the setting that works."""
    args = tiny_config(tmp_path, sampling="grpo", skip_zero_advantage_rows=True)
    setattr(args, field, value)
    with pytest.raises(ValueError) as refused:
        sync_trainer(tiny_model_dir, args)
    message = str(refused.value)
    assert field in message and repr(value) in message and "skip_zero_advantage_rows" in message
    args.skip_zero_advantage_rows = False  # the fix works
    assert sync_trainer(tiny_model_dir, args).args.beta == args.beta


def test_the_asynchronous_config_refuses_an_assignment_when_the_trainer_is_built(tmp_path, tiny):  # noqa: F811
    model_dir, tokenizer = tiny
    args = async_config(tmp_path)
    args.max_staleness = 0
    with pytest.raises(ValueError) as refused:
        async_trainer(model_dir, tokenizer, args)
    assert "max_staleness=0" in str(refused.value)
    args.vllm_mode = "colocate"
    args.max_staleness = 2
    with pytest.raises(ValueError, match="vllm_mode='colocate'"):
        async_trainer(model_dir, tokenizer, args)


def test_a_config_rebuilt_from_its_fields_after_an_assignment_is_the_same_config(tmp_path):
    args = tiny_config(tmp_path, sampling="balance")
    args.max_rounds = 6
    plan = args.sampling_plan
    rebuilt = tiny_config(tmp_path, sampling="balance", max_rounds=6)
    assert rebuilt.sampling_plan == plan


def test_an_unknown_loss_type_is_refused_when_the_config_is_built_listing_trls(tmp_path):
    """It failed with a traceback after the first generation; now one line, before any model loads."""
    with pytest.raises(ValueError) as refused:
        tiny_config(tmp_path, loss_type="DAPO")
    message = str(refused.value)
    assert "loss_type='DAPO'" in message and "'dapo'" in message and "\n" not in message
    assert tiny_config(tmp_path, loss_type="dapo").loss_type == "dapo"  # the fix works
