"""Step-time overhead of `ReinforceAdaTrainer` over plain `trl.GRPOTrainer` on the tiny offline model (CPU).

Three methods (`grpo`: `trl.GRPOTrainer`; `none`: `ReinforceAdaTrainer(sampling="grpo")`, plain GRPO sampling
through our rounds code; `balance`: M = 8, N = 4) train on the same batch in interleaved threads, one step at a time;
it reports median wall and CPU time per step, where the time goes inside the step, bootstrap confidence intervals
and an A/A control. How it is timed and the results: `docs/lab/benchmarks_overhead.md`.

    python -m benchmarks.step_overhead                  # 2 instances x 3 methods, 60 cycles: ~2-4 min on 2 CPUs
    python -m benchmarks.step_overhead --smoke          # 3 cycles after 1 warm-up step: ~20 s

Writes `results.json`, `results.csv` (every timed step), `tables.txt` and `step_overhead.png` into `--out`
(default `benchmarks/results/step_overhead/`). This module is the harness that times the steps; the statistics, the
tables and the figure are `benchmarks.step_overhead_stats`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from benchmarks.common import machine_description, write_csv, write_json
from benchmarks.step_overhead_stats import METHODS, csv_rows, method_table, plot, ratio_lines, summarize

NUM_GENERATIONS = 4
SAMPLES_PER_ROUND = 8
MAX_ROUNDS = 4


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Options; `--smoke` shrinks the run to seconds (explicit options still win)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="3 cycles after 1 warm-up step: seconds, same outputs")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/step_overhead"))
    parser.add_argument("--repeats", type=int, default=None, help="timed cycles, one step per trainer (default: 60)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed first steps per trainer (default: 2)")
    parser.add_argument("--instances", type=int, default=2, help="trainers per method; 2+ gives the A/A control")
    parser.add_argument("--prompts", type=int, default=16, help="distinct prompts per step (x n=4 completions)")
    parser.add_argument("--max-completion-length", type=int, default=12, help="tokens in every completion")
    parser.add_argument("--seed", type=int, default=0, help="model and data seed")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.smoke else 60
    if args.warmup is None:
        args.warmup = 1 if args.smoke else 2
    if args.repeats < 2 or args.warmup < 0 or args.instances < 1:
        parser.error("--repeats must be >= 2, --warmup >= 0 and --instances >= 1")
    return args


# --------------------------------------------------------------------------------------------
# Timing probes
# --------------------------------------------------------------------------------------------


@dataclass
class StepProbe:
    """Wall seconds per `training_step` call, by part; `<part>@sampling` is the share spent inside `_generate`."""

    totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    in_sampling: bool = False
    records: list[dict[str, float]] = field(default_factory=list)

    def timed(self, fn: Callable[..., Any], part: str) -> Callable[..., Any]:
        """`fn` wrapped so that its wall time is added to `part` (and to `part@sampling` inside `_generate`)."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            inside = self.in_sampling
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.totals[part] += elapsed
                if inside:
                    self.totals[f"{part}@sampling"] += elapsed

        return wrapper

    def _sampling(self, generate: Callable[..., Any]) -> Callable[..., Any]:
        timed = self.timed(generate, "sampling")

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.in_sampling = True
            try:
                return timed(*args, **kwargs)
            finally:
                self.in_sampling = False

        return wrapper

    def _record(self, cpu_time: float, started: float) -> dict[str, float]:
        """The parts of one step (see the module docstring)."""
        t = self.totals
        ours = t["sampling"] - t["trl_generate@sampling"] - t["trl_rewards@sampling"] + t["advantages"]
        return {
            "started": started,
            "ended": time.perf_counter(),
            "cpu_time": cpu_time,
            "generation": t["generation"],
            "reward": t["trl_rewards"],
            "trl_glue": t["trl_generate"] - t["generation"],
            "ours": ours,
        }

    def attach(self, trainer: Any) -> None:
        """Patch `trainer` (this instance only) so that every training step leaves one record."""
        trainer._step_probe = self  # read by the class-level timers of `install_trl_timers`
        trainer._generate = self._sampling(trainer._generate)
        trainer._generate_single_turn = self.timed(trainer._generate_single_turn, "generation")
        if hasattr(trainer, "_pool_advantages"):
            trainer._pool_advantages = self.timed(trainer._pool_advantages, "advantages")
        training_step = trainer.training_step

        def step(*args: Any, **kwargs: Any) -> Any:
            self.totals.clear()
            started, cpu = time.perf_counter(), time.process_time()
            output = training_step(*args, **kwargs)
            self.records.append(self._record(time.process_time() - cpu, started))
            return output

        trainer.training_step = step


def install_trl_timers() -> None:
    """Time TRL's own `_generate` and `_calculate_rewards` per trainer, also when reached through `super()`.

    Patches `GRPOTrainer` in this process (idempotent); trainers without a `_step_probe` are not timed.
    """
    from trl import GRPOTrainer

    if getattr(GRPOTrainer, "_step_overhead_timers", False):
        return
    for name, part in (("_generate", "trl_generate"), ("_calculate_rewards", "trl_rewards")):
        original = getattr(GRPOTrainer, name)

        def timed(self: Any, *args: Any, _original: Callable = original, _part: str = part, **kwargs: Any) -> Any:
            probe = getattr(self, "_step_probe", None)
            if probe is None:
                return _original(self, *args, **kwargs)
            return probe.timed(_original, _part)(self, *args, **kwargs)

        setattr(GRPOTrainer, name, timed)
    GRPOTrainer._step_overhead_timers = True


# --------------------------------------------------------------------------------------------
# Trainers
# --------------------------------------------------------------------------------------------


def trainer_kwargs(args: argparse.Namespace, output_dir: Path) -> dict[str, Any]:
    """Config fields shared by the three methods: same batch, loss, lengths and seed."""
    from trl_ada.toy import toy_grpo_kwargs

    return toy_grpo_kwargs(
        output_dir=str(output_dir),
        per_device_train_batch_size=args.prompts * NUM_GENERATIONS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=args.max_completion_length,
        generation_kwargs={"min_new_tokens": args.max_completion_length},  # EOS cannot end a completion early
        max_steps=args.warmup + args.repeats,
        learning_rate=0.0,  # the optimizer still runs; the policy, hence the work per step, stays fixed
        loss_type="dapo",
        scale_rewards="none",
        epsilon_high=0.28,
        gradient_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        log_level="error",
        seed=args.seed,
    )


def build_trainer(method: str, model_dir: Path, args: argparse.Namespace, output_dir: Path) -> tuple[Any, StepProbe]:
    """One trainer for `method` with its probe attached and the per-step log printer removed."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
    from trl_ada.toy import make_toy_dataset, toy_reward

    probe = StepProbe()
    kwargs = trainer_kwargs(args, output_dir)
    dataset = make_toy_dataset(args.prompts, seed=args.seed)
    if method == "grpo":
        trainer = GRPOTrainer(str(model_dir), toy_reward, args=GRPOConfig(**kwargs), train_dataset=dataset)
    else:
        sampling = (
            {"sampling": "grpo"}  # plain GRPO refuses rounds it never draws
            if method == "none"
            else {"exit_rule": method, "samples_per_round": SAMPLES_PER_ROUND, "max_rounds": MAX_ROUNDS}
        )
        config = ReinforceAdaConfig(**sampling, **kwargs)
        trainer = ReinforceAdaTrainer(str(model_dir), toy_reward, args=config, train_dataset=dataset)
    trainer.remove_callback(PrinterCallback)
    probe.attach(trainer)
    return trainer, probe


@dataclass
class Step:
    """One timed training step of one trainer instance."""

    method: str
    instance: int
    cycle: int
    started: float
    ended: float
    step_time: float
    cpu_time: float
    generation: float
    reward: float
    trl_glue: float
    ours: float
    samples: float
    tokens: float
    mean_length: float

    @property
    def rest(self) -> float:
        """The remainder of the step: TRL's scoring tail, padding, the loss forward and the backward."""
        return self.step_time - self.generation - self.reward - self.trl_glue - self.ours


# --------------------------------------------------------------------------------------------
# Interleaved training
# --------------------------------------------------------------------------------------------


def rotated(order: Sequence[str], shift: int) -> list[str]:
    """`order` rotated left by `shift`: each trainer takes every position equally often."""
    shift %= len(order)
    return [*order[shift:], *order[:shift]]


class Baton:
    """Lets exactly one of several training threads work at a time, one step per turn, in rotating cycles.

    A thread calls `wait_turn` when it is ready for its next step (which hands the baton on if it held it) and
    `finish` when its training is over. `start` gives the first turn once every thread waits for one.
    """

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self._condition = threading.Condition()
        self._holder: str | None = None
        self._waiting: set[str] = set()
        self._finished: set[str] = set()
        self._turns: deque[str] = deque()
        self._cycle = 0
        self._started = False

    def _pass_on(self) -> None:
        """Give the baton to the next unfinished name of the schedule (called with the lock held)."""
        self._holder = None
        while len(self._finished) < len(self.names):
            if not self._turns:
                self._turns.extend(rotated(self.names, self._cycle))
                self._cycle += 1
            name = self._turns.popleft()
            if name not in self._finished:
                self._holder = name
                break
        self._condition.notify_all()

    def start(self) -> None:
        """Block until every thread waits for a turn (or has finished), then give the first turn."""
        with self._condition:
            self._condition.wait_for(lambda: self._waiting | self._finished >= set(self.names))
            self._started = True
            self._pass_on()

    def wait_turn(self, name: str) -> None:
        with self._condition:
            if self._holder == name:
                self._pass_on()
            self._waiting.add(name)
            self._condition.notify_all()
            self._condition.wait_for(lambda: self._holder == name)
            self._waiting.discard(name)

    def finish(self, name: str) -> None:
        with self._condition:
            self._finished.add(name)
            if self._started and self._holder == name:
                self._pass_on()
            self._condition.notify_all()


