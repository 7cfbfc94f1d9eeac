"""Output files and directories that are checked before the work and appear whole or not at all.

[`check_output`] runs before any expensive work: it refuses an existing output (unless `overwrite`), an output that
is also an input, and a location that cannot be written, with one message naming the option, the path and the fix.
[`staged_output`] gives the writer a temporary sibling (`.NAME.partial-*`) and renames it into place only when the
writer returns, so an interruption, a full disk or a crash never leaves a half-written or mixed output, and an
existing output is replaced only at that last step.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["OutputError", "check_output", "staged_output"]


class OutputError(ValueError):
    """An output path that cannot be used as asked; the message says why and what to do."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output(
    path: str | os.PathLike,
    *,
    option: str,
    overwrite: bool = False,
    directory: bool = False,
    inputs: Iterable[str | os.PathLike] = (),
    owned: Callable[[str], bool] | None = None,
) -> Path:
    """The absolute output path, after checking that it can be written as a new file (or `directory`).

    Raises [`OutputError`] when `path` exists and `overwrite` is False, when it exists as the other kind (file vs
    directory), when it is, contains or lies inside one of `inputs`, when an existing `directory` holds an entry whose
    name `owned` does not accept (a file the command did not write, which replacing the directory would delete), or
    when its nearest existing ancestor is not a writable directory.
    """
    target = Path(path).expanduser().absolute()
    kind = "directory" if directory else "file"
    for source in inputs:
        source_path = Path(source).expanduser().absolute()
        if source_path.exists() and (
            source_path == target
            or target in source_path.parents
            or (source_path.is_dir() and source_path in target.parents)
        ):
            raise OutputError(
                f"{option} {path}: this is also the input {source}; writing it would destroy the data being read. "
                f"Choose another {option}."
            )
    if target.exists():
        if target.is_dir() != directory:
            raise OutputError(f"{option} {path}: exists and is not a {kind}. Choose another {option}.")
        if not overwrite:
            raise OutputError(
                f"{option} {path}: already exists. Pass --overwrite to replace it (only once the new results are "
                f"complete), or choose another {option}."
            )
        if directory and owned is not None:
            _check_owned(target, owned, option, path)
    ancestor = _nearest_existing(target.parent)
    if not ancestor.is_dir():
        raise OutputError(f"{option} {path}: cannot be created, {ancestor} is a file. Choose another {option}.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: cannot be written, {ancestor} is not writable. Choose another {option}.")
    return target


def _check_owned(target: Path, owned: Callable[[str], bool], option: str, path: str | os.PathLike) -> None:
    """Refuse to replace a directory that holds entries the command did not write (`owned` rejects their names)."""
    foreign = sorted(entry.name for entry in target.iterdir() if not owned(entry.name))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise OutputError(
            f"{option} {path}: holds {len(foreign)} file(s) this command did not write ({shown}); --overwrite "
            f"replaces only an earlier output of the command. Move them away, or choose another {option}."
        )


@contextmanager
def staged_output(path: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of `path` to write; move it to `path` when the body returns, delete it otherwise.

    For a file the sibling does not exist yet; for a `directory` it is an empty directory. An existing `path` is
    replaced only after the new output is complete (a directory is swapped with two renames, then deleted).
    """
    target = Path(path).expanduser().absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    written = staging if directory else staging / target.name
    try:
        yield written
        _publish(written, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(written: Path, target: Path) -> None:
    if written.is_file() or not target.is_dir():
        os.replace(written, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.replace(target, old / target.name)
    os.replace(written, target)
    shutil.rmtree(old, ignore_errors=True)
