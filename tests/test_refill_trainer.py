"""Dynamic sampling in the trainer: candidates beyond the batch, DAPO's refill as configuration, checkpoints."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset
from tiny import CountingReward, tiny_config

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

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
    seen = []
    original = trainer._compute_loss

    def spy(model, inputs):
        seen.append(inputs)
        return original(model, inputs)

    trainer._compute_loss = spy
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
    with pytest.raises(
        ValueError, match=r"prompt_oversampling=3: one step samples over 12 candidate prompts.*has only 8"
    ):
        ReinforceAdaTrainer(
            model=tiny_model_dir,
            reward_funcs=[KindReward()],
            args=_config(tmp_path, prompt_oversampling=3.0),
            train_dataset=_dataset(4, 4),
        )


def test_checkpoint_restores_the_candidate_stream(tiny_model_dir, tmp_path):
    args = {"max_steps": 2, "save_strategy": "steps", "save_steps": 1}
    first = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    states = []
    advance = first._advance_candidate_stream

    def record(sampler, batch_size):
        advance(sampler, batch_size)
        states.append(first.candidate_stream.state_dict())

    first._advance_candidate_stream = record
    first.train()
    saved = json.loads((Path(first.args.output_dir) / "checkpoint-1" / "candidate_stream.json").read_text())
    assert saved == states[0] and states[0] != states[1]
    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    resumed.train(resume_from_checkpoint=str(Path(first.args.output_dir) / "checkpoint-1"))
    assert resumed.candidate_stream.state_dict() == states[1]  # step 2 drew and consumed the same candidates


@pytest.mark.slow
def test_two_processes_keep_identical_candidate_skip_and_keep_decisions(tiny_model_dir, tmp_path):
    import os
    import subprocess
    import sys

    script = Path(__file__).parent / "scripts" / "distributed_refill.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    result = subprocess.run(
        [*command, str(script), tiny_model_dir, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert len(ranks[0]["steps"]) == 3
    assert ranks[0]["steps"] == ranks[1]["steps"]  # candidates, skips, pools, kept prompts, stream position
    for step in ranks[0]["steps"]:
        assert len(step["candidates"]) == 6 == len(set(step["candidates"]))  # 2 x 3 candidates, no prompt twice
        assert len(step["kept"]) == 3
    assert any(any(step["skipped"]) for step in ranks[0]["steps"][1:])  # the memory skipped some candidates
    assert ranks[0]["rows"] == ranks[1]["rows"] == [6, 6, 6]  # 3 kept prompts x n=4 over 2 ranks, every step
