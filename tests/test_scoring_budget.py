"""`math_reward`'s batch budget: a batch of slow answers finishes within it, and what is left over is counted."""

from __future__ import annotations

import logging
import time

import pytest

from trl_ada.rewards import clear_caches, make_math_reward, score_math, shutdown_workers
from trl_ada.rewards.scoring import OVER_BUDGET_METRIC

PAIR_TIMEOUT_S = 1.0
BATCH_TIMEOUT_S = 2.5


def _power_towers(count: int) -> list[str]:
    """Distinct answers that each take a full pair budget in `math_verify` (a collapsing policy's output)."""
    return [rf"\boxed{{{k}^{{{k}^{{{k}^{{{k}}}}}}}}}" for k in range(5, 5 + count)]


def test_a_batch_of_slow_pairs_stops_at_the_budget_and_is_counted(caplog):
    clear_caches()
    reward = make_math_reward(timeout_s=PAIR_TIMEOUT_S, batch_timeout_s=BATCH_TIMEOUT_S)
    completions = [r"\boxed{4}", *_power_towers(8)]  # 8 s of verification without the batch budget
    logged: list[tuple[str, float]] = []
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="trl_ada.rewards.scoring"):
        scores = reward(completions, answer=["4"] * len(completions), log_metric=lambda *m: logged.append(m))
    elapsed = time.monotonic() - start
    assert elapsed < BATCH_TIMEOUT_S + 1.0  # (+ the overshoot of one alarm on a busy machine)
    assert scores[1:] == [0.0] * 8
    # at most two towers fit in the budget (1 s each), so at least 6 are cut or never started
    (name, over_budget), *_ = logged
    assert name == OVER_BUDGET_METRIC and 6 <= over_budget <= 9
    assert f"{int(over_budget)} of 9 completions were not verified" in caplog.text


def test_pairs_over_the_budget_are_not_cached_as_wrong():
    clear_caches()
    completions = [*_power_towers(1), r"\boxed{3}"]
    start = time.monotonic()
    assert score_math(completions, ["3", "3"], timeout_s=PAIR_TIMEOUT_S, batch_timeout_s=0.3) == [0.0, 0.0]
    assert time.monotonic() - start < 0.8
    assert score_math([r"\boxed{3}"], ["3"]) == [1.0]  # scored now, not remembered as 0


def test_no_metric_when_every_pair_fits():
    clear_caches()
    logged: list[tuple[str, float]] = []
    assert make_math_reward()([r"\boxed{2}"], answer=["2"], log_metric=lambda *m: logged.append(m)) == [1.0]
    assert logged == [(OVER_BUDGET_METRIC, 0.0)]


@pytest.mark.slow
def test_worker_processes_respect_the_batch_budget():
    clear_caches()
    try:
        assert score_math([r"\boxed{1}"] * 2, ["1", "1"], num_workers=2, min_parallel_batch=1) == [1.0, 1.0]  # warm up
        towers = _power_towers(12)  # 6 s on two workers without the batch budget
        logged: list[tuple[str, float]] = []
        start = time.monotonic()
        scores = score_math(
            towers,
            ["5"] * len(towers),
            num_workers=2,
            min_parallel_batch=1,
            timeout_s=PAIR_TIMEOUT_S,
            batch_timeout_s=BATCH_TIMEOUT_S,
            log_metric=lambda *m: logged.append(m),
        )
        assert time.monotonic() - start < BATCH_TIMEOUT_S + 1.5  # + the hard kill grace of a worker
        assert scores == [0.0] * len(towers)
        assert logged[0][0] == OVER_BUDGET_METRIC and 6 <= logged[0][1] <= len(towers)
    finally:
        shutdown_workers()
