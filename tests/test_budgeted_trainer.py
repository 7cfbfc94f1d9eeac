"""Budgeted balance rounds (pass-rate memory, prior-sized rounds, futility, budget) in the trainer: config validation,
memory in checkpoints, resumed runs decide alike."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from datasets import Dataset
from refusals import names
from tiny import PERIOD, PeriodicReward, tiny_config

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.checkpoint_state import CheckpointStateError
from trl_ada.memory import PassRateMemory, prompt_key

pytestmark = pytest.mark.xdist_group("trainer")

PROMPTS = tuple(PERIOD)


def _dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": k}] for k in PROMPTS]})


def _config(tmp_path, **overrides) -> ReinforceAdaConfig:
    fields = dict(
        num_generations=4,
        samples_per_round=4,
        max_rounds=3,
        per_device_train_batch_size=16,  # 4 of the 8 prompts per step: steps 1-2 are epoch 1, steps 3-4 epoch 2
        max_steps=4,
        save_strategy="steps",
        save_steps=1,
        shuffle_dataset=False,  # TRL draws a new order for an epoch after a resume; keep the batches comparable
        pass_rate_memory=True,
        memory_decay=0.5,
        first_round="prior",
        later_rounds="prior",
        futility_threshold=0.05,
        sample_budget=6,
    )
    return tiny_config(tmp_path, **(fields | overrides))


def _trainer(tiny_model_dir, tmp_path, reward=None, **overrides) -> ReinforceAdaTrainer:
    return ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward or PeriodicReward()],
        args=_config(tmp_path, **overrides),
        train_dataset=_dataset(),
    )


def _key(text: str) -> int:
    return prompt_key([{"role": "user", "content": text}])


def _posteriors(memory: PassRateMemory) -> np.ndarray:
    alpha, beta, _ = memory.posterior([_key(k) for k in PROMPTS])
    return np.stack([alpha, beta])


@pytest.mark.slow  # five short trainings on the tiny model
def test_memory_is_checkpointed_and_a_resumed_run_makes_the_same_decisions(tiny_model_dir, tmp_path):
    uninterrupted = PeriodicReward()
    trainer = _trainer(tiny_model_dir, tmp_path, uninterrupted)
    trainer.train()
    assert sorted(uninterrupted.rounds) == [1, 2, 3, 4]
    hits = [h["reinforce_ada/est/memory_hit_fraction"] for h in trainer.state.log_history if "loss" in h]
    assert hits == [0.0, 0.0, 1.0, 1.0]  # epoch 2 revisits every prompt
    # nothing known yet: n each; in epoch 2 the first round is sized from the memory, differently per prompt
    assert set(uninterrupted.rounds[1][0].values()) == {4}
    assert len(set(uninterrupted.rounds[3][0].values())) > 1

    checkpoint = Path(trainer.args.output_dir, "checkpoint-2")
    saved = PassRateMemory.load(str(checkpoint / "pass_rate_memory.npz"))
    assert len(saved) == 8 and saved.decay == 0.5 and saved.visits([_key("one in 2")]).tolist() == [1]
    final = PassRateMemory.load(str(Path(trainer.args.output_dir, "checkpoint-4", "pass_rate_memory.npz")))
    np.testing.assert_array_equal(_posteriors(final), _posteriors(trainer.pass_rate_memory))
    assert final.visits([_key(k) for k in PROMPTS]).tolist() == [2] * 8

    for start in ("checkpoint-1", "checkpoint-2"):
        resumed_reward = PeriodicReward()
        resumed = _trainer(tiny_model_dir, tmp_path, resumed_reward)
        resumed.train(resume_from_checkpoint=str(Path(trainer.args.output_dir, start)))
        first = int(start[-1]) + 1
        assert resumed_reward.rounds == {step: uninterrupted.rounds[step] for step in range(first, 5)}
        np.testing.assert_array_equal(_posteriors(resumed.pass_rate_memory), _posteriors(trainer.pass_rate_memory))

    forgetful = PeriodicReward()  # the same resume with a fresh memory decides differently
    with patch("trl_ada.trainer.load_memory", return_value=PassRateMemory(decay=0.5)):
        _trainer(tiny_model_dir, tmp_path, forgetful).train(resume_from_checkpoint=str(checkpoint))
    assert forgetful.rounds[3] != uninterrupted.rounds[3]


def test_resume_refuses_a_corrupt_or_missing_memory(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, max_steps=1)
    trainer.train()
    checkpoint = Path(trainer.args.output_dir, "checkpoint-1")
    memory_file = checkpoint / "pass_rate_memory.npz"
    memory_file.write_bytes(memory_file.read_bytes()[:100])
    with pytest.raises(CheckpointStateError) as refused:
        _trainer(tiny_model_dir, tmp_path, max_steps=2).train(resume_from_checkpoint=str(checkpoint))
    names(str(refused.value), "pass_rate_memory.npz: ", "without resume_from_checkpoint")
    memory_file.unlink()
    with pytest.raises(CheckpointStateError) as refused:
        _trainer(tiny_model_dir, tmp_path, max_steps=2).train(resume_from_checkpoint=True)
    names(str(refused.value), "checkpoint-1 has no pass_rate_memory.npz", "pass_rate_memory=False")


def test_defaults_leave_the_estimation_off(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    assert (config.pass_rate_memory, config.first_round, config.later_rounds) == (False, "fixed", "fixed")
    assert (config.futility_threshold, config.sample_budget, config.memory_decay) == (0.0, None, 0.5)
    assert PassRateMemory().decay == config.memory_decay  # the memory's own default is the config's
    plan = config.sampling_plan
    estimation = ("first_round", "later_rounds", "round_confidence", "futility_threshold", "sample_budget")
    assert {name: plan.fields()[name] for name in estimation} == {
        "first_round": "fixed",
        "later_rounds": "fixed",
        "round_confidence": 0.5,
        "futility_threshold": 0.0,
        "sample_budget": None,
    }


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"sample_budget": 3}, ["sample_budget=3", ">= num_generations=4"]),
        ({"memory_decay": 0.0}, ["memory_decay=0.0", "must be in (0, 1]"]),
        ({"memory_decay": 1.5}, ["memory_decay=1.5"]),
        ({"futility_threshold": 1.0}, ["futility_threshold=1.0", "[0, 1)"]),
        ({"first_round": "prior", "pass_rate_memory": False}, ["first_round='prior'", "pass_rate_memory=False"]),
        ({"first_round": "guess"}, ["first_round='guess'", "['fixed', 'prior']"]),
        ({"sampling": "grpo", "sample_budget": 8}, ["sample_budget=8", "sampling='grpo'", "Remove sample_budget"]),
    ],
)
def test_bad_estimation_config_names_field_value_and_fix(tmp_path, overrides, fragments):
    with pytest.raises(ValueError) as error:
        ReinforceAdaConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **overrides)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_a_resume_inside_a_generation_batch_ends_with_the_memory_of_an_uninterrupted_run(tiny_model_dir, tmp_path):
    # steps_per_generation=2: one generation batch (the 8 prompts) lasts two optimizer steps, so checkpoint-1 and
    # checkpoint-3 fall inside a batch, which TRL generates again on resume.
    within = {"steps_per_generation": 2, "per_device_train_batch_size": 16}
    trainer = _trainer(tiny_model_dir, tmp_path, **within)
    trainer.train()
    uninterrupted = trainer.pass_rate_memory
    assert uninterrupted.visits([_key(k) for k in PROMPTS]).tolist() == [2] * 8
    output = Path(trainer.args.output_dir)
    inside = PassRateMemory.load(str(output / "checkpoint-3" / "pass_rate_memory.npz"))
    assert inside.visits([_key(k) for k in PROMPTS]).tolist() == [1] * 8  # as of the start of the second batch
    for start in ("checkpoint-1", "checkpoint-3"):
        resumed = _trainer(tiny_model_dir, tmp_path, output_dir=str(tmp_path / f"from-{start}"), **within)
        resumed.train(resume_from_checkpoint=str(output / start))
        assert resumed.pass_rate_memory.visits([_key(k) for k in PROMPTS]).tolist() == [2] * 8
        np.testing.assert_array_equal(_posteriors(resumed.pass_rate_memory), _posteriors(uninterrupted))