def turn_taking_callback(baton: Baton, name: str) -> Any:
    """A `TrainerCallback` that waits for `name`'s turn before each optimizer step."""
    from transformers import TrainerCallback

    class TurnTaking(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            baton.wait_turn(name)

    return TurnTaking()


def train_in_turn(trainer: Any, name: str, baton: Baton, errors: dict[str, BaseException]) -> None:
    """Thread body: one `trainer.train()` taking turns; an error is kept for the main thread."""
    from trl_ada.toy import configure_torch_threads

    configure_torch_threads()  # torch's intra-op thread setting is per thread
    try:
        trainer.train()
    except BaseException as error:  # re-raised by the main thread
        errors[name] = error
    finally:
        baton.finish(name)


def collect_steps(trainer: Any, probe: StepProbe, method: str, instance: int, warmup: int) -> list[Step]:
    """The timed steps of one trainer, from TRL's log history and the probe."""
    logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
    if len(logs) != len(probe.records):
        raise RuntimeError(f"{len(logs)} logged steps but {len(probe.records)} training_step calls")
    batch = trainer.args.per_device_train_batch_size
    steps = []
    for k, (log, record) in enumerate(zip(logs, probe.records, strict=True)):
        samples = log.get("reinforce_ada/samples", batch)
        length = log["completions/mean_length"]
        tokens = log.get("reinforce_ada/tokens", samples * length)
        fields = {"samples": samples, "tokens": tokens, "mean_length": length, **record}
        steps.append(Step(method, instance, cycle=k - warmup, step_time=log["step_time"], **fields))
    return steps[warmup:]


def quiet_libraries() -> None:
    """Silence transformers/TRL progress bars, warnings and info logs."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("trl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def run_in_turns(trainers: dict[str, tuple[Any, StepProbe]], quiet: bool) -> None:
    """Train every trainer in its own thread, one step at a time in rotating order; re-raise any failure."""
    baton, errors = Baton(list(trainers)), {}
    threads = []
    for name, (trainer, _) in trainers.items():
        trainer.add_callback(turn_taking_callback(baton, name))
        threads.append(threading.Thread(target=train_in_turn, args=(trainer, name, baton, errors), name=name))
    if not quiet:
        steps = trainers[next(iter(trainers))][0].args.max_steps
        print(f"training {len(trainers)} trainers x {steps} steps in turns ...", file=sys.stderr, flush=True)
    for thread in threads:
        thread.start()
    baton.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"training failed for {sorted(errors)}") from next(iter(errors.values()))


def measure(args: argparse.Namespace) -> list[Step]:
    """Build the tiny model and `instances` trainers per method, train them in turns; return the timed steps."""
    from trl_ada.toy import build_tiny_model, configure_torch_threads

    configure_torch_threads()
    quiet_libraries()
    install_trl_timers()
    with tempfile.TemporaryDirectory(prefix="step_overhead_") as tmp:
        work = Path(tmp)
        model_dir = build_tiny_model(work / "model", seed=args.seed)
        keys = {f"{method}#{k}": (method, k) for k in range(args.instances) for method in METHODS}
        trainers = {name: build_trainer(method, model_dir, args, work / name) for name, (method, _) in keys.items()}
        run_in_turns(trainers, args.quiet)
        steps = [
            step
            for name, (trainer, probe) in trainers.items()
            for step in collect_steps(trainer, probe, *keys[name], args.warmup)
        ]
    origin = min(step.started for step in steps)
    return [replace(s, started=s.started - origin, ended=s.ended - origin) for s in steps]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write JSON, CSV, table and figure; return the JSON data."""
    args = parse_args(argv)
    started = time.perf_counter()
    steps = measure(args)
    summary = summarize(steps, args.seed)
    config = {key: value for key, value in vars(args).items() if key not in ("out", "quiet")} | {
        "num_generations": NUM_GENERATIONS,
        "samples_per_round": SAMPLES_PER_ROUND,
        "max_rounds": MAX_ROUNDS,
        "torch_threads": 1,
        "learning_rate": 0.0,
    }
    text = method_table(summary, config) + "\n\n" + ratio_lines(summary)
    print(text, flush=True)
    data = {
        "benchmark": "step_overhead",
        "config": config,
        "machine": machine_description(),
        "wall_seconds": time.perf_counter() - started,
        **summary,
    }
    out = Path(args.out)
    write_json(out / "results.json", data)
    write_csv(out / "results.csv", csv_rows(steps))
    (out / "tables.txt").write_text(text + "\n")
    figure = plot(summary, out / "step_overhead.png")
    print(f"wrote {out / 'results.json'}, {out / 'results.csv'}, {out / 'tables.txt'}, {figure}")
    return data


if __name__ == "__main__":
    main()
