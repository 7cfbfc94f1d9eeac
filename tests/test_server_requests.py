"""Concurrent completion requests (`trl_ada.server_requests`) against a scripted local HTTP server: results as they
finish, bounded retries of failed or timed-out requests, then a clear error. No vLLM needed."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from refusals import names

from trl_ada.server_requests import ServerCompletions


def parse_logprobs(choices_logprobs):
    """TRL's parser's shape: (sequences, tokens, 1) log-probs (here the scripted ones)."""
    return [[[lp] for lp in choice["token_logprobs"]] for choice in choices_logprobs], None


class Scripted(BaseHTTPRequestHandler):
    """Answers `/v1/completions` with token ids [prompt length] * n; the first `failures` calls fail as told."""

    failures = 0
    mode = "error"  # or "hang", "short" (one completion too few), "trickle" (a byte every 0.1 s, for at most 3 s)
    calls: list = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Scripted.lock:
            Scripted.calls.append(body)
            failing = len(Scripted.calls) <= Scripted.failures
        if failing and Scripted.mode == "hang":
            time.sleep(1.0)
            return
        if failing and Scripted.mode == "trickle":
            self.trickle()
            return
        if failing and Scripted.mode == "short":
            body["n"] -= 1
        elif failing:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"engine error")
            return
        length = len(body["prompt"][0])
        choices = [{"token_ids": [length] * 3, "logprobs": {"token_logprobs": [-0.5] * 3}} for _ in range(body["n"])]
        payload = json.dumps({"choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def trickle(self):
        """A 200 answer that never completes: one byte of its 1000 every 0.1 s, until the client hangs up or 3 s."""
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(30):
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Scripted.calls, Scripted.failures, Scripted.mode = [], 0, "error"
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def client(url, **kwargs):
    return ServerCompletions(url, "tiny", {"temperature": 1.0, "max_tokens": 3}, parse_logprobs, **kwargs)


def collect(requests: ServerCompletions) -> dict:
    results = {}
    while requests.pending:
        results.update({r.key: r for r in requests.results()})
    return results


def test_every_request_comes_back_with_its_own_completions_and_logprobs(server):
    requests = client(server)
    for key, length in enumerate([2, 5, 7]):
        requests.submit(key, list(range(length)), n=key + 1)
    results = collect(requests)
    requests.close()
    assert {key: r.completion_ids for key, r in results.items()} == {
        0: [[2, 2, 2]],
        1: [[5, 5, 5]] * 2,
        2: [[7, 7, 7]] * 3,
    }
    assert results[2].logprobs == [[-0.5] * 3] * 3
    assert sorted(call["n"] for call in Scripted.calls) == [1, 2, 3]
    assert all(call["model"] == "tiny" and call["return_token_ids"] for call in Scripted.calls)


def test_a_failed_request_is_retried(server):
    Scripted.failures = 2
    requests = client(server, max_retries=2)
    requests.submit("a", [1, 2], n=1)
    results = collect(requests)
    requests.close()
    assert results["a"].completion_ids == [[2, 2, 2]] and results["a"].attempts == 3
    assert len(Scripted.calls) == 3


def test_a_request_failing_past_its_retries_fails_the_step_naming_the_options(server):
    Scripted.failures = 10
    requests = client(server, max_retries=1)
    requests.submit("a", [1, 2], n=1)
    with pytest.raises(RuntimeError) as failed:
        collect(requests)
    names(str(failed.value), "failed 2 times", "HTTP 500", "streaming_max_retries")
    assert len(Scripted.calls) == 2


def test_a_timed_out_request_is_retried_then_fails(server):
    Scripted.failures, Scripted.mode = 10, "hang"
    requests = client(server, max_retries=1, request_timeout=0.2)
    requests.submit("a", [1], n=1)
    with pytest.raises(RuntimeError, match="timed out|TimeoutError") as failed:
        collect(requests)
    names(str(failed.value), "failed 2 times", "streaming_request_timeout")


def test_an_answer_with_too_few_completions_is_retried_then_fails(server):
    Scripted.failures, Scripted.mode = 1, "short"
    requests = client(server, max_retries=1)
    requests.submit("a", [1, 2], n=3)
    results = collect(requests)
    assert len(results["a"].completion_ids) == 3 and results["a"].attempts == 2
    Scripted.calls, Scripted.failures = [], 10
    requests.submit("b", [1, 2], n=3)
    with pytest.raises(RuntimeError) as failed:
        collect(requests)
    names(str(failed.value), "failed 2 times", "2 completions", "3 were asked for")


def test_the_timeout_bounds_the_whole_request_not_each_read(server):
    Scripted.failures, Scripted.mode = 10, "trickle"
    requests = client(server, max_retries=0, request_timeout=0.5)
    requests.submit("a", [1], n=1)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        collect(requests)
    names(str(failed.value), "TimeoutError: ", "streaming_request_timeout=0.5 s")
    assert time.monotonic() - start < 1.5  # the server would trickle for 3 s


def test_a_cancelled_request_never_returns(server):
    Scripted.failures, Scripted.mode = 1, "hang"  # the first request hangs until cancelled
    requests = client(server, request_timeout=5.0)
    requests.submit("slow", [1], n=1)
    time.sleep(0.1)
    requests.submit("fast", [1, 2], n=1)
    requests.cancel("slow")
    start = time.monotonic()
    results = collect(requests)
    requests.close()
    assert list(results) == ["fast"] and requests.cancelled == 1
    assert time.monotonic() - start < 1.0


def test_the_streaming_schedule_and_the_asynchronous_worker_request_the_same_sampling(tmp_path):
    from types import SimpleNamespace

    from trl_ada import _trl
    from trl_ada.async_grpo import AsyncReinforceAdaConfig
    from trl_ada.async_grpo.trainer import _worker_settings

    settings = dict(temperature=0.7, top_p=0.9, top_k=5, min_p=None, repetition_penalty=1.1)
    args = AsyncReinforceAdaConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], max_completion_length=12, **settings
    )
    client = SimpleNamespace(base_url="http://server", model="m")
    generation = SimpleNamespace(
        **settings,
        max_completion_length=12,
        structured_outputs_regex=None,
        generation_kwargs=None,
        vllm_client=client,
    )
    expected = {**settings, "min_p": 0.0, "max_tokens": 12, "logprobs": 0}
    assert _trl.server_decoding(SimpleNamespace(vllm_generation=generation))[2] == expected
    assert _worker_settings(args, "m").decoding == expected
    generation.structured_outputs_regex, generation.generation_kwargs = r"\d+", {"top_k": 3, "seed": 1}
    assert _trl.server_decoding(SimpleNamespace(vllm_generation=generation))[2] == {
        **expected,
        "structured_outputs": {"regex": r"\d+"},
        "top_k": 3,  # generation_kwargs override the rest, as in TRL's client
        "seed": 1,
    }
