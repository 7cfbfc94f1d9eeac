"""What the tiny-model trainer tests share: the CPU run settings of one short step, and a prompt's text."""

from __future__ import annotations

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


def prompt_text(prompt: str | list[dict[str, str]]) -> str:
    """The text of a prompt: the string itself, or the content of a conversation's last message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]
