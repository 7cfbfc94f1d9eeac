"""One run per output directory, and checkpoints that are either complete or visibly partial.

Three guarantees for a training run's `output_dir`:

* **One run at a time.** [`run_lock`] creates `output_dir/.trl_ada.lock` atomically, holding the owner's pid, host
  and start time. A second run into the same directory fails at once with a message naming that process. A lock
  left by a process that died (same host, pid gone or reused) is stale: it is taken over with a warning.
* **No mixing.** [`check_output_dir`] refuses a directory that already holds `checkpoint-*` folders unless the run
  resumes from them (`resume_from_checkpoint`) or explicitly replaces them (`overwrite_output_dir=True`, which
  deletes the old checkpoints before training starts). A directory holding a finished run saved without
  checkpoints (its final model or trainer state at the top, [`FINISHED_RUN_FILES`]) is refused the same way; with
  `overwrite_output_dir=True` the new run's final save replaces those files.
* **No half-written checkpoint is ever resumed.** [`saving_checkpoint`] marks `checkpoint-N` with
  `.trl_ada-saving` before the first file is written and removes the marker only after the last one (and after
  checkpoint rotation, so an interruption between the two cannot delete the previous complete checkpoint).
  [`last_complete_checkpoint`] skips, with a warning, marked folders and folders that a save cut short in another
  way: no readable `trainer_state.json`, no model weights (or a missing shard, or a safetensors file shorter than
  its header says), an empty file (an `optimizer.pt` of 0 bytes) or a `torch.save` file cut short (an `optimizer.pt`
  whose zip directory is missing); resuming with `True` falls back to the newest
  complete checkpoint and logs which. A new save of a step deletes the folder an earlier save of that step left,
  before writing into it.

Checkpoints written by other tools (no marker, a readable `trainer_state.json`, whole weights) count as complete.
[`claim_run_dir`] and [`complete_checkpoint`] wire this into a `transformers.Trainer` in one line each.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

__all__ = [
    "FINISHED_RUN_FILES",
    "LOCK_NAME",
    "SAVING_MARKER",
    "LockHolder",
    "RunDirectoryError",
    "SaveInterrupted",
    "check_output_dir",
    "check_output_dir_is_directory",
    "checkpoint_dirs",
    "finished_run_files",
    "claim_run_dir",
    "complete_checkpoint",
    "incomplete_reason",
    "is_complete",
    "last_complete_checkpoint",
    "resolve_resume",
    "run_lock",
    "safetensors_complete",
    "saving_checkpoint",
    "weights_file_problem",
]

logger = logging.getLogger(__name__)

LOCK_NAME = ".trl_ada.lock"
"""File in `output_dir` that names the run using it."""
SAVING_MARKER = ".trl_ada-saving"
"""File inside `checkpoint-N` while it is being written."""
TRAINER_STATE = "trainer_state.json"
FINISHED_RUN_FILES = (
    TRAINER_STATE,
    "config.json",
    "adapter_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model.bin",
)
"""Files at the top of `output_dir` that a finished run's final save (`save_model`, `save_state`) writes."""
_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


class RunDirectoryError(ValueError):
    """The output directory cannot be used as asked; the message says why and what to do."""


class SaveInterrupted(KeyboardInterrupt):
    """Ctrl-C while a checkpoint was being written; the message names the checkpoint and how to go on."""


# --------------------------------------------------------------------------- checkpoints


