"""The tiny offline model and the toy "write letter X k times" task (trl_ada/toy/model.py, trl_ada/toy/task.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from trl_ada import toy  # noqa: E402

CONVERSATION = [{"role": "user", "content": "Say a 3 times"}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return toy.build_tiny_model(tmp_path_factory.mktemp("toy-model"))


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


# ---------------------------------------------------------------------------------------------------- model


def test_model_dir_loads_offline_and_runs(model_dir: Path, tokenizer) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tokenizer) == toy.TOY_VOCAB_SIZE
    assert tokenizer.eos_token == toy.EOS_TOKEN and tokenizer.pad_token == toy.PAD_TOKEN
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id != tokenizer.eos_token_id
    ids = tokenizer("Say e 2 times", return_tensors="pt").input_ids
    assert model(ids).logits.shape == (1, ids.shape[1], len(tokenizer))


def test_build_options_and_validation(tmp_path: Path) -> None:
    from transformers import AutoConfig

    path = toy.build_tiny_model(tmp_path / "wide", hidden_size=32, num_layers=1, vocab_size=300)
    config = AutoConfig.from_pretrained(path)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (32, 1, 300)
    with pytest.raises(ValueError, match="hidden_size"):
        toy.build_tiny_model(tmp_path / "bad", hidden_size=30)


def test_build_is_deterministic_per_seed(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    first, again, other = (toy.build_tiny_model(tmp_path / name, seed=s) for name, s in [("a", 0), ("b", 0), ("c", 1)])
    weights = [load_file(path / "model.safetensors") for path in (first, again, other)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not torch.equal(weights[0]["model.embed_tokens.weight"], weights[2]["model.embed_tokens.weight"])
    tokenizer_files = [(path / "tokenizer.json").read_text() for path in (first, again, other)]
    assert tokenizer_files[0] == tokenizer_files[1] == tokenizer_files[2]  # the tokenizer does not depend on seed


# ---------------------------------------------------------------------------------------------------- tokenizer


def test_chat_template_renders_chatml_with_generation_prompt(tokenizer) -> None:
    rendered = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nSay a 3 times<|im_end|>\n<|im_start|>assistant\n"
    messages = [*CONVERSATION, {"role": "assistant", "content": "aaa"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == "<|im_start|>user\nSay a 3 times<|im_end|>\n<|im_start|>assistant\naaa<|im_end|>\n"


def test_special_tokens_are_single_ids_and_skipped_on_decode(tokenizer) -> None:
    for token in toy.SPECIAL_TOKENS:
        assert tokenizer(token, add_special_tokens=False).input_ids == [tokenizer.convert_tokens_to_ids(token)]
    ids = tokenizer("<|im_start|>assistant\nee<|im_end|>", add_special_tokens=False).input_ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\nee"


@pytest.mark.parametrize(
    "text",
    [
        *toy.toy_task_prompts(),
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789",
        "What is 12 + 30? The answer is 42.\n\n  indented\ttab",
        "héllo wörld ✓ ∑ 日本",
    ],
)
def test_tokenizer_round_trips_and_matches_trained_pipeline(tokenizer, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    assert ids == toy.build_tokenizer()(text, add_special_tokens=False).input_ids


# ---------------------------------------------------------------------------------------------------- dataset


def test_dataset_columns_sizes_and_determinism() -> None:
    dataset = toy.make_toy_dataset(70, seed=3)
    assert dataset.column_names == ["prompt", "answer", "min_count", "template"]
    assert dataset.num_rows == 70
    assert dataset.to_dict() == toy.make_toy_dataset(70, seed=3).to_dict()
    assert dataset["prompt"] != toy.make_toy_dataset(70, seed=4)["prompt"]
    assert toy.make_toy_dataset(0).num_rows == 0
    row = dataset[0]
    assert row["prompt"] == [
        {
            "role": "user",
            "content": toy.toy_prompt(row["answer"], row["min_count"], toy.PROMPT_TEMPLATES[row["template"]]),
        }
    ]


def test_dataset_cycles_through_every_combination_before_repeating() -> None:
    dataset = toy.make_toy_dataset(60, seed=0, conversational=False)
    assert sorted(dataset["prompt"]) == sorted(toy.toy_task_prompts())
    assert set(dataset["answer"]) == set(toy.TOY_TARGETS) and set(dataset["min_count"]) == set(toy.TOY_COUNTS)
    for text, target, count in zip(dataset["prompt"], dataset["answer"], dataset["min_count"], strict=True):
        assert isinstance(text, str) and target in text and str(count) in text


def test_dataset_custom_targets_and_counts() -> None:
    dataset = toy.make_toy_dataset(10, targets="xy", counts=[2])
    assert set(dataset["answer"]) == {"x", "y"} and set(dataset["min_count"]) == {2}


def test_task_prompts_are_documented_size() -> None:
    prompts = toy.toy_task_prompts()
    assert len(prompts) == len(set(prompts)) == 60
    assert "Say a 3 times" in prompts and "Type 2 copies of e" in prompts


# ---------------------------------------------------------------------------------------------------- reward


def test_reward_on_plain_completions() -> None:
    completions = ["a", "", "banana", "bnn", "eee", "e e", "E"]
    answers = ["a", "a", "a", "a", "e", "e", "e"]
    assert toy.toy_reward(completions, answers) == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    counts = [1, 1, 3, 1, 4, 2, 1]
    assert toy.toy_reward(completions, answers, counts) == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]


def test_reward_on_conversational_completions_with_trl_kwargs() -> None:
    completions = [[{"role": "assistant", "content": text}] for text in ["oo o", "o", "x"]]
    rewards = toy.toy_reward(
        prompts=[CONVERSATION] * 3,
        completions=completions,
        completion_ids=[[1], [2], [3]],
        answer=["o", "o", "o"],
        min_count=[3, 2, 1],
        template=[0, 1, 2],
        trainer_state=None,
        log_extra=lambda *a, **k: None,
        log_metric=lambda *a, **k: None,
    )
    assert rewards == [1.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------------------------- measurement


def test_estimate_pass_rates_shape_range_and_seed(model_dir: Path) -> None:
    dataset = toy.make_toy_dataset(6, seed=0)
    rates = toy.estimate_pass_rates(model_dir, dataset, num_samples=8, max_new_tokens=6, seed=1)
    assert len(rates) == 6 and all(0.0 <= r <= 1.0 for r in rates)
    assert all(r * 8 == int(r * 8) for r in rates)
    assert rates == toy.estimate_pass_rates(model_dir, dataset, num_samples=8, max_new_tokens=6, seed=1)


def test_render_prompts_matches_chat_template(tokenizer) -> None:
    conversational = toy.make_toy_dataset(2, seed=0)
    plain = toy.make_toy_dataset(2, seed=0, conversational=False)
    rendered = toy.render_prompts(conversational, tokenizer)
    assert rendered == [f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n" for text in plain["prompt"]]
    assert toy.render_prompts(plain, tokenizer) == plain["prompt"]


def test_grpo_kwargs_are_valid_grpo_config(tmp_path: Path) -> None:
    from trl import GRPOConfig

    kwargs = toy.toy_grpo_kwargs(max_steps=3)
    assert kwargs["max_steps"] == 3
    assert kwargs["per_device_train_batch_size"] % kwargs["num_generations"] == 0
    config = GRPOConfig(output_dir=str(tmp_path), **kwargs)
    assert config.learning_rate == toy.TOY_LEARNING_RATE and config.max_completion_length == 12
