r"""Rule-based rewards for math RL, and a registry that resolves reward functions by name.

- `trl_ada.rewards.answers`: extraction of the final `\boxed{}` answer (or, with `extraction="final"`, of the final
  number of a plain-text answer), normalisation, `math_verify` equivalence and its comparison settings
  (`MathVerifySettings`).
- `trl_ada.rewards.scoring`: time-bounded batch scoring (`score_math`) and the TRL reward functions `math_reward`,
  `math_final_reward`, `format_reward`, `make_math_reward`.
- `trl_ada.rewards.short_answer`: `short_answer_reward` for fact prompts (the first known name answered is the
  gold, alone: lists and hedges score 0).
- `trl_ada.rewards.workers`: the per-pair timers and the worker processes that `score_math` verifies in.
- `trl_ada.rewards.registry`: `register_reward` and `get_reward_funcs` (names such as `"math"`, `"math_final"`,
  `"short_answer"`, or import paths).
"""

from .answers import (
    EXTRACTIONS,
    MAX_BOX_CHARS,
    MathVerifySettings,
    completion_text,
    extract_answer,
    extract_boxed,
    normalize_answer,
    reference_answer,
)
from .registry import REWARD_FUNCS, get_reward_funcs, register_reward
from .scoring import (
    DEFAULT_TIMEOUT_S,
    RewardFunc,
    clear_caches,
    format_reward,
    make_math_reward,
    math_final_reward,
    math_reward,
    score_math,
    shutdown_workers,
)
from .short_answer import make_short_answer_reward, short_answer_reward

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EXTRACTIONS",
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
    "make_short_answer_reward",
    "math_final_reward",
    "math_reward",
    "normalize_answer",
    "reference_answer",
    "register_reward",
    "score_math",
    "short_answer_reward",
    "shutdown_workers",
]
