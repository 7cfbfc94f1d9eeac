r"""Rule-based rewards for math RL, and a registry that resolves reward functions by name.

- `trl_ada.rewards.answers`: extraction of the final `\boxed{}` answer, normalisation, `math_verify` equivalence and
  its comparison settings (`MathVerifySettings`).
- `trl_ada.rewards.scoring`: time-bounded batch scoring (`score_math`) and the TRL reward functions `math_reward`,
  `format_reward`, `make_math_reward`.
- `trl_ada.rewards.workers`: the per-pair timers and the worker processes that `score_math` verifies in.
- `trl_ada.rewards.registry`: `register_reward` and `get_reward_funcs` (names such as `"math"` or import paths).
"""

from .answers import (
    MAX_BOX_CHARS,
    MathVerifySettings,
    completion_text,
    extract_answer,
    extract_boxed,
    normalize_answer,
)
from .registry import REWARD_FUNCS, get_reward_funcs, register_reward
from .scoring import (
    DEFAULT_TIMEOUT_S,
    RewardFunc,
    clear_caches,
    format_reward,
    make_math_reward,
    math_reward,
    score_math,
    shutdown_workers,
)
from .standin import short_answer_reward  # stand-in until the prose rewards land

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_BOX_CHARS",
    "REWARD_FUNCS",
    "MathVerifySettings",
    "RewardFunc",
    "clear_caches",
    "completion_text",
    "extract_answer",
    "extract_boxed",
    "format_reward",
    "get_reward_funcs",
    "make_math_reward",
    "math_reward",
    "normalize_answer",
    "register_reward",
    "score_math",
    "short_answer_reward",
    "shutdown_workers",
]
