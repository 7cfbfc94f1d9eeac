"""Issue 35, items 5 and 11, against a local HTTP server: per-request seeds decided from what the engine answers
(seeded, and unseeded from the first seeded request it refuses), and a program at `vllm_server_base_url` that is not
vLLM named in one error before TRL's client reads its answers."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_async import NoTransfer, async_config, parity_reward
from test_async_worker import tiny  # noqa: F401 (the module-scoped tiny model and tokenizer)

from trl_ada.async_grpo import AdaptiveRolloutWorker, AsyncReinforceAdaTrainer
from trl_ada.async_grpo.trainer import _worker_settings
from trl_ada.async_grpo.worker import check_server
from trl_ada.server_requests import NotVLLMAnswer

HTML = b"<!doctype html><html><body><h1>Welcome</h1></body></html>"
SEED_ERROR = json.dumps({"error": {"message": "CPU Generator does not use offset", "code": 500}}).encode()


class Engine(BaseHTTPRequestHandler):
    """A vLLM server as far as the worker and the trainer ask it, or another program (`kind`)."""

    kind = "vllm"  # "html": a web page on every route; "json api": JSON that is not vLLM's on every route
    device: str | None = None  # the device `/server_info` reports (None: no dev-mode `/server_info`)
    refuse_seeds = False  # answer a seeded completion request with vLLM-CPU's error
    bodies: list = []

    def do_GET(self):
        if self.path == "/health":
            self._send(200, b"")
        elif self.kind == "html":
            self._send(200, HTML)
        elif self.kind == "json api":
            self._send(200, json.dumps({"status": "ok", "items": []}).encode())
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": "served", "max_model_len": 64}]}).encode())
        elif self.path.startswith("/server_info") and Engine.device is not None:
            self._send(200, json.dumps({"vllm_config": {"device_config": {"device": Engine.device}}}).encode())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path != "/v1/completions" or not body:
            self._send(404, b'{"detail": "Not Found"}')
            return
        Engine.bodies.append(body)
        if Engine.refuse_seeds and "seed" in body:
            self._send(500, SEED_ERROR)
            return
        logprobs = {"tokens": [], "token_logprobs": [], "top_logprobs": []}
        choices = [{"token_ids": [11, 12], "logprobs": logprobs} for _ in range(body["n"])]
        self._send(200, json.dumps({"choices": choices}).encode())

    def _send(self, status: int, payload: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker cancelled the request (closed its connection)
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def engine():
    Engine.kind, Engine.device, Engine.refuse_seeds, Engine.bodies = "vllm", None, False, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


# -- item 5: seeds ----------------------------------------------------------------------------------------------------


def completion_bodies(tmp_path, tiny, url: str, count: int = 16) -> list[dict]:  # noqa: F811
    """The first `count` completion requests a worker sends to `url` (it must keep running meanwhile)."""
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, vllm_server_base_url=url, vllm_server_timeout=5, max_prompts_in_flight=1)
    settings = _worker_settings(args, model_dir)
    worker = AdaptiveRolloutWorker(settings, [{"prompt": "hello"}], [parity_reward], tokenizer)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(Engine.bodies) < count and time.monotonic() < deadline:
            worker.check_health(60)
            time.sleep(0.05)
        worker.check_health(60)
    finally:
        worker.stop()
    assert len(Engine.bodies) >= count
    return list(Engine.bodies)


@pytest.mark.parametrize("device", [None, "auto"])
def test_an_engine_of_unknown_device_gets_seeded_requests(tmp_path, tiny, engine, device):  # noqa: F811
    """No `/server_info`, or a device of `auto`: the engine is not known to refuse seeds, so every request carries its
    own (data-parallel engines seed unseeded requests alike)."""
    Engine.device = device
    bodies = completion_bodies(tmp_path, tiny, engine)
    seeds = [body.get("seed") for body in bodies]
    assert all(isinstance(seed, int) for seed in seeds) and len(set(seeds)) == len(seeds)


def test_an_engine_that_refuses_a_seeded_request_gets_unseeded_ones_from_then_on(tmp_path, tiny, engine, caplog):  # noqa: F811
    """vLLM-CPU 0.32 without `/server_info` errs on a seeded request ("CPU Generator does not use offset"): the
    refused requests are sent again without a seed, every later request goes without one, the worker keeps going,
    and one line says so."""
    Engine.refuse_seeds = True
    caplog.set_level(logging.INFO, logger="trl_ada")
    bodies = completion_bodies(tmp_path, tiny, engine, count=32)
    seeded = [i for i, body in enumerate(bodies) if "seed" in body]
    # the first requests only (sent before the first refusal came back, each sent again unseeded), then none
    assert seeded and max(seeded) < 2 * len(seeded) <= len(bodies) - 8
    lines = [r.getMessage() for r in caplog.records if "seed" in r.getMessage() and r.name.startswith("trl_ada")]
    assert len(lines) == 1 and engine in lines[0]


def test_a_cpu_engine_that_reports_its_device_gets_unseeded_requests(tmp_path, tiny, engine):  # noqa: F811
    Engine.device, Engine.refuse_seeds = "cpu", True
    assert not any("seed" in body for body in completion_bodies(tmp_path, tiny, engine))


# -- item 11: a program that is not vLLM ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["html", "json api"])
def test_train_names_a_program_that_is_not_vllm_before_trls_client_reads_it(tmp_path, tiny, engine, kind):  # noqa: F811
    """A web page, or another JSON API, behind a healthy `/health`: TRL's client would fail reading
    `max_model_len` ('Expecting value: line 1 column 1', `KeyError: 'data'`); the trainer names the URL first."""
    Engine.kind = kind
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, vllm_server_base_url=engine, vllm_server_timeout=5, token_budget=None)
    trainer = AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[parity_reward],
        args=args,
        train_dataset=[{"prompt": "hello"}],
        processing_class=tokenizer,
        weight_transfer=NoTransfer(),
    )
    with pytest.raises(NotVLLMAnswer) as refused:
        trainer.train()
    message = str(refused.value)
    assert f"{engine}/v1/models answered" in message and "not a vLLM server" in message
    assert "vllm_server_base_url" in message and "\n" not in message


def test_the_probe_asks_for_max_model_len_only_where_trl_reads_it(engine):
    Engine.kind = "json api"
    with pytest.raises(NotVLLMAnswer, match=f"{engine}/v1/models answered"):
        check_server(engine, 5, max_model_len=False)
    Engine.kind = "vllm"
    check_server(engine, 5, max_model_len=True)


def test_a_lora_run_names_a_program_that_is_not_vllm_when_the_trainer_is_built(tmp_path, tiny, engine):  # noqa: F811
    """With a PEFT model TRL asks the server in its `__init__`: the trainer names the program before."""
    from peft import LoraConfig

    Engine.kind = "json api"
    model_dir, tokenizer = tiny
    args = async_config(tmp_path, vllm_server_base_url=engine, vllm_server_timeout=5)
    with pytest.raises(NotVLLMAnswer, match=f"{engine}/v1/models answered"):
        AsyncReinforceAdaTrainer(
            model_dir,
            reward_funcs=[parity_reward],
            args=args,
            train_dataset=[{"prompt": "hello"}],
            processing_class=tokenizer,
            peft_config=LoraConfig(r=4, target_modules=["q_proj"]),
        )
