"""Dynamic sampling in the trainer: candidates beyond the batch, DAPO's refill as configuration, checkpoints."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset
from refusals import names
from tiny import CountingReward, loss_batches, run_two_processes, tiny_config

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.checkpoint_state import CheckpointStateError

pytestmark = pytest.mark.xdist_group("trainer")


class KindReward(CountingReward):
    """'right …' always 1, 'wrong …' always 0, 'mixed …' 1/0/1/0 per prompt; counts the completions it scores."""

    __name__ = "kind"

    def rule(self, prompt: str, k: int) -> float:
        return {"right": 1.0, "wrong": 0.0, "mixed": float(k % 2 == 0)}[prompt.split()[0]]


def _dataset(mixed: int, uniform: int) -> Dataset:
    names = [f"mixed {i}" for i in range(mixed)]
    names += [f"{'right' if i % 2 else 'wrong'} {i}" for i in range(uniform)]
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": name}] for name in names]})


def _config(tmp_path, **overrides) -> ReinforceAdaConfig:
    fields = dict(
        num_generations=4,
        per_device_train_batch_size=16,  # B = 4 prompts per step
        # DAPO's dynamic sampling: one round of n per candidate, zero-variance groups dropped and refilled
        exit_rule="mixed",
        samples_per_round=4,
        rounds_per_prompt=1,
        max_rounds=5,
        prompt_oversampling=2.0,
    )
    return tiny_config(tmp_path, **(fields | overrides))


def test_dapo_mode_trains_exactly_b_effective_prompts_refilled_from_the_candidates(tiny_model_dir, tmp_path):
    reward = KindReward()
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[reward], args=_config(tmp_path), train_dataset=_dataset(4, 4)
    )
    seen = loss_batches(trainer)
    trainer.train()
    # 8 candidates = the whole dataset; 5 rounds are enough to reach all 4 mixed prompts whatever the order
    assert seen[0]["completion_ids"].shape[0] == 16  # TRL's shape: B x n
    texts = [trainer.processing_class.decode(ids) for ids in seen[0]["prompt_ids"]]
    kept = Counter(next(f"mixed {i}" for i in range(4) if f"mixed {i}" in text) for text in texts)
    assert kept == {f"mixed {i}": 4 for i in range(4)}
    assert sorted(seen[0]["advantages"].tolist()) == [-0.5] * 8 + [0.5] * 8  # pool [1, 0, 1, 0] of each
    sampled = [name for name, count in reward.scored.items() if count]
    assert all(count == 4 for count in reward.scored.values())  # one round of n per sampled candidate
    log = trainer.state.log_history[0]
    assert log["reinforce_ada/refill/candidates"] == 8
    assert log["reinforce_ada/refill/kept"] == 4
    assert log["reinforce_ada/refill/sampled"] == len(sampled)
    assert log["reinforce_ada/refill/effective_kept_fraction"] == 1.0
    assert log["reinforce_ada/refill/samples_per_kept_prompt"] == 4 * len(sampled) / 4
    assert log["reinforce_ada/samples"] == 4 * len(sampled)


def test_a_dataset_smaller_than_one_steps_candidates_names_the_field(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaTrainer(
            model=tiny_model_dir,
            reward_funcs=[KindReward()],
            args=_config(tmp_path, prompt_oversampling=3.0),
            train_dataset=_dataset(4, 4),
        )
    names(str(refused.value), "prompt_oversampling=3", "12 candidate prompts", "only 8", "at most 2.00")


def test_checkpoint_restores_the_candidate_stream(tiny_model_dir, tmp_path):
    args = {"max_steps": 2, "save_strategy": "steps", "save_steps": 1}
    first = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    states = []
    end_step = first.schedule.end_step

    def record(outcome):
        end_step(outcome)
        states.append(first.schedule.candidate_stream.state_dict())

    first.schedule.end_step = record
    first.train()
    saved = json.loads((Path(first.args.output_dir) / "checkpoint-1" / "candidate_stream.json").read_text())
    assert saved == {"format": "trl_ada.candidate_stream", "version": 1, **states[0]} and states[0] != states[1]
    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    resumed.train(resume_from_checkpoint=str(Path(first.args.output_dir) / "checkpoint-1"))
    assert resumed.schedule.candidate_stream.state_dict() == states[1]  # step 2 drew and consumed the same candidates


def test_a_checkpoint_inside_a_generation_batch_keeps_the_stream_of_the_batch_start(tiny_model_dir, tmp_path):
    # steps_per_generation=2: one generation batch lasts two optimizer steps; TRL generates it again when resumed
    # from checkpoint-1, so the stream saved there is the one the batch started from, not the one it consumed.
    args = {"max_steps": 2, "save_strategy": "steps", "save_steps": 1, "steps_per_generation": 2}
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    start = trainer.schedule.candidate_stream.state_dict()
    trainer.train()
    output = Path(trainer.args.output_dir)
    saved = {
        step: json.loads((output / f"checkpoint-{step}" / "candidate_stream.json").read_text()) for step in (1, 2)
    }
    assert saved[1] == {"format": "trl_ada.candidate_stream", "version": 1, **start}
    assert (
        saved[2] == {"format": "trl_ada.candidate_stream", "version": 1, **trainer.schedule.state_dict()} != saved[1]
    )


@pytest.fixture(scope="module")
def refill_checkpoint(tiny_model_dir, tmp_path_factory) -> Path:
    """checkpoint-1 of a one-step refill run on 16 prompts."""
    tmp_path = tmp_path_factory.mktemp("refill-run")
    args = _config(tmp_path, save_strategy="steps", save_steps=1)
    ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=args, train_dataset=_dataset(8, 8)
    ).train()
    return Path(args.output_dir) / "checkpoint-1"


@pytest.mark.parametrize("prompts", [10, 24])
def test_resuming_on_a_dataset_of_another_size_is_refused_naming_both_sizes(
    tiny_model_dir, tmp_path, refill_checkpoint, prompts
):
    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[KindReward()],
        args=_config(tmp_path, max_steps=2),
        train_dataset=_dataset(prompts // 2, prompts // 2),
    )
    with pytest.raises(CheckpointStateError) as refused:
        resumed.train(resume_from_checkpoint=str(refill_checkpoint))
    names(str(refused.value), "candidate_stream.json: ", "of 16 prompts", f"has {prompts}.", "resume_from_checkpoint")


def test_resuming_from_a_corrupt_candidate_stream_names_the_file(tiny_model_dir, tmp_path, refill_checkpoint):
    checkpoint = tmp_path / "checkpoint-1"
    shutil.copytree(refill_checkpoint, checkpoint)
    (checkpoint / "candidate_stream.json").write_text('{"size": 16, "seed": 0, "epoch": 0, "position": 99}')
    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[KindReward()],
        args=_config(tmp_path, max_steps=2),
        train_dataset=_dataset(8, 8),
    )
    with pytest.raises(CheckpointStateError) as refused:
        resumed.train(resume_from_checkpoint=str(checkpoint))
    names(str(refused.value), "candidate_stream.json: ", "position=99", "resume_from_checkpoint")


@pytest.mark.slow
def test_two_processes_keep_identical_candidate_skip_and_keep_decisions(tiny_model_dir, tmp_path):
    result = run_two_processes("distributed_refill.py", tiny_model_dir, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert len(ranks[0]["steps"]) == 3
    assert ranks[0]["steps"] == ranks[1]["steps"]  # candidates, skips, pools, kept prompts, stream position
    for step in ranks[0]["steps"]:
        assert len(step["candidates"]) == 6 == len(set(step["candidates"]))  # 2 x 3 candidates, no prompt twice
        assert len(step["kept"]) == 3
    assert any(any(step["skipped"]) for step in ranks[0]["steps"][1:])  # the memory skipped some candidates
    assert ranks[0]["rows"] == ranks[1]["rows"] == [6, 6, 6]  # 3 kept prompts x n=4 over 2 ranks, every step


def _spy_candidates(trainer) -> list[list[str]]:
    """Record the prompt texts of every step's candidates (the batch's first, then the stream's)."""
    steps = []
    new_sampler = trainer.schedule.new_sampler

    def record(batch_inputs):
        candidates, sampler = new_sampler(batch_inputs)
        steps.append([x["prompt"][-1]["content"] for x in candidates])
        return candidates, sampler

    trainer.schedule.new_sampler = record
    return steps


