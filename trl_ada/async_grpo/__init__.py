"""Reinforce-Ada in TRL's asynchronous trainer (`trl.experimental.async_grpo`): generation decoupled from training.

`docs/async.md` explains what changes against the synchronous `ReinforceAdaTrainer`.
"""

from .config import AsyncReinforceAdaConfig
from .rollout import PromptRollout
from .trainer import AsyncReinforceAdaTrainer
from .weights import HTTPWeightTransfer
from .worker import AdaptiveRolloutWorker

__all__ = [
    "AdaptiveRolloutWorker",
    "AsyncReinforceAdaConfig",
    "AsyncReinforceAdaTrainer",
    "HTTPWeightTransfer",
    "PromptRollout",
]
