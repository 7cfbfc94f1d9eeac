"""Per-pair time bounds for `math_verify`, in this process or in worker processes.

[`~trl_ada.rewards.score_math`] (`trl_ada.rewards.scoring`, whose docstring states the guarantees) verifies its
distinct pairs here: serially under a `SIGALRM` timer in the main thread ([`_score_serial`]), or in a pool of worker
processes ([`_score_in_workers`]) off the main thread or for large batches. A worker is a fresh interpreter that
imports this module and answers one pair at a time under the same timer; the parent kills and replaces a worker
whose pair overruns `timeout_s + HARD_GRACE_S`.
"""

from __future__ import annotations

import atexit
import collections
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any

from .answers import DEFAULT_SETTINGS, MathVerifySettings, PlainText, _verify_pair

__all__ = ["DEFAULT_TIMEOUT_S", "HARD_GRACE_S", "Pair", "Result", "shutdown_workers"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3.0
"""Wall-clock budget for parsing and verifying one (prediction, gold) pair."""
Prediction = str | PlainText
"""A boxed answer's LaTeX, or the plain text of a completion without a box (`extraction="final"`)."""
Pair = tuple[Prediction, str, MathVerifySettings]
"""(prediction, gold, comparison settings): one verification."""
_ALARM_REPEAT_S = 0.05
"""After the budget, the scoring alarm re-fires this often until cancelled, in case Python swallowed one."""
HARD_GRACE_S = 1.0
"""Extra time a worker process gets past `timeout_s` before it is killed."""
WORKER_START_TIMEOUT_S = 120.0
"""How long a spawned worker may take to import this module and report ready."""


class _PairTimeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so `except Exception` inside sympy cannot swallow it."""


def _raise_timeout(signum: int, frame: Any) -> None:
    raise _PairTimeout


@contextmanager
def _quiet_swallowed_timeouts():
    """Keep a `_PairTimeout` that lands in a callback Python cannot raise from (a weakref or GC callback, which
    prints "Exception ignored ...") off stderr; the repeating timer raises again in the scoring frame."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, _PairTimeout):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _shown(prediction: Prediction, chars: int = 100) -> str:
    """The first `chars` characters of a prediction, for a log line."""
    return (prediction.text if isinstance(prediction, PlainText) else prediction)[:chars]


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


def _score_pair_with_alarm(
    prediction: Prediction, gold: str, timeout_s: float, settings: MathVerifySettings = DEFAULT_SETTINGS
) -> tuple[float, bool]:
    """(score, finished) for one pair under a SIGALRM timer. Main thread only.

    After `timeout_s` the timer fires every `_ALARM_REPEAT_S` until cancelled: an exception raised inside a weakref
    or GC callback is swallowed by Python, so a single alarm could be lost and the pair run unbounded. Wherever it
    lands (inside math_verify or just before the timer is cancelled) the outer `except` catches it; the previous
    handler and any pending outer timer are restored.
    """
    old_handler = signal.signal(signal.SIGALRM, _raise_timeout)
    if old_handler is None:  # installed outside Python; cannot be put back as it was
        old_handler = signal.SIG_DFL
    start = time.monotonic()
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        try:
            with _quiet_swallowed_timeouts():
                signal.setitimer(signal.ITIMER_REAL, timeout_s, _ALARM_REPEAT_S)
                return _verify_pair(prediction, gold, settings), True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _PairTimeout:
        return 0.0, False
    except Exception:  # math_verify is called with raise_on_error=False; this is belt and braces
        logger.debug("math_verify failed on %r vs %r", _shown(prediction), gold[:100], exc_info=True)
        return 0.0, True
    finally:
        signal.signal(signal.SIGALRM, old_handler)
        if outer_delay:
            remaining = max(outer_delay - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, remaining, outer_interval)


def _score_pair_unbounded(prediction: Prediction, gold: str, settings: MathVerifySettings) -> tuple[float, bool]:
    """(score, finished) without any timeout: the last resort when neither signals nor workers are available."""
    try:
        return _verify_pair(prediction, gold, settings), True
    except Exception:
        return 0.0, True


Result = tuple[float, bool] | None
"""(score, finished) of a pair, or None when the batch budget ran out before the pair could be verified."""


def _score_serial(pairs: Sequence[Pair], timeout_s: float, deadline: float) -> list[Result]:
    """Score pairs one after the other in this thread, starting none after the monotonic `deadline`."""
    bounded = _in_main_thread()
    if not bounded:
        _warn_unbounded()
    results: list[Result] = []
    for prediction, gold, settings in pairs:
        budget = min(timeout_s, deadline - time.monotonic())
        if budget <= 0:
            results.append(None)
            continue
        if not bounded:
            results.append(_score_pair_unbounded(prediction, gold, settings))
            continue
        score, finished = _score_pair_with_alarm(prediction, gold, budget, settings)
        results.append((score, finished) if finished or budget == timeout_s else None)
    return results


@functools.cache
def _warn_unbounded() -> None:
    logger.warning("No reward worker process available off the main thread: math_verify runs without a timeout.")


# --------------------------------------------------------------------------- worker processes


def _worker_main(fd: int) -> None:
    """Worker process loop on socket `fd`: answer each `(prediction, gold, settings, timeout_s)` with
    `(score, finished)`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    conn = Connection(fd)
    _score_pair_with_alarm("1", "1", DEFAULT_TIMEOUT_S)  # warm up sympy / latex2sympy before reporting ready
    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        prediction, gold, settings, timeout_s = job
        conn.send(_score_pair_with_alarm(prediction, gold, timeout_s, settings))


class _Worker:
    """One scoring process (a fresh interpreter that imports only this module) and the parent's end of its socket.

    Started with `subprocess` rather than `multiprocessing`: no fork of a process that already runs threads (CUDA,
    NCCL, tokenizers), and no re-import of the caller's `__main__` as the "spawn" start method would do.
    """

    def __init__(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        code = (
            f"import sys; sys.path[:0] = {sys.path!r}; "
            f"from {__name__} import _worker_main; _worker_main({child_sock.fileno()})"
        )
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=[child_sock.fileno()], stdin=subprocess.DEVNULL
            )
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.ready = False
        self.start_deadline = time.monotonic() + WORKER_START_TIMEOUT_S

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=5)
        self.conn.close()


class _WorkerPool:
    """Worker processes scoring one pair at a time; a worker that overruns its deadline is killed and replaced."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self._workers = [_Worker() for _ in range(size)]

    def close(self) -> None:
        for worker in self._workers:
            worker.kill()
        self._workers = []

    def score(self, pairs: Sequence[Pair], timeout_s: float, deadline: float) -> list[Result]:
        """(score, finished) per pair; a pair that overruns `timeout_s + HARD_GRACE_S` gets (0.0, False).

        No pair is sent after the monotonic `deadline`, and none runs past it (plus the grace); those get None.
        """
        results: list[Result] = [None] * len(pairs)
        todo = collections.deque(range(len(pairs)))
        busy: dict[Connection, tuple[_Worker, int, float]] = {}  # conn -> (worker, pair index, deadline)
        starting = {w.conn: w for w in self._workers if not w.ready}
        idle = [w for w in self._workers if w.ready]
        while todo or busy:
            if time.monotonic() >= deadline:
                todo.clear()  # the batch budget is spent: what was not sent stays None
            self._dispatch(idle, todo, busy, pairs, timeout_s, deadline)
            if not todo and not busy:
                break
            if not busy and not starting:
                raise RuntimeError("no reward worker process could be started")
            deadlines = [d for _, _, d in busy.values()] + [w.start_deadline for w in starting.values()]
            deadlines += [deadline] if todo else []
            ready = wait([*busy, *starting], timeout=max(0.0, min(deadlines) - time.monotonic()))
            for conn in ready:
                if conn in starting:
                    idle.extend(self._on_started(starting.pop(conn)))
                else:
                    worker, index, _ = busy.pop(conn)
                    result, alive = self._receive(worker)
                    cut_by_budget = not result[1] and time.monotonic() >= deadline
                    results[index] = None if cut_by_budget else result
                    if alive:
                        idle.append(worker)
                    else:
                        self._replace(worker, starting)
            now = time.monotonic()
            for conn, (worker, index, pair_deadline) in list(busy.items()):
                if now >= pair_deadline:
                    del busy[conn]
                    logger.warning(
                        "Reward worker overran %.1fs on %r: restarting it", timeout_s, _shown(pairs[index][0], 50)
                    )
                    self._replace(worker, starting)
                    results[index] = None if now >= deadline else (0.0, False)
            for conn, worker in list(starting.items()):
                if now >= worker.start_deadline:
                    del starting[conn]
                    self._drop(worker)
        return results

    def _dispatch(
        self,
        idle: list[_Worker],
        todo: collections.deque,
        busy: dict,
        pairs: Sequence,
        timeout_s: float,
        deadline: float,
    ):
        """Hand queued pairs to idle workers, each with the pair budget or what is left of the batch budget."""
        while idle and todo:
            budget = min(timeout_s, deadline - time.monotonic())
            if budget <= 0:
                return
            worker, index = idle.pop(), todo.popleft()
            try:
                worker.conn.send((*pairs[index], budget))
            except (OSError, ValueError):
                todo.appendleft(index)
                self._drop(worker)
                continue
            busy[worker.conn] = (worker, index, time.monotonic() + budget + HARD_GRACE_S)

    def _on_started(self, worker: _Worker) -> list[_Worker]:
        """Read a new worker's ready message; returns it as idle, or drops it if it died."""
        try:
            worker.ready = worker.conn.recv() == "ready"
        except (EOFError, OSError):
            worker.ready = False
        if worker.ready:
            return [worker]
        self._drop(worker)
        return []

    @staticmethod
    def _receive(worker: _Worker) -> tuple[tuple[float, bool], bool]:
        """(result, worker still usable)."""
        try:
            score, finished = worker.conn.recv()
            return (float(score), bool(finished)), True
        except (EOFError, OSError, TypeError, ValueError):
            return (0.0, False), False

    def _replace(self, worker: _Worker, starting: dict[Connection, _Worker]) -> _Worker:
        """Kill `worker` and start a replacement, tracked in `starting` until it reports ready."""
        self._drop(worker)
        fresh = _Worker()
        self._workers.append(fresh)
        starting[fresh.conn] = fresh
        return fresh

    def _drop(self, worker: _Worker) -> None:
        worker.kill()
        if worker in self._workers:
            self._workers.remove(worker)


_POOL: _WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def _get_pool(size: int) -> _WorkerPool | None:
    """The process-wide worker pool with `size` workers, (re)started as needed; None if it cannot start."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and _POOL.pid != os.getpid():
            _POOL = None  # inherited through fork: those workers belong to the parent
        if _POOL is not None and _POOL.size == size and _POOL._workers:
            return _POOL
        if _POOL is not None:
            _close_pool(_POOL)
        try:
            _POOL = _WorkerPool(size)
        except Exception:  # e.g. "daemonic processes are not allowed to have children"
            logger.warning("Could not start reward worker processes; scoring in-process.", exc_info=True)
            _POOL = None
        return _POOL


def _close_pool(pool: _WorkerPool) -> None:
    """Close `pool` once no thread is scoring in it (or after a while: its workers are killed regardless)."""
    acquired = pool.lock.acquire(timeout=30)
    try:
        pool.close()
    finally:
        if acquired:
            pool.lock.release()


def shutdown_workers() -> None:
    """Stop the reward worker processes (they are restarted on demand). Registered with `atexit`."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and _POOL.pid == os.getpid():
            _close_pool(_POOL)
        _POOL = None


atexit.register(shutdown_workers)


def _score_in_workers(pairs: Sequence[Pair], size: int, timeout_s: float, deadline: float) -> list[Result]:
    """Score in the worker pool, or serially when no pool can be had."""
    pool = _get_pool(size)
    if pool is None:
        return _score_serial(pairs, timeout_s, deadline)
    with pool.lock:
        try:
            return pool.score(pairs, timeout_s, deadline)
        except Exception:
            logger.warning("Reward worker pool failed; scoring in-process.", exc_info=True)
    shutdown_workers()
    return _score_serial(pairs, timeout_s, deadline)
