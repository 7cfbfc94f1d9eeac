"""trl_ada: Reinforce-Ada adaptive sampling (arXiv 2510.04996) for TRL's GRPOTrainer.

The pure core (`trl_ada.sampling`, `trl_ada.advantages`) imports neither torch nor TRL; the trainer, the config
and the rewards are loaded on first use, so `import trl_ada` stays cheap.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "ReinforceAdaConfig": "config",
    "ReinforceAdaTrainer": "trainer",
    "AdaptiveSampler": "sampling",
    "ExitRule": "sampling",
    "QuotaRule": "sampling",
    "SamplingStatistics": "sampling",
    "get_exit_rule": "sampling",
    "register_exit_rule": "sampling",
    "compute_advantages": "advantages",
    "math_reward": "rewards",
    "register_reward": "rewards",
    "get_reward_funcs": "rewards",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'trl_ada' has no attribute {name!r}")
