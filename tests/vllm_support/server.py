"""A real vLLM OpenAI-compatible server on 127.0.0.1, and the tiny model it can serve on CPU (test-only)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from trl_ada.async_grpo.weights import WORKER_EXTENSION

REPO_ROOT = Path(__file__).resolve().parents[2]
"""First on the server's PYTHONPATH, so that its workers import this checkout's `trl_ada` (the worker extension)."""
MAX_MODEL_LEN = 256
SERVER_FLAGS = (
    "--dtype", "float32",
    "--max-model-len", str(MAX_MODEL_LEN),
    "--enforce-eager",
    "--max-num-seqs", "16",
    "--logprobs-mode", "processed_logprobs",
    "--max-logprobs", "-1",
)  # fmt: skip
PLAIN_TEXT_RESPONSE = {
    "defaults": {"role": "assistant"},
    "fields": {"content": {"close_pattern": r"$", "content": "text"}},
}
"""A transformers `response_template` reading the whole completion as the assistant's content (no reasoning, no
tools). TRL's own async worker parses completions with the tokenizer's template and refuses a chat template it does
not know (`trl/chat_template_utils.py`, `add_response_schema`), the tiny model's included."""
SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1"}


def build_servable_tiny_model(output_dir: str | Path, seed: int = 0) -> Path:
    """The toy model (`trl_ada.toy.build_tiny_model`) with an attention shape vLLM's CPU backend serves.

    The CPU attention backend needs a head size in {32, 64, 80, ...}: hidden 64 with 2 heads and 1 key-value head
    gives 32. Embeddings stay tied, the case where a CPU reload is easiest to get wrong.
    """
    import torch
    from transformers import AutoConfig, Qwen2ForCausalLM

    from trl_ada.toy import build_tiny_model

    output_dir = build_tiny_model(output_dir, hidden_size=64, seed=seed)
    config = AutoConfig.from_pretrained(output_dir)
    config.num_attention_heads, config.num_key_value_heads, config.head_dim = 2, 1, 32
    assert config.tie_word_embeddings
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        Qwen2ForCausalLM(config).save_pretrained(output_dir)
    return output_dir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; psutil ships with vLLM
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:
        return True


@dataclass
class VLLMServer:
    """A `python -m vllm.entrypoints.openai.api_server` process group; `stop()` ends it and every child."""

    model_dir: str
    port: int
    log_path: Path
    process: subprocess.Popen
    child_pids: list[int] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_until_healthy(self, timeout: float) -> None:
        """Poll `/health` until it answers 200; raise with the server log if it exits or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"The vLLM server exited with code {self.process.returncode} while starting. Its log "
                    f"({self.log_path}) ends with:\n{self.log_tail()}"
                )
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    import psutil

                    self.child_pids = [p.pid for p in psutil.Process(self.process.pid).children(recursive=True)]
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        self.stop()
        raise TimeoutError(
            f"The vLLM server at {self.base_url} was not healthy after {timeout:.0f} s (busy cores slow its start; "
            f"raise the startup timeout). Its log ({self.log_path}) ends with:\n{self.log_tail()}"
        )

    def kill(self) -> None:
        """End the server abruptly (SIGKILL to its whole process group), as a crash would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after `grace` seconds, and reap the server."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # children that outlived the server
        self.process.wait()
        deadline = time.monotonic() + grace
        while self.leftover_pids() and time.monotonic() < deadline:
            time.sleep(0.2)

    def leftover_pids(self) -> list[int]:
        """Processes of this server (the server and the children it had once healthy) still alive."""
        return [pid for pid in [self.process.pid, *self.child_pids] if _alive(pid)]


def start_server(
    model_dir: str | Path,
    log_path: str | Path,
    port: int | None = None,
    extra_flags: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
    cpus: set[int] | None = None,
) -> VLLMServer:
    """Launch the server on 127.0.0.1 (a free port unless given) with the CPU weight-sync worker extension (and
    `extra_flags`, `extra_env`, e.g. `--enable-lora`); pinned with its children to `cpus` when given (its OpenMP
    threads bound to them).

    Returns at once; call `wait_until_healthy`. The server runs in its own session so `stop()` reaches its children.
    """
    port = port or free_port()
    log_path = Path(log_path)
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--host", "127.0.0.1",
        "--port", str(port),
        *SERVER_FLAGS,
        "--worker-extension-cls", WORKER_EXTENSION,
        *extra_flags,
    ]  # fmt: skip
    pinned = {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, sorted(cpus)))} if cpus else {}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            env={**os.environ, **SERVER_ENV, **pinned, **(extra_env or {}), "PYTHONPATH": python_path},
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return VLLMServer(str(model_dir), port, log_path, process)
