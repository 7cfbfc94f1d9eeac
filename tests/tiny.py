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


PERIOD = {f"one in {k}": k for k in range(1, 9)}
"""The prompts of [`PeriodicReward`]: "one in k", k = 1..8."""


class PeriodicReward:
    """Reward 1 for the 1st, (1+k)-th, (1+2k)-th... row of prompt "one in k" within each call, else 0.

    It depends only on the prompt and on how many rows of it the call holds, never on the completion or on the order
    of prompts in the step. `rounds[step]` records, per call of that training step (one per round), how many rows of
    each prompt it scored; `rows[step]` sums them over the step.
    """

    __name__ = "periodic"

    def __init__(self):
        self.rounds: dict[int, list[dict[str, int]]] = {}

    def __call__(self, prompts, completions, trainer_state, **kwargs) -> list[float]:
        seen: dict[str, int] = {}
        rewards = []
        for prompt in prompts:
            key = prompt_text(prompt)
            rewards.append(float(seen.get(key, 0) % PERIOD[key] == 0))
            seen[key] = seen.get(key, 0) + 1
        self.rounds.setdefault(trainer_state.global_step + 1, []).append(seen)
        return rewards

    @property
    def rows(self) -> dict[int, dict[str, int]]:
        """Per training step, the rows of each prompt scored over all its calls."""
        return {step: dict(sum(map(Counter, calls), Counter())) for step, calls in self.rounds.items()}


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
