"""ReinforceAdaTrainer on a tiny offline model: the rounds, the scoring, the advantages and TRL's features."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from refusals import names, refusal
from tiny import CountingReward, prompt_text, tiny_config

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.schedules.rounds import split_round

pytestmark = pytest.mark.xdist_group("trainer")

PROMPTS = {"always right": 1, "always wrong": 0, "alternating": None, "one in four": None}


class ScriptedReward(CountingReward):
    """Rewards by prompt: always 1, always 0, 1/0/1/0..., or 1/0/0/0/1...; counts every completion scored."""

    __name__ = "scripted"

    def rule(self, prompt: str, k: int) -> float:
        return {
            "always right": 1.0,
            "always wrong": 0.0,
            "alternating": float(k % 2 == 0),
            "one in four": float(k % 4 == 0),
        }[prompt]


def _dataset(repeats: int = 1) -> Dataset:
    keys = list(PROMPTS) * repeats
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": k}] for k in keys], "answer": ["a"] * len(keys)})


def _config(tmp_path, **overrides) -> ReinforceAdaConfig:
    fields = dict(num_generations=4, samples_per_round=4, max_rounds=3, per_device_train_batch_size=16)  # 4 prompts
    if overrides.get("sampling") == "grpo":  # plain GRPO refuses rounds it never draws
        fields.update(samples_per_round=None, max_rounds=None)
    return tiny_config(tmp_path, **(fields | overrides))


class LossSpy:
    """Wraps `_compute_loss` to record, per prompt text, the advantages and completions that reach the loss."""

    def __init__(self, trainer: ReinforceAdaTrainer):
        self.trainer = trainer
        self.advantages = defaultdict(list)
        self.batch_sizes = []
        self.inputs = []
        self.prompts_per_call = []
        original = trainer._compute_loss

        def spy(model, inputs):
            self.inputs.append(inputs)
            self.batch_sizes.append(inputs["completion_ids"].shape[0])
            tokenizer = trainer.processing_class
            self.prompts_per_call.append(Counter())
            for ids, mask, advantage in zip(
                inputs["prompt_ids"], inputs["prompt_mask"], inputs["advantages"], strict=True
            ):
                text = tokenizer.decode(ids[mask.bool()])
                key = next(k for k in PROMPTS if k in text)
                self.advantages[key].append(round(float(advantage), 6))
                self.prompts_per_call[-1][key] += 1
            return original(model, inputs)

        trainer._compute_loss = spy


def _train(tiny_model_dir, tmp_path, reward=None, dataset=None, **overrides):
    reward = reward or ScriptedReward()
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward],
        args=_config(tmp_path, **overrides),
        train_dataset=dataset or _dataset(),
    )
    spy = LossSpy(trainer)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    changed = any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters() if name in before)
    return trainer, reward, spy, changed


def _metric(trainer, name):
    return [h[name] for h in trainer.state.log_history if name in h]


@pytest.mark.parametrize(
    "sampling", [{"exit_rule": "balance"}, {"exit_rule": "pos"}, {"sampling": "grpo"}], ids=["balance", "pos", "grpo"]
)
def test_train_runs_changes_parameters_and_feeds_exactly_n_per_prompt(tiny_model_dir, tmp_path, sampling):
    trainer, _, spy, changed = _train(tiny_model_dir, tmp_path, **sampling, max_steps=2)
    assert changed
    assert spy.batch_sizes == [16, 16]  # 4 prompts x n=4 per step, whatever was drawn
    assert _metric(trainer, "reinforce_ada/samples_per_prompt")


def test_balance_scores_each_completion_once_and_uses_pool_advantages(tiny_model_dir, tmp_path):
    trainer, reward, spy, _ = _train(tiny_model_dir, tmp_path, exit_rule="balance")
    # right/wrong never balance: N x M each; alternating balances in round 1: M; one-in-four needs a second round.
    assert reward.scored == {"always right": 12, "always wrong": 12, "alternating": 4, "one in four": 8}
    assert trainer.state.log_history[0]["reinforce_ada/samples"] == 36
    # pool baseline: alternating pool [1,0,1,0] -> ±0.5; one-in-four pool of 8 with 2 right, kept 2+2 -> .75/-.25
    assert sorted(spy.advantages["alternating"]) == [-0.5, -0.5, 0.5, 0.5]
    assert sorted(spy.advantages["one in four"]) == [-0.25, -0.25, 0.75, 0.75]
    assert spy.advantages["always right"] == [0.0] * 4
    assert spy.advantages["always wrong"] == [0.0] * 4
    log = trainer.state.log_history[0]
    assert log["reinforce_ada/rounds"] == 3
    assert log["reinforce_ada/exit_fraction/round_1"] == 0.25
    assert log["reinforce_ada/exit_fraction/round_2"] == 0.25
    assert log["reinforce_ada/unresolved_all_positive_fraction"] == 0.25
    assert log["reinforce_ada/unresolved_all_negative_fraction"] == 0.25
    # first-round reward: (4 + 0 + 2 + 1) / 16
    assert log["reinforce_ada/first_round_reward"] == pytest.approx(7 / 16)


def test_group_baseline_matches_grpo(tiny_model_dir, tmp_path):
    _, _, spy, _ = _train(tiny_model_dir, tmp_path, exit_rule="balance", advantage_baseline="group")
    assert sorted(spy.advantages["one in four"]) == [-0.5, -0.5, 0.5, 0.5]


def test_pos_exits_on_first_positive(tiny_model_dir, tmp_path):
    trainer, reward, _, _ = _train(tiny_model_dir, tmp_path, exit_rule="pos")
    # every prompt but "always wrong" has a positive in round 1
    assert reward.scored == {"always right": 4, "always wrong": 12, "alternating": 4, "one in four": 4}
    assert trainer.state.log_history[0]["reinforce_ada/exit_fraction/round_1"] == 0.75


def test_plain_grpo_draws_exactly_n(tiny_model_dir, tmp_path):
    trainer, reward, _, _ = _train(tiny_model_dir, tmp_path, sampling="grpo")
    assert reward.scored == {key: 4 for key in PROMPTS}
    assert trainer.state.log_history[0]["reinforce_ada/rounds"] == 1


def test_extra_dataset_columns_reach_reward_functions_in_every_round(tiny_model_dir, tmp_path):
    seen = []

    def reward(completions, answer, difficulty, **kwargs):
        seen.append(list(difficulty))
        return [0.0] * len(completions)

    dataset = _dataset().add_column("difficulty", ["easy", "hard", "mid", "mid"])
    _train(tiny_model_dir, tmp_path, reward=reward, dataset=dataset)
    assert len(seen) == 3  # one call per round, all prompts unresolved
    assert all(set(batch) <= {"easy", "hard", "mid"} and len(batch) == 16 for batch in seen)


def test_reward_function_returning_none_has_no_opinion(tiny_model_dir, tmp_path):
    scripted = ScriptedReward()

    def abstains(prompts, completions, **kwargs):
        return [None] * len(completions)

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[scripted, abstains], args=_config(tmp_path), train_dataset=_dataset()
    )
    trainer.train()
    assert scripted.scored == {"always right": 12, "always wrong": 12, "alternating": 4, "one in four": 8}


def test_abstained_completions_are_neither_positive_nor_negative(tiny_model_dir, tmp_path):
    def right_or_abstain(prompts, completions, **kwargs):
        right_or_abstain.calls += 1
        return [1.0 if k % 2 == 0 else None for k in range(len(completions))]

    right_or_abstain.calls = 0
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[right_or_abstain], args=_config(tmp_path), train_dataset=_dataset()
    )
    spy = LossSpy(trainer)
    trainer.train()
    # pools [1, None, 1, None, ...] never hold a negative, so balance never exits: 3 rounds; the groups are 4
    # positives whose pool mean (None left out) is 1, so every advantage is 0, as GRPOTrainer gives for 1 / None
    assert right_or_abstain.calls == 3
    assert all(values == [0.0] * 4 for values in spy.advantages.values())
    assert _metric(trainer, "reinforce_ada/pool_pass_rate") == [1.0]


def test_prompt_no_function_can_score_stops_after_its_first_round(tiny_model_dir, tmp_path):
    scripted = ScriptedReward()

    def except_always_wrong(prompts, completions, **kwargs):
        scores = scripted(prompts, completions)
        return [None if prompt_text(p) == "always wrong" else r for p, r in zip(prompts, scores, strict=True)]

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[except_always_wrong], args=_config(tmp_path), train_dataset=_dataset()
    )
    spy = LossSpy(trainer)
    trainer.train()
    assert scripted.scored == {"always right": 12, "always wrong": 4, "alternating": 4, "one in four": 8}
    assert spy.advantages["always wrong"] == [0.0] * 4
    assert sorted(spy.advantages["alternating"]) == [-0.5, -0.5, 0.5, 0.5]


def test_log_completions_table_holds_the_kept_samples(tiny_model_dir, tmp_path):
    trainer, _, _, _ = _train(tiny_model_dir, tmp_path, log_completions=True)
    table = list(Path(trainer.args.output_dir, "completions").glob("*.parquet"))
    assert len(table) == 1
    import pandas as pd

    frame = pd.read_parquet(table[0])
    assert len(frame) == 16
    assert sorted(frame["advantage"].round(6))[:2] == [-0.5, -0.5]


def test_evaluation_keeps_plain_grpo_sampling(tiny_model_dir, tmp_path):
    reward = ScriptedReward()
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward],
        args=_config(tmp_path, per_device_eval_batch_size=16, eval_strategy="no"),
        train_dataset=_dataset(),
        eval_dataset=_dataset(),
    )
    metrics = trainer.evaluate()
    assert reward.scored == {key: 4 for key in PROMPTS}
    assert "eval_reward" in metrics
    assert not any(key.startswith("eval_reinforce_ada") for key in metrics)


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_iterations": 2, "max_steps": 2},
        {"steps_per_generation": 2, "per_device_train_batch_size": 8, "max_steps": 2},
        {"gradient_accumulation_steps": 2, "per_device_train_batch_size": 8},
        {"beta": 0.1},
    ],
    ids=["num_iterations", "steps_per_generation", "grad_accum", "beta"],
)
def test_trl_options_keep_working(tiny_model_dir, tmp_path, overrides):
    trainer, reward, spy, changed = _train(tiny_model_dir, tmp_path, **overrides)
    assert changed
    assert sum(spy.batch_sizes) % 16 == 0
    micro_steps = trainer.state.global_step * trainer.args.gradient_accumulation_steps
    generations = micro_steps // (trainer.args.steps_per_generation * trainer.args.num_iterations)
    assert reward.scored["alternating"] == 4 * generations  # the alternating prompt exits in round 1 every time


def test_lora_trains_only_the_adapter(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[ScriptedReward()],
        args=_config(tmp_path),
        train_dataset=_dataset(),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)


def test_checkpoint_resume_and_model_card(tiny_model_dir, tmp_path):
    args = dict(max_steps=2, save_strategy="steps", save_steps=1, per_device_train_batch_size=8)
    trainer, _, first_spy, _ = _train(tiny_model_dir, tmp_path, dataset=_dataset(4), **args)
    checkpoint = Path(trainer.args.output_dir, "checkpoint-1")
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "rng_state.pth"):
        assert (checkpoint / name).exists(), name
    card = Path(trainer.args.output_dir, "README.md").read_text()
    assert "Reinforce-Ada" in card and "2510.04996" in card and "reinforce-ada" in card
    first_run = [h["reinforce_ada/samples"] for h in trainer.state.log_history if "reinforce_ada/samples" in h]

    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[ScriptedReward()],
        args=_config(tmp_path, **args),
        train_dataset=_dataset(4),
    )
    spy = LossSpy(resumed)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 2
    assert len(spy.batch_sizes) == 1  # only step 2 ran
    assert spy.prompts_per_call == first_spy.prompts_per_call[1:]  # same data order: step 2 sees the same prompts
    state = json.loads((Path(trainer.args.output_dir) / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    resumed_samples = [h["reinforce_ada/samples"] for h in resumed.state.log_history if "reinforce_ada/samples" in h]
    assert resumed_samples[-1] == first_run[-1]


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"samples_per_round": 1, "max_rounds": 3}, "samples_per_round \\* max_rounds"),
        ({"num_generations": 1}, "num_generations=1"),
        ({"exit_rule": "balanced"}, "exit_rule='balanced'.*'balance'"),
        ({"samples_per_round": 0}, "samples_per_round=0"),
        ({"max_rounds": 0}, "max_rounds=0"),
        ({"positive_threshold": float("nan")}, "positive_threshold=nan"),
        ({"advantage_baseline": "batch"}, "advantage_baseline='batch'"),
    ],
)
def test_bad_config_names_the_field(tmp_path, overrides, match):
    with pytest.raises(ValueError, match=match):
        _config(tmp_path, **overrides)


def test_plain_grpo_refuses_a_round_plan_it_would_not_draw(tmp_path):
    fields = dict(sampling="grpo", num_generations=8, per_device_train_batch_size=8)
    refused = refusal(_config, tmp_path, **fields, samples_per_round=4)  # M = 4 < n = 8: once replaced by n silently
    names(refused, "samples_per_round=4", "generation_schedule='grpo'", "Remove samples_per_round")
    assert not _config(tmp_path, **fields).sampling_plan.section.samples_adaptively


def test_grpo_config_is_rejected_with_the_fix(tiny_model_dir, tmp_path):
    from trl import GRPOConfig

    with pytest.raises(TypeError, match="ReinforceAdaConfig"):
        ReinforceAdaTrainer(
            model=tiny_model_dir,
            reward_funcs=[ScriptedReward()],
            args=GRPOConfig(output_dir=str(tmp_path), num_generations=4, report_to="none", use_cpu=True),
            train_dataset=_dataset(),
        )


# --------------------------------------------------------------------------------------------
# Scripted episodes (rollout_func): exact control over lengths, truncation and rewards
# --------------------------------------------------------------------------------------------


class ScriptedRollout:
    """`rollout_func` whose k-th episode of a prompt has the length, ending and reward its script gives.

    `script[prompt][k] = (reward, num_tokens, ends_with_eos)`; the reward reaches reward functions as the extra field
    `scripted_reward`, so `scripted_reward_func` just reads it back.
    """

    def __init__(self, tokenizer, script: dict[str, list[tuple[float, int, bool]]]):
        self.tokenizer, self.script, self.episodes = tokenizer, script, Counter()

    def __call__(self, prompts, trainer):
        output = {key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "scripted_reward")}
        for prompt in prompts:
            key = prompt_text(prompt)
            reward, length, eos = self.script[key][self.episodes[key]]
            self.episodes[key] += 1
            text = self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            ids = [20 + length] * (length - 1) + [self.tokenizer.eos_token_id if eos else 21]
            output["prompt_ids"].append(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            output["completion_ids"].append(ids)
            output["logprobs"].append([-1.0] * length)
            output["scripted_reward"].append(reward)
        return output


def scripted_reward_func(scripted_reward, **kwargs):
    return list(scripted_reward)


def _scripted_trainer(tiny_model_dir, tmp_path, script, reward_funcs=None, **overrides):
    from transformers import AutoTokenizer

    rollout = ScriptedRollout(AutoTokenizer.from_pretrained(tiny_model_dir), script)
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": key}] for key in script]})
    fields = dict(per_device_train_batch_size=4 * len(script), max_completion_length=8)
    fields.update(overrides)
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=reward_funcs or [scripted_reward_func],
        args=_config(tmp_path, **fields),
        train_dataset=dataset,
        rollout_func=rollout,
    )
    return trainer, rollout


def test_truncation_masking_keeps_a_balanced_group_that_carries_gradient(tiny_model_dir, tmp_path):
    # 8 episodes in round 1: the first two negatives hit the length cap (no EOS); the pool balances
    script = {
        "q": [(0, 8, False), (0, 8, False), (1, 3, True), (1, 3, True), (0, 4, True), (0, 4, True)]
        + [(1, 3, True)] * 2
    }
    trainer, _ = _scripted_trainer(
        tiny_model_dir, tmp_path, script, samples_per_round=8, mask_truncated_completions=True
    )
    batches = []
    compute_loss = trainer._compute_loss
    trainer._compute_loss = lambda model, inputs: batches.append(inputs) or compute_loss(model, inputs)
    trainer.train()
    (batch,) = batches
    assert batch["completion_mask"].sum(dim=1).tolist() == [3, 3, 4, 4]  # 2 positives + 2 negatives, none masked
    assert batch["advantages"].tolist() == [0.5, 0.5, -0.5, -0.5]


def test_trl_metrics_describe_the_kept_batch_and_sampling_metrics_everything_generated(tiny_model_dir, tmp_path):
    # "q" (round 1): 1, 0, 0, 0 -> one positive, balance needs two; round 2: 1, 0, 0, 0 -> exits with 8 drawn.
    # kept: the first two positives (lengths 2, 6) and the first two negatives (lengths 3, 4)
    lengths = [2, 3, 4, 5, 6, 7, 8, 8]
    script = {"q": [(float(k % 4 == 0), length, length < 8) for k, length in enumerate(lengths)]}
    metric_calls = []

    def logs_a_metric(scripted_reward, log_metric, **kwargs):
        metric_calls.append(len(scripted_reward))
        log_metric("rows_in_call", float(len(scripted_reward)))
        return list(scripted_reward)

    trainer, rollout = _scripted_trainer(tiny_model_dir, tmp_path, script, reward_funcs=[logs_a_metric])
    trainer.train()
    assert rollout.episodes == {"q": 8}
    (entry,) = [h for h in trainer.state.log_history if "loss" in h]
    assert entry["completions/mean_length"] == pytest.approx((2 + 3 + 4 + 6) / 4)
    assert entry["completions/min_length"] == 2 and entry["completions/max_length"] == 6
    assert entry["completions/clipped_ratio"] == 0.0
    assert entry["reinforce_ada/samples"] == 8 and entry["reinforce_ada/tokens"] == sum(lengths)
    prompt_tokens = entry["num_tokens"] - (2 + 3 + 4 + 6)
    assert prompt_tokens > 0 and prompt_tokens % 4 == 0  # kept prompts and completions only
    assert metric_calls == [4, 4]
    assert entry["rows_in_call"] == 4.0


def test_log_extra_column_seen_in_some_rounds_only_is_filled_with_none(tiny_model_dir, tmp_path):
    script = {"q": [(float(k % 4 == 0), 3, True) for k in range(8)]}
    calls = []

    def logs_in_round_two(scripted_reward, log_extra, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            log_extra("round_two_note", [f"note {k}" for k in range(len(scripted_reward))])
        return list(scripted_reward)

    trainer, _ = _scripted_trainer(
        tiny_model_dir, tmp_path, script, reward_funcs=[logs_in_round_two], log_completions=True
    )
    trainer.train()
    assert len(calls) == 2
    # kept: pool indices 0 and 4 (positives, rounds 1 and 2), 1 and 2 (negatives, round 1)
    assert list(trainer._logs["extra"]["round_two_note"]) == [None, None, None, "note 0"]


def test_a_trainer_built_without_init_falls_back_to_grpo_trainer(monkeypatch):
    from trl import GRPOTrainer

    monkeypatch.setattr(GRPOTrainer, "_generate", lambda self, prompts: ("generated", prompts))
    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", lambda self, *args: "scored")
    trainer = ReinforceAdaTrainer.__new__(ReinforceAdaTrainer)
    assert trainer._generate(["p"]) == ("generated", ["p"])
    assert trainer._calculate_rewards([], [], [], []) == "scored"


def test_reward_funcs_is_optional_as_in_grpo_trainer(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="No reward source provided"):  # TRL's own message: nothing to score with
        ReinforceAdaTrainer(model=tiny_model_dir, args=_config(tmp_path), train_dataset=_dataset())


@pytest.mark.parametrize(
    ("num_active", "samples_per_round", "num_processes", "rows", "padding", "copies"),
    [
        (1, 8, 2, 4, 0, 4),  # one active prompt on two processes: 4 samples each, nothing thrown away
        (1, 8, 8, 1, 0, 1),  # one sample per process; a vLLM server gets n=1 requests of the same prompt
        (3, 8, 2, 12, 0, 4),
        (3, 3, 2, 5, 1, 1),  # 9 samples cannot be split evenly over 2: one padded row, never counted
        (64, 8, 8, 64, 0, 8),
    ],
)
def test_a_round_is_split_over_processes_at_sample_level(
    num_active, samples_per_round, num_processes, rows, padding, copies
):
    split = split_round([samples_per_round] * num_active, num_processes)
    assert split.num_samples == num_active * samples_per_round
    num_padding = split.rows_per_process * num_processes - split.num_samples  # rows generated only to even shards
    assert (split.rows_per_process, num_padding, split.copies_per_request) == (rows, padding, copies)
    assert num_padding < num_processes
    assert samples_per_round % split.copies_per_request == 0 and rows % split.copies_per_request == 0
