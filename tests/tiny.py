"""What the tiny-model trainer tests share: the CPU run settings of one short step, a prompt's text, and rewards
scripted by prompt."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from trl_ada import ReinforceAdaConfig

TINY_RUN: dict[str, Any] = dict(
    max_completion_length=4,
    max_steps=1,
    learning_rate=1e-2,
    logging_steps=1,
    report_to="none",
    use_cpu=True,
    save_strategy="no",
    seed=0,
)
"""Config fields of a short CPU run on the tiny model (no logging service, no checkpoints, seed 0)."""


def tiny_config(tmp_path, **fields: Any) -> ReinforceAdaConfig:
    """A `ReinforceAdaConfig` writing to `tmp_path/out` with [`TINY_RUN`]; `fields` add to it or override it."""
    return ReinforceAdaConfig(**{"output_dir": str(tmp_path / "out"), **TINY_RUN, **fields})


def loss_batches(trainer) -> list[dict[str, Any]]:
    """A list that receives every batch reaching `trainer`'s loss (the inputs dict of `_compute_loss`), in order."""
    batches, compute_loss = [], trainer._compute_loss

    def record(model, inputs):
        batches.append(inputs)
        return compute_loss(model, inputs)

    trainer._compute_loss = record
    return batches


def prompt_text(prompt: str | list[dict[str, str]]) -> str:
    """The text of a prompt: the string itself, or the content of a conversation's last message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


class CountingReward:
    """A TRL reward function scripted by prompt: the k-th completion of a prompt scored gets `rule(text, k)`,
    whatever it says; `scored[text]` counts the completions scored per prompt."""

    __name__ = "counting"

    def __init__(self):
        self.scored = Counter()

    def rule(self, prompt: str, k: int) -> float:
        """Reward of the k-th completion (from 0) of the prompt whose text is `prompt`."""
        raise NotImplementedError

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        rewards = []
        for prompt in prompts:
            key = prompt_text(prompt)
            rewards.append(self.rule(key, self.scored[key]))
            self.scored[key] += 1
        return rewards


TESTS = Path(__file__).parent


def run_two_processes(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`tests/scripts/<script>` under torchrun with 2 CPU processes (gloo), offline, with `tests/` importable."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    return subprocess.run(
        [*command, str(TESTS / "scripts" / script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
