"""Tiny offline model and toy RL task for tests, demos and benchmarks.

Everything here runs fully offline on a CPU in seconds:

* :func:`build_tiny_model` trains a small byte-level BPE tokenizer (ChatML special tokens and chat template) on
  generated sentences and saves it with a randomly initialised two-layer ``Qwen2ForCausalLM``.
* :func:`make_toy_dataset` / :func:`toy_reward` define the "write letter X k times" task.
* :func:`estimate_pass_rates` measures per-prompt pass rates by sampling, the way GRPO sees them.

The task (see :func:`toy_task_prompts`): each prompt asks for a target letter (``e``, ``a`` or ``o``) at least ``k``
times (k = 1..5), e.g. ``"Say a 3 times"``; the reward is 1.0 when the completion contains the letter at least k
times. A freshly initialised model samples tokens almost uniformly, so a completion's letter count depends on how many
vocabulary tokens contain that letter (``e`` is the most frequent letter of the tokenizer corpus, ``o`` the least of
the three) and on k. With the defaults (``TOY_MAX_COMPLETION_LENGTH`` = 12 new tokens, temperature 1) the initial
pass rates range from ~0.9 (``e``, k=1) through mid values (``a``/``o`` with k=1, ``e`` with k=2..3) to ~0 (k >= 3
for ``a``/``o``): about 40% of the prompts start below 0.05, so GRPO groups of 4 are often all wrong. GRPO raises
the mean reward from ~0.25 to ~0.7 within 40 steps at ``TOY_LEARNING_RATE`` with a constant schedule.

Tiny models run much faster with one CPU thread (see :func:`configure_torch_threads`): on a busy 2-core machine a
GRPO step drops from ~2 s to ~0.1 s.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

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

# Qwen2's pre-tokenization regex: ``AutoTokenizer`` loads the tokenizer of a ``qwen2`` checkpoint as
# ``Qwen2Tokenizer``, which rebuilds this pipeline, so training with it keeps the reloaded tokenizer identical.
_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Recommended settings for the toy task (measured on a 2-core CPU, see the module docstring).
TOY_VOCAB_SIZE = 384
TOY_MAX_COMPLETION_LENGTH = 12
TOY_NUM_GENERATIONS = 4
TOY_BATCH_SIZE = 16
TOY_LEARNING_RATE = 5e-3
TOY_LR_SCHEDULER_TYPE = "constant"
TOY_TEMPERATURE = 1.0
TOY_MAX_STEPS = 40
TOY_TORCH_THREADS = 1

TOY_TARGETS = "eao"
TOY_COUNTS = (1, 2, 3, 4, 5)
PROMPT_TEMPLATES = (
    "Write the letter {target} {count} times",
    "Say {target} {count} times",
    "Please repeat {target} {count} times",
    "Type {count} copies of {target}",
)

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


def toy_grpo_kwargs(**overrides: Any) -> dict[str, Any]:
    """Recommended ``GRPOConfig`` keyword arguments for the toy task on CPU, updated with ``overrides``."""
    kwargs: dict[str, Any] = {
        "num_generations": TOY_NUM_GENERATIONS,
        "per_device_train_batch_size": TOY_BATCH_SIZE,
        "max_completion_length": TOY_MAX_COMPLETION_LENGTH,
        "learning_rate": TOY_LEARNING_RATE,
        "lr_scheduler_type": TOY_LR_SCHEDULER_TYPE,
        "temperature": TOY_TEMPERATURE,
        "max_steps": TOY_MAX_STEPS,
        "beta": 0.0,
        "use_cpu": True,
        "report_to": "none",
    }
    return {**kwargs, **overrides}


# ---------------------------------------------------------------------------------------------------- model


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
    """Small Qwen2 configuration matching ``tokenizer`` (4 heads, 2 key-value heads, tied embeddings)."""
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
    """Build and save a random tiny ``Qwen2ForCausalLM`` with its tokenizer; return ``output_dir``.

    Offline and deterministic: the tokenizer depends only on ``vocab_size``, the weights on ``seed`` too.
    The directory loads back with ``AutoModelForCausalLM`` / ``AutoTokenizer``.
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


# ---------------------------------------------------------------------------------------------------- task


def toy_prompt(target: str, count: int, template: str = PROMPT_TEMPLATES[0]) -> str:
    """The user message asking for ``count`` copies of ``target``."""
    return template.format(target=target, count=count)


def toy_task_prompts(targets: str = TOY_TARGETS, counts: Sequence[int] = TOY_COUNTS) -> list[str]:
    """Every distinct user message of the task: each template of :data:`PROMPT_TEMPLATES` for each target and count.

    With the defaults: 3 targets x 5 counts x 4 templates = 60 prompts such as ``"Write the letter e 1 times"``,
    ``"Say a 3 times"``, ``"Please repeat o 5 times"`` or ``"Type 2 copies of e"``.
    """
    return [toy_prompt(t, k, template) for template in PROMPT_TEMPLATES for t in targets for k in counts]


