"""Outputs checked before the work, written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from refusals import names

from trl_ada import outputs
from trl_ada.outputs import OutputError, check_output, staged_output


def test_an_existing_output_is_refused_unless_overwrite(tmp_path):
    report = tmp_path / "report.json"
    report.write_text("earlier")
    with pytest.raises(OutputError) as refused:
        check_output(report, option="--output")
    names(str(refused.value), "--output ", "report.json: already exists", "--overwrite")
    assert check_output(report, option="--output", overwrite=True) == report
    assert check_output(tmp_path / "new" / "deeper" / "r.json", option="--output") == tmp_path / "new/deeper/r.json"


def test_wrong_kind_unwritable_and_blocked_paths_are_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError) as refused:
        check_output(tmp_path / "file", option="--output", overwrite=True, directory=True)
    names(str(refused.value), "file: exists", "not a directory", "another --output")
    with pytest.raises(OutputError) as refused:
        check_output(tmp_path / "file" / "out", option="--output")
    names(str(refused.value), "out: cannot be created", "file is a file", "another --output")


def test_an_unwritable_location_is_refused_naming_the_option_the_path_and_the_fix(tmp_path, monkeypatch):
    """A folder the process may not write into (here as the operating system would report it for a read-only mount
    or another user's folder: root bypasses permission bits, so `os.access` answers as it would there)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    access = os.access
    monkeypatch.setattr(outputs.os, "access", lambda path, mode: Path(path) != locked and access(path, mode))
    with pytest.raises(OutputError) as refused:
        check_output(locked / "out.json", option="--output")
    message = str(refused.value)
    assert message.startswith(f"--output {locked / 'out.json'}") and f"{locked} is not writable" in message
    assert "another --output" in message and "\n" not in message
    assert check_output(tmp_path / "out.json", option="--output") == tmp_path / "out.json"  # the fix works


def test_an_output_that_is_an_input_is_refused(tmp_path):
    selection = tmp_path / "selected"
    selection.mkdir()
    for output in (selection, selection / "prompts.jsonl"):
        with pytest.raises(OutputError, match="this is also the input"):
            check_output(output, option="--output", overwrite=True, directory=True, inputs=[selection])
    (selection / "data.jsonl").write_text("{}")
    with pytest.raises(OutputError, match="this is also the input"):  # the input lies inside the output
        check_output(tmp_path, option="--output", overwrite=True, directory=True, inputs=[selection / "data.jsonl"])
    assert check_output(tmp_path / "other", option="--output", directory=True, inputs=[selection, "org/hub-name"])


def test_staged_directory_replaces_the_old_one_only_when_complete(tmp_path):
    out = tmp_path / "selected"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), staged_output(out, directory=True) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["selected"]  # no staging left behind

    with staged_output(out, directory=True) as staging:
        (staging / "new.txt").write_text("new")
        assert not (out / "new.txt").exists()
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["selected"]


def test_staged_file_appears_whole(tmp_path):
    out = tmp_path / "sub" / "report.json"
    with staged_output(out) as staging:
        assert staging.name == "report.json" and not staging.exists()
        staging.write_text("{}")
        assert not out.exists()
    assert out.read_text() == "{}"
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.json"]
