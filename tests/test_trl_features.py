"""Every GRPOTrainer feature a TRL user can switch on, under plain GRPO (`sampling="grpo"`) and under `balance`.

Each run is one or two steps on the tiny offline model; what is asserted is what a user relies on: the batch that
reaches the loss holds n completions per prompt, the parameters move, the feature's own numbers are logged.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
import trl
from datasets import Dataset
from tiny import loss_batches, tiny_config
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

pytestmark = pytest.mark.xdist_group("trl_features")

METHODS = ["grpo", "balance"]  # plain GRPO, or an exit rule
N = 4


def parity_reward(completion_ids, **kwargs):
    """1 when the token sum is even: about half right, so groups are mixed and balance exits within a few rounds."""
    return [float(sum(ids) % 2 == 0) for ids in completion_ids]


def first_token_reward(completion_ids, **kwargs):
    return [(ids[0] % 5) / 4 for ids in completion_ids]


def _dataset(num_prompts: int = 4) -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": f"task {k}"}] for k in range(num_prompts)]})


def _config(tmp_path, method: str, **overrides) -> ReinforceAdaConfig:
    sampling = {"sampling": "grpo"} if method == "grpo" else {"exit_rule": method}
    fields = dict(**sampling, num_generations=N, samples_per_round=4, max_rounds=2)
    fields["per_device_train_batch_size"] = 8  # 2 prompts per step
    fields |= overrides
    if method == "grpo":  # plain GRPO refuses the rounds the adaptive runs use: it never draws them
        fields.update(samples_per_round=None, max_rounds=None)
    return tiny_config(tmp_path, **fields)


class BatchSpy:
    """Records every batch that reaches the loss."""

    def __init__(self, trainer):
        self.batches = loss_batches(trainer)
        self.micro_batches_per_generation = trainer.args.steps_per_generation

    def copies_per_prompt(self) -> list[int]:
        """Distinct numbers of copies of a prompt within a generation batch (TRL shuffles it into micro-batches)."""
        counts, size = set(), self.micro_batches_per_generation
        for start in range(0, len(self.batches), size):
            chunk = self.batches[start : start + size]
            counts.update(Counter(tuple(ids.tolist()) for batch in chunk for ids in batch["prompt_ids"]).values())
        return sorted(counts)


def _train(model_dir, tmp_path, method, reward_funcs=None, trainer_kwargs=None, **overrides):
    trainer = ReinforceAdaTrainer(
        model=model_dir,
        reward_funcs=reward_funcs if reward_funcs is not None else [parity_reward],
        args=_config(tmp_path, method, **overrides),
        train_dataset=_dataset(),
        **(trainer_kwargs or {}),
    )
    spy = BatchSpy(trainer)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    changed = {
        name for name, p in trainer.model.named_parameters() if name in before and not torch.equal(before[name], p)
    }
    return trainer, spy, changed


def _logged(trainer, name):
    return [entry[name] for entry in trainer.state.log_history if name in entry]


# --------------------------------------------------------------------------------------------
# Loss formulations, importance sampling, entropy, truncation, KL
# --------------------------------------------------------------------------------------------

LOSSES = [
    {"loss_type": "grpo"},
    {"loss_type": "dr_grpo"},
    {"loss_type": "dapo"},
    {"loss_type": "bnpo"},
    {"loss_type": "cispo"},
    {"loss_type": "sapo"},
    {"loss_type": "luspo", "importance_sampling_level": "sequence"},
    {"loss_type": "vespo"},
    {"loss_type": "grpo", "importance_sampling_level": "sequence"},  # GSPO
]


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("overrides", LOSSES, ids=lambda o: "-".join(map(str, o.values())))
def test_every_loss_formulation_trains(tiny_model_dir, tmp_path, method, overrides):
    trainer, spy, changed = _train(tiny_model_dir, tmp_path, method, **overrides)
    assert changed
    assert spy.copies_per_prompt() == [N]
    assert len(_logged(trainer, "loss")) == 1


OPTIONS = {
    "entropy_masking": {"top_entropy_quantile": 0.2},
    "entropy_bonus": {"entropy_coef": 0.01},
    "kl_reference_model": {"beta": 0.1},
    "off_policy_mask": {"off_policy_mask_threshold": 0.5, "num_iterations": 2, "max_steps": 2},
    "steps_per_generation": {"steps_per_generation": 2, "per_device_train_batch_size": 4, "max_steps": 2},
    "num_iterations": {"num_iterations": 2, "max_steps": 2},
    "gradient_accumulation": {"gradient_accumulation_steps": 2, "per_device_train_batch_size": 4},
}


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(OPTIONS))
def test_trl_training_options_train(tiny_model_dir, tmp_path, method, name):
    trainer, spy, changed = _train(tiny_model_dir, tmp_path, method, **OPTIONS[name])
    assert changed
    assert spy.copies_per_prompt() == [N]
    if name == "kl_reference_model":
        assert _logged(trainer, "kl")
    if name in ("steps_per_generation", "gradient_accumulation"):
        assert all(batch["completion_ids"].shape[0] == 4 for batch in spy.batches)  # one prompt per micro-batch


@pytest.mark.parametrize("method", METHODS)
def test_masked_truncated_completions_reach_the_loss_without_gradient(tiny_model_dir, tmp_path, method):
    # 4 new tokens from a random model practically never end with EOS: every completion is truncated
    trainer, spy, changed = _train(tiny_model_dir, tmp_path, method, mask_truncated_completions=True)
    assert not changed
    assert all(batch["completion_mask"].sum() == 0 for batch in spy.batches)
    assert _logged(trainer, "completions/clipped_ratio") == [1.0]


# --------------------------------------------------------------------------------------------
# Rewards: several weighted functions, a reward model, normalize_then_sum
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_reward_model_dir(tiny_model_dir, tmp_path_factory) -> str:
    """A random tiny sequence-classification model (one logit) sharing the tiny tokenizer, built offline."""
    path = tmp_path_factory.mktemp("tiny-reward-model")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = Qwen2Config.from_pretrained(tiny_model_dir, num_labels=1)
    torch.manual_seed(1)
    Qwen2ForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_weighted_reward_functions_and_a_reward_model(
    tiny_model_dir, tiny_reward_model_dir, tmp_path, method, aggregation
):
    trainer, spy, changed = _train(
        tiny_model_dir,
        tmp_path,
        method,
        reward_funcs=[parity_reward, first_token_reward, tiny_reward_model_dir],
        reward_weights=[1.0, 0.5, 0.1],
        multi_objective_aggregation=aggregation,
    )
    assert changed
    assert spy.copies_per_prompt() == [N]
    names = trainer.reward_func_names
    assert len(names) == 3
    for name in names:
        assert len(_logged(trainer, f"rewards/{name}/mean")) == 1


# --------------------------------------------------------------------------------------------
# PEFT and evaluation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_peft_trains_only_the_adapter(tiny_model_dir, tmp_path, method):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    _, spy, changed = _train(tiny_model_dir, tmp_path, method, trainer_kwargs={"peft_config": lora})
    assert changed and all("lora_" in name for name in changed)
    assert spy.copies_per_prompt() == [N]


@pytest.mark.parametrize("method", METHODS)
def test_evaluation_during_training_is_plain_grpo(tiny_model_dir, tmp_path, method):
    calls = []

    def counting_reward(completion_ids, **kwargs):
        calls.append(len(completion_ids))
        return parity_reward(completion_ids)

    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[counting_reward],
        args=_config(tmp_path, method, eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=8),
        train_dataset=_dataset(),
        eval_dataset=_dataset(2),
    )
    trainer.train()
    eval_entries = [entry for entry in trainer.state.log_history if "eval_reward" in entry]
    assert len(eval_entries) == 1
    assert not any(key.startswith("eval_reinforce_ada") for key in eval_entries[0])
    assert calls[-1] == 2 * N  # evaluation scored n completions of each of its 2 prompts, in one call


# --------------------------------------------------------------------------------------------
# Tools, environments and rollout_func: every round asks TRL's `_generate` for M episodes
# --------------------------------------------------------------------------------------------

TOOL_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>'
ANSWER = "3<|im_end|>"
EPISODES = {"grpo": {"mixed": 4, "hard": 4}, "balance": {"mixed": 4, "hard": 12}}  # n = M = 4, N = 3


@pytest.fixture(scope="module")
def tool_model_dir(tiny_model_dir, tmp_path_factory) -> str:
    """The tiny model with Qwen2.5's chat template (TRL ships it), which renders and parses tool calls."""
    path = tmp_path_factory.mktemp("tiny-tool-model")
    shutil.copytree(tiny_model_dir, path, dirs_exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    tokenizer.save_pretrained(path)
    config = json.loads((path / "config.json").read_text())  # the template's tool preamble alone is ~650 tokens
    (path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2048}))
    return str(path)


