"""`sampling="grpo"` is GRPOTrainer: the same completions, advantages, loss and TRL metrics, step by step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from datasets import Dataset
from tiny import TINY_RUN
from transformers import set_seed
from trl import GRPOConfig, GRPOTrainer

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.advantages import compute_advantages, normalize_then_sum_advantages
from trl_ada.sampling import aggregate_rewards

pytestmark = pytest.mark.xdist_group("grpo_parity")

TIMING = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos")


def first_token_parity(completion_ids, log_metric, **kwargs):
    """Abstains when the first token is a multiple of 3; otherwise 1 for an odd last token. Logs a metric."""
    rewards = [None if ids[0] % 3 == 0 else float(ids[-1] % 2) for ids in completion_ids]
    scored = [r for r in rewards if r is not None]
    log_metric("parity/scored_fraction", len(scored) / len(rewards))
    return rewards


def token_sum(completion_ids, **kwargs):
    """Abstains when the token sum is a multiple of 4; otherwise a graded reward in [0, 1)."""
    return [None if sum(ids) % 4 == 0 else (sum(ids) % 7) / 7 for ids in completion_ids]


def _dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": f"say {w}"}] for w in "abcdefgh"]})


def _run(trainer_class, config_class, model_dir, tmp_path, **overrides):
    """Two steps of training; returns per-step (completion ids, advantages, loss) and the logged history."""
    fields = dict(
        TINY_RUN,
        output_dir=str(tmp_path / trainer_class.__name__),
        num_generations=4,
        per_device_train_batch_size=8,  # 2 prompts per step
        max_completion_length=6,
        max_steps=2,
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        reward_weights=[1.0, 0.5],
    )
    fields.update(overrides)
    set_seed(0)
    trainer = trainer_class(
        model=model_dir,
        reward_funcs=[first_token_parity, token_sum],
        args=config_class(**fields),
        train_dataset=_dataset(),
    )
    steps = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        loss = compute_loss(model, inputs)
        steps.append((inputs["completion_ids"].tolist(), inputs["advantages"].tolist(), loss.item()))
        return loss

    trainer._compute_loss = spy
    set_seed(0)
    trainer.train()
    return steps, trainer.state.log_history, trainer


@pytest.mark.parametrize(
    "overrides",
    [
        {"scale_rewards": "none"},
        {"scale_rewards": "group"},
        {"scale_rewards": "batch"},
        {"multi_objective_aggregation": "normalize_then_sum"},
    ],
    ids=["scale_none", "scale_group", "scale_batch", "normalize_then_sum"],
)
def test_sampling_grpo_equals_grpo_trainer_step_by_step(tiny_model_dir, tmp_path, overrides):
    grpo_steps, grpo_log, grpo = _run(GRPOTrainer, GRPOConfig, tiny_model_dir, tmp_path, **overrides)
    ada_steps, ada_log, _ = _run(
        ReinforceAdaTrainer, ReinforceAdaConfig, tiny_model_dir, tmp_path, sampling="grpo", **overrides
    )
    assert len(ada_steps) == len(grpo_steps) == 2
    abstained = 0
    for (grpo_ids, grpo_adv, grpo_loss), (ada_ids, ada_adv, ada_loss) in zip(grpo_steps, ada_steps, strict=True):
        assert ada_ids == grpo_ids
        torch.testing.assert_close(torch.tensor(ada_adv), torch.tensor(grpo_adv), atol=1e-6, rtol=1e-5)
        assert ada_loss == pytest.approx(grpo_loss, rel=1e-5, abs=1e-7)
        abstained += sum(ids[0] % 3 == 0 for ids in grpo_ids)
    assert abstained > 0  # the case under test: some completions were not scored by the first function

    assert len(ada_log) == len(grpo_log)
    for grpo_entry, ada_entry in zip(grpo_log, ada_log, strict=True):
        trl_keys = {key for key in grpo_entry if key not in TIMING}
        assert trl_keys <= set(ada_entry)
        for key in trl_keys:
            expected, actual = grpo_entry[key], ada_entry[key]
            if isinstance(expected, float) and math.isnan(expected):
                assert math.isnan(actual), key
            else:
                assert actual == pytest.approx(expected, rel=1e-5, abs=1e-6), key
    assert "parity/scored_fraction" in grpo_log[0]

    # our advantage functions, fed the last step's rewards with the pool = the group, give TRL's advantages
    kept = np.stack([list(grpo._logs["rewards"][name]) for name in grpo.reward_func_names], axis=1).reshape(2, 4, 2)
    weights = [1.0, 0.5]
    if overrides.get("multi_objective_aggregation") == "normalize_then_sum":
        ours = normalize_then_sum_advantages(kept, list(kept), weights)
    else:
        rewards = aggregate_rewards(kept.reshape(-1, 2), weights).reshape(2, 4)
        ours = compute_advantages(rewards, list(rewards), scale=overrides["scale_rewards"])
    np.testing.assert_allclose(ours.reshape(-1), list(grpo._logs["advantages"]), atol=1e-5)
    assert {key for key in ada_log[0] if key.startswith("reinforce_ada/")} >= {"reinforce_ada/samples"}
