"""Reinforce-Ada-Est (the paper's Algorithm 1) and the objective weights in the trainer: the allocation each step
draws, the advantages that reach the loss, the estimator in checkpoints, and what is refused at construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from tiny import PERIOD, PeriodicReward, loss_batches, tiny_config

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.memory import PassRateMemory, prompt_key

pytestmark = pytest.mark.xdist_group("trainer")

PROMPTS = tuple(PERIOD)


def _trainer(tiny_model_dir, tmp_path, reward, **overrides) -> ReinforceAdaTrainer:
    fields = dict(
        sampling="est",
        num_generations=4,
        per_device_train_batch_size=16,  # 4 of the 8 prompts per step: steps 1-2 are epoch 1, steps 3-4 epoch 2
        max_steps=3,
        shuffle_dataset=False,
        save_strategy="steps",
        save_steps=1,
    )
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": k}] for k in PROMPTS]})
    return ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward],
        args=tiny_config(tmp_path, **(fields | overrides)),
        train_dataset=dataset,
    )


def _periodic(k: int, size: int) -> np.ndarray:
    return (np.arange(size) % k == 0).astype(float)


def test_est_allocates_from_the_memory_trains_every_sample_and_weights_the_advantages(tiny_model_dir, tmp_path):
    reward = PeriodicReward()
    trainer = _trainer(tiny_model_dir, tmp_path, reward)
    batches = loss_batches(trainer)
    trainer.train()
    # step 1: nothing known, every estimate is the prior's 1/2: n = 4 each
    assert reward.rows[1] == {"one in 1": 4, "one in 2": 4, "one in 3": 4, "one in 4": 4}
    # step 3 revisits prompts 1-4. After one visit of 4 samples with c right, λ = 0.9 and Beta(1, 1):
    # p̂ = (c + 1) / 6 = 5/6, 3/6, 3/6, 2/6; N ∝ 1/√(p̂ + 0.05) = 1.064, 1.348, 1.348, 1.615 (sum 5.375);
    # 16 · w / 5.375 = 3.17, 4.01, 4.01, 4.81 -> floors 3, 4, 4, 4 and the missing one to the largest fraction
    assert reward.rows[3] == {"one in 1": 3, "one in 2": 4, "one in 3": 4, "one in 4": 5}
    # the loss sees every sample: A = (r - r̄) / √(r̄ + 0.05), normalised over the samples with signal
    groups = [_periodic(1, 3), _periodic(2, 4), _periodic(3, 4), _periodic(4, 5)]
    raw = [(g - g.mean()) / np.sqrt(g.mean() + 0.05) for g in groups]
    weights = [1 / np.sqrt(g.mean() + 0.05) for g in groups[1:]]  # "one in 1" is all right: no signal
    mean_weight = (4 * weights[0] + 4 * weights[1] + 5 * weights[2]) / 13
    expected = np.sort(np.concatenate(raw) / mean_weight)
    step3 = np.sort(batches[2]["advantages"].numpy())
    np.testing.assert_allclose(step3, expected, rtol=1e-5, atol=1e-6)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert logs[2]["reinforce_ada/est/samples_min"] == 3 and logs[2]["reinforce_ada/est/samples_max"] == 5
    assert logs[2]["reinforce_ada/est/predicted_pass_rate"] == pytest.approx((5 / 6 + 0.5 + 0.5 + 2 / 6) / 4)
    assert logs[2]["reinforce_ada/objective/weight_max"] == pytest.approx(weights[2] / mean_weight, rel=1e-5)

    # the estimator is the checkpointed memory: Ada-EMA counts with λ = 0.9
    saved = PassRateMemory.load(str(Path(trainer.args.output_dir, "checkpoint-3", "pass_rate_memory.npz")))
    alpha, beta, _ = saved.posterior([prompt_key([{"role": "user", "content": "one in 4"}])])
    assert (alpha[0], beta[0]) == pytest.approx((1 + 0.9 * 1 + 2, 1 + 0.9 * 3 + 3))
    assert saved.decay == 0.9 and saved.prior == (1.0, 1.0)


def test_a_resumed_est_run_allocates_as_the_uninterrupted_one(tiny_model_dir, tmp_path):
    uninterrupted = PeriodicReward()
    trainer = _trainer(tiny_model_dir, tmp_path, uninterrupted, max_steps=4)
    trainer.train()
    resumed_reward = PeriodicReward()
    resumed = _trainer(tiny_model_dir, tmp_path, resumed_reward, max_steps=4)
    resumed.train(resume_from_checkpoint=str(Path(trainer.args.output_dir, "checkpoint-2")))
    assert resumed_reward.rows == {step: uninterrupted.rows[step] for step in (3, 4)}
    assert resumed_reward.rows[3] != {k: 4 for k in PROMPTS[:4]}  # the estimator was restored, not restarted
    keys = [prompt_key([{"role": "user", "content": k}]) for k in PROMPTS]
    for a, b in zip(resumed.pass_rate_memory.posterior(keys), trainer.pass_rate_memory.posterior(keys), strict=True):
        np.testing.assert_array_equal(a, b)  # the estimator ends exactly where the uninterrupted run's does


def test_log_objective_on_balance_rounds_weights_each_group_by_its_pool_pass_rate(tiny_model_dir, tmp_path):
    reward = PeriodicReward()
    trainer = _trainer(
        tiny_model_dir, tmp_path, reward, sampling="balance", objective="log", samples_per_round=4, max_steps=1
    )
    batches = loss_batches(trainer)
    trainer.train()
    # pools: one round of 4 each; "one in 1" all right (no signal), "one in 2" and "one in 3" mixed and balanced
    # ("one in 3" has 2 right of 4), "one in 4" has 1 right: a second round of 4 gives 2 of 8 (balance met).
    assert reward.rows[1] == {"one in 1": 16, "one in 2": 4, "one in 3": 4, "one in 4": 8}
    p = {"one in 2": 0.5, "one in 3": 0.5, "one in 4": 0.25}
    w = {k: 1 / (v + 0.05) for k, v in p.items()}
    mean_weight = sum(4 * v for v in w.values()) / 12
    kept_4 = np.array([1.0, 1.0, 0.0, 0.0]) - 0.25  # balance keeps 2 right and 2 wrong; baseline: the pool
    expected = np.concatenate(
        [
            (np.array([1.0, 0, 1, 0]) - 0.5) * w["one in 2"],
            (np.array([1.0, 0, 0, 1]) - 0.5) * w["one in 3"],
            kept_4 * w["one in 4"],
            np.zeros(4),
        ]
    )
    np.testing.assert_allclose(np.sort(batches[0]["advantages"].numpy()), np.sort(expected / mean_weight), rtol=1e-5)


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"sampling": "est", "exit_rule": "pos"}, ["generation_schedule='est'", "exit_rule='pos'", "Remove"]),
        ({"sampling": "est", "sample_budget": 8.0}, ["sample_budget=8.0", "'rounds'", "Remove sample_budget"]),
        ({"sampling": "est", "prompt_oversampling": 2.0}, ["prompt_oversampling=2.0"]),
        ({"sampling": "est", "skip_threshold": 0.5}, ["skip_threshold=0.5"]),
        ({"generation_schedule": "est"}, ["pass_rate_memory=False", "Set pass_rate_memory=True"]),
        ({"sampling": "est", "est_min_samples": 5}, ["est_min_samples=5", "num_generations=4", "at most 4"]),
        ({"sampling": "est", "est_max_samples": 3}, ["est_max_samples=3", "at least 4"]),
        ({"sampling": "est", "est_min_samples": 1}, ["est_min_samples=1", "[2, inf)"]),
        ({"sampling": "est", "memory_decay": 0.0}, ["memory_decay=0.0", "(0, 1]"]),
        ({"sampling": "est", "memory_decay": 1.5}, ["memory_decay=1.5"]),
        ({"sampling": "est", "memory_prior_alpha": 0.0}, ["memory_prior_alpha=0.0", "(0, inf)", "=1.0"]),
        ({"sampling": "est", "memory_prior_beta": -1.0}, ["memory_prior_beta=-1.0"]),
        ({"objective": "power", "objective_alpha": 0.0}, ["objective_alpha=0.0", "(0, inf)"]),
        ({"objective": "power", "objective_alpha": -1}, ["objective_alpha=-1"]),
        ({"objective": "entropy"}, ["objective='entropy'", "'linear', 'log', 'power'"]),
        ({"objective": "log", "objective_weighting": "implicit"}, ["objective_weighting='implicit'", "'rounds'"]),
        ({"objective": "log", "objective_weighting": "hybrid", "sampling": "balance"}, ["'explicit'", "'est'"]),
        ({"sampling": "est", "objective": "linear", "objective_weighting": "variance"}, ["objective='log'"]),
        ({"objective": "log", "objective_epsilon": 0.0}, ["objective_epsilon=0.0", "(0, 1]"]),
        (
            {"sampling": "est", "generation_schedule": "streaming"},
            ["sampling='est'", "generation_schedule='streaming'", "Remove generation_schedule"],
        ),
    ],
)
def test_bad_est_or_objective_config_names_fields_values_and_fix(tmp_path, overrides, fragments):
    with pytest.raises(ValueError) as error:
        ReinforceAdaConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **overrides)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_est_preset_resolves_to_the_papers_algorithm(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, sampling="est")
    plan = config.sampling_plan
    assert plan.generation_schedule == "est" and plan.memory.enabled and plan.memory.decay == 0.9
    assert (plan.objective.function, plan.objective.weighting, plan.objective.epsilon) == ("log", "hybrid", 0.05)
    assert plan.section.bounds(plan.n) == (2, 16)  # N_max defaults to 4n
    explicit = ReinforceAdaConfig(
        output_dir=str(tmp_path), report_to="none", use_cpu=True, sampling="est", objective_weighting="explicit"
    )
    assert explicit.sampling_plan.objective.weighting == "explicit"  # uniform n with 1/p̂: the reference branch


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_iterations": 2, "max_steps": 2},
        {"steps_per_generation": 2, "per_device_train_batch_size": 8, "max_steps": 2},
        {"gradient_accumulation_steps": 2, "per_device_train_batch_size": 8, "max_steps": 1},
    ],
    ids=["num_iterations", "steps_per_generation", "grad_accum"],
)
def test_est_with_trl_options_draws_each_generation_batch_once(tiny_model_dir, tmp_path, overrides):
    reward = PeriodicReward()
    trainer = _trainer(tiny_model_dir, tmp_path, reward, save_strategy="no", **overrides)
    batches = loss_batches(trainer)
    trainer.train()
    args = trainer.args
    generations = trainer.state.global_step * args.gradient_accumulation_steps
    generations //= args.steps_per_generation * args.num_iterations
    assert len(reward.rows) == generations and all(sum(rows.values()) == 16 for rows in reward.rows.values())
    assert sum(len(batch["advantages"]) for batch in batches) == 16 * generations * args.num_iterations


def test_est_logs_the_fraction_of_prompts_whose_group_has_zero_reward_std(tiny_model_dir, tmp_path):
    order = ("one in 4", "one in 3", "one in 2", "one in 1", "one in 5", "one in 6", "one in 7", "one in 8")
    reward = PeriodicReward()
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward],
        args=tiny_config(tmp_path, sampling="est", per_device_train_batch_size=16, max_steps=3, shuffle_dataset=False),
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": k}] for k in order]}),
    )
    trainer.train()
    assert reward.rows[3] == {"one in 4": 5, "one in 3": 4, "one in 2": 4, "one in 1": 3}  # the 3, 4, 4, 5
    logged = [entry["frac_reward_zero_std"] for entry in trainer.state.log_history if "frac_reward_zero_std" in entry]
    # Step 1: 4 samples each, "one in 1" all right (1 of 4 prompts); step 2: "one in 5".."one in 8", all mixed;
    # step 3: 10001 1001 1010 111, "one in 1" all right again. TRL cuts step 3's 16 rows into blocks of 4 across the
    # prompts, 1000 1100 1101 0111, none constant, and logged 0.0.
    assert logged == [0.25, 0.0, 0.25]


def test_est_with_lora_trains_only_the_adapter(tiny_model_dir, tmp_path):
    import torch
    from peft import LoraConfig

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[PeriodicReward()],
        args=tiny_config(tmp_path, sampling="est", num_generations=4, per_device_train_batch_size=16),
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": k}] for k in PROMPTS]}),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)
