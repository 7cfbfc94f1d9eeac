r"""Time-bounded math scoring, and the TRL reward functions built on it.

`math_reward` gives 1.0 when the final `\boxed{...}` answer of a completion (see `extract_answer`) is mathematically
equivalent to the gold `answer` (checked with `math_verify`), else 0.0. `math_final_reward` (`extraction="final"`)
reads the boxed answer too, and a completion without a box by its final number in plain text, as math-verify's own
extraction finds it (see `final_value`): for chat models that answer in prose. Both never raise and every
(prediction, gold) pair gets a bounded time budget:

* Main thread, in-process: a one-shot `SIGALRM` wall-clock timer (`signal.setitimer`) of `timeout_s` interrupts
  `math_verify` (whose own `signal.alarm` timeouts we disable). Python runs the handler between bytecodes, so a
  single long C call (e.g. a huge integer power) can overshoot; in tests the worst cases stopped within 20 ms of
  the deadline.
* Worker processes (`num_workers > 0` and at least `min_parallel_batch` pairs to score, or any call from a
  non-main thread, where signals are unavailable): each worker applies the same timer in its own main
  thread, and the parent kills and replaces any worker whose pair is still running `timeout_s + HARD_GRACE_S`
  after it was sent. That is a hard bound, whatever the worker is doing.
* Inputs are capped: the boxes are found with a linear scan, at most `MAX_ANSWER_BOXES` of them are read and their
  content is limited to `MAX_BOX_CHARS` in all, so a 1 MB completion costs a few milliseconds before `math_verify`
  sees at most 1000 characters. A completion read as plain text is cut to its last `MAX_TEXT_CHARS`, and
  math-verify's extraction from it runs under the same timer.
* A call has a batch budget too, `batch_timeout_s` (default `DEFAULT_BATCH_TIMEOUT_S`, 300 s): no pair is started
  after it, and a pair running at that moment is cut off, so thousands of distinct slow answers (a collapsing policy
  writing power towers) cannot block a training step for hours. Completions left unverified score 0.0; `math_reward`
  counts them in the `math_reward/over_budget` metric and logs a warning.

Workers are plain subprocesses, so they also start from daemonic `multiprocessing` workers. Only where no
subprocess can be started (or without `signal.setitimer`, i.e. on Windows) does a call from a non-main thread
fall back to running without a timeout; a warning is logged once.

The timers and the worker processes are `trl_ada.rewards.workers`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..utils import is_int, is_number
from .answers import (
    DEFAULT_SETTINGS,
    MathVerifySettings,
    _parse_gold,
    _prediction,
    check_extraction,
    normalize_answer,
)
from .workers import (
    DEFAULT_TIMEOUT_S,
    Pair,
    _in_main_thread,
    _score_in_workers,
    _score_serial,
    shutdown_workers,
)

__all__ = [
    "DEFAULT_BATCH_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "RewardFunc",
    "clear_caches",
    "format_reward",
    "make_math_reward",
    "math_final_reward",
    "math_reward",
    "score_math",
    "shutdown_workers",
]

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float]]
DEFAULT_BATCH_TIMEOUT_S = 300.0
"""Wall-clock budget for verifying all the distinct pairs of one call; what is left unverified scores 0.0."""
OVER_BUDGET_METRIC = "math_reward/over_budget"
"""Metric `math_reward` logs through TRL: completions of the call left unverified when the batch budget ran out."""
MIN_PARALLEL_BATCH = 64
"""Below this many pairs to score, the main thread scores in-process even when workers are configured."""
WORKERS_ENV = "TRL_ADA_REWARD_WORKERS"
"""Environment variable giving the default `num_workers` of `math_reward` (0 when unset)."""
_SCORE_CACHE_SIZE = 1 << 16


# --------------------------------------------------------------------------- batch scoring


_SCORE_CACHE: dict[Pair, float] = {}


def clear_caches() -> None:
    """Forget cached scores and parsed gold answers (in this process)."""
    _SCORE_CACHE.clear()
    _parse_gold.cache_clear()


def _default_workers() -> int:
    """`num_workers` from the `TRL_ADA_REWARD_WORKERS` environment variable, 0 when unset or invalid."""
    try:
        return max(0, int(os.environ.get(WORKERS_ENV, "0")))
    except ValueError:
        return 0


def _score_unique(
    pairs: Sequence[Pair], num_workers: int, timeout_s: float, min_parallel_batch: int, deadline: float
) -> list[float | None]:
    """Scores of distinct pairs (None: over the batch budget): in-process in the main thread for small batches,
    otherwise in workers."""
    if not pairs:
        return []
    use_workers = not _in_main_thread() or (num_workers > 0 and len(pairs) >= min_parallel_batch)
    if use_workers:
        results = _score_in_workers(pairs, max(1, num_workers), timeout_s, deadline)
    else:
        results = _score_serial(pairs, timeout_s, deadline)
    if len(_SCORE_CACHE) > _SCORE_CACHE_SIZE:
        _SCORE_CACHE.clear()
    for pair, result in zip(pairs, results, strict=True):
        if result is not None and result[1]:  # a timeout may be load-dependent: do not make it sticky
            _SCORE_CACHE[pair] = result[0]
    return [None if result is None else result[0] for result in results]


def score_math(
    completions: Sequence[Any],
    answers: Sequence[object],
    *,
    num_workers: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    min_parallel_batch: int = MIN_PARALLEL_BATCH,
    settings: MathVerifySettings = DEFAULT_SETTINGS,
    batch_timeout_s: float | None = DEFAULT_BATCH_TIMEOUT_S,
    log_metric: Callable[[str, float], None] | None = None,
    extraction: str = "boxed",
) -> list[float]:
    """1.0/0.0 per completion: is its final answer equivalent to the gold answer?

    `extraction` says how the answer is read (`EXTRACTIONS`): `"boxed"`, the final boxed answer (see
    `extract_answer`); `"final"`, the same when the completion has a box, else the final number of its plain text
    (see `final_value`). `settings` says how `math_verify` compares them. Identical (prediction, gold, settings) are
    verified once and
    remembered across calls. `num_workers` (default:
    `$TRL_ADA_REWARD_WORKERS`, else 0) worker processes are used when at least `min_parallel_batch` distinct pairs
    need verifying, and always off the main thread. Each pair gets `timeout_s`, the whole call `batch_timeout_s`
    (None: no batch budget); completions left unverified when it runs out score 0.0, are counted in a warning, and
    in the `math_reward/over_budget` metric when `log_metric` (TRL's reward keyword) is given. Never raises for any
    content of `completions`/`answers`.
    """
    start = time.monotonic()
    extraction = check_extraction(extraction)
    workers = _default_workers() if num_workers is None else max(0, int(num_workers))
    timeout_s = max(float(timeout_s), 1e-3)  # a zero timer would mean no timer
    deadline = math.inf if batch_timeout_s is None else start + max(float(batch_timeout_s), 1e-3)
    keys = [_pair_key(c, a, settings, extraction) for c, a in zip(completions, answers, strict=True)]
    todo = list(dict.fromkeys(k for k in keys if k is not None and k not in _SCORE_CACHE))
    fresh = dict(zip(todo, _score_unique(todo, workers, timeout_s, min_parallel_batch, deadline), strict=True))
    over_budget = sum(1 for k in keys if k is not None and k in fresh and fresh[k] is None)
    if over_budget:
        logger.warning(
            "math_reward: the batch budget of %g s ran out; %d of %d completions were not verified and score 0. "
            "Use reward worker processes (TRL_ADA_REWARD_WORKERS) or raise batch_timeout_s (make_math_reward).",
            batch_timeout_s,
            over_budget,
            len(keys),
        )
    if log_metric is not None:
        log_metric(OVER_BUDGET_METRIC, float(over_budget))
    return [0.0 if k is None else (fresh.get(k) if k in fresh else _SCORE_CACHE.get(k)) or 0.0 for k in keys]


def _pair_key(completion: Any, answer: object, settings: MathVerifySettings, extraction: str) -> Pair | None:
    """(prediction, gold, settings) to verify, or None when the completion has no answer to score."""
    try:
        prediction = _prediction(completion, extraction)
        gold = normalize_answer(answer) if prediction is not None else ""
    except Exception:  # exotic objects whose str() fails
        return None
    return (prediction, gold, settings) if prediction and gold else None


# --------------------------------------------------------------------------- TRL reward functions


def math_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    r"""TRL reward: 1.0 when the final `\boxed{}` answer of each completion equals its gold `answer`, else 0.0.

    The final answer is the last box with the boxes that only separators join to it (see `extract_answer`). Extra
    TRL keyword arguments (`prompts`, `completion_ids`, `trainer_state`, other dataset columns, ...) are ignored.
    Worker processes are used per `$TRL_ADA_REWARD_WORKERS`; see `make_math_reward` to set them, or the comparison
    settings, in code. Each call has the batch budget `DEFAULT_BATCH_TIMEOUT_S`; completions over it are logged as
    `math_reward/over_budget`.
    """
    return score_math(completions, answer, log_metric=kwargs.get("log_metric"))


def math_final_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
    r"""TRL reward: `math_reward` that also reads a plain-text answer (`extraction="final"`, registered as
    `"math_final"`).

    A completion with a `\boxed{}` answer is scored exactly as `math_reward` scores it; one without, by the final
    number of its text as math-verify's extraction finds it ("4 + 9 = 13." gives 13; see `final_value`).
    """
    return score_math(completions, answer, log_metric=kwargs.get("log_metric"), extraction="final")


def make_math_reward(
    num_workers: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    min_parallel_batch: int = MIN_PARALLEL_BATCH,
    batch_timeout_s: float | None = DEFAULT_BATCH_TIMEOUT_S,
    *,
    float_rounding: int = DEFAULT_SETTINGS.float_rounding,
    numeric_precision: int = DEFAULT_SETTINGS.numeric_precision,
    strict: bool = DEFAULT_SETTINGS.strict,
    allow_set_relation_comp: bool = DEFAULT_SETTINGS.allow_set_relation_comp,
    extraction: str = "boxed",
) -> RewardFunc:
    """A `math_reward` with explicit worker count, per-pair timeout, per-call batch budget (None: unbounded),
    comparison settings and answer extraction.

    The comparison settings are those of [`MathVerifySettings`] (math_verify's own defaults). `extraction="boxed"`
    (default) scores the final boxed answer only, as `math_reward`; `"final"` also reads a completion without a box
    by the final number of its plain text, as `math_final_reward` (see `score_math`). Raises ValueError for a bad
    value, naming the option.
    """
    for name, value, low in (("num_workers", num_workers, 0), ("min_parallel_batch", min_parallel_batch, 1)):
        if not is_int(value) or value < low:
            raise ValueError(f"{name}={value!r} must be an integer >= {low}.")
    if not is_number(timeout_s) or not timeout_s > 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be a positive number of seconds, e.g. {DEFAULT_TIMEOUT_S}.")
    if batch_timeout_s is not None and (not is_number(batch_timeout_s) or not batch_timeout_s > 0):
        raise ValueError(
            f"batch_timeout_s={batch_timeout_s!r} must be a positive number of seconds (e.g. "
            f"{DEFAULT_BATCH_TIMEOUT_S}) or None for no batch budget."
        )
    settings = MathVerifySettings(float_rounding, numeric_precision, strict, allow_set_relation_comp)
    extraction = check_extraction(extraction)

    def math_reward(completions: Sequence[Any], answer: Sequence[object], **kwargs: Any) -> list[float]:
        """TRL reward: 1.0 when the final answer of each completion (read per `extraction`) equals its `answer`."""
        return score_math(
            completions,
            answer,
            num_workers=num_workers,
            timeout_s=timeout_s,
            min_parallel_batch=min_parallel_batch,
            settings=settings,
            batch_timeout_s=batch_timeout_s,
            log_metric=kwargs.get("log_metric"),
            extraction=extraction,
        )

    if extraction == "final":  # TRL logs a reward under its function's name
        math_reward.__name__ = math_reward.__qualname__ = math_final_reward.__name__
    return math_reward


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    r"""TRL reward: 1.0 when the completion holds a non-empty `\boxed{}` answer (as `math_reward` reads it)."""
    return [0.0 if _safe_prediction(c) is None else 1.0 for c in completions]


def _safe_prediction(completion: Any) -> str | None:
    try:
        return _prediction(completion)
    except Exception:
        return None
