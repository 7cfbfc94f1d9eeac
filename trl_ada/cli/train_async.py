"""`trl-ada train-async`: train from a YAML recipe with the asynchronous `AsyncReinforceAdaTrainer`.

```bash
VLLM_SERVER_DEV_MODE=1 vllm serve Qwen/Qwen2.5-Math-1.5B --weight-transfer-config '{"backend":"nccl"}'
accelerate launch --config_file recipes/accelerate_configs/fsdp2.yaml -m trl_ada.cli train-async \\
    --config recipes/Qwen2.5-Math-1.5B/reinforce_ada_async_balance.yaml
```

The same command as `trl-ada train` (`trl_ada.cli.train`: parser, one-line errors, run-directory lock and checks,
saving and pushing) over (`ReinforceAdaScriptArguments`, `AsyncReinforceAdaConfig`, `ModelConfig`), building an
`AsyncReinforceAdaTrainer`: generation runs on a separate vLLM server while the trainer trains. TRL's asynchronous
trainer takes no evaluation dataset and no quantization, and attends with its own tree attention; a generation server
that does not answer before the first step is a one-line error.
"""

from __future__ import annotations

from collections.abc import Sequence

from .train import TrainCommand
from .train import main as train_main

__all__ = ["TRAIN_ASYNC", "main"]

TRAIN_ASYNC = TrainCommand(
    name="train-async",
    config="trl_ada.async_grpo:AsyncReinforceAdaConfig",
    trl_config="trl.experimental.async_grpo:AsyncGRPOConfig",
    trainer="trl_ada.async_grpo:AsyncReinforceAdaTrainer",
    description="""\
Train a model with Reinforce-Ada adaptive sampling (arXiv 2510.04996) on TRL's asynchronous AsyncGRPOTrainer:
generation runs on a separate vLLM server (vllm_server_base_url) while the trainer trains, each prompt sampling on
its own. Every option below can be set in the YAML recipe (as `key: value`) or as a flag; flags override the recipe.
Booleans take a value (--bf16 false); lists take several (--reward_funcs math format).

The asynchronous options come first, then the adaptive-sampling options, the data and rewards, the model, and TRL's
AsyncGRPOConfig and transformers' options in the groups of their documentation.""",
    recipe="recipes/Qwen2.5-Math-1.5B/reinforce_ada_async_balance.yaml",
    evaluation=False,
    quantization=False,
    attn_implementation=False,
    startup_errors=(RuntimeError, OSError),
)
"""`trl-ada train-async`: `AsyncReinforceAdaTrainer` (TRL's `AsyncGRPOTrainer`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """`trl-ada train-async`: as `trl-ada train` (`trl_ada.cli.train.main`), plus one-line errors for a vLLM server
    that does not answer (or refuses the weight transfer) before the first step."""
    return train_main(argv, TRAIN_ASYNC)
