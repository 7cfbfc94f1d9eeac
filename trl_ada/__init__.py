"""trl_ada: Reinforce-Ada adaptive sampling (arXiv 2510.04996) for TRL's GRPOTrainer.

The pure core (`PURE_CORE`: the plan, exit rules, groups, Beta maths, samplers, candidates, memory, advantages,
objectives, the schedules' sections and decisions (streaming scheduler, Est's allocation), the asynchronous worker's
per-prompt core and record of trained groups, simulation) imports neither torch nor TRL; the trainer, the config and
the rewards are loaded on first use, so `import trl_ada` stays cheap. The `if TYPE_CHECKING:` imports below give type
checkers and IDEs the real types of the lazily loaded names.

Layout (`docs/architecture.md`): `plan` holds the shared sampling parameters, the section machinery and the schedules'
registries; each module of `schedules/` holds one schedule's section (registered with `plan`), decisions and runner;
`_trl` is the only module that touches TRL's private surface; `config` and `trainer` are the glue. Around them: `data`,
`rewards/`, `evaluation/`, `checks`, `checkpoint_state`, `run_dir`, `server_requests`; `toy/` is the tiny offline
model, the toy task and the experiments on them; `cli/` is the `trl-ada` command line, which nothing else imports.
"""

from __future__ import annotations

from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING, Any

from . import plan as _plan

if TYPE_CHECKING:
    from .advantages import compute_advantages
    from .candidates import RefillSampler
    from .config import ReinforceAdaConfig
    from .memory import PassRateMemory
    from .plan import PRESETS, SamplingPlan
    from .rewards import get_reward_funcs, math_reward, register_reward
    from .sampling import AdaptiveSampler, ExitRule, QuotaRule, SamplingStatistics, get_exit_rule, register_exit_rule
    from .trainer import ReinforceAdaTrainer

__version__ = "0.1.0"

PURE_CORE = (
    "trl_ada.plan",
    "trl_ada.records",
    "trl_ada.fields_table",
    "trl_ada.seq",
    "trl_ada.exit_rules",
    "trl_ada.groups",
    "trl_ada.beta",
    "trl_ada.sampling",
    "trl_ada.candidates",
    "trl_ada.memory",
    "trl_ada.advantages",
    "trl_ada.objectives",
    "trl_ada.schedules.base",
    "trl_ada.schedules.rounds",
    "trl_ada.schedules.streaming",
    "trl_ada.schedules.est",
    "trl_ada.schedules.pilot_commit",
    "trl_ada.schedules.grpo",
    "trl_ada.async_grpo.rollout",
    "trl_ada.async_grpo.trained",
    "trl_ada.simulation",
    "trl_ada.utils",
)
"""Modules that load without torch and TRL (numpy at most; the plan and `utils` not even numpy). The schedules are
among them: their sections are part of the plan, and what runs a step imports `_trl` when it runs."""

for _host in (_plan.SYNCHRONOUS, _plan.ASYNCHRONOUS):  # the built-in schedules register on first use of a registry
    _host.load = partial(import_module, f"{__name__}.schedules")

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
    "RefillSampler": "candidates",
    "SamplingPlan": "plan",
    "PRESETS": "plan",
    "compute_advantages": "advantages",
    "math_reward": "rewards",
    "register_reward": "rewards",
    "get_reward_funcs": "rewards",
}

__all__ = [
    "PRESETS",
    "PURE_CORE",
    "AdaptiveSampler",
    "ExitRule",
    "PassRateMemory",
    "QuotaRule",
    "ReinforceAdaConfig",
    "RefillSampler",
    "ReinforceAdaTrainer",
    "SamplingPlan",
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
