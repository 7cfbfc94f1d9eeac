"""Reinforce-Ada in TRL's asynchronous trainer (`trl.experimental.async_grpo`): generation decoupled from training.

`rollout` (`PromptRollout`) is pure (numpy only); the rest (`worker`, `config`, `trainer`, `weights`,
`cpu_attention`) needs torch and TRL and loads on first use. `docs/async.md` explains what changes against the
synchronous `ReinforceAdaTrainer`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import AsyncReinforceAdaConfig
    from .rollout import PromptRollout
    from .trainer import AsyncReinforceAdaTrainer
    from .weights import HTTPWeightTransfer
    from .worker import AdaptiveRolloutWorker

_LAZY = {
    "AdaptiveRolloutWorker": "worker",
    "AsyncReinforceAdaConfig": "config",
    "AsyncReinforceAdaTrainer": "trainer",
    "HTTPWeightTransfer": "weights",
    "PromptRollout": "rollout",
}

__all__ = [
    "AdaptiveRolloutWorker",
    "AsyncReinforceAdaConfig",
    "AsyncReinforceAdaTrainer",
    "HTTPWeightTransfer",
    "PromptRollout",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'trl_ada.async_grpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
