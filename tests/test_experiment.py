"""The toy experiments (trl_ada/toy/experiment.py): method specs, summaries and their pure helpers."""

from __future__ import annotations

import math

import pytest
from refusals import names, refusal

from trl_ada.toy import experiment


def test_moving_average_is_trailing():
    assert experiment.moving_average([0, 1, 2, 3, 4, 5], window=3) == [0, 0.5, 1, 2, 3, 4]


def test_steps_and_samples_to_reach_use_the_smoothed_curve():
    rewards = [0.0, 0.0, 1.0, 0.0, 0.6, 0.6]
    records = [
        {"step": k + 1, "first_round_reward": r, "cumulative_samples": 10.0 * (k + 1)} for k, r in enumerate(rewards)
    ]
    assert experiment.steps_to_reach(records, 0.5, window=1) == 3  # raw curve: the single spike counts
    assert experiment.steps_to_reach(records, 0.5, window=3) == 5  # smoothed: (1 + 0 + .6) / 3 first >= .5
    assert experiment.samples_to_reach(records, 0.5, window=3) == 50.0
    assert math.isnan(experiment.steps_to_reach(records, 0.9, window=3))


def test_summarize_counts_gain_per_1k_samples():
    records = [
        {
            "step": k + 1,
            "first_round_reward": 0.2 if k < 5 else 0.7,
            "cumulative_samples": 100.0 * (k + 1),
            "frac_reward_zero_std": 0.5,
            "wall_time": float(k),
        }
        for k in range(10)
    ]
    summary = experiment.summarize(records, targets=(0.45,))
    assert summary["initial_first_round_reward"] == pytest.approx(0.2)
    assert summary["final_first_round_reward"] == pytest.approx(0.7)
    assert summary["total_samples"] == 1000.0
    assert summary["reward_gain_per_1k_samples"] == pytest.approx(0.5)
    assert summary["steps_to"]["0.45"] == 8  # 5-step average: .4 at step 7, .5 at step 8


def test_method_spec_names_its_trainer_and_rejects_mixed_settings():
    assert not experiment.MethodSpec("grpo", "GRPO n=4").uses_reinforce_ada
    ada_grpo = experiment.MethodSpec("ada_grpo", "Ada GRPO", trainer="reinforce_ada", sampling="grpo")
    assert ada_grpo.uses_reinforce_ada and ada_grpo.sampling == "grpo"
    names(
        refusal(experiment.MethodSpec, "x", "x", exit_rule="pos"),
        "trainer='grpo'",
        "exit_rule='pos'",
        "drop exit_rule",
    )
    grpo_est = refusal(experiment.MethodSpec, "x", "x", sampling="est")
    names(grpo_est, "trainer='grpo'", "sampling='est'", "trainer='reinforce_ada'")
    names(
        refusal(experiment.MethodSpec, "x", "x", trainer="reinforce_ada"), "sampling=None", "set exit_rule or sampling"
    )
    both = refusal(experiment.MethodSpec, "x", "x", trainer="reinforce_ada", exit_rule="balance", sampling="est")
    names(both, "exit_rule='balance'", "sampling='est'", "set one")
    assert experiment.MethodSpec("est", "Est", trainer="reinforce_ada", sampling="est").uses_reinforce_ada
    names(refusal(experiment.MethodSpec, "x", "x", trainer="ppo"), "'ppo'", "['grpo', 'reinforce_ada']")


def test_summaries_skip_steps_without_a_metric():
    records = [
        {"step": 1, "first_round_reward": 0.2, "cumulative_samples": 8.0, "frac_reward_zero_std": math.nan},
        {"step": 2, "first_round_reward": 0.4, "cumulative_samples": 16.0, "frac_reward_zero_std": 0.5},
    ]
    summary = experiment.summarize([{**r, "wall_time": 1.0} for r in records], targets=(0.3,), window=2)
    assert summary["mean_frac_reward_zero_std"] == 0.5
    assert summary["final_first_round_reward"] == pytest.approx(0.3)


def test_targets_on_a_probed_metric_read_only_the_steps_that_have_it():
    probed = [math.nan, 0.3, math.nan, 0.72, math.nan, 0.8]
    records = [
        {"step": k + 1, "eval_pass_rate": p, "first_round_reward": 0.9, "cumulative_samples": 10.0 * (k + 1)}
        for k, p in enumerate(probed)
    ]
    assert experiment.steps_to_reach(records, 0.7, window=1, metric="eval_pass_rate") == 4
    assert experiment.samples_to_reach(records, 0.7, window=1, metric="eval_pass_rate") == 40.0
    assert experiment.steps_to_reach(records, 0.7, window=2, metric="eval_pass_rate") == 6  # (.72 + .8) / 2
    assert experiment.steps_to_reach(records, 0.7, window=1) == 1  # the first-round curve is another question


def test_pass_rate_probe_scores_every_task_prompt_without_touching_the_training_randomness(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    settings = experiment.TaskSettings(eval_every=2, eval_samples=4)
    assert len(settings.task_rows()) == 40  # a and o, k = 1..5, 4 phrasings: every prompt of the dataset
    model_dir = experiment.prepare_model(tmp_path / "model", seed=0)
    model = AutoModelForCausalLM.from_pretrained(model_dir).train()  # as during training
    probe = experiment.PassRateProbe(AutoTokenizer.from_pretrained(model_dir), settings, seed=0)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = probe(model, step=2)
    assert torch.equal(torch.get_rng_state(), state)  # the training's random stream goes on as without a probe
    assert model.training  # the probe puts the model back in its mode
    assert probe(model, step=2) == first  # the same draws for every method probed at step 2
    assert first * 160 == round(first * 160)  # a mean over 40 prompts x 4 completions
    assert 0.05 < first < 0.35  # the random model: about 0.5 for k=1, near 0 for k >= 3


def test_parallel_seeds_of_one_method_get_their_own_run_directory(monkeypatch, tmp_path):
    # The learning benchmark runs two seeds of a method at once in one work dir; a shared output_dir is refused
    # (one run per output_dir), so each (method, seed) needs its own.
    used = []

    class Trainer:
        def __init__(self, output_dir):
            used.append(output_dir)

        def remove_callback(self, callback):
            pass

        def add_callback(self, callback):
            pass

        def train(self):
            pass

    monkeypatch.setattr(experiment, "build_method_trainer", lambda *args: Trainer(args[-1]))
    spec = experiment.MethodSpec("grpo_n4", "GRPO n=4")
    for seed in (0, 1):
        experiment.run_method(spec, tmp_path / "model", None, seed=seed, steps=1, work_dir=tmp_path)
    assert len(set(used)) == 2 and all(path.parent == tmp_path for path in used)
