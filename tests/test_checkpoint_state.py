"""Reinforce-Ada's checkpoint state files read back on resume: every bad file is one clear CheckpointStateError."""

from __future__ import annotations

import json

import pytest
from refusals import names

from trl_ada.candidates import CandidateStream
from trl_ada.checkpoint_state import (
    CANDIDATE_STREAM_FILE,
    STREAM_FORMAT,
    CheckpointStateError,
    load_candidate_stream,
    save_candidate_stream,
)

OLD_RELEASE = {"size": 8, "seed": 0, "epoch": 1, "position": 3}
"""What the previous release wrote (no format name, no version)."""


def _checkpoint(tmp_path, content: str | bytes) -> str:
    path = tmp_path / CANDIDATE_STREAM_FILE
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(tmp_path)


def test_a_saved_stream_names_its_format_and_is_read_back(tmp_path):
    stream = CandidateStream(8, 3, epoch=2, position=5)
    save_candidate_stream(stream, str(tmp_path / CANDIDATE_STREAM_FILE))
    saved = json.loads((tmp_path / CANDIDATE_STREAM_FILE).read_text())
    assert saved == {"format": STREAM_FORMAT, "version": 1, **stream.state_dict()}
    assert load_candidate_stream(str(tmp_path), 8).state_dict() == stream.state_dict()


def test_a_stream_saved_by_the_previous_release_is_still_read(tmp_path):
    loaded = load_candidate_stream(_checkpoint(tmp_path, json.dumps(OLD_RELEASE)), 8)
    assert loaded.state_dict() == OLD_RELEASE


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "Expecting value"),
        ('{"size": 8, "seed"', "Expecting"),
        (b"\xff\xfe\x00", "can't decode"),
        ("[8, 0, 1, 3]", "expected a JSON object, got a list"),
        ('{"size": 8, "seed": 0, "epoch": 1}', "missing position"),
        ('{"size": "8", "seed": 0, "epoch": 1, "position": 3}', "size='8': must be integers"),
        ('{"size": 8, "seed": 0, "epoch": 1, "position": 2.5}', "position=2.5: must be integers"),
        ('{"size": 8, "seed": 0, "epoch": 1, "position": -1}', "out of range"),
        ('{"size": 8, "seed": 0, "epoch": 1, "position": 9}', "position=9 out of range"),
        ('{"format": "other", "version": 1, "size": 8, "seed": 0, "epoch": 1, "position": 3}', "format is 'other'"),
        (json.dumps({"format": STREAM_FORMAT, "version": 2, **OLD_RELEASE}), "format version 2 is not supported"),
    ],
)
def test_a_corrupt_stream_file_is_named_with_the_problem_and_the_fix(tmp_path, content, problem):
    checkpoint = _checkpoint(tmp_path, content)
    with pytest.raises(CheckpointStateError) as caught:
        load_candidate_stream(checkpoint, 8)
    message = str(caught.value)
    names(message, f"{tmp_path / CANDIDATE_STREAM_FILE}: ", problem, "without resume_from_checkpoint")
    assert "\n" not in message


@pytest.mark.parametrize("dataset_size", [6, 10])
def test_a_stream_for_a_dataset_of_another_size_is_refused_naming_both_sizes(tmp_path, dataset_size):
    checkpoint = _checkpoint(tmp_path, json.dumps(OLD_RELEASE))
    with pytest.raises(CheckpointStateError) as refused:
        load_candidate_stream(checkpoint, dataset_size)
    names(str(refused.value), "of 8 prompts", f"has {dataset_size}.", "without resume_from_checkpoint")


def test_a_missing_stream_file_says_which_settings_to_resume_with(tmp_path):
    with pytest.raises(CheckpointStateError) as refused:
        load_candidate_stream(str(tmp_path), 8)
    names(str(refused.value), f"{tmp_path} has no candidate_stream.json", "Resume with the settings")
