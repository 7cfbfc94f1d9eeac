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

from .sampling import AdaptiveSampler, _as_rewards

__all__ = [
    "GENERATION_SCHEDULES",
    "Request",
    "StreamingScheduler",
    "Update",
    "validate_schedule",
    "validate_streaming",
]

GENERATION_SCHEDULES = ("rounds", "streaming")


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


def validate_schedule(args) -> None:
    """Check a `ReinforceAdaConfig`'s `generation_schedule` and the options it needs (ValueError naming the fix)."""
    schedule = args.generation_schedule
    if schedule not in GENERATION_SCHEDULES:
        raise ValueError(f"generation_schedule={schedule!r}: choose one of {list(GENERATION_SCHEDULES)}.")
    if schedule == "rounds":
        return
    if not args.use_vllm or args.vllm_mode != "server":
        raise ValueError(
            f"generation_schedule='streaming' sends requests to a vLLM server, but use_vllm={args.use_vllm!r} and "
            f"vllm_mode={args.vllm_mode!r}. Set use_vllm=True and vllm_mode='server', or use "
            "generation_schedule='rounds' (the default, which every backend supports)."
        )
    if not isinstance(args.streaming_chunk, int) or not 1 <= args.streaming_chunk <= args.samples_per_round:
        raise ValueError(
            f"streaming_chunk={args.streaming_chunk!r}: completions per request must be an integer in [1, "
            f"samples_per_round={args.samples_per_round}]."
        )
    cap = args.samples_per_round * args.max_rounds
    window = args.streaming_window
    if window is not None and (not isinstance(window, int) or not args.streaming_chunk <= window <= cap):
        raise ValueError(
            f"streaming_window={window!r}: completions of a prompt in flight must be an integer in "
            f"[streaming_chunk={args.streaming_chunk}, samples_per_round * max_rounds={cap}], or None for "
            f"samples_per_round={args.samples_per_round}."
        )
    if not isinstance(args.streaming_max_retries, int) or args.streaming_max_retries < 0:
        raise ValueError(f"streaming_max_retries={args.streaming_max_retries!r}: must be an integer >= 0.")
    if not args.streaming_request_timeout > 0:
        raise ValueError(f"streaming_request_timeout={args.streaming_request_timeout!r}: must be > 0 seconds.")
    if args.exit_rule != "none":
        validate_streaming(args.first_round, args.later_rounds)
    if args.prompt_oversampling != 1.0:
        raise ValueError(
            f"generation_schedule='streaming' with prompt_oversampling={args.prompt_oversampling!r}: candidates and "
            "refill run on the round schedule only. Use generation_schedule='rounds', or prompt_oversampling=1.0."
        )


def validate_streaming(first_round: str, later_rounds: str) -> None:
    """Streaming issues completions as prompts need them; rounds sized by a prior have no meaning there."""
    for name, value in (("first_round", first_round), ("later_rounds", later_rounds)):
        if value != "fixed":
            raise ValueError(
                f"{name}={value!r} sizes rounds, but generation_schedule='streaming' has none: it keeps "
                f"samples_per_round completions of each active prompt in flight. Use {name}='fixed', or "
                "generation_schedule='rounds'."
            )


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

    def __init__(self, sampler: AdaptiveSampler, window: int | None = None, chunk: int = 1):
        if sampler.samples_drawn or sampler.round:
            raise ValueError("StreamingScheduler needs a fresh AdaptiveSampler (nothing planned or ingested yet).")
        validate_streaming(sampler.first_round, sampler.later_rounds)
        self.sampler = sampler
        self.window = sampler.samples_per_round if window is None else window
        self.chunk = chunk
        if not isinstance(self.window, int) or self.window < 1 or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"window={window!r} and chunk={chunk!r} must be integers >= 1.")
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

    def _active(self, prompt: int) -> bool:
        return self.sampler.exit_round[prompt] is None and not self.sampler.stopped[prompt]

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
        values = _as_rewards(rewards, request.size)
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
                sampler.pools[prompt].append(reward)
                sampler.masked[prompt].append(flag)
                if sampler._meets_exit(prompt):
                    sampler.exit_round[prompt] = self._round_of(prompt)
                    return True
                if self._futile(prompt):
                    sampler.stopped[prompt] = True
                    return True
        return False

    def _futile(self, prompt: int) -> bool:
        sampler = self.sampler
        size = len(sampler.pools[prompt])
        if sampler.futility_threshold <= 0 or size < sampler.num_generations:
            return False
        probability = sampler._exit_probability(sampler.rule, [prompt])[0, sampler.cap - size]
        return probability < sampler.futility_threshold

    def _round_of(self, prompt: int) -> int:
        """The round in which the rounds schedule would have drawn the prompt's latest completion."""
        return math.ceil(len(self.sampler.pools[prompt]) / self.sampler.samples_per_round)

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
            if not self._active(p):
                wanted.append(0)
                continue
            waiting = self.requested[p] - len(sampler.pools[p])
            wanted.append(max(0, min(self.window - waiting, sampler.cap - self.requested[p])))
        return wanted

    def _issue(self) -> list[Request]:
        wanted = self._wanted()
        issued = []
        for prompt, count in enumerate(wanted):
            count = min(count, self._budget_room(prompt))
            while count > 0:
                size = min(self.chunk, count)
                request = Request(self._next_id, prompt, self.requested[prompt], size)
                self._next_id += 1
                self.requested[prompt] += size
                self.in_flight[request.id] = request
                issued.append(request)
                count -= size
        return issued

    def _budget_room(self, prompt: int) -> int:
        """Completions `prompt` may request within the step's budget (its group-filling ones always fit)."""
        sampler = self.sampler
        if sampler._budget_total is None:
            return sampler.cap
        n = sampler.num_generations
        owed = sum(max(n - self.requested[q], 0) for q in range(sampler.num_prompts) if q != prompt)
        beyond = sampler._budget_total - self.requested_total - owed - max(n - self.requested[prompt], 0)
        return max(n - self.requested[prompt], 0) + max(beyond, 0)

    def _finish(self) -> None:
        """Leave the sampler in the state `select_groups` and `statistics` read (rounds in the rounds' units)."""
        sampler = self.sampler
        sampler.round = max(self._round_of(p) for p in range(sampler.num_prompts))
        for p, pool in enumerate(sampler.pools):
            sampler.first_round_sizes[p] = min(len(pool), sampler.samples_per_round)
        if not sampler.done:  # a budget left some prompts short of their cap: sampling is over all the same
            sampler.round = sampler.max_rounds