def checkpoint_dirs(output_dir: str | os.PathLike) -> list[Path]:
    """`checkpoint-N` folders of `output_dir`, by increasing N (empty if the directory does not exist)."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _CHECKPOINT.match(p.name)) and p.is_dir()]
    return [path for _, path in sorted(found)]


def incomplete_reason(checkpoint: str | os.PathLike) -> str | None:
    """Why the checkpoint was not completely written (a saving marker, a missing or unreadable
    `trainer_state.json`, missing or truncated model weights, an empty file), or None when it is complete."""
    path = Path(checkpoint)
    if (path / SAVING_MARKER).exists():
        return f"its saving marker {SAVING_MARKER} is still there"
    try:
        state = json.loads((path / TRAINER_STATE).read_text())
    except FileNotFoundError:
        return f"it has no {TRAINER_STATE}"
    except (OSError, UnicodeDecodeError, ValueError):
        return f"its {TRAINER_STATE} is truncated or corrupt"
    if not isinstance(state, dict):
        return f"its {TRAINER_STATE} is not a JSON object"
    return _weights_problem(path) or _empty_file(path) or _archive_problem(path)


def is_complete(checkpoint: str | os.PathLike) -> bool:
    """True when every file of the checkpoint was written: no saving marker, a `trainer_state.json` that parses,
    model weights whose size matches their header, and no empty file."""
    return incomplete_reason(checkpoint) is None


_WEIGHT_FILES = (
    "model.safetensors",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "adapter_model.bin",
)
"""The model weights of a checkpoint, one of which (or a sharded index, `<name>.index.json`) it must hold."""
_UNCHECKED_WEIGHTS = re.compile(r"^(global_step\d+|pytorch_model_fsdp_\d+)$")
"""DeepSpeed and FSDP folders of sharded weights: present counts as complete (their layout is theirs)."""


def _weights_problem(checkpoint: Path) -> str | None:
    """Why the checkpoint's model weights cannot be loaded (none, a missing shard, a truncated safetensors file)."""
    for name in _WEIGHT_FILES:
        index = checkpoint / f"{name}.index.json"
        if index.is_file():
            return _index_problem(index)
        if (checkpoint / name).is_file():
            return weights_file_problem(checkpoint / name)
    if any(_UNCHECKED_WEIGHTS.match(entry.name) for entry in checkpoint.iterdir()):
        return None
    return f"it has no model weights ({', '.join(_WEIGHT_FILES[:2])} or {_WEIGHT_FILES[2]})"


def _index_problem(index: Path) -> str | None:
    """The first problem of a sharded checkpoint: an unreadable index, or a shard missing or truncated."""
    try:
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return f"its {index.name} is truncated or corrupt"
    for shard in shards:
        if not (index.parent / shard).is_file():
            return f"its weight shard {shard} is missing"
        problem = weights_file_problem(index.parent / shard)
        if problem:
            return problem
    return None


def weights_file_problem(weights: Path) -> str | None:
    """Why a weights file is incomplete: empty, or (safetensors) shorter than its header says."""
    if weights.stat().st_size == 0:
        return f"its {weights.name} is empty"
    if weights.suffix == ".safetensors" and not safetensors_complete(weights):
        return f"its {weights.name} is truncated or corrupt"
    return None


def safetensors_complete(path: str | os.PathLike) -> bool:
    """True when the safetensors file's JSON header parses and the file is as long as the tensors it lists."""
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            if size < 8 or 8 + length > size:
                return False
            header = json.loads(handle.read(length))
        ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return False
    return size >= 8 + length + max(ends, default=0)


def _empty_file(checkpoint: Path) -> str | None:
    """The first file of the checkpoint that is empty (a save that died after creating it), as a reason."""
    empty = sorted(
        p.name for p in checkpoint.iterdir() if not p.name.startswith(".") and p.is_file() and not p.stat().st_size
    )
    return f"its {empty[0]} is empty" if empty else None


_TORCH_ARCHIVES = (".pt", ".pth", ".bin")
"""Files `torch.save` writes (the optimizer, the scheduler, the RNG states, the training arguments): zip archives,
whose directory is written last, so a truncated one is no zip file."""


def _archive_problem(checkpoint: Path) -> str | None:
    """The first `torch.save` file of the checkpoint that was cut short (its zip directory missing), as a reason."""
    for path in sorted(checkpoint.iterdir()):
        if path.suffix in _TORCH_ARCHIVES and path.is_file() and not zipfile.is_zipfile(path):
            return f"its {path.name} is truncated or corrupt"
    return None


def last_complete_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The complete checkpoint with the highest step, warning about every partial one newer than it."""
    complete = None
    for path in reversed(checkpoint_dirs(output_dir)):
        reason = incomplete_reason(path)
        if reason is None:
            complete = path
            break
        logger.warning(
            "Ignoring %s: it was not completely written (%s; an interrupted save or a full disk). Delete it once "
            "you no longer need to inspect it.",
            path,
            reason,
        )
    return complete


def resolve_resume(output_dir: str | os.PathLike, resume: str | os.PathLike | bool | None) -> str | None:
    """The checkpoint to resume from: `True` means the last complete one in `output_dir`; a path must be complete."""
    if resume is None or resume is False:
        return None
    if resume is True:
        last = last_complete_checkpoint(output_dir)
        if last is None:
            partial = checkpoint_dirs(output_dir)
            found = f"only partial checkpoints ({', '.join(p.name for p in partial)})" if partial else "no checkpoint"
            raise RunDirectoryError(
                f"resume_from_checkpoint=True, but output_dir {str(output_dir)!r} holds {found}. Start a new run "
                "without resume_from_checkpoint, or pass the path of a complete checkpoint."
            )
        logger.info("Resuming from %s, the newest complete checkpoint in %s.", last, output_dir)
        return str(last)
    path = Path(resume)
    if not path.is_dir():
        raise RunDirectoryError(
            f"resume_from_checkpoint={str(resume)!r}: no such directory. Pass a checkpoint-N folder of a previous "
            "run, or the boolean True (`true` in the YAML or on the command line, not the string 'true' in Python) "
            "for the last complete checkpoint in output_dir."
        )
    reason = incomplete_reason(path)
    if reason is not None:
        last = last_complete_checkpoint(path.parent)
        hint = f" The last complete checkpoint there is {str(last)!r}." if last else ""
        raise RunDirectoryError(
            f"resume_from_checkpoint={str(resume)!r} was not completely written ({reason}; an interrupted save or a "
            f"full disk).{hint}"
        )
    return str(path)


def check_output_dir_is_directory(output_dir: str | os.PathLike) -> None:
    """Raise when `output_dir`, or the closest of its parents that exists, is not a directory."""
    path = Path(output_dir).expanduser().absolute()
    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        where = "is a file" if existing == path else f"is inside {str(existing)!r}, which is a file"
        raise RunDirectoryError(
            f"output_dir {str(output_dir)!r} {where}; output_dir must be a directory (it receives the checkpoints and "
            "the final model). Choose another output_dir, or move the file away."
        )


def finished_run_files(output_dir: str | os.PathLike) -> list[str]:
    """The [`FINISHED_RUN_FILES`] at the top of `output_dir`: what a finished run's final save left there."""
    root = Path(output_dir)
    return [name for name in FINISHED_RUN_FILES if (root / name).is_file()]


def check_output_dir(output_dir: str | os.PathLike, *, resuming: bool, overwrite: bool) -> list[Path]:
    """Checkpoints of an earlier run that a new run would mix with; raises unless resuming or overwriting. A finished
    run saved without checkpoints (its final model at the top) is refused the same way.

    Returns the folders to delete (only with `overwrite=True` and not resuming), else an empty list; the files of a
    finished run are not deleted: the new run's final save replaces them.
    """
    existing = checkpoint_dirs(output_dir)
    finished = finished_run_files(output_dir)
    if not (existing or finished) or resuming:
        return []
    if overwrite:
        return existing
    if not existing:
        raise RunDirectoryError(
            f"output_dir {str(output_dir)!r} already holds a finished run ({', '.join(finished)}), which this run's "
            "final save would overwrite. Replace it with overwrite_output_dir=true, or choose a new output_dir."
        )
    names = ", ".join(p.name for p in existing[:3]) + (", ..." if len(existing) > 3 else "")
    raise RunDirectoryError(
        f"output_dir {str(output_dir)!r} already holds checkpoints of another run ({names}). Continue that run with "
        "resume_from_checkpoint=true, replace it with overwrite_output_dir=true, or choose a new output_dir."
    )


