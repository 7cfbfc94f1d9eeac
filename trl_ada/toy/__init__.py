"""The tiny offline model, the toy "write letter X k times" task, and the training experiments built on them.

- `trl_ada.toy.model`: [`build_tiny_model`], a random two-layer Qwen2 with a trained byte-level BPE tokenizer.
- `trl_ada.toy.task`: [`make_toy_dataset`], [`toy_reward`], the recommended settings ([`toy_grpo_kwargs`]) and
  [`estimate_pass_rates`].
- `trl_ada.toy.keyed`: the keyed task family (a secret code per prompt, a transfer knob, a pass-rate filter).
- `trl_ada.toy.experiment`: the runner that `trl-ada demo` and the benchmarks share (it re-exports the results).
- `trl_ada.toy.results`: the summaries, tables and figures of its per-step records.

Everything runs offline on a CPU in seconds; the tests use it too.
"""

from .model import (
    BOS_TOKEN,
    CHAT_TEMPLATE,
    EOS_TOKEN,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    TOY_VOCAB_SIZE,
    build_tiny_model,
    build_tokenizer,
    configure_torch_threads,
)
from .task import (
    PROMPT_TEMPLATES,
    TOY_COUNTS,
    TOY_LEARNING_RATE,
    TOY_MAX_COMPLETION_LENGTH,
    TOY_TARGETS,
    estimate_pass_rates,
    make_toy_dataset,
    render_prompts,
    toy_grpo_kwargs,
    toy_prompt,
    toy_reward,
    toy_task_prompts,
)

__all__ = [
    "BOS_TOKEN",
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "PROMPT_TEMPLATES",
    "TOY_COUNTS",
    "TOY_LEARNING_RATE",
    "TOY_MAX_COMPLETION_LENGTH",
    "TOY_TARGETS",
    "TOY_VOCAB_SIZE",
    "build_tiny_model",
    "build_tokenizer",
    "configure_torch_threads",
    "estimate_pass_rates",
    "make_toy_dataset",
    "render_prompts",
    "toy_grpo_kwargs",
    "toy_prompt",
    "toy_reward",
    "toy_task_prompts",
]
