"""The tiny offline model: a byte-level BPE tokenizer with ChatML tokens and a random two-layer Qwen2.

[`build_tiny_model`] trains the tokenizer on generated sentences (and every prompt of the toy task, see
`trl_ada.toy.task`) and saves it with a randomly initialised `Qwen2ForCausalLM`. Everything is offline and
deterministic and takes about a second on a CPU.

Tiny models run much faster with one CPU thread (see [`configure_torch_threads`]): on a busy 2-core machine a GRPO
step drops from ~2 s to ~0.1 s.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from .task import toy_task_prompts

__all__ = ["TOY_VOCAB_SIZE", "build_tiny_model", "build_tokenizer", "configure_torch_threads"]

BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Qwen2's pre-tokenization regex: `AutoTokenizer` loads the tokenizer of a `qwen2` checkpoint as
# `Qwen2Tokenizer`, which rebuilds this pipeline, so training with it keeps the reloaded tokenizer identical.
_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Recommended settings for the toy task (measured on a 2-core CPU, see the module docstring).
TOY_VOCAB_SIZE = 384
TOY_TORCH_THREADS = 1

# Words for the tokenizer corpus. Their letter frequencies decide how many merged tokens contain each letter, hence
# the initial pass rates under a random model.
_CORPUS_TEXT = (
    "the a an and to of in is it on at as be we he she they this that there these those then than "
    "say said write wrote please repeat after me once again character symbol letter digit number word "
    "answer question model reward sample token text short long simple easy hard right wrong good best "
    "see seen tree three street sea tea eat rate late state test rest set net ten seen need feed "
    "one two four five six seven eight nine zero red green blue light night sight right height "
    "cat dog bird fish horse mouse house tent rain train stone tone note not hot hat ant"
)
_CORPUS_SEED = 0
_CORPUS_SENTENCES = 400


def configure_torch_threads(num_threads: int = TOY_TORCH_THREADS) -> None:
    """Limit torch's intra-op CPU threads; one thread is fastest for the tiny model."""
    torch.set_num_threads(num_threads)


def _corpus_sentences(num_sentences: int, seed: int) -> list[str]:
    """Deterministic pseudo-English sentences plus every prompt of the toy task."""
    rng = random.Random(seed)
    words = _CORPUS_TEXT.split()
    sentences = [
        " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))).capitalize() + "." for _ in range(num_sentences)
    ]
    return [*sentences, *toy_task_prompts(), "user", "assistant", "system"]


def build_tokenizer(vocab_size: int = TOY_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer with ChatML special tokens and chat template (deterministic, offline)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus_sentences(_CORPUS_SENTENCES, _CORPUS_SEED), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )


def _model_config(tokenizer: PreTrainedTokenizerBase, hidden_size: int, num_layers: int) -> Qwen2Config:
    """Small Qwen2 configuration matching `tokenizer` (4 heads, 2 key-value heads, tied embeddings)."""
    if hidden_size % 4:
        raise ValueError(f"hidden_size must be a multiple of 4, got {hidden_size}")
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )


def build_tiny_model(
    output_dir: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    seed: int = 0,
    vocab_size: int = TOY_VOCAB_SIZE,
) -> Path:
    """Build and save a random tiny `Qwen2ForCausalLM` with its tokenizer; return `output_dir`.

    Offline and deterministic: the tokenizer depends only on `vocab_size`, the weights on `seed` too.
    The directory loads back with `AutoModelForCausalLM` / `AutoTokenizer`.
    """
    output_dir = Path(output_dir)
    tokenizer = build_tokenizer(vocab_size)
    config = _model_config(tokenizer, hidden_size, num_layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True, temperature=1.0
    )
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir
