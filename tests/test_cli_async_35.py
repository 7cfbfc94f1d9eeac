"""Issue 35, item 11: `trl-ada train-async` against a port that is not vLLM (a web page, another JSON API behind a
healthy `/health`) fails in one line naming the URL and the cause, not TRL's client's JSON error or traceback."""

from __future__ import annotations

import pytest
from test_async_servers_35 import Engine, engine  # noqa: F401 (the fixture: a local server, vLLM or not)
from test_cli_async import _error_lines, async_config  # noqa: F401 (the fixture: a tiny train-async recipe)

from trl_ada import cli

pytestmark = pytest.mark.xdist_group("trainer")


@pytest.mark.parametrize("kind", ["html", "json api"])
def test_train_async_against_a_program_that_is_not_vllm_is_one_line_naming_it(async_config, engine, capsys, kind):  # noqa: F811
    Engine.kind = kind
    flags = ["--vllm_server_base_url", engine, "--vllm_server_timeout", "5"]
    assert cli.main(["train-async", "--config", str(async_config), *flags]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in _error_lines(err) if "trl-ada train-async: error:" in line]
    assert len(lines) == 1 and f"{engine}/v1/models answered" in lines[0] and "not a vLLM server" in lines[0]
