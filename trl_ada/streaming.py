"""Streaming sampling: Reinforce-Ada's exits without a round barrier (pure Python, no torch, no HTTP).

The rounds of `AdaptiveSampler` wait for a round's longest completion before any prompt gets more samples. A
`StreamingScheduler` instead keeps a few completions of every active prompt in flight, takes results in whatever
order the engine finishes them, and issues more as soon as a prompt needs them:

    scheduler = StreamingScheduler(sampler)             # a fresh AdaptiveSampler of the step
    send(scheduler.start())                             # the first requests
    while not scheduler.done:
        request, rewards = wait_for_any_result()
        update = scheduler.receive(request.id, rewards)
        send(update.issue); cancel(update.cancel)
    groups = sampler.select_groups()

No length bias: each prompt's completions are numbered in the order they were requested (their pool index), and
a prompt's pool only ever grows by its next number. A completion that arrives early (say, because it is short)
waits until every earlier-requested completion of its prompt has arrived, so the exit rule sees each prompt's
completions in request order, whatever order the engine finishes them in. The pool of a prompt is therefore the
shortest request-order prefix that meets its exit rule (or its cap M·N): the same pools, exits and kept groups
as feeding the results in request order, and the group selection, statistics and advantages of `AdaptiveSampler`
apply unchanged. Completions past that prefix are not used; those still running are reported for cancellation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .groups import check_rewards
from .plan import GENERATION_SCHEDULES
from .sampling import AdaptiveSampler

__all__ = ["GENERATION_SCHEDULES", "Request", "StreamingScheduler", "Update"]


@dataclass(frozen=True)
class Request:
    """`size` completions of `prompt`, whose pool indices are `first, ..., first + size - 1` (request order)."""

    id: int
    prompt: int
    first: int
    size: int


@dataclass
class Update:
    """What a result changed: requests to send, requests to cancel (their prompt no longer needs them), exits."""

    issue: list[Request] = field(default_factory=list)
    cancel: list[Request] = field(default_factory=list)
    exited: list[int] = field(default_factory=list)


class StreamingScheduler:
    """Drives one step's `AdaptiveSampler` from results that arrive in any order (see the module docstring).

    Every active prompt keeps up to `window` completions requested but not yet used (default `samples_per_round`),
    never more than its cap M·N in all, asked for `chunk` at a time (one engine request each; default 1, the finest
    cancellation). With a `sample_budget`, a completion beyond a prompt's first n is requested only while the step's
    requests stay within the budget after the completions every prompt still needs to fill its group; such a step's
    decisions can depend on arrival order, since the budget goes to whichever prompt asks first. A
    `futility_threshold` stops a prompt, as in the rounds, once its used pool can fill a group and its chance to meet
    the exit rule within its remaining cap is below it.
    """

    def __init__(self, sampler: AdaptiveSampler, window: int | None = None, chunk: int | None = None):
        if sampler.samples_drawn or sampler.round:
            raise ValueError("StreamingScheduler needs a fresh AdaptiveSampler (nothing planned or ingested yet).")
        if sampler.plan.sizes_rounds_from_prior:
            name = "first_round" if sampler.first_round == "prior" else "later_rounds"
            raise ValueError(
                f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps a window of "
                f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
            )
        self.sampler = sampler
        self.window = sampler.plan.window if window is None else window
        self.chunk = sampler.plan.streaming_chunk if chunk is None else chunk
        for name, value in (("window", self.window), ("chunk", self.chunk)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: must be an integer >= 1.")
        b = sampler.num_prompts
        self.requested = [0] * b  # completions requested per prompt (the next pool index)
        self.in_flight: dict[int, Request] = {}
        self._arrived: dict[int, list[tuple[float, bool]]] = {}  # request id -> results, until used
        self._next_id = 0
        self._started = False

    # -- state ---------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Nothing in flight: every result so far led to the requests it called for, so none is left to make."""
        return self._started and not self.in_flight

    @property
    def requested_total(self) -> int:
        return sum(self.requested)

    # -- events --------------------------------------------------------------------------------

    def start(self) -> list[Request]:
        """The first requests of the step: up to `window` completions of every prompt."""
        if self._started:
            raise RuntimeError("start() was already called.")
        self._started = True
        return self._issue()

    def receive(self, request_id: int, rewards: Sequence[float], masked: Sequence[bool] | None = None) -> Update:
        """Use the results of one request (one reward per completion, in its order), as far as request order allows.

        A result of a request that is no longer in flight (cancelled, or its prompt already left) is ignored.
        """
        request = self.in_flight.get(request_id)
        if request is None:
            return Update()
        values = check_rewards(rewards, request.size)
        flags = [False] * request.size if masked is None else [bool(flag) for flag in masked]
        if len(flags) != request.size:
            raise ValueError(f"masked has {len(flags)} flags; expected {request.size}, one per completion.")
        self._arrived[request_id] = list(zip(values.tolist(), flags, strict=True))
        update = Update()
        if self._use_in_order(request.prompt):
            update.exited.append(request.prompt)
            update.cancel = self._drop(request.prompt)
        update.issue = self._issue()
        if self.done:
            self._finish()
        return update

    # -- internals -----------------------------------------------------------------------------

    def _use_in_order(self, prompt: int) -> bool:
        """Append the prompt's arrived results in request order; True if the prompt leaves (exit or futility)."""
        sampler = self.sampler
        pending = sorted((r for r in self.in_flight.values() if r.prompt == prompt), key=lambda r: r.first)
        for request in pending:
            if request.id not in self._arrived or request.first != len(sampler.pools[prompt]):
                return False
            del self.in_flight[request.id]
            for reward, flag in self._arrived.pop(request.id):
                if sampler.add_sample(prompt, reward, flag, round=self._round_of(prompt, extra=1)):
                    return True
        return False

    def _round_of(self, prompt: int, extra: int = 0) -> int:
        """The round in which the rounds schedule would have drawn the prompt's latest completion (counting `extra`
        completions not yet in its pool)."""
        return math.ceil((len(self.sampler.pools[prompt]) + extra) / self.sampler.samples_per_round)

    def _drop(self, prompt: int) -> list[Request]:
        """The prompt left: its requests still running are to be cancelled; results that arrived early go unused."""
        dropped = [r for r in self.in_flight.values() if r.prompt == prompt]
        running = [r for r in dropped if r.id not in self._arrived]
        for request in dropped:
            del self.in_flight[request.id]
            self._arrived.pop(request.id, None)
        return running

    def _wanted(self) -> list[int]:
        """Completions each prompt may still request now (window, cap, budget not yet applied)."""
        sampler = self.sampler
        wanted = []
        for p in range(sampler.num_prompts):
            if not sampler.is_active(p):
                wanted.append(0)
                continue
            waiting = self.requested[p] - len(sampler.pools[p])
            wanted.append(max(0, min(self.window - waiting, sampler.cap - self.requested[p])))
        return wanted

    def _issue(self) -> list[Request]:
        wanted = self._wanted()
        issued = []
        for prompt, count in enumerate(wanted):
            count = min(count, self.sampler.budget_room(prompt, self.requested))
            while count > 0:
                size = min(self.chunk, count)
                request = Request(self._next_id, prompt, self.requested[prompt], size)
                self._next_id += 1
                self.requested[prompt] += size
                self.in_flight[request.id] = request
                issued.append(request)
                count -= size
        return issued

    def _finish(self) -> None:
        """Leave the sampler in the state `select_groups` and `statistics` read (rounds in the rounds' units)."""
        self.sampler.close(max(self._round_of(p) for p in range(self.sampler.num_prompts)))
