"""The state files Reinforce-Ada adds to a checkpoint: the pass-rate memory and the candidate stream's position.

[`load_memory`] and [`load_candidate_stream`] read them back on resume and refuse, with a [`CheckpointStateError`]
naming the file and the fix, a file that is missing, corrupt, of another format, or (the stream) made for a dataset
of another size. [`save_candidate_stream`] writes the stream with its format name and version; files of the previous
release (without them) are still read.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .candidates import CandidateStream
from .memory import PassRateMemory

__all__ = [
    "CANDIDATE_STREAM_FILE",
    "MEMORY_FILE",
    "STREAM_FORMAT",
    "STREAM_VERSION",
    "CheckpointStateError",
    "load_candidate_stream",
    "load_memory",
    "save_candidate_stream",
    "stream_from_state",
]

MEMORY_FILE = "pass_rate_memory.npz"
CANDIDATE_STREAM_FILE = "candidate_stream.json"
STREAM_FORMAT = "trl_ada.candidate_stream"
STREAM_VERSION = 1
_STREAM_FIELDS = ("size", "seed", "epoch", "position")
_RESTART = "Resume from another checkpoint, or start a new run without resume_from_checkpoint."


class CheckpointStateError(ValueError):
    """A checkpoint's Reinforce-Ada state cannot be resumed; the message names the file and the fix."""


def load_memory(checkpoint: str, decay: float, prior: tuple[float, float] | None = None) -> PassRateMemory:
    """The pass-rate memory saved in `checkpoint`; an error, never a fresh memory, if it is missing or unreadable.

    Its evidence is kept as saved; `decay` (the resumed run's `memory_decay`) applies from the next update on, and
    `prior` (its `memory_prior_alpha`, `memory_prior_beta`), when given, from the next estimate on.
    """
    path = os.path.join(checkpoint, MEMORY_FILE)
    if not os.path.isfile(path):
        raise CheckpointStateError(
            f"pass_rate_memory=True but checkpoint {checkpoint} has no {MEMORY_FILE} (it was saved without the "
            "memory). Resume with pass_rate_memory=False, or start a fresh run."
        )
    try:
        memory = PassRateMemory.load(path)
    except ValueError as error:
        raise CheckpointStateError(f"{_sentence(error)} {_RESTART}") from error
    memory.decay = float(decay)
    if prior is not None:
        memory.prior = (float(prior[0]), float(prior[1]))
    return memory


def save_candidate_stream(stream: CandidateStream, path: str) -> None:
    """Write the stream's position to `path` (JSON), with the format name and version."""
    with open(path, "w") as file:
        json.dump({"format": STREAM_FORMAT, "version": STREAM_VERSION, **stream.state_dict()}, file)


def load_candidate_stream(checkpoint: str, dataset_size: int) -> CandidateStream:
    """The candidate stream saved in `checkpoint`, checked, for a train_dataset of `dataset_size` prompts."""
    path = os.path.join(checkpoint, CANDIDATE_STREAM_FILE)
    if not os.path.isfile(path):
        raise CheckpointStateError(
            f"prompt_oversampling / skip_threshold / rounds_per_prompt are set but checkpoint {checkpoint} has no "
            f"{CANDIDATE_STREAM_FILE} (it was saved without candidates). Resume with the settings it was saved with."
        )
    try:
        with open(path, "rb") as file:
            state = json.loads(file.read().decode())
        stream = stream_from_state(state)
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        raise CheckpointStateError(f"Corrupt candidate stream file {path}: {_sentence(error)} {_RESTART}") from error
    if stream.size != dataset_size:
        raise CheckpointStateError(
            f"{path}: the checkpoint's candidate stream covers a train_dataset of {stream.size} prompts, but this "
            f"run's has {dataset_size}. Resume on the dataset the checkpoint was trained on (same file, filters and "
            "max_prompt_tokens), or start a new run without resume_from_checkpoint for the new dataset."
        )
    return stream


def _sentence(error: Exception) -> str:
    """The error's message on one line, ending with a full stop."""
    return " ".join(str(error).split()).rstrip(".") + "."


def stream_from_state(state: Any) -> CandidateStream:
    """The `CandidateStream` of a saved state; a ValueError says what is wrong with it.

    Accepts the previous release's states, which hold only size, seed, epoch and position.
    """
    if not isinstance(state, dict):
        raise ValueError(f"expected a JSON object, got a {type(state).__name__}")
    if "format" in state or "version" in state:
        if state.get("format") != STREAM_FORMAT:
            raise ValueError(f"format is {state.get('format')!r}, expected {STREAM_FORMAT!r}")
        if state.get("version") != STREAM_VERSION:
            raise ValueError(
                f"format version {state.get('version')!r} is not supported by this trl_ada (it reads version "
                f"{STREAM_VERSION}); resume with the trl_ada version that wrote it"
            )
    missing = [name for name in _STREAM_FIELDS if name not in state]
    if missing:
        raise ValueError(f"missing {', '.join(missing)} (keys found: {sorted(state)})")
    values = {name: state[name] for name in _STREAM_FIELDS}
    wrong = [f"{name}={value!r}" for name, value in values.items() if type(value) is not int]
    if wrong:
        raise ValueError(f"{', '.join(wrong)}: must be integers")
    size, seed, epoch, position = values.values()
    if size < 1 or seed < 0 or epoch < 0 or not 0 <= position <= size:
        raise ValueError(
            f"size={size}, seed={seed}, epoch={epoch}, position={position} out of range (size >= 1, seed >= 0, "
            "epoch >= 0, 0 <= position <= size)"
        )
    return CandidateStream.from_state_dict(values)
