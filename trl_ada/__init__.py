"""trl_ada: Reinforce-Ada adaptive sampling (arXiv 2510.04996) for TRL's GRPOTrainer.

The pure core (`trl_ada.sampling`, `trl_ada.refill`, `trl_ada.memory`, `trl_ada.advantages`) imports neither torch
nor TRL; the trainer, the config and the rewards are loaded on first use, so `import trl_ada` stays cheap. The
`if TYPE_CHECKING:` imports below give type checkers and IDEs the real types of the lazily loaded names.

Layout: the library is `config`, `trainer`, `sampling`, `refill`, `memory`, `advantages`, `data`, `rewards/`,
`evaluation` and `simulation`; `toy/` is the tiny offline model, the toy task and the experiments on them; `cli/` is
the `trl-ada` command line, which nothing else imports.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .advantages import compute_advantages
    from .config import ReinforceAdaConfig
    from .memory import PassRateMemory
    from .refill import RefillSampler
    from .rewards import get_reward_funcs, math_reward, register_reward
    from .sampling import AdaptiveSampler, ExitRule, QuotaRule, SamplingStatistics, get_exit_rule, register_exit_rule
    from .trainer import ReinforceAdaTrainer

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
    "PassRateMemory": "memory",
    "RefillSampler": "refill",
    "compute_advantages": "advantages",
    "math_reward": "rewards",
    "register_reward": "rewards",
    "get_reward_funcs": "rewards",
}

__all__ = [
    "AdaptiveSampler",
    "ExitRule",
    "PassRateMemory",
    "QuotaRule",
    "ReinforceAdaConfig",
    "RefillSampler",
    "ReinforceAdaTrainer",
    "SamplingStatistics",
    "__version__",
    "compute_advantages",
    "get_exit_rule",
    "get_reward_funcs",
    "math_reward",
    "register_exit_rule",
    "register_reward",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'trl_ada' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