@contextmanager
def saving_checkpoint(checkpoint: str | os.PathLike, *, is_writer: bool = True) -> Iterator[None]:
    """Mark `checkpoint` as partial while the body writes it; the marker goes only when the body returns."""
    path = Path(checkpoint)
    if is_writer:
        path.mkdir(parents=True, exist_ok=True)
        _write_atomically(path / SAVING_MARKER, f"{os.getpid()} {time.time():.0f}\n")
    try:
        yield
    except BaseException as error:
        if is_writer:
            logger.warning("Saving %s was interrupted; it stays marked partial and resuming will skip it.", path)
        if isinstance(error, KeyboardInterrupt) and not isinstance(error, SaveInterrupted):
            raise SaveInterrupted(
                f"interrupted (Ctrl-C) while saving {path}; it stays marked partial and resuming skips it. Go on "
                "with --resume_from_checkpoint true."
            ) from error
        raise
    if is_writer:
        (path / SAVING_MARKER).unlink()


# --------------------------------------------------------------------------- lock


@dataclass(frozen=True)
class LockHolder:
    """Who holds a run directory's lock."""

    pid: int
    host: str
    started: float
    """Seconds since the epoch when the lock was taken."""
    process_start: str | None = None
    """The process's start time as the OS reports it (`/proc/<pid>/stat`), to tell a reused pid apart."""

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"process {self.pid} on {self.host}, started {when}"

    def is_alive(self) -> bool | None:
        """True/False on the holder's host; None when it runs elsewhere and cannot be checked."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return self.process_start is None or self.process_start == _process_start(self.pid)


def _process_start(pid: int) -> str | None:
    """Start time of `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`), or None without /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _me() -> LockHolder:
    return LockHolder(os.getpid(), socket.gethostname(), time.time(), _process_start(os.getpid()))


def _read_holder(lock: Path) -> LockHolder | None:
    try:
        return LockHolder(**json.loads(lock.read_text()))
    except (OSError, ValueError, TypeError):
        return None


_HELD: dict[Path, int] = {}
"""Locks this process holds, with their nesting depth (the CLI and `train()` may both take it)."""


@contextmanager
def run_lock(output_dir: str | os.PathLike) -> Iterator[LockHolder]:
    """Hold `output_dir`'s run lock for the body; fail at once, naming the holder, if another live run has it.

    Re-entrant within a process. Creates `output_dir` if needed, and removes it again if it is still empty.
    """
    check_output_dir_is_directory(output_dir)
    root = Path(output_dir).resolve()
    if root in _HELD:
        _HELD[root] += 1
        try:
            yield _me()
        finally:
            _HELD[root] -= 1
        return
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    try:
        me = _acquire(lock)
    except BaseException:
        _remove_if_empty(root, created)
        raise
    _HELD[root] = 1
    try:
        yield me
    finally:
        del _HELD[root]
        if _read_holder(lock) == me:
            lock.unlink(missing_ok=True)
        _remove_if_empty(root, created)


def _remove_if_empty(root: Path, created: bool) -> None:
    if created and root.is_dir() and not any(root.iterdir()):
        root.rmdir()


