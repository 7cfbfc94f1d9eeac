"""The import graph runs library -> application: no module outside `trl_ada/cli/` imports the command line, and
the benchmarks import no command-line module (they share `trl_ada.toy.experiment` with `trl-ada demo`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trl_ada"


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


LIBRARY = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if p.relative_to(PACKAGE).parts[0] != "cli" and p.name != "__main__.py"  # `python -m trl_ada` runs the CLI
)
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", LIBRARY + BENCHMARKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_outside_the_cli_imports_it(path):
    cli_imports = sorted(
        name for name in imported_modules(path) if name == "trl_ada.cli" or name.startswith("trl_ada.cli.")
    )
    assert cli_imports == []


def test_the_benchmarks_do_not_edit_sys_path():
    for path in BENCHMARKS:
        assert "sys.path" not in path.read_text(), path


@pytest.mark.parametrize("path", sorted((PACKAGE / "schedules").glob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_schedule_imports_the_trainer(path):
    """A schedule sees its trainer only as `schedules.base.StepHost`."""
    assert not {name for name in imported_modules(path) if name.startswith("trl_ada.trainer")}


def test_the_trl_joints_import_nothing_of_the_asynchronous_trainer():
    """`_trl.py` holds the synchronous trainer's joints; the asynchronous trainer's own code imports them, not the
    other way round."""
    assert not {name for name in imported_modules(PACKAGE / "_trl.py") if name.startswith("trl_ada.async_grpo")}


def test_the_one_exception_that_steers_trl_stays_in_the_joints():
    """`_PromptsReady` stops TRL's preamble for rows with environments, tools or images (`docs/architecture.md`): it is
    raised and caught in `_trl.py` only, in one function and the hook it stops."""
    holders = sorted(
        str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py") if "_PromptsReady" in path.read_text()
    )
    assert holders == ["trl_ada/_trl.py"]


def test_the_package_map_names_every_module():
    """docs/architecture.md's layers table is the one package map: every module and subpackage of `trl_ada` is in
    it (a module added without a line there fails here, naming it)."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("## The layers", 1)[1].split("\n\n", 2)[1]
    package = ROOT / "trl_ada"
    modules = [p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    modules += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    missing = [name for name in modules if f"`{name}" not in table]
    assert not missing, f"docs/architecture.md's layers table does not name {missing}"