def _script_tool_episodes(trainer) -> None:
    """A random model never writes a tool call, so each turn's tokens are scripted: a call to `add`, then the answer.

    Only the token choice is scripted; TRL's tool loop parses the call, runs the tool, builds the tool mask, and the
    tiny model computes log-probs and gradients on the result.
    """
    tokenizer = trainer.processing_class
    call = tokenizer(TOOL_CALL, add_special_tokens=False)["input_ids"]
    answer = tokenizer(ANSWER, add_special_tokens=False)["input_ids"]

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        texts = tokenizer.batch_decode(prompt_ids)
        return [answer if "<tool_response>" in text else call for text in texts], None

    trainer._generate_single_turn = generate


class AddingEnvironment:
    """Toy environment exposing `add` as a tool; its reward alternates 1/0 on prompt "mixed", is 0 on "hard"."""

    episodes: Counter = Counter()  # rewards handed out, per prompt
    tool_calls: Counter = Counter()

    def reset(self, prompt, **kwargs):
        self.key, self.calls = prompt[-1]["content"], 0

    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        self.calls += 1
        AddingEnvironment.tool_calls[self.key] += 1
        return a + b

    def get_reward(self) -> float:
        k = AddingEnvironment.episodes[self.key]
        AddingEnvironment.episodes[self.key] += 1
        return float(self.key == "mixed" and k % 2 == 0 and self.calls == 1)


