"""The toy RL task: "write letter X at least k times", its reward, its dataset and its recommended settings.

Each prompt asks for a target letter (`e`, `a` or `o`) at least `k` times (k = 1..5), e.g. `"Say a 3 times"`; the
reward is 1.0 when the completion contains the letter at least k times. A freshly initialised model (see
`trl_ada.toy.model`) samples tokens almost uniformly, so a completion's letter count depends on how many vocabulary
tokens contain that letter (`e` is the most frequent letter of the tokenizer corpus, `o` the least of the three) and
on k. With the defaults (`TOY_MAX_COMPLETION_LENGTH` = 12 new tokens, temperature 1) the initial pass rates range
from ~0.9 (`e`, k=1) through mid values (`a`/`o` with k=1, `e` with k=2..3) to ~0 (k >= 3 for `a`/`o`): about 40% of
the prompts start below 0.05, so GRPO groups of 4 are often all wrong. GRPO raises the mean reward from ~0.25 to
~0.7 within 40 steps at `TOY_LEARNING_RATE` with a constant schedule.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

from ..rewards import completion_text

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "PROMPT_TEMPLATES",
    "TOY_COUNTS",
    "TOY_LEARNING_RATE",
    "TOY_MAX_COMPLETION_LENGTH",
    "TOY_TARGETS",
    "estimate_pass_rates",
    "make_toy_dataset",
    "render_prompts",
    "toy_grpo_kwargs",
    "toy_prompt",
    "toy_reward",
    "toy_task_prompts",
]

# Recommended settings for the toy task (measured on a 2-core CPU, see the module docstring).
TOY_MAX_COMPLETION_LENGTH = 12
TOY_NUM_GENERATIONS = 4
TOY_BATCH_SIZE = 16
TOY_LEARNING_RATE = 5e-3
TOY_LR_SCHEDULER_TYPE = "constant"
TOY_TEMPERATURE = 1.0
TOY_MAX_STEPS = 40

TOY_TARGETS = "eao"
TOY_COUNTS = (1, 2, 3, 4, 5)
PROMPT_TEMPLATES = (
    "Write the letter {target} {count} times",
    "Say {target} {count} times",
    "Please repeat {target} {count} times",
    "Type {count} copies of {target}",
)


def toy_grpo_kwargs(**overrides: Any) -> dict[str, Any]:
    """Recommended `GRPOConfig` keyword arguments for the toy task on CPU, updated with `overrides`."""
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


def toy_prompt(target: str, count: int, template: str = PROMPT_TEMPLATES[0]) -> str:
    """The user message asking for `count` copies of `target`."""
    return template.format(target=target, count=count)


def toy_task_prompts(targets: str = TOY_TARGETS, counts: Sequence[int] = TOY_COUNTS) -> list[str]:
    """Every distinct user message of the task: each template of `PROMPT_TEMPLATES` for each target and count.

    With the defaults: 3 targets x 5 counts x 4 templates = 60 prompts such as `"Write the letter e 1 times"`,
    `"Say a 3 times"`, `"Please repeat o 5 times"` or `"Type 2 copies of e"`.
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
    """Dataset of "write letter X k times" prompts (see [`toy_task_prompts`]).

    Columns: `prompt` (a one-message user conversation, or the plain message when `conversational=False`),
    `answer` (the target letter), `min_count` (k) and `template` (index into `PROMPT_TEMPLATES`).
    Rows cycle through seeded shuffles of all (target, count, template) combinations, so every combination appears
    once before any repeats. Deterministic for a given `seed`.
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


def toy_reward(
    completions: list[Any], answer: list[str], min_count: list[int] | None = None, **kwargs: Any
) -> list[float]:
    """1.0 when a completion contains `answer` at least `min_count` times (once if not given), else 0.0.

    Follows TRL's reward-function signature; other keyword arguments (`prompts`, `completion_ids`, dataset
    columns, `trainer_state`, `log_extra`, `log_metric`...) are ignored.
    """
    needed = [1] * len(completions) if min_count is None else min_count
    return [
        float(completion_text(c).count(target) >= k) for c, target, k in zip(completions, answer, needed, strict=True)
    ]


def render_prompts(dataset: Dataset, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """Prompt texts as TRL renders them: chat template with generation prompt for conversations, else as is."""
    prompts = dataset["prompt"]
    if prompts and isinstance(prompts[0], str):
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


def estimate_pass_rates(
    model_dir: str | Path,
    dataset: Dataset,
    num_samples: int = 32,
    max_new_tokens: int = TOY_MAX_COMPLETION_LENGTH,
    seed: int = 0,
) -> list[float]:
    """Per-prompt mean [`toy_reward`] over `num_samples` completions sampled at temperature 1, the way GRPO sees them.

    `dataset` needs the `prompt` and `answer` columns (`min_count` is optional). Sampling and the pass-rate estimate
    are the library's [`~trl_ada.evaluation.estimate_pass_rates`] on the transformers backend.
    """
    from ..evaluation import SamplingSettings
    from ..evaluation import estimate_pass_rates as estimate

    counts = dataset["min_count"] if "min_count" in dataset.column_names else [1] * len(dataset)
    sampling = SamplingSettings(
        temperature=TOY_TEMPERATURE, max_new_tokens=max_new_tokens, seed=seed, backend="transformers"
    )
    return estimate(
        str(model_dir),
        dataset["prompt"],
        dataset["answer"],
        num_samples,
        sampling=sampling,
        reward_func=toy_reward,
        columns={"min_count": counts},
    )
