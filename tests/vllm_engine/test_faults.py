"""Faults against a real vLLM server: none at the address, something else on the port, the server killed mid-run."""

from __future__ import annotations

import faulthandler
import http.server
import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import requests  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from scripted import PROMPTS, ScriptedReward, make_config  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from vllm_support.server import free_port  # noqa: E402

from trl_ada import ReinforceAdaTrainer  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

HANG_GUARD_S = 600
"""A run that has not ended by then is a hang: dump the stacks and end pytest rather than stall CI."""


def _dataset() -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("listener", ["nothing", "another HTTP server"])
def test_no_server_at_the_address_names_the_option_within_the_timeout(listener, servable_model_dir, tmp_path):
    port = free_port()
    other = None
    if listener == "another HTTP server":  # TRL's own check would poll it forever
        other = http.server.ThreadingHTTPServer(("127.0.0.1", port), _NotFound)
        threading.Thread(target=other.serve_forever, daemon=True).start()
    args = make_config(
        "balance", "server", tmp_path, vllm_server_base_url=f"http://127.0.0.1:{port}", vllm_server_timeout=3
    )
    start = time.monotonic()
    try:
        with pytest.raises(ConnectionError) as error:
            ReinforceAdaTrainer(
                model=servable_model_dir, reward_funcs=[ScriptedReward()], args=args, train_dataset=_dataset()
            )
    finally:
        if other is not None:
            other.shutdown()
    assert time.monotonic() - start < 3 + 10
    message = str(error.value)
    for needed in (f"http://127.0.0.1:{port}", "vllm_server_timeout=3", "vllm_server_base_url", "trl vllm-serve"):
        assert needed in message
    if other is not None:
        assert "HTTP 404" in message


def test_server_killed_mid_training_stops_the_run_and_keeps_the_last_checkpoint(
    vllm_server_to_kill, servable_model_dir, cpu_sync, tmp_path
):
    """The server dies in step 3, after round 1: the run fails naming the server's address, checkpoint 2 intact."""
    server = vllm_server_to_kill
    reward = ScriptedReward()
    trainer = None

    def kill_during_step_3(prompts, completions, **kwargs):
        if trainer.state.global_step == 2 and server.process.poll() is None:
            server.kill()
        return reward(prompts, completions, **kwargs)

    args = make_config(
        "balance",
        "server",
        tmp_path,
        server.base_url,
        max_steps=5,
        save_strategy="steps",
        save_steps=1,
        vllm_server_timeout=30,
    )
    trainer = ReinforceAdaTrainer(
        model=servable_model_dir, reward_funcs=[kill_during_step_3], args=args, train_dataset=_dataset()
    )
    faulthandler.dump_traceback_later(HANG_GUARD_S, exit=True)
    start = time.monotonic()
    try:
        with pytest.raises(requests.exceptions.ConnectionError) as error:
            trainer.train()
    finally:
        faulthandler.cancel_dump_traceback_later()
    print(f"run stopped {time.monotonic() - start:.0f} s after it started: {error.value}")
    assert f"port={server.port}" in str(error.value)
    assert not server.leftover_pids()

    output = Path(args.output_dir)
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    last = output / "checkpoint-2"
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "rng_state.pth"):
        assert (last / name).is_file(), name
    assert json.loads((last / "trainer_state.json").read_text())["global_step"] == 2
    # the failed step never reached its optimizer update: the checkpoint holds the weights the trainer still has
    saved = AutoModelForCausalLM.from_pretrained(last).state_dict()
    current = trainer.model.state_dict()
    assert saved.keys() == current.keys() and all(torch.equal(saved[k], current[k]) for k in saved)