def test_a_stream_that_runs_past_the_dataset_mid_epoch_ends_cleanly_without_a_repeat_inside_a_step(
    tiny_model_dir, tmp_path
):
    # 8 distinct prompts, 6 of them all-wrong: every step examines all its 8 candidates (the batch's 4 and 4 from the
    # stream) and still has free slots. The stream passes the end of the dataset in the middle of TRL's epochs.
    reward = KindReward()
    args = _config(tmp_path, max_steps=-1, num_train_epochs=3, max_rounds=3)
    dataset = Dataset.from_dict(
        {
            "prompt": [
                [{"role": "user", "content": f"{kind} {i}"}] for i, kind in enumerate(["mixed"] * 2 + ["wrong"] * 6)
            ]
        }
    )
    trainer = ReinforceAdaTrainer(model=tiny_model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    steps = _spy_candidates(trainer)
    trainer.train()
    assert trainer.state.global_step == 6  # 3 epochs of 8 prompts / 4 per step: every requested step ran
    assert len(steps) == 6
    for candidates in steps:
        assert len(candidates) == 8 == len(set(candidates))  # the whole dataset, no prompt twice
    logs = [log for log in trainer.state.log_history if "reinforce_ada/refill/consumed" in log]
    assert len(logs) == 6
    for log in logs:
        assert log["reinforce_ada/refill/consumed"] == 8  # every candidate examined ...
        assert log["reinforce_ada/refill/exhausted"] == 1.0  # ... and the free slots found none left
        assert log["reinforce_ada/refill/kept"] == 4
        assert log["reinforce_ada/refill/effective_kept_fraction"] == 0.5  # the 2 mixed prompts; 2 slots all wrong
        assert log["reinforce_ada/refill/ineffective_kept_fraction"] == 0.5
    assert trainer.schedule.candidate_stream.epoch >= 2  # the stream went round the dataset more than once
    assert all(count % 4 == 0 and count > 0 for count in reward.scored.values())


def test_steps_per_generation_and_num_iterations_keep_trls_shape_with_candidates(tiny_model_dir, tmp_path):
    # A generation batch of 2 steps x 4 prompts samples over 16 candidates and keeps 8 prompts; each is reused for
    # num_iterations=2 passes: 4 optimisation steps from 1 generation batch, each on TRL's B x n = 16 rows.
    reward = KindReward()
    args = _config(tmp_path, steps_per_generation=2, num_iterations=2, max_steps=4, max_rounds=4)
    trainer = ReinforceAdaTrainer(model=tiny_model_dir, reward_funcs=[reward], args=args, train_dataset=_dataset(8, 8))
    steps = _spy_candidates(trainer)
    seen = []
    original = trainer._compute_loss

    def spy(model, inputs):
        seen.append((inputs["completion_ids"].shape[0], inputs["advantages"].tolist()))
        return original(model, inputs)

    trainer._compute_loss = spy
    parameters = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 4
    assert len(steps) == 1 and len(steps[0]) == 16 == len(set(steps[0]))  # one generation batch of candidates
    assert [rows for rows, _ in seen] == [16] * 4
    kept = sorted(a for _, advantages in seen[:2] for a in advantages)
    assert kept == [-0.5] * 16 + [0.5] * 16  # the 8 mixed prompts kept, pools [1, 0, 1, 0]
    assert [advantages for _, advantages in seen[2:]] == [advantages for _, advantages in seen[:2]]  # reused
    log = next(log for log in trainer.state.log_history if "reinforce_ada/refill/kept" in log)
    assert log["reinforce_ada/refill/candidates"] == 16 and log["reinforce_ada/refill/kept"] == 8
    assert any(not (p == parameters[name]).all() for name, p in trainer.model.named_parameters())


def test_a_huge_oversampling_is_refused_in_a_short_line(tiny_model_dir, tmp_path):
    """A count of candidates with hundreds of digits is written as a float, so the line stays readable."""
    from refusals import names, refusal

    refused = refusal(
        ReinforceAdaTrainer,
        model=tiny_model_dir,
        reward_funcs=[KindReward()],
        args=_config(tmp_path, prompt_oversampling=1e300),
        train_dataset=_dataset(4, 4),
    )
    names(refused, "prompt_oversampling=1e+300", "4e+300 candidate prompts", "has only 8", "at most 2.00")
    assert len(refused) < 400
