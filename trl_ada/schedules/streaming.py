"""The streaming schedule (vLLM server mode): Reinforce-Ada's exits without a round barrier.

The rounds of `AdaptiveSampler` wait for a round's longest completion before any prompt gets more samples. A
`RequestWindow` instead keeps a few completions of every active prompt in flight, takes results in whatever
order the engine finishes them, and issues more as soon as a prompt needs them:

    scheduler = RequestWindow(sampler)                  # a fresh AdaptiveSampler of the step
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
The asynchronous worker drives one prompt's `EstSampler` the same way (its allocation is its cap).

The section, `Streaming`, is `InFlight` (the exits of `Seq`, a window of completions per prompt, the requests'
chunk and retries) with a step budget and a request timeout. `ServerStreamingSchedule` runs it in the trainer: every
process holds the same `RequestWindow`; the main process alone talks to the server; each batch of results it
receives is broadcast, split over the processes at row level for decoding and scoring (`_trl.TRLRounds`: TRL's
`_generate` fed the server's answers as a rollout, and `_calculate_rewards`), and the gathered rewards drive every
process's scheduler alike. Requests of prompts that exited are cancelled on the server. The scheduler and the
sections load without torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..groups import reward_values
from ..plan import ASYNCHRONOUS, SCHEDULING, SamplingPlan, register
from ..records import Record, option
from ..sampling import PromptPools
from ..seq import Exits, Seq, budget_option, with_budget
from ..server_requests import ServerCompletions
from ..utils import is_int
from .base import Schedule, StepHost, StepOutcome

if TYPE_CHECKING:
    from .._trl import TRLRounds

__all__ = [
    "InFlight",
    "PromptStreaming",
    "Request",
    "Requests",
    "ServerStreamingSchedule",
    "Streaming",
    "RequestWindow",
    "Update",
    "send_requests",
]


@dataclass(frozen=True)
class Requests(Record):
    """How completions are asked of the vLLM server: a few per request, sent again when they fail."""

    group: ClassVar[str] = SCHEDULING

    chunk: int = option(
        1,
        "Completions asked for per request, in [1, `samples_per_round`]. 1 cancels at the finest grain; more sends "
        "fewer requests, but a request's completions come back together.",
        flat="streaming_chunk",
        within="[1, inf)",  # at most samples_per_round: `InFlight.check`
    )
    max_retries: int = option(
        2,
        "A request that fails or times out is sent again this many times; then the step fails with an error "
        "naming the server and these options.",
        flat="streaming_max_retries",
        within="[0, inf)",
    )


@dataclass(frozen=True)
class InFlight(Seq, Requests):
    """Exits decided as results arrive: every active prompt keeps up to `window` completions in flight."""

    group: ClassVar[str] = SCHEDULING

    window: int | None = option(
        None,
        "Completions of one prompt requested and not yet used, at most, in [`streaming_chunk`, M·N]; None = M. A "
        "wider window shortens the chain of completions a hard prompt waits for one after another, at the price of "
        "tokens spent on requests its exit cancels (worth it when the engine has spare batch capacity).",
        flat="streaming_window",
        within="[1, inf)",  # from streaming_chunk to M·N: `InFlight.check`
    )

    @property
    def window_size(self) -> int:
        """Completions of one prompt in flight at most (`streaming_window`, default M)."""
        return self.samples_per_round if self.window is None else self.window

    def check(self, plan: SamplingPlan) -> None:
        super().check(plan)
        if self.chunk > self.samples_per_round:
            raise ValueError(
                f"streaming_chunk={self.chunk!r}: completions per request must be an integer in [1, "
                f"samples_per_round={self.samples_per_round}]."
            )
        if self.window is not None and not self.chunk <= self.window <= self.cap:
            raise ValueError(
                f"streaming_window={self.window!r}: completions of a prompt in flight must be an integer in "
                f"[streaming_chunk={self.chunk}, samples_per_round * max_rounds={self.cap}], or None for "
                f"samples_per_round={self.samples_per_round}."
            )


@register
@dataclass(frozen=True)
class Streaming(InFlight):
    """On a vLLM server (`use_vllm=True`, `vllm_mode="server"`), completions are requested a chunk at a time, up to
    `streaming_window` of each active prompt in flight; exits are decided as results arrive, in request order, and
    the requests of a prompt that exits are cancelled.

    The section is `InFlight` with a step budget and a request timeout."""

    name: ClassVar[str] = "streaming"

    sample_budget: float | None = budget_option()
    request_timeout: float = option(
        600.0,
        "Seconds one request may wait for the server's whole answer (a server sending it slowly does not extend "
        "it). A timed-out request, or an answer with fewer completions than asked for, is sent again "
        "(`streaming_max_retries`).",
        flat="streaming_request_timeout",
        within="(0, inf)",
    )

    def schedule_class(self) -> type[Schedule]:
        return ServerStreamingSchedule

    def exits(self, num_generations: int) -> Exits:
        return with_budget(super().exits(num_generations), self.sample_budget)

    def check_trainer(self, plan: SamplingPlan, config: Any) -> None:
        if not config.use_vllm or config.vllm_mode != "server":
            raise ValueError(
                f"generation_schedule='streaming' sends requests to a vLLM server, but use_vllm={config.use_vllm!r} "
                f"and vllm_mode={config.vllm_mode!r}. Set use_vllm=True and vllm_mode='server', or use "
                "generation_schedule='rounds' (the default, which every backend supports)."
            )


@register(host=ASYNCHRONOUS)
@dataclass(frozen=True)
class PromptStreaming(InFlight):
    """Each prompt samples on its own, with a window of completions in flight: exits as results arrive, as the
    synchronous streaming schedule decides them (the asynchronous worker's section)."""

    name: ClassVar[str] = "streaming"

    def in_flight(self, num_generations: int) -> int:
        """Completions of one prompt in flight, for `AsyncReinforceAdaConfig.prompts_in_flight`."""
        return self.window_size


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


class RequestWindow:
    """Drives one step's sampler (an `AdaptiveSampler`, or a `schedules.est.EstSampler` whose allocation is each
    prompt's cap) from results that arrive in any order (see the module docstring).

    Every active prompt keeps up to `window` completions requested but not yet used (default: the plan's
    `streaming_window`, or `samples_per_round`), never more than its cap (`sampler.cap_of`: M·N) in all, asked for
    `chunk` at a time (one engine request each; default 1, the finest cancellation). With a `sample_budget`, a
    completion beyond a prompt's first n is requested only while the step's requests stay within the budget after the
    completions every prompt still needs to fill its group; such a step's decisions can depend on arrival order, since
    the budget goes to whichever prompt asks first. A `futility_threshold` stops a prompt, as in the rounds, once its
    used pool can fill a group and its chance to meet the exit rule within its remaining cap is below it.
    """

    def __init__(self, sampler: PromptPools, window: int | None = None, chunk: int | None = None):
        if sampler.samples_drawn or sampler.round:
            raise ValueError("RequestWindow needs a fresh AdaptiveSampler (nothing planned or ingested yet).")
        if sampler.sizes_rounds_from_prior:
            name = "first_round" if sampler.first_round == "prior" else "later_rounds"
            raise ValueError(
                f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps a window of "
                f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
            )
        section = sampler.plan.section
        self.sampler = sampler
        if window is None:
            window = section.window_size if isinstance(section, InFlight) else sampler.samples_per_round
        if chunk is None:
            chunk = section.chunk if isinstance(section, Requests) else 1
        self.window, self.chunk = window, chunk
        for name, value in (("window", self.window), ("chunk", self.chunk)):
            if not is_int(value) or value < 1:
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
        values = reward_values(rewards, request.size)
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
                if sampler.add_sample(prompt, reward, flag, round=sampler.round_of(len(sampler.pools[prompt]) + 1)):
                    return True
        return False

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
            wanted.append(max(0, min(self.window - waiting, sampler.cap_of(p) - self.requested[p])))
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
        sampler = self.sampler
        sampler.close(max(sampler.round_of(len(pool)) for pool in sampler.pools))


class ServerStreamingSchedule(Schedule):
    """Streaming supports single-turn text generation; the rest is refused when the trainer is built."""

    def __init__(self, trainer: StepHost):
        from .. import _trl

        super().__init__(trainer)
        found = [name for name, present in _trl.rollout_features(trainer).items() if present]
        if found:
            raise ValueError(
                f"generation_schedule='streaming' does not support {', '.join(found)} (it asks the vLLM server for "
                "single-turn text completions, one request per few completions). Use generation_schedule='rounds'."
            )

    def run(self, step_inputs: list[dict], rounds: TRLRounds) -> StepOutcome:
        from .. import _trl

        trainer = self.trainer
        self._returned_tokens = 0
        inputs, sampler = self.new_sampler(step_inputs)
        scheduler = RequestWindow(sampler)
        outcome = StepOutcome(inputs, sampler)
        prompts = _trl.round_prompts(trainer, [dict(x) for x in inputs])
        prompt_ids = _trl.tokenize_prompts(trainer, prompts)
        _trl.sync_weights_once(trainer)  # weights reach the server once, before generation

        requests = self.server_requests() if trainer.accelerator.is_main_process else None
        start = time.perf_counter()
        try:
            send_requests(requests, prompt_ids, scheduler.start())
            while not scheduler.done:
                results = self._next_results(requests, scheduler)
                guarded, masked = self._score(rounds, results, outcome, prompts, prompt_ids)
                offset = 0
                for result in results:
                    size = result.key.size
                    update = scheduler.receive(
                        result.key.id, guarded[offset : offset + size], masked[offset : offset + size]
                    )
                    offset += size
                    send_requests(requests, prompt_ids, update.issue, update.cancel)
                    outcome.keep_selectable(update.exited)
        finally:
            if requests is not None:
                requests.close()
        cancelled = self._main_process_value(0 if requests is None else requests.cancelled)
        used = outcome.used_tokens()
        outcome.metrics.update(
            {
                "generation_time/streaming": time.perf_counter() - start,
                "streaming/requests": float(scheduler.requested_total),
                "streaming/cancelled_requests": float(cancelled),
                "streaming/returned_tokens": float(self._returned_tokens),
                "streaming/unused_returned_tokens": float(self._returned_tokens - used),
            }
        )
        return outcome

    def server_requests(self) -> ServerCompletions:
        """Concurrent requests to the vLLM server with TRL's decoding settings and the section's transport."""
        from .. import _trl

        base_url, model, decoding, parse_logprobs = _trl.server_decoding(self.trainer)
        streaming = self.plan.section
        return ServerCompletions(
            base_url,
            model,
            decoding,
            parse_logprobs,
            request_timeout=streaming.request_timeout,
            max_retries=streaming.max_retries,
        )

    def _next_results(self, requests: ServerCompletions | None, scheduler: RequestWindow) -> list:
        """The next results the scheduler still waits for, received by the main process and shared with the others.

        A failure on the main process (retries spent, nothing left running) is raised on every process alike.
        """
        accelerator = self.trainer.accelerator
        payload: list = [None]
        if requests is not None:
            try:
                results: list = []
                while not results:
                    if not requests.pending:
                        raise RuntimeError("Streaming: the scheduler waits for requests that are no longer running.")
                    results = [r for r in requests.results() if r.key.id in scheduler.in_flight]
                payload = [results]
            except RuntimeError as error:
                if accelerator.num_processes == 1:
                    raise
                payload = [str(error)]
        if accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], str):
            raise RuntimeError(payload[0])
        return payload[0]

    def _score(
        self, rounds: TRLRounds, results: list, outcome: StepOutcome, prompts: list, prompt_ids: list
    ) -> tuple[np.ndarray, np.ndarray]:
        """Decode and score arrived completions, split over the processes; their rewards and truncation flags.

        TRL's gathers need the same number of rows on every process: the last row is repeated to even them out, and
        the repeat's score is dropped.
        """
        rank, world = self.trainer.accelerator.process_index, self.trainer.accelerator.num_processes
        rows = [(result, k) for result in results for k in range(result.key.size)]
        keys = [(result.key.prompt, result.key.first + k) for result, k in rows]
        per_process = math.ceil(len(rows) / world)
        mine = [min(r, len(rows) - 1) for r in range(rank * per_process, (rank + 1) * per_process)]
        generated = rounds.decode(
            [dict(outcome.inputs[keys[r][0]]) for r in mine],
            [prompts[keys[r][0]] for r in mine],
            [prompt_ids[keys[r][0]] for r in mine],
            [rows[r][0].completion_ids[rows[r][1]] for r in mine],
            None if results[0].logprobs is None else [rows[r][0].logprobs[rows[r][1]] for r in mine],
        )
        scores = rounds.score(generated, len(keys), rank * per_process)
        outcome.record(keys, rank * per_process, generated.rows, scores)
        self._returned_tokens += int(sum(outcome.row_stats[key][1] for key in keys))
        return scores.rewards, scores.masked

    def _main_process_value(self, value: int) -> int:
        """`value` as the main process has it, on every process (what only the main process counts)."""
        if self.trainer.accelerator.num_processes == 1:
            return value
        from accelerate.utils import broadcast_object_list

        payload = [value]
        broadcast_object_list(payload, from_process=0)
        return payload[0]


def send_requests(
    requests: ServerCompletions | None, prompt_ids: list, issue: list[Request], cancel: Sequence[Request] = ()
) -> None:
    """The main process sends the scheduler's new requests and cancels stale ones; the others only track them."""
    if requests is None:
        return
    for request in cancel:
        requests.cancel(request)
    for request in issue:
        requests.submit(request, prompt_ids[request.prompt], request.size)
