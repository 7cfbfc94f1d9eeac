"""A scripted vLLM server for the streaming trainer tests that run without vLLM.

`ScriptedCompletions` stands in for `trl_ada.server_requests.ServerCompletions` (the main process's connection to
the server): it answers requests a few at a time in a seeded random order, and each completion is a function of its
prompt and its pool index only, so any arrival order must give the same pools, exits and kept groups.
`attach_scripted_server` puts it, and a counting stand-in for TRL's `VLLMGeneration`, into a built trainer.
"""

from __future__ import annotations

import random
import zlib

from trl_ada.schedules.streaming import ServerStreamingSchedule
from trl_ada.server_requests import CompletionResult


def token_logprob(token_id: int) -> float:
    """The log-prob the scripted server reports for a token: it encodes the token, so a test can tell whose it is."""
    return -token_id / 1000.0


def scripted_completion(prompt_ids: list[int], index: int, vocab_size: int, max_length: int) -> list[int]:
    """The completion number `index` of a prompt: 1 to `max_length` tokens drawn from a hash of both."""
    rng = random.Random(zlib.crc32(repr((list(prompt_ids), index)).encode()))
    return [rng.randrange(3, vocab_size) for _ in range(rng.randint(1, max_length))]


class ScriptedCompletions:
    """Answers 1 to `batch` pending requests per `results()` call, picked at random (seeded); counts cancellations.

    With `fail_after` set, the call after that many answered requests raises the error a real connection raises
    once its retries are spent.
    """

    def __init__(self, vocab_size: int, max_length: int, seed: int = 0, batch: int = 3, fail_after: int | None = None):
        self.vocab_size, self.max_length, self.batch, self.fail_after = vocab_size, max_length, batch, fail_after
        self.answered_completions = 0
        self.rng = random.Random(seed)
        self.waiting: dict = {}
        self.answered, self.cancelled, self.closed = 0, 0, False
        self.submitted: list = []
        self.models: list = []  # the model each request named (None: the served one)
        self.first_wave: int | None = None  # requests sent before the first answer

    def submit(self, key, prompt_ids: list[int], n: int, model: str | None = None) -> None:
        self.submitted.append(key)
        self.models.append(model)
        self.waiting[key] = (list(prompt_ids), n)

    def cancel(self, key) -> None:
        if self.waiting.pop(key, None) is not None:
            self.cancelled += 1

    @property
    def pending(self) -> int:
        return len(self.waiting)

    def results(self, timeout: float | None = None) -> list[CompletionResult]:
        if self.first_wave is None:
            self.first_wave = len(self.submitted)
        if self.fail_after is not None and self.answered >= self.fail_after:
            raise RuntimeError("A completion request to http://scripted/v1/completions failed 3 times (scripted).")
        keys = self.rng.sample(list(self.waiting), k=min(len(self.waiting), self.rng.randint(1, self.batch)))
        results = []
        for key in keys:
            prompt_ids, n = self.waiting.pop(key)
            first = key.first if hasattr(key, "first") else key[1].first  # a Request, or (group id, Request)
            ids = [scripted_completion(prompt_ids, first + k, self.vocab_size, self.max_length) for k in range(n)]
            results.append(CompletionResult(key, ids, [[token_logprob(t) for t in c] for c in ids], attempts=1))
        self.answered += len(results)
        self.answered_completions += sum(len(result.completion_ids) for result in results)
        return results

    def close(self) -> None:
        self.closed = True
        self.waiting.clear()


class CountingGeneration:
    """Stands in for TRL's `VLLMGeneration` in server mode: counts weight syncs; streaming never calls `generate`."""

    mode = "server"

    def __init__(self):
        self.syncs = 0

    def sync_weights(self) -> None:
        self.syncs += 1

    def generate(self, *args, **kwargs):
        raise AssertionError("streaming generation must not call VLLMGeneration.generate")


def attach_scripted_server(trainer, server: ScriptedCompletions | None, **fields) -> CountingGeneration:
    """Switch a trainer built with `use_vllm=False` to streaming generation against `server`, with more streaming
    `fields` (`streaming_window=...`).

    `server=None`: this process must never open a connection (only the main process talks to the server).
    """
    generation = CountingGeneration()
    trainer.args.use_vllm, trainer.args.vllm_mode = True, "server"  # read by TRL at construction only
    for name, value in {"generation_schedule": "streaming", **fields}.items():
        setattr(trainer.args, name, value)  # the plan follows the fields
    trainer.sampling_plan = trainer.args.sampling_plan  # what a trainer built now would train
    trainer.schedule = ServerStreamingSchedule(trainer)
    trainer.use_vllm, trainer.vllm_generation, trainer._last_loaded_step = True, generation, -1
    trainer.vllm_importance_sampling_correction = True

    def connect():
        if server is None:
            raise AssertionError("only the main process may send requests to the server")
        return server

    trainer.schedule.server_requests = connect
    return generation
