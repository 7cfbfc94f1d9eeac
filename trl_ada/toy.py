"""Tiny offline model and toy RL task for tests, demos and benchmarks.

Everything here runs fully offline on a CPU in seconds:

* :func:`build_tiny_model` trains a small byte-level BPE tokenizer on generated sentences and saves it together with
  a randomly initialised two-layer ``Qwen2ForCausalLM``.
* :func:`make_toy_dataset` / :func:`toy_reward` define the "say a character" task: each prompt asks the model to write
  one target character (a letter or a digit) and the reward is 1 when the completion contains it.

Why this task works for adaptive sampling: a freshly initialised model samples tokens almost uniformly, so the chance
that a completion contains a character is governed by how many vocabulary tokens contain it. Frequent letters of the
tokenizer corpus (``e``, ``a``, ``t``...) live in many merged tokens and start with pass rates around 0.3-0.6, while
rare letters and digits only exist as single byte tokens and start near zero, giving many all-wrong GRPO groups.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TOY_VOCAB_SIZE = 512
TOY_MAX_COMPLETION_LENGTH = 12
TOY_LEARNING_RATE = 3e-3
TOY_NUM_GENERATIONS = 4
TOY_TEMPERATURE = 1.0

LETTERS = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
TOY_TARGETS = LETTERS + DIGITS
PROMPT_TEMPLATES = (
    "Say the character {target}",
    "Please write {target}",
    "Write the symbol {target} once",
    "Repeat after me: {target}",
)

# Word lists for the tokenizer corpus. Letter frequencies in these words decide how many merged tokens contain
# each character, hence the initial pass rate of each target under a random model.
_CORPUS_WORDS = (
    "the a an and to of in is it on at as be we he she they this that there these those then than "
    "say said write wrote please repeat after me once again character symbol letter digit number word "
    "answer question model reward sample token text short long simple easy hard right wrong good best "
    "see seen tree three street sea tea eat rate late state test rest set net ten seen need feed "
    "one two four five six seven eight nine zero red green blue light night sight right height "
    "cat dog bird fish horse mouse house tent rain train stone tone note not hot hat ant"
).split()


def _corpus_sentences(num_sentences: int, seed: int) -> list[str]:
    """Generate deterministic pseudo-English sentences, plus every prompt of the toy task."""
    rng = random.Random(seed)
    sentences = [
        " ".join(rng.choice(_CORPUS_WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "."
        for _ in range(num_sentences)
    ]
    sentences += [template.format(target=t) for template in PROMPT_TEMPLATES for t in TOY_TARGETS]
    sentences += ["user", "assistant", "system"]
    return sentences


def build_tokenizer(vocab_size: int = TOY_VOCAB_SIZE, seed: int = 0) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer with ChatML special tokens and chat template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus_sentences(400, seed), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )


def _model_config(tokenizer: PreTrainedTokenizerFast, hidden_size: int, num_layers: int) -> Qwen2Config:
    """Small Qwen2 configuration matching ``tokenizer``."""
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
    """Build and save a random tiny ``Qwen2ForCausalLM`` with its tokenizer; return the directory.

    Deterministic for a given ``seed``; needs no network access.
    """
    output_dir = Path(output_dir)
    tokenizer = build_tokenizer(vocab_size=vocab_size, seed=seed)
    config = _model_config(tokenizer, hidden_size, num_layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
    )
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def toy_prompt(target: str, template: str = PROMPT_TEMPLATES[0]) -> str:
    """The user message asking for ``target``."""
    return template.format(target=target)


def make_toy_dataset(num_prompts: int, seed: int = 0, conversational: bool = True) -> Dataset:
    """Dataset of "say a character" prompts.

    Columns: ``prompt`` (a one-message user conversation, or a plain string when ``conversational=False``),
    ``answer`` (the target character) and ``template`` (index into :data:`PROMPT_TEMPLATES`).
    Targets cycle through a seeded shuffle of :data:`TOY_TARGETS`, so every target appears before any repeats.
    """
    rng = random.Random(seed)
    answers: list[str] = []
    while len(answers) < num_prompts:
        answers += rng.sample(TOY_TARGETS, len(TOY_TARGETS))
    answers = answers[:num_prompts]
    templates = [rng.randrange(len(PROMPT_TEMPLATES)) for _ in answers]
    texts = [toy_prompt(a, PROMPT_TEMPLATES[t]) for a, t in zip(answers, templates, strict=True)]
    prompts: list[Any] = [[{"role": "user", "content": t}] for t in texts] if conversational else texts
    return Dataset.from_dict({"prompt": prompts, "answer": answers, "template": templates})


def completion_text(completion: str | list[dict[str, Any]]) -> str:
    """Text of a plain or conversational completion."""
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content") or "") for message in completion)


def toy_reward(completions: list[Any], answer: list[str], **kwargs: Any) -> list[float]:
    """1.0 when the completion contains the target character ``answer``, else 0.0 (TRL reward signature)."""
    return [float(target in completion_text(c)) for c, target in zip(completions, answer, strict=True)]


def _prompt_texts(dataset: Dataset, tokenizer: PreTrainedTokenizerFast) -> list[str]:
    """Render the dataset prompts the way TRL does (chat template with generation prompt for conversations)."""
    prompts = dataset["prompt"]
    if prompts and isinstance(prompts[0], str):
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


@torch.no_grad()
def sample_completions(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    prompt_texts: list[str],
    num_samples: int,
    max_new_tokens: int,
    temperature: float = TOY_TEMPERATURE,
) -> list[list[str]]:
    """Sample ``num_samples`` decoded completions per prompt text with ``generate``."""
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
    """Per-prompt mean :func:`toy_reward` of ``num_samples`` completions sampled at temperature 1."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        samples = sample_completions(model, tokenizer, _prompt_texts(dataset, tokenizer), num_samples, max_new_tokens)
    return [
        sum(toy_reward(completions, [target] * len(completions))) / len(completions)
        for completions, target in zip(samples, dataset["answer"], strict=True)
    ]
