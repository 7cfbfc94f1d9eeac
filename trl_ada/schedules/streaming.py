"""The streaming schedule (vLLM server mode): per-completion requests, exits as results arrive, cancellation.

Every process holds the same `StreamingScheduler` (`trl_ada/streaming.py`). The main process alone talks to the
server; each batch of results it receives is broadcast, split over the processes at row level for decoding and
scoring (TRL's `_generate` fed the server's answers, and `_calculate_rewards`), and the gathered rewards drive every
process's scheduler alike. Requests of prompts that exited are cancelled on the server.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
from accelerate.utils import broadcast_object_list

from .. import _trl
from ..server_requests import ServerCompletions
from ..streaming import Request, StreamingScheduler
from .base import Schedule, StepHost, score_and_record
from .outcome import StepOutcome

__all__ = ["ServerStreamingSchedule"]


class ServerStreamingSchedule(Schedule):
    """Streaming supports single-turn text generation; the rest is refused when the trainer is built."""

    def __init__(self, trainer: StepHost):
        super().__init__(trainer)
        found = [name for name, present in _trl.rollout_features(trainer).items() if present]
        if found:
            raise ValueError(
                f"generation_schedule='streaming' does not support {', '.join(found)} (it asks the vLLM server for "
                "single-turn text completions, one request per few completions). Use generation_schedule='rounds'."
            )

    def run(self, step_inputs: list[dict]) -> StepOutcome:
        trainer = self.trainer
        self._returned_tokens = 0
        inputs, sampler = self.new_sampler(step_inputs)
        scheduler = StreamingScheduler(sampler)
        outcome = StepOutcome(inputs, sampler)
        prompt_rows = _trl.round_prompts(trainer, [dict(x) for x in inputs])
        prompt_ids = _trl.tokenize_prompts(trainer, prompt_rows)
        _trl.sync_weights_once(trainer)  # weights reach the server once, before generation

        requests = self.server_requests() if trainer.accelerator.is_main_process else None
        start = time.perf_counter()
        try:
            send_requests(requests, prompt_ids, scheduler.start())
            while not scheduler.done:
                results = self._next_results(requests, scheduler)
                guarded, masked = self._score(results, outcome, prompt_rows)
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
        """Concurrent requests to the vLLM server with TRL's sampling settings."""
        base_url, model, sampling, parse_logprobs = _trl.server_sampling(self.trainer)
        args = self.trainer.args
        return ServerCompletions(
            base_url,
            model,
            sampling,
            parse_logprobs,
            request_timeout=args.streaming_request_timeout,
            max_retries=args.streaming_max_retries,
        )

    def _next_results(self, requests: ServerCompletions | None, scheduler: StreamingScheduler) -> list:
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
            broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], str):
            raise RuntimeError(payload[0])
        return payload[0]

    def _score(self, results: list, outcome: StepOutcome, prompt_rows: list) -> tuple[np.ndarray, np.ndarray]:
        """Decode and score arrived completions, split over the processes; their rewards and truncation flags.

        TRL's gathers need the same number of rows on every process: the last row is repeated to even them out, and
        the repeat's score is dropped.
        """
        trainer = self.trainer
        rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
        rows = [(result, k) for result in results for k in range(result.key.size)]
        keys = [(result.key.prompt, result.key.first + k) for result, k in rows]
        per_process = math.ceil(len(rows) / world)
        mine = [min(r, len(rows) - 1) for r in range(rank * per_process, (rank + 1) * per_process)]
        row_inputs = [dict(outcome.inputs[keys[r][0]]) for r in mine]
        row_prompts = [prompt_rows[keys[r][0]] for r in mine]
        completion_ids = [rows[r][0].completion_ids[rows[r][1]] for r in mine]
        logprobs = None if results[0].logprobs is None else [rows[r][0].logprobs[rows[r][1]] for r in mine]
        with _trl.held_generation_metrics(trainer, outcome.logs, per_process * world):
            generated = _trl.decode_server_rows(trainer, row_prompts, completion_ids, logprobs)
        guarded, masked = score_and_record(
            trainer, outcome, keys, rank * per_process, row_inputs, row_prompts, generated
        )
        self._returned_tokens += int(sum(outcome.row_stats[key][1] for key in keys))
        return guarded, masked

    def _main_process_value(self, value: int) -> int:
        """`value` as the main process has it, on every process (what only the main process counts)."""
        if self.trainer.accelerator.num_processes == 1:
            return value
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