def _check_tool_masks(trainer, spy) -> None:
    """Every kept row: the tool's answer is masked out of the loss, the model's call and answer are not."""
    tokenizer = trainer.processing_class
    for batch in spy.batches:
        for ids, mask, tool_mask in zip(
            batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True
        ):
            model_part = tokenizer.decode(ids[(mask * tool_mask).bool()])
            tool_part = tokenizer.decode(ids[(mask * (1 - tool_mask)).bool()])
            assert "<tool_call>" in model_part and model_part.rstrip().endswith(ANSWER)
            assert "<tool_response>" in tool_part and "3" in tool_part and "<tool_call>" not in tool_part


@pytest.mark.parametrize("method", METHODS)
def test_environment_episodes_resample_like_completions(tool_model_dir, tmp_path, method):
    AddingEnvironment.episodes.clear()
    AddingEnvironment.tool_calls.clear()
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": key}] for key in ("mixed", "hard")]})
    trainer = ReinforceAdaTrainer(  # no reward_funcs: the environment owns the reward, as in GRPOTrainer
        model=tool_model_dir,
        args=_config(tmp_path, method, max_rounds=3, max_completion_length=256),
        train_dataset=dataset,
        environment_factory=AddingEnvironment,
    )
    _script_tool_episodes(trainer)
    spy = BatchSpy(trainer)
    trainer.train()
    assert AddingEnvironment.episodes == EPISODES[method]
    assert AddingEnvironment.tool_calls == EPISODES[method]
    assert spy.copies_per_prompt() == [N]
    _check_tool_masks(trainer, spy)
    assert _logged(trainer, "tools/call_frequency") == [1.0]
    if method == "balance":
        assert _logged(trainer, "reinforce_ada/samples") == [16.0]


@pytest.mark.parametrize("method", METHODS)
def test_standalone_tools_resample_like_completions(tool_model_dir, tmp_path, method):
    scored = Counter()

    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return a + b

    def alternating(prompts, completions, **kwargs):
        rewards = []
        for prompt, completion in zip(prompts, completions, strict=True):
            key = prompt[-1]["content"]
            used_tool = any(message["role"] == "tool" for message in prompt) or len(completion) > 1
            rewards.append(float(key == "mixed" and scored[key] % 2 == 0 and used_tool))
            scored[key] += 1
        return rewards

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": key}] for key in ("mixed", "hard")]})
    trainer = ReinforceAdaTrainer(
        model=tool_model_dir,
        reward_funcs=[alternating],
        args=_config(tmp_path, method, max_rounds=3, max_completion_length=256),
        train_dataset=dataset,
        tools=[add],
    )
    _script_tool_episodes(trainer)
    spy = BatchSpy(trainer)
    trainer.train()
    assert scored == EPISODES[method]
    _check_tool_masks(trainer, spy)


@pytest.mark.parametrize("method", METHODS)
def test_rollout_func_fields_and_masks_stay_with_their_episode(tiny_model_dir, tmp_path, method):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    episodes = Counter()

    def pattern(episode: int) -> list[int]:
        """The env mask of episode e: e % 3 + 2 model tokens, one environment token, then EOS."""
        return [1] * (episode % 3 + 2) + [0, 1]

    def rollout(prompts, trainer):
        output = {key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "episode")}
        for prompt in prompts:
            key = prompt[-1]["content"]
            e = episodes[key]
            episodes[key] += 1
            text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            mask = pattern(e)
            output["prompt_ids"].append(tokenizer(text, add_special_tokens=False)["input_ids"])
            output["completion_ids"].append([10 + e] * (len(mask) - 1) + [tokenizer.eos_token_id])
            output["logprobs"].append([-1.0] * len(mask))
            output["env_mask"].append(mask)
            output["episode"].append(f"{key}:{e}")
        return output

    def reward_from_episode(episode, **kwargs):
        return [float(ep.startswith("mixed") and int(ep.split(":")[1]) % 2 == 0) for ep in episode]

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": key}] for key in ("mixed", "hard")]})
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[reward_from_episode],
        args=_config(tmp_path, method, max_rounds=3),
        train_dataset=dataset,
        rollout_func=rollout,
    )
    spy = BatchSpy(trainer)
    trainer.train()
    assert episodes == EPISODES[method]
    for batch in spy.batches:
        for ids, mask, tool_mask in zip(
            batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True
        ):
            e = int(ids[0]) - 10
            length = int(mask.sum())
            assert tool_mask[:length].tolist() == pattern(e)  # the mask its own episode returned
            assert ids[:length].tolist() == [10 + e] * (length - 1) + [tokenizer.eos_token_id]
    rewards = sorted(trainer._logs["rewards"]["reward_from_episode"])
    assert rewards == ([0.0] * 6 + [1.0] * 2)  # 2 + 2 for "mixed", 4 negatives for "hard"