def _acquire(lock: Path) -> LockHolder:
    me = _me()
    for _ in range(3):
        if _create_exclusively(lock, json.dumps(asdict(me))):
            return me
        holder = _read_holder(lock)
        if holder is None:
            if time.time() - _mtime(lock) < 5:  # another process is writing it right now
                time.sleep(0.2)
                continue
            raise RunDirectoryError(
                f"output_dir {str(lock.parent)!r} is locked by {lock} (unreadable). If no run is using this "
                "directory, delete that file and start again."
            )
        alive = holder.is_alive()
        if alive is False:
            logger.warning("Taking over the lock of %s, which is no longer running (%s).", holder.describe(), lock)
            if _read_holder(lock) == holder:
                lock.unlink(missing_ok=True)
            continue
        elsewhere = "" if alive else " (on another machine: trl_ada cannot check whether it still runs)"
        raise RunDirectoryError(
            f"output_dir {str(lock.parent)!r} is in use by {holder.describe()}{elsewhere}. Wait for that run to end "
            f"or choose another output_dir; if it is no longer running, delete {lock}."
        )
    raise RunDirectoryError(
        f"Could not take the lock {lock}; another run keeps replacing it. Choose another output_dir."
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _create_exclusively(path: Path, text: str) -> bool:
    """Create `path` holding `text` in one step (False if it exists): a hard link from a finished temporary file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links
        try:
            with open(path, "x") as handle:
                handle.write(text)
            return True
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- Trainer wiring


def _broadcast(trainer: Any, compute: Callable[[], Any]) -> Any:
    """Run `compute` on the main process and hand its result (or its error) to every process."""
    accelerator = trainer.accelerator
    outcome: Any = None
    if accelerator.is_main_process:
        try:
            outcome = ("ok", compute())
        except RunDirectoryError as err:
            outcome = ("error", str(err))
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        outcome = broadcast_object_list([outcome], from_process=0)[0]
    kind, value = outcome
    if kind == "error":
        raise RunDirectoryError(value)
    return value


@contextmanager
def claim_run_dir(trainer: Any, resume_from_checkpoint: str | bool | None) -> Iterator[str | None]:
    """For `Trainer.train`: lock `output_dir`, refuse another run's checkpoints, yield the checkpoint to resume.

    With `overwrite_output_dir=True` (and no resume) the old `checkpoint-*` folders are deleted first.
    """
    args = trainer.args
    overwrite = bool(getattr(args, "overwrite_output_dir", False))
    with run_lock(args.output_dir) if trainer.accelerator.is_main_process else _nothing():

        def prepare() -> str | None:
            resume = resolve_resume(args.output_dir, resume_from_checkpoint)
            for old in check_output_dir(args.output_dir, resuming=resume is not None, overwrite=overwrite):
                logger.warning("overwrite_output_dir=True: deleting %s of an earlier run.", old)
                shutil.rmtree(old)
            finished = finished_run_files(args.output_dir)
            if overwrite and resume is None and finished:
                logger.warning(
                    "overwrite_output_dir=True: this run's final save replaces the earlier run's %s in %s.",
                    ", ".join(finished),
                    args.output_dir,
                )
            return resume

        yield _broadcast(trainer, prepare)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def complete_checkpoint(trainer: Any, folder: str | Path) -> Iterator[None]:
    """For a checkpoint save into `folder` (`<run dir>/checkpoint-N`): write it under a saving marker, rotate old
    ones after the marker is gone.

    A `checkpoint-N` already there (left partial by a killed save, or by a run resumed from an earlier step) is
    deleted first, so that no file of it survives into the new one. Rotation (`save_total_limit`) is held back while
    the body runs and done here once the new checkpoint is complete.
    """
    args = trainer.args
    checkpoint = Path(folder)
    run_dir = checkpoint.parent
    if args.should_save and checkpoint.is_dir():
        logger.warning("Replacing %s, left by an earlier save of this step.", checkpoint)
        shutil.rmtree(checkpoint)
    trainer.accelerator.wait_for_everyone()  # no rank writes into the folder before it is cleared
    limit, args.save_total_limit = args.save_total_limit, None
    try:
        with saving_checkpoint(checkpoint, is_writer=args.should_save):
            yield
            trainer.accelerator.wait_for_everyone()  # every rank's shards are on disk before the marker goes
    finally:
        args.save_total_limit = limit
    if args.should_save:
        rotate_checkpoints(
            output_dir=run_dir,
            save_total_limit=limit,
            best_model_checkpoint=trainer.state.best_model_checkpoint,
            use_mtime=True,
        )