def _task_cycle(rng: random.Random, targets: str, counts: Sequence[int]) -> list[tuple[str, int, int]]:
    """One seeded shuffle of every (target, count, template index) combination."""
    combos = list(itertools.product(targets, counts, range(len(PROMPT_TEMPLATES))))
    rng.shuffle(combos)
    return combos


def make_toy_dataset(
    num_prompts: int,
    seed: int = 0,
    conversational: bool = True,
    *,
    targets: str = TOY_TARGETS,
    counts: Sequence[int] = TOY_COUNTS,
) -> Dataset:
    """Dataset of "write letter X k times" prompts (see :func:`toy_task_prompts`).

    Columns: ``prompt`` (a one-message user conversation, or the plain message when ``conversational=False``),
    ``answer`` (the target letter), ``min_count`` (k) and ``template`` (index into :data:`PROMPT_TEMPLATES`).
    Rows cycle through seeded shuffles of all (target, count, template) combinations, so every combination appears
    once before any repeats. Deterministic for a given ``seed``.
    """
    rng = random.Random(seed)
    rows: list[tuple[str, int, int]] = []
    while len(rows) < num_prompts:
        rows += _task_cycle(rng, targets, counts)
    rows = rows[:num_prompts]
    texts = [toy_prompt(t, k, PROMPT_TEMPLATES[i]) for t, k, i in rows]
    prompts: list[Any] = [[{"role": "user", "content": text}] for text in texts] if conversational else texts
    return Dataset.from_dict(
        {
            "prompt": prompts,
            "answer": [t for t, _, _ in rows],
            "min_count": [k for _, k, _ in rows],
            "template": [i for _, _, i in rows],
        }
    )


def completion_text(completion: str | list[dict[str, Any]]) -> str:
    """Text of a plain (string) or conversational (list of messages) completion."""
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content") or "") for message in completion)


def toy_reward(
    completions: list[Any], answer: list[str], min_count: list[int] | None = None, **kwargs: Any
) -> list[float]:
    """1.0 when a completion contains ``answer`` at least ``min_count`` times (once if not given), else 0.0.

    Follows TRL's reward-function signature; other keyword arguments (``prompts``, ``completion_ids``, dataset
    columns, ``trainer_state``, ``log_extra``, ``log_metric``...) are ignored.
    """
    needed = [1] * len(completions) if min_count is None else min_count
    return [
        float(completion_text(c).count(target) >= k) for c, target, k in zip(completions, answer, needed, strict=True)
    ]


# ---------------------------------------------------------------------------------------------------- measurement


def render_prompts(dataset: Dataset, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """Prompt texts as TRL renders them: chat template with generation prompt for conversations, else as is."""
    prompts = dataset["prompt"]
    if prompts and isinstance(prompts[0], str):
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


@torch.no_grad()
def sample_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt_texts: list[str],
    num_samples: int,
    max_new_tokens: int = TOY_MAX_COMPLETION_LENGTH,
    temperature: float = TOY_TEMPERATURE,
) -> list[list[str]]:
    """``num_samples`` decoded completions per prompt text, sampled like TRL (top_k=0, top_p=1)."""
    tokenizer.padding_side = "left"
    inputs = tokenizer(prompt_texts, return_tensors="pt", padding=True, add_special_tokens=False)
    output = model.generate(
        **inputs,
        do_sample=True,
        temperature=temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=max_new_tokens,
        num_return_sequences=num_samples,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return [texts[i * num_samples : (i + 1) * num_samples] for i in range(len(prompt_texts))]


def estimate_pass_rates(
    model_dir: str | Path,
    dataset: Dataset,
    num_samples: int = 32,
    max_new_tokens: int = TOY_MAX_COMPLETION_LENGTH,
    seed: int = 0,
) -> list[float]:
    """Per-prompt mean :func:`toy_reward` over ``num_samples`` completions sampled at temperature 1.

    ``dataset`` needs the ``prompt`` and ``answer`` columns (``min_count`` is optional).
    """
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        samples = sample_completions(model, tokenizer, render_prompts(dataset, tokenizer), num_samples, max_new_tokens)
    counts = dataset["min_count"] if "min_count" in dataset.column_names else [1] * len(samples)
    return [
        sum(toy_reward(completions, [target] * num_samples, [k] * num_samples)) / num_samples
        for completions, target, k in zip(samples, dataset["answer"], counts, strict=True)
    ]
