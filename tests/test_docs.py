"""The user docs stay true: their CPU commands run, their links resolve, and they cover every config field and metric.

Shell blocks in `docs/*.md`, the lab's `docs/lab/*.md` and `README.md` are fenced as ```` ```bash cpu ```` when
they run on a CPU-only machine without network access, and as plain ```` ```bash ```` when they need a GPU or the
network. The CPU blocks of one page run in order, each as `bash -euo pipefail`, in one fresh working directory per
page (so a page may build the tiny model in one block and use it in the next), with `HF_HUB_OFFLINE=1` and this
interpreter's `bin/` first on `PATH`. The docs assume a clone of the repository for `recipes/` and `benchmarks/`: the
working directory gets a copy of both, so that what the commands write stays out of the repository.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("docs")

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
LAB = DOCS / "lab"
"""The lab: the benchmarks' detailed reports and the journal; the index links its README, which links every page."""
README = REPO / "README.md"
COPIED_TO_WORKDIR = ("recipes", "benchmarks")
"""Repository folders the docs' commands refer to by relative path."""

BLOCK_BUDGET_S = 60
"""Each CPU block is written to finish well within this on an idle 2-core machine."""
BLOCK_TIMEOUT_S = 2 * BLOCK_BUDGET_S
"""Hard limit per block: the budget, with room for a machine shared with other tests."""

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=ticks)[ \t]*$", re.M | re.S
)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.M)


def doc_pages() -> list[Path]:
    """Every Markdown page whose CPU blocks are run: docs/*.md, docs/lab/*.md and the top-level README.md."""
    pages = sorted(DOCS.glob("*.md")) + sorted(LAB.glob("*.md"))
    return pages + [README] if README.is_file() else pages


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, dedented body) of every fenced code block, in order."""
    return [
        (m["info"].strip(), textwrap.dedent(m["body"]) if m["indent"] else m["body"]) for m in FENCE.finditer(text)
    ]


def cpu_blocks(page: Path) -> list[str]:
    """The page's ```bash cpu blocks, and its ```python cpu blocks as `python -` commands, in order."""
    blocks = []
    for info, body in fenced_blocks(page.read_text()):
        if info.split() == ["bash", "cpu"]:
            blocks.append(body)
        elif info.split() == ["python", "cpu"]:
            blocks.append(f"python - <<'PYTHON'\n{body}PYTHON\n")
    return blocks


def without_code(text: str) -> str:
    """The text with fenced code blocks and inline code removed (links inside code are not links)."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def github_slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link in a heading keeps its text
    title = title.replace("`", "").strip().lower()
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page (duplicates get GitHub's -1, -2 ... suffixes)."""
    seen: dict[str, int] = {}
    result = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        slug = github_slug(match["title"])
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


PAGES_WITH_CPU_BLOCKS = [page for page in doc_pages() if cpu_blocks(page)]


# ---------------------------------------------------------------------------------------------------- commands


def _environment(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(workdir / ".hf_home"),  # no login token of the person running the tests
        HF_TOKEN="",
        TOKENIZERS_PARALLELISM="false",
        TRL_EXPERIMENTAL_SILENCE="1",
        WANDB_MODE="disabled",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    return env


def run_block(block: str, workdir: Path, env: dict[str, str]) -> tuple[int | None, str, str]:
    """Run one block as `bash -euo pipefail`; (exit code or None on timeout, stdout, stderr).

    The block runs in its own process group, which is killed on timeout, so nothing it started outlives it.
    """
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return None, stdout, stderr
    return process.returncode, stdout, stderr


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CPU_BLOCKS, ids=lambda page: str(page.relative_to(REPO)))
def test_cpu_commands_run(page, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    for name in COPIED_TO_WORKDIR:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, workdir / name, ignore=shutil.ignore_patterns("results", "__pycache__"))
    env = _environment(workdir)
    for number, block in enumerate(cpu_blocks(page), start=1):
        start = time.perf_counter()
        code, stdout, stderr = run_block(block, workdir, env)
        elapsed = time.perf_counter() - start
        print(f"{page.name} block {number}: exit {code} in {elapsed:.1f} s")
        outcome = f"ran over {BLOCK_TIMEOUT_S} s" if code is None else f"exited {code} after {elapsed:.0f} s"
        assert code == 0, (
            f"{page.name}, CPU block {number} {outcome}:\n{block}\n"
            f"--- stdout (tail) ---\n{stdout[-3000:]}\n--- stderr (tail) ---\n{stderr[-5000:]}"
        )


# ---------------------------------------------------------------------------------------------------- structure


def test_shell_blocks_are_marked():
    """A shell block is either ```bash cpu (run by the tests) or ```bash (needs a GPU or the network)."""
    odd = [
        f"{page.name}: ```{info}"
        for page in doc_pages()
        for info, _ in fenced_blocks(page.read_text())
        if info.split()[:1] in (["bash"], ["sh"], ["shell"], ["console"])
        and info.split() not in (["bash"], ["bash", "cpu"])
    ]
    assert not odd, f"shell blocks must be fenced as ```bash or ```bash cpu: {odd}"


def test_the_pages_have_cpu_examples():
    names = {page.name for page in PAGES_WITH_CPU_BLOCKS}
    assert {"getting_started.md", "configuration.md", "recipes.md", "algorithm.md", "faq.md"} <= names


def test_relative_links_point_at_existing_files_and_headings():
    broken = []
    for page in sorted(DOCS.glob("*.md")) + sorted(LAB.glob("*.md")):
        for match in LINK.finditer(without_code(page.read_text())):
            target = match["target"].strip("<>")
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
                continue
            path_part, _, anchor = target.partition("#")
            resolved = page if not path_part else (page.parent / path_part).resolve()
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{page.name}: {target} (no heading #{anchor} in {resolved.name})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_index_links_every_page():
    index = without_code((DOCS / "index.md").read_text())
    linked = {Path(m["target"].partition("#")[0]).name for m in LINK.finditer(index)}
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert not pages - linked, f"docs/index.md does not link {sorted(pages - linked)}"


def test_the_benchmark_hub_quotes_its_reports_word_for_word():
    """The secondary benchmarks' headline tables in docs/benchmarks.md are copies: each table row, and each line of
    a printed table that holds a figure, must be in the lab report its section links, so the two cannot drift."""
    hub = (DOCS / "benchmarks.md").read_text()
    for section in re.split(r"\n(?=## )", hub):
        targets = {m["target"].partition("#")[0] for m in LINK.finditer(section)}
        reports = [(DOCS / target).read_text() for target in targets if target.startswith("lab/")]
        lines = _quoted_result_lines(section)
        if lines:
            assert reports, f"docs/benchmarks.md {section.splitlines()[0]!r} quotes results but links no lab report"
            missing = [line for line in lines if not any(line in report for report in reports)]
            assert not missing, f"docs/benchmarks.md {section.splitlines()[0]!r}: not in its report: {missing}"


def _quoted_result_lines(section: str) -> list[str]:
    """A section's table rows (not the separators) and the lines of its `text` blocks that hold a figure."""
    rows = [line for line in section.splitlines() if line.startswith("|") and set(line) - set("|- ")]
    printed = [
        line
        for block in re.findall(r"```text\n(.*?)```", section, flags=re.S)
        for line in block.splitlines()
        if re.search(r"\d", line)
    ]
    return rows + printed


def test_the_lab_is_one_line_of_the_index_and_its_readme_links_every_lab_page():
    index = without_code((DOCS / "index.md").read_text())
    assert "lab/README.md" in {m["target"].partition("#")[0] for m in LINK.finditer(index)}
    lab_index = without_code((LAB / "README.md").read_text())
    linked = {Path(m["target"].partition("#")[0]).name for m in LINK.finditer(lab_index)}
    pages = {page.name for page in LAB.glob("*.md")} - {"README.md"}
    assert not pages - linked, f"docs/lab/README.md does not link {sorted(pages - linked)}"


# ---------------------------------------------------------------------------------------------------- coverage


def test_configuration_documents_every_new_field():
    from trl import GRPOConfig

    from trl_ada import ReinforceAdaConfig

    added = {f.name for f in dataclasses.fields(ReinforceAdaConfig)} - {f.name for f in dataclasses.fields(GRPOConfig)}
    assert {"exit_rule", "samples_per_round", "max_rounds", "positive_threshold", "advantage_baseline"} <= added
    text = (DOCS / "configuration.md").read_text()
    missing = sorted(name for name in added if f"`{name}`" not in text)
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_configuration_documents_every_async_field():
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from trl_ada import ReinforceAdaConfig
    from trl_ada.async_grpo import AsyncReinforceAdaConfig

    added = {f.name for f in dataclasses.fields(AsyncReinforceAdaConfig)}
    added -= {f.name for f in dataclasses.fields(AsyncGRPOConfig)} | {
        f.name for f in dataclasses.fields(ReinforceAdaConfig)
    }
    assert {"max_prompts_in_flight", "reward_timeout"} <= added
    text = (DOCS / "configuration.md").read_text()
    missing = sorted(name for name in added if f"`{name}`" not in text)
    assert not missing, f"docs/configuration.md does not document {missing}"


def _generic(name: str) -> str:
    """`exit_fraction/round_3` and `generation_time/round_{sampler.round}` -> `.../round_<r>`."""
    return re.sub(r"round_(\d+|\{[^}]*\})", "round_<r>", name)


def sampler_metric_names() -> set[str]:
    """Every key `SamplingStatistics.as_metrics` emits, with round numbers made generic."""
    from trl_ada.sampling import SamplingStatistics
    from trl_ada.simulation import SimulatedPolicy, simulate_step

    sampler = simulate_step(SimulatedPolicy([0.0, 0.5, 1.0]), num_generations=4, samples_per_round=4, max_rounds=3)
    keys = set(sampler.statistics().as_metrics())
    assert keys == set(SamplingStatistics.as_metrics(sampler.statistics()))
    return {_generic(key) for key in keys}


def est_and_objective_metric_names() -> set[str]:
    """Every key an Est step's sampler and the objective weights emit."""
    import numpy as np

    from trl_ada.objectives import advantage_weights
    from trl_ada.plan import SamplingPlan
    from trl_ada.schedules.est import EstSampler

    plan = SamplingPlan.from_fields(
        generation_schedule="est", pass_rate_memory=True, objective="log", objective_weighting="hybrid"
    )
    sampler = EstSampler(2, plan, prior_alpha=[1.0, 1.0], prior_beta=[1.0, 3.0])
    sampler.plan_round()
    sampler.ingest([1.0, 0.0] * 4)
    _, weights = advantage_weights(plan, [0.5, 0.5], [np.array([0.5, -0.5])] * 2)
    return {key for key in sampler.metrics() if key.startswith("est/")} | {f"objective/{key}" for key in weights}


def trainer_metric_names() -> set[str]:
    """The metrics the trainer logs under its prefix besides the sampler's (from its and the schedules' source)."""
    source = (REPO / "trl_ada" / "trainer.py").read_text()
    names = set(re.findall(r"\{METRIC_PREFIX\}([\w/]+(?:\{[^}]*\})?)", source))
    names = {name for name in names if "{name}" not in name} | est_and_objective_metric_names()
    worker = (REPO / "trl_ada" / "async_grpo" / "worker.py").read_text()
    worker_names = re.findall(r"\{METRIC_PREFIX\}([\w/]+)(\{name\})?", worker)
    names.update(name for name, per_name in worker_names if not per_name)  # objective/{name}: the trainer's names
    for schedule in (REPO / "trl_ada" / "schedules").glob("*.py"):  # a schedule's own metrics, prefixed by the trainer
        pattern = r"f?\"((?:generation_time|samples|streaming)/[\w/]*(?:\{[^}]*\})?)\""
        names.update(re.findall(pattern, schedule.read_text()))
    return {_generic(name) for name in names}


def test_metrics_documents_every_metric():
    from trl_ada.trainer import METRIC_PREFIX

    names = sampler_metric_names() | trainer_metric_names()
    assert {"first_round_reward", "samples", "tokens", "exit_fraction/round_<r>", "generation_time/round_<r>"} <= names
    text = (DOCS / "metrics.md").read_text()
    missing = sorted(METRIC_PREFIX + name for name in names if f"`{METRIC_PREFIX}{name}`" not in text)
    assert not missing, f"docs/metrics.md does not document {missing}"


def test_readme_quick_start_names_every_preset():
    from trl_ada.plan import PRESETS

    line = next(line for line in README.read_text().splitlines() if "# a preset:" in line)
    assert sorted(re.findall(r'"(\w+)"', line.split("# a preset:")[1])) == sorted(PRESETS)


@pytest.mark.parametrize("page", ["configuration.md", "architecture.md"])
def test_the_pages_hold_their_generated_tables(page):
    from trl_ada.fields_table import with_generated_tables

    text = (DOCS / page).read_text()
    assert with_generated_tables(text) == text, (
        f"docs/{page}'s generated tables are stale: run "
        "`python -m trl_ada.fields_table docs/configuration.md docs/architecture.md`"
    )
