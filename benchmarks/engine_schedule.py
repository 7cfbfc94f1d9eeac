"""Rounds against streaming on a modelled GPU engine: what the 2-core CPU engine of `vllm_step_time` cannot show.

A model, not a measurement. An engine with continuous batching decodes up to `capacity` sequences at once (vLLM's
`max_num_seqs`; more wait in a FIFO queue); one decoding step costs `1 + batch_cost · running / capacity` units (a
GPU far from compute-bound: a full batch costs little more than a small one). Completion lengths are log-normal,
capped at `max_length`; a completion is right with its prompt's pass rate (the paper's base-model distribution of
`sampling_efficiency`), independent of its length. The samplers are the library's own: `AdaptiveSampler` for GRPO
n=4 and round-based balance (M=8, N=4), `RequestWindow` over it for streaming balance, with the default window
(M completions of a prompt in flight) and with the whole cap M·N in flight (`streaming_window=32`). Rounds wait for
their longest completion; streaming issues and cancels requests as results arrive. Scoring, weight sync and the
loss are not modelled (they cost the same under both schedules), so the ratios are of engine time only.

With a trainer (the second and third tables): every prompt has a fixed reward stream (the reward and length of its
i-th requested completion), so every method sees the same draws. A training step on B groups costs `train` and a
weight sync `sync` (the engine pauses), calibrated on the paper's 1.5B GRPO n=4 step (`TRAIN_SHARE`, `SYNC_SHARE`).
Synchronous methods generate, train and sync one after another. The asynchronous ones (`AsyncLoop`: TRL's async
GRPO, n completions per prompt; async balance, a `PromptRollout` per prompt) keep K prompts sampling while the
trainer takes B finished groups per step, dropping samples more than `max_staleness` versions old; our worker forms
each group among the samples still fresh when its prompt finishes, or drops it whole, as `trl_ada.async_grpo`
does. Async balance gets the same pools and exits as synchronous streaming on the same streams (counted in the
third table).

    python -m benchmarks.engine_schedule           # 4 engine settings x 12 methods x 5 seeds: ~5-10 min
    python -m benchmarks.engine_schedule --smoke   # 1 setting, 16 prompts, 1 seed: a second or two

Writes `results.json`, `table.txt` and `wall_per_group.png` into `--out` (default
`benchmarks/results/engine_schedule/`). Results and what they mean: `docs/lab/benchmarks_vllm.md`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    derive_seed,
    format_table,
    machine_description,
    make_parser,
    mean_and_std,
    pyplot,
    save_figure,
    write_json,
)
from benchmarks.sampling_efficiency import PROMPT_SETS
from trl_ada.async_grpo.rollout import PromptRollout, trainable
from trl_ada.plan import SamplingPlan
from trl_ada.sampling import AdaptiveSampler
from trl_ada.schedules.streaming import Request, RequestWindow

DEFAULT_OUT = Path("benchmarks/results/engine_schedule")
METHODS = ("GRPO n=4", "balance rounds", "balance streaming", "balance streaming, window M·N")
WINDOWS = {"balance streaming": None, "balance streaming, window M·N": 32}
"""`RequestWindow(window=...)` of each streaming method: `samples_per_round` (the default), the whole cap."""


@dataclass(frozen=True)
class EngineSetting:
    """One modelled engine and the prompts one step sends it."""

    prompts: int  # prompts per step on this engine (the paper's 512 over 8 GPUs: 64 each)
    capacity: int = 256
    batch_cost: float = 0.5
    median_length: float = 400.0
    length_sigma: float = 0.8
    max_length: int = 2048


SETTINGS = (
    EngineSetting(prompts=64),
    EngineSetting(prompts=64, capacity=1024),
    EngineSetting(prompts=64, length_sigma=0.4),
    EngineSetting(prompts=512, capacity=1024),
)
SMOKE_SETTINGS = (EngineSetting(prompts=16, capacity=64, median_length=50.0, max_length=256),)


class Engine:
    """Continuous batching: `submit` queues a sequence, `advance` decodes until the next one finishes."""

    def __init__(self, setting: EngineSetting):
        self.setting = setting
        self.time = 0.0  # in decoding steps of a near-empty batch
        self.tokens = 0  # tokens decoded, cancelled sequences included
        self.decoding_steps = 0
        self.queue: list[tuple[int, int]] = []  # (key, length) waiting for a slot, first in first out
        self.keys = np.empty(0, dtype=np.int64)
        self.remaining = np.empty(0, dtype=np.int64)

    @property
    def busy(self) -> bool:
        return bool(self.queue) or self.keys.size > 0

    def submit(self, key: int, length: int) -> None:
        self.queue.append((key, length))

    def cancel(self, key: int) -> None:
        self.queue = [(k, n) for k, n in self.queue if k != key]
        keep = self.keys != key
        self.keys, self.remaining = self.keys[keep], self.remaining[keep]

    def advance(self, deadline: float = math.inf) -> list[int]:
        """Decode until at least one running sequence ends, or until the step that reaches `deadline` (engine time);
        the keys that ended."""
        free = self.setting.capacity - self.keys.size
        if free > 0 and self.queue:
            admitted, self.queue = self.queue[:free], self.queue[free:]
            self.keys = np.concatenate([self.keys, [k for k, _ in admitted]])
            self.remaining = np.concatenate([self.remaining, [n for _, n in admitted]])
        steps = int(self.remaining.min())
        running = self.keys.size
        step_cost = 1.0 + self.setting.batch_cost * running / self.setting.capacity
        if deadline < math.inf:
            steps = min(steps, max(1, math.ceil((deadline - self.time) / step_cost)))
        self.time += steps * step_cost
        self.tokens += steps * running
        self.decoding_steps += steps
        self.remaining = self.remaining - steps
        ended = self.remaining == 0
        finished = self.keys[ended].tolist()
        self.keys, self.remaining = self.keys[~ended], self.remaining[~ended]
        return finished

    def pause(self, duration: float) -> None:
        """Decode nothing for `duration` (a weight sync)."""
        self.time += duration

    def wait(self, until: float) -> None:
        """Idle (nothing to decode) until engine time `until`."""
        self.time = max(self.time, until)


def completion_lengths(setting: EngineSetting, rng: np.random.Generator, size: int) -> np.ndarray:
    """Log-normal lengths around `median_length`, capped at `max_length`."""
    lengths = np.rint(rng.lognormal(math.log(setting.median_length), setting.length_sigma, size))
    return np.clip(lengths, 1, setting.max_length).astype(np.int64)


PLANS = {
    "GRPO n=4": SamplingPlan.from_fields(sampling="grpo", num_generations=4),
    "balance": SamplingPlan.from_fields(num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balance"),
}
"""The plan of each method family (streaming methods sample as balance does)."""


def new_sampler(method: str, num_prompts: int) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts, PLANS["GRPO n=4" if method == "GRPO n=4" else "balance"])


def run_rounds(sampler: AdaptiveSampler, engine: Engine, rates: np.ndarray, rng: np.random.Generator) -> None:
    """Each round: every active prompt's samples at once; the next round starts when the last one ends."""
    while not sampler.done:
        active = sampler.plan_round()
        prompts = np.repeat(active, sampler.plan_sizes)
        for key, length in enumerate(completion_lengths(engine.setting, rng, prompts.size)):
            engine.submit(key, int(length))
        while engine.busy:
            engine.advance()
        sampler.ingest((rng.random(prompts.size) < rates[prompts]).astype(float))


def run_streaming(
    sampler: AdaptiveSampler, engine: Engine, rates: np.ndarray, rng: np.random.Generator, window: int | None
) -> int:
    """Requests as prompts need them, results in finishing order; returns the requests cancelled."""
    return drive_streaming(
        RequestWindow(sampler, window=window),
        engine,
        length=lambda request: int(completion_lengths(engine.setting, rng, 1)[0]),
        rewards=lambda request: (rng.random(request.size) < rates[request.prompt]).astype(float),
    )


def drive_streaming(
    scheduler: RequestWindow,
    engine: Engine,
    length: Callable[[Request], int],
    rewards: Callable[[Request], np.ndarray],
) -> int:
    """Run `scheduler` on `engine` until it is done: each request decodes `length(request)` tokens and its results
    are `rewards(request)`; requests of exited prompts are cancelled. Returns the requests cancelled."""
    cancelled = 0

    def send(requests: list[Request]) -> None:
        for request in requests:
            engine.submit(request.id, length(request))

    send(scheduler.start())
    while not scheduler.done:
        for key in engine.advance():
            request = scheduler.in_flight.get(key)
            if request is None:
                continue
            update = scheduler.receive(key, rewards(request))
            for stale in update.cancel:
                engine.cancel(stale.id)
                cancelled += 1
            send(update.issue)
    return cancelled


def run_step(method: str, setting: EngineSetting, seed: int) -> dict[str, float]:
    """One step of `method` on the modelled engine: its engine time, samples used, tokens decoded."""
    rng = np.random.default_rng(seed)
    rates = PROMPT_SETS[0].sample(rng, setting.prompts)
    sampler, engine = new_sampler(method, setting.prompts), Engine(setting)
    cancelled = 0
    if method in WINDOWS:
        cancelled = run_streaming(sampler, engine, rates, rng, WINDOWS[method])
    else:
        run_rounds(sampler, engine, rates, rng)
    return {
        "engine_time": engine.time,
        "samples": float(sampler.samples_drawn),
        "tokens": float(engine.tokens),
        "cancelled_requests": float(cancelled),
        "mixed_groups": sampler.statistics().mixed_group_fraction,
    }


def run_setting(setting: EngineSetting, seeds: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Every method at every seed (the same prompts per seed); means and stds, ratios of the means."""
    summary: dict[str, dict[str, Any]] = {}
    for method in METHODS:
        runs = [run_step(method, setting, derive_seed(seed, setting.prompts, setting.capacity)) for seed in seeds]
        summary[method] = {}
        for name in runs[0]:
            mean, std = mean_and_std([run[name] for run in runs])
            summary[method][name], summary[method][f"{name}_std"] = mean, std
    grpo, rounds = summary["GRPO n=4"]["engine_time"], summary["balance rounds"]["engine_time"]
    for values in summary.values():
        values["vs_grpo"] = values["engine_time"] / grpo
        values["vs_rounds"] = values["engine_time"] / rounds
    return summary


# --------------------------------------------------------------------------------------------
# With a trainer: synchronous steps against the asynchronous worker, on fixed reward streams
# --------------------------------------------------------------------------------------------

TRAIN_SHARE, SYNC_SHARE = 15 / 102, 2 / 102
"""Training and weight sync as shares of a synchronous GRPO n=4 step: the paper's 1.5B step is 102 s with 15 s of
training; the sync's 2 s is our assumption (the paper does not split it out). Generation is the other 85/102."""
MAX_STALENESS = 4  # TRL's AsyncGRPOConfig default
TRAINED_GROUPS, SMOKE_TRAINED_GROUPS, MIN_STEPS = 512, 64, 4
"""A run measures at least `TRAINED_GROUPS` trained groups over at least `MIN_STEPS` steps (after its warm-up)."""
FILL = {"K=fill": 1, "K=2·fill": 2}
"""Prompts in flight of an asynchronous method: multiples of ceil(capacity / window), fewest to fill the batch."""
ASYNC_METHODS = {
    f"async {family}, {k}": (family, multiple) for family in ("GRPO n=4", "balance") for k, multiple in FILL.items()
}
"""Each asynchronous method's plan family and prompts-in-flight multiple."""


@dataclass(frozen=True)
class TrainerCosts:
    """Engine time units of one optimizer step on B groups, and of a weight sync (the engine pauses)."""

    train: float
    sync: float
    max_staleness: int = MAX_STALENESS


def trainer_costs(grpo_generation: float, max_staleness: int = MAX_STALENESS) -> TrainerCosts:
    """Costs calibrated so a synchronous GRPO n=4 step that generates for `grpo_generation` splits as the paper's."""
    generation_share = 1.0 - TRAIN_SHARE - SYNC_SHARE
    return TrainerCosts(
        grpo_generation * TRAIN_SHARE / generation_share,
        grpo_generation * SYNC_SHARE / generation_share,
        max_staleness,
    )


class RewardStreams:
    """Each prompt's fixed draws, by seed: its pass rate, and the reward and length of its i-th requested completion
    (i < M·N), whatever the schedule or the order the engine finishes them in."""

    def __init__(self, setting: EngineSetting, seed: int, cap: int = PLANS["balance"].section.cap):
        self.setting, self.seed, self.cap = setting, seed, cap
        self._draws: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def draws(self, prompt: int) -> tuple[np.ndarray, np.ndarray]:
        """The prompt's (rewards, lengths), one per pool index."""
        if prompt not in self._draws:
            rng = np.random.default_rng(derive_seed(self.seed, prompt))
            rate = PROMPT_SETS[0].sample(rng, 1)[0]
            rewards = (rng.random(self.cap) < rate).astype(float)
            self._draws[prompt] = rewards, completion_lengths(self.setting, rng, self.cap)
        return self._draws[prompt]

    def rewards(self, prompt: int, first: int, size: int) -> list[float]:
        return self.draws(prompt)[0][first : first + size].tolist()

    def length(self, prompt: int, index: int) -> int:
        return int(self.draws(prompt)[1][index])


@dataclass(frozen=True)
class Outcome:
    """One prompt's sampling: its pool (request order), kept pool indices, and each pool index's policy version."""

    pool: tuple[float, ...]
    kept: tuple[int, ...]
    versions: tuple[int, ...] = ()


@dataclass
class Run:
    """A run of optimizer steps: when each ended, what each trained group cost, the staleness of pulled samples."""

    step_ends: list[float] = field(default_factory=list)
    requested: list[int] = field(default_factory=list)  # per pulled group: completions requested (cancelled too)
    used: list[int] = field(default_factory=list)  # per pulled group: its pool
    warmup: int = 0  # steps before the measured ones (their groups are not counted)
    trained: list[int] = field(default_factory=list)  # staleness of each trained sample
    dropped: list[int] = field(default_factory=list)  # staleness of each sample dropped (in the queue, or whole group)
    outcomes: dict[int, Outcome] = field(default_factory=dict)  # every prompt whose sampling finished
    tokens: int = 0  # decoded by the engine(s), over the whole run
    decoding_steps: int = 0


def steps_for(setting: EngineSetting, groups: int) -> int:
    """Optimizer steps that train at least `groups` groups, and at least `MIN_STEPS`."""
    return max(MIN_STEPS, math.ceil(groups / setting.prompts))


def rounds_on_streams(
    sampler: AdaptiveSampler, engine: Engine, streams: RewardStreams, prompts: Sequence[int]
) -> None:
    """`run_rounds` with each completion's reward and length read from the streams by its pool index."""
    while not sampler.done:
        active = sampler.plan_round()
        draws = [
            (prompts[p], len(sampler.pools[p]) + i)
            for p, size in zip(active, sampler.plan_sizes, strict=True)
            for i in range(size)
        ]
        for key, (prompt, index) in enumerate(draws):
            engine.submit(key, streams.length(prompt, index))
        while engine.busy:
            engine.advance()
        sampler.ingest([streams.rewards(prompt, index, 1)[0] for prompt, index in draws])


def streaming_on_streams(
    scheduler: RequestWindow, engine: Engine, streams: RewardStreams, prompts: Sequence[int]
) -> None:
    """`run_streaming` with each request's rewards and length read from the streams by its pool indices."""
    drive_streaming(
        scheduler,
        engine,
        length=lambda request: streams.length(prompts[request.prompt], request.first),
        rewards=lambda request: streams.rewards(prompts[request.prompt], request.first, request.size),
    )


def run_sync(method: str, setting: EngineSetting, streams: RewardStreams, steps: int) -> tuple[Run, list[float]]:
    """`steps` synchronous steps of B prompts each (step s: prompts sB, ..., sB + B - 1); the run without its
    `step_ends` (see `sync_step_ends`), and each step's engine time."""
    run, engine_times, b = Run(), [], setting.prompts
    for step in range(steps):
        prompts = range(step * b, (step + 1) * b)
        sampler, engine = new_sampler(method, b), Engine(setting)
        if method in WINDOWS:
            scheduler = RequestWindow(sampler, window=WINDOWS[method])
            streaming_on_streams(scheduler, engine, streams, prompts)
            run.requested += scheduler.requested
        else:
            rounds_on_streams(sampler, engine, streams, prompts)
            run.requested += [len(pool) for pool in sampler.pools]
        engine_times.append(engine.time)
        run.tokens += engine.tokens
        run.decoding_steps += engine.decoding_steps
        for p, group in zip(sampler.kept_prompts(), sampler.select_groups(), strict=True):
            run.outcomes[prompts[p]] = Outcome(tuple(sampler.pools[p]), tuple(group))
            run.used.append(len(sampler.pools[p]))
            run.trained += [0] * len(group)
    return run, engine_times


def sync_step_ends(engine_times: Sequence[float], costs: TrainerCosts) -> list[float]:
    """Synchronous steps one after another: generation, then training, then the weight sync."""
    return np.cumsum([time + costs.train + costs.sync for time in engine_times]).tolist()


def new_rollout(family: str, prompt: int, version: int) -> PromptRollout:
    """TRL's async GRPO: n completions, done when all arrive (plain GRPO's one round of n); balance: a Seq rollout."""
    return PromptRollout(prompt, PLANS[family], version)


class AsyncLoop:
    """The asynchronous worker and trainer on one engine.

    The worker keeps `in_flight` prompts sampling (a `PromptRollout` each, admitted in prompt order); a finished
    prompt's group joins a queue (`push`: ours is selected among the fresh samples or dropped whole). The trainer,
    when idle, pulls groups and drops kept samples that went stale in the queue, more than `max_staleness` versions
    old (`trainable`, TRL's rule); with B groups it trains for `costs.train` while the engine decodes, then
    the engine pauses `costs.sync` for the weight sync and the version goes up. Requests carry the version live when
    they are sent.
    """

    def __init__(
        self, family: str, setting: EngineSetting, streams: RewardStreams, costs: TrainerCosts, in_flight: int
    ):
        self.family, self.setting, self.streams, self.costs = family, setting, streams, costs
        self.in_flight = in_flight
        self.engine, self.run = Engine(setting), Run()
        self.version = self.next_prompt = 0
        self.rollouts: dict[int, PromptRollout] = {}
        self.requests: dict[int, Request] = {}  # engine key -> the request it decodes
        self.queue: deque[int] = deque()  # finished prompts, in finishing order
        self.batch = 0  # groups with a trainable sample the trainer pulled for its next step
        self.pulled: list[tuple[int, list[int], list[int]]] = []  # (prompt, trained, dropped staleness), this step
        self.train_end: float | None = None

    def key(self, prompt: int, request_id: int) -> int:
        """The engine's key of a prompt's request (a prompt sends at most M·N requests)."""
        return prompt * self.streams.cap + request_id

    def send(self, prompt: int, requests: list[Request]) -> None:
        for request in requests:
            self.requests[self.key(prompt, request.id)] = request
            self.engine.submit(self.key(prompt, request.id), self.streams.length(prompt, request.first))

    def admit(self) -> None:
        while len(self.rollouts) < self.in_flight:
            prompt, self.next_prompt = self.next_prompt, self.next_prompt + 1
            self.rollouts[prompt] = new_rollout(self.family, prompt, self.version)
            self.send(prompt, self.rollouts[prompt].start())

    def deliver(self, key: int) -> None:
        """One completion finished: its prompt uses it; a finished prompt's group joins the queue."""
        request = self.requests.pop(key, None)
        if request is None:  # ended in the decoding step its prompt's exit cancelled it
            return
        prompt = key // self.streams.cap
        rollout = self.rollouts[prompt]
        rewards = self.streams.rewards(prompt, request.first, request.size)
        update = rollout.receive(request.id, rewards, version=self.version)
        for cancelled in update.cancel:
            self.engine.cancel(self.key(prompt, cancelled.id))
            del self.requests[self.key(prompt, cancelled.id)]
        self.send(prompt, update.issue)
        if rollout.done:
            del self.rollouts[prompt]
            self.push(prompt, rollout)
            self.admit()

    def push(self, prompt: int, rollout: PromptRollout) -> None:
        """A finished prompt's group joins the queue. TRL's worker pushes all n samples; ours selects the group among
        the samples still fresh under the live policy, or drops it whole (`PromptRollout.kept`), as
        `trl_ada.async_grpo` does: a group dropped whole is charged to the next step and never queued."""
        fresh = None if self.family == "GRPO n=4" else rollout.fresh(self.version, self.costs.max_staleness)
        kept = tuple(rollout.kept(fresh))
        self.run.outcomes[prompt] = Outcome(tuple(rollout.pool), kept, tuple(rollout.versions))
        if kept:
            self.queue.append(prompt)
            return
        self.pulled.append((prompt, [], [self.version - rollout.versions[i] for i in rollout.kept()]))

    def pull(self) -> None:
        """The idle trainer takes queued groups; B groups with a trainable sample start a step."""
        while self.train_end is None and self.queue:
            prompt = self.queue.popleft()
            outcome = self.run.outcomes[prompt]
            versions = [outcome.versions[i] for i in outcome.kept]
            fresh = trainable(versions, self.version, self.costs.max_staleness)
            staleness = [self.version - version for version in versions]
            self.pulled.append(
                (
                    prompt,
                    [age for age, ok in zip(staleness, fresh, strict=True) if ok],
                    [age for age, ok in zip(staleness, fresh, strict=True) if not ok],
                )
            )
            self.batch += any(fresh)
            if self.batch == self.setting.prompts:
                self.start_step()

    def start_step(self) -> None:
        """Train on the batch; after the warm-up, count the groups pulled for it (those dropped whole too)."""
        if len(self.run.step_ends) >= self.run.warmup:
            for prompt, trained, dropped in self.pulled:
                outcome = self.run.outcomes[prompt]
                self.run.requested.append(len(outcome.versions))
                self.run.used.append(len(outcome.pool))
                self.run.trained += trained
                self.run.dropped += dropped
        self.batch, self.pulled = 0, []
        self.train_end = self.engine.time + self.costs.train

    def end_step(self) -> None:
        """Training is over: the engine pauses for the weight sync, then the next policy version is live."""
        self.engine.pause(self.costs.sync)
        self.version += 1
        self.run.step_ends.append(self.engine.time)
        self.train_end = None

    def run_steps(self, steps: int) -> Run:
        """`warmup_steps` while the pipeline fills, then `steps` measured steps."""
        self.run.warmup = warmup_steps(self.setting, self.in_flight)
        steps += self.run.warmup
        self.admit()
        while len(self.run.step_ends) < steps:
            self.pull()
            deadline = math.inf if self.train_end is None else self.train_end
            if self.engine.busy:
                finished = self.engine.advance(deadline)
            elif self.train_end is not None:
                self.engine.wait(self.train_end)
                finished = []
            else:
                raise RuntimeError("Nothing to decode and nothing to train: the worker admits no prompt.")
            for key in finished:
                self.deliver(key)
            if self.train_end is not None and self.engine.time >= self.train_end:
                self.end_step()
        self.run.tokens, self.run.decoding_steps = self.engine.tokens, self.engine.decoding_steps
        return self.run


def warmup_steps(setting: EngineSetting, in_flight: int) -> int:
    """Steps not measured: until the prompts admitted at the start have been trained, and one more."""
    return math.ceil(in_flight / setting.prompts) + 1


def prompts_in_flight(family: str, setting: EngineSetting, multiple: int) -> int:
    """`multiple` x ceil(capacity / window): prompts whose completions in flight fill the engine's batch once."""
    window = PLANS[family].num_generations if family == "GRPO n=4" else PLANS[family].section.samples_per_round
    return multiple * math.ceil(setting.capacity / window)


def same_exits(reference: dict[int, Outcome], other: dict[int, Outcome]) -> tuple[int, int, int]:
    """Prompts both runs finished; how many of them got the same pool (rewards, hence exit); how many the same
    kept group too (ours differs where it was selected among the fresh samples, or dropped whole)."""
    common = reference.keys() & other.keys()
    same_pool = [p for p in common if reference[p].pool == other[p].pool]
    return len(common), len(same_pool), sum(reference[p].kept == other[p].kept for p in same_pool)


def run_summary(run: Run, setting: EngineSetting) -> dict[str, float]:
    """After the warm-up: wall time per trained group, completions per trained group (those of groups dropped whole
    included), staleness of pulled samples (trained or dropped); and the engine's mean batch fill while it decodes
    (running sequences / capacity, over the whole run)."""
    start = run.step_ends[run.warmup - 1] if run.warmup else 0.0
    groups = (len(run.step_ends) - run.warmup) * setting.prompts
    wall = (run.step_ends[-1] - start) / groups
    pulled = np.asarray(run.trained + run.dropped, dtype=float)
    return {
        "wall_per_group": wall,
        "groups_per_1k": 1000.0 / wall,
        "requested_per_group": sum(run.requested) / groups,
        "used_per_group": sum(run.used) / groups,
        "staleness_mean": float(pulled.mean()),
        "staleness_p50": float(np.percentile(pulled, 50)),
        "staleness_p90": float(np.percentile(pulled, 90)),
        "staleness_max": float(pulled.max()),
        "dropped_fraction": len(run.dropped) / pulled.size,
        "batch_fill": run.tokens / (run.decoding_steps * setting.capacity),
        "warmup_steps": float(run.warmup),
    }


def run_seed_with_trainer(
    setting: EngineSetting, seed: int, groups: int = TRAINED_GROUPS, costs: TrainerCosts | None = None
) -> dict[str, Any]:
    """Every synchronous and asynchronous method on one seed's reward streams, training at least `groups` groups:
    the trainer's costs (default: calibrated on this seed's synchronous GRPO n=4 steps), the runs, and the exits of
    each asynchronous balance method compared with each synchronous streaming one (`same_exits`)."""
    streams, steps = RewardStreams(setting, seed), steps_for(setting, groups)
    synced = {method: run_sync(method, setting, streams, steps) for method in METHODS}
    if costs is None:
        costs = trainer_costs(float(np.mean(synced["GRPO n=4"][1])))
    runs: dict[str, Run] = {}
    for method, (run, engine_times) in synced.items():
        run.step_ends = sync_step_ends(engine_times, costs)
        runs[method] = run
    for method, (family, multiple) in ASYNC_METHODS.items():
        loop = AsyncLoop(family, setting, streams, costs, prompts_in_flight(family, setting, multiple))
        runs[method] = loop.run_steps(steps)
    exits = {
        f"{method} vs {reference}": same_exits(runs[reference].outcomes, runs[method].outcomes)
        for method, (family, _) in ASYNC_METHODS.items()
        if family == "balance"
        for reference in WINDOWS
    }
    return {"costs": costs, "runs": runs, "exits": exits}


RATIO_REFERENCES = ("balance rounds", "balance streaming", "balance streaming, window M·N")
"""The synchronous balance methods each asynchronous balance method's wall time per trained group is divided by."""


def run_setting_with_trainer(setting: EngineSetting, seeds: Sequence[int], groups: int) -> dict[str, Any]:
    """Every method with the trainer at every seed: means and stds over seeds, per-seed ratios of wall time per
    trained group (async balance over sync balance: mean and std), exit comparisons summed over seeds."""
    per_seed = [
        run_seed_with_trainer(setting, derive_seed(seed, setting.prompts, setting.capacity), groups) for seed in seeds
    ]
    summaries = [{method: run_summary(run, setting) for method, run in seed["runs"].items()} for seed in per_seed]
    methods: dict[str, dict[str, float]] = {}
    for method in summaries[0]:
        methods[method] = {}
        for name in summaries[0][method]:
            mean, std = mean_and_std([summary[method][name] for summary in summaries])
            methods[method][name], methods[method][f"{name}_std"] = mean, std
    ratios = {}
    for method, (family, _) in ASYNC_METHODS.items():
        for reference in RATIO_REFERENCES if family == "balance" else ("GRPO n=4",):
            values = [s[method]["wall_per_group"] / s[reference]["wall_per_group"] for s in summaries]
            ratios[f"{method} / {reference}"] = dict(zip(("mean", "std"), mean_and_std(values), strict=True))
    counts = ("prompts", "same_pool", "same_group")
    exits = {
        pair: {name: sum(seed["exits"][pair][k] for seed in per_seed) for k, name in enumerate(counts)}
        for pair in per_seed[0]["exits"]
    }
    costs = {name: mean_and_std([getattr(seed["costs"], name) for seed in per_seed])[0] for name in ("train", "sync")}
    steps = steps_for(setting, groups)
    return {"steps": steps, "costs": costs, "methods": methods, "ratios": ratios, "exits": exits}


def engine_label(setting: EngineSetting) -> str:
    return f"B={setting.prompts} cap={setting.capacity} sigma={setting.length_sigma}"


def trainer_table(results: list[tuple[EngineSetting, dict[str, Any]]]) -> str:
    headers = [
        "engine",
        "method",
        "wall/group",
        "groups/1k",
        "requested/group",
        "used/group",
        "batch fill",
        "staleness mean",
        "p50/p90/max",
        "dropped",
    ]
    rows = []
    for setting, summary in results:
        for method, v in summary["methods"].items():
            rows.append(
                [
                    engine_label(setting),
                    method,
                    f"{v['wall_per_group']:.1f} ± {v['wall_per_group_std']:.1f}",
                    f"{v['groups_per_1k']:.1f} ± {v['groups_per_1k_std']:.1f}",
                    f"{v['requested_per_group']:.1f} ± {v['requested_per_group_std']:.1f}",
                    f"{v['used_per_group']:.1f}",
                    f"{v['batch_fill']:.2f}",
                    f"{v['staleness_mean']:.2f} ± {v['staleness_mean_std']:.2f}",
                    f"{v['staleness_p50']:.0f}/{v['staleness_p90']:.0f}/{v['staleness_max']:.0f}",
                    f"{v['dropped_fraction']:.3f}",
                ]
            )
    title = (
        "With a trainer: wall time per trained group (engine time units) after the warm-up, trained groups per"
        f" 1,000 units, completions per trained group, staleness of pulled samples in versions (p50/p90/max: means"
        f" over seeds), fraction dropped (max_staleness={MAX_STALENESS}); mean ± population std over seeds"
    )
    return format_table(headers, rows, title=title)


def ratio_table(results: list[tuple[EngineSetting, dict[str, Any]]]) -> str:
    headers = ["engine", "ratio of wall time per trained group", "mean ± population std over seeds", "≤ 0.5"]
    rows = [
        [engine_label(setting), pair, f"{v['mean']:.2f} ± {v['std']:.2f}", "yes" if v["mean"] <= 0.5 else "no"]
        for setting, summary in results
        for pair, v in summary["ratios"].items()
    ]
    rows += [
        [
            engine_label(setting),
            f"same exits: {pair}",
            f"{v['same_pool']}/{v['prompts']} pools, {v['same_group']} groups",
            "",
        ]
        for setting, summary in results
        for pair, v in summary["exits"].items()
    ]
    return format_table(headers, rows, title="Asynchronous over synchronous, on the same reward streams")


def plot_wall_per_group(results: list[tuple[EngineSetting, dict[str, Any]]]) -> Any:
    """Wall time per trained group of every method (bars: mean, whiskers: std over seeds), one group per engine."""
    figure, axis = pyplot().subplots(figsize=(11, 4.5))
    methods = list(results[0][1]["methods"])
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        means = [summary["methods"][method]["wall_per_group"] for _, summary in results]
        stds = [summary["methods"][method]["wall_per_group_std"] for _, summary in results]
        positions = np.arange(len(results)) + (k - (len(methods) - 1) / 2) * width
        axis.bar(positions, means, width, yerr=stds, label=method, capsize=2)
    axis.set_xticks(np.arange(len(results)), [engine_label(setting) for setting, _ in results])
    axis.set_ylabel("wall time per trained group (engine units)")
    axis.set_title("Modelled engine with a trainer: synchronous steps against the asynchronous worker")
    axis.legend(fontsize=7, ncol=2)
    return figure


def table(results: list[tuple[EngineSetting, dict[str, dict[str, Any]]]]) -> str:
    headers = ["engine", "method", "engine time", "vs GRPO n=4", "vs balance rounds", "samples", "tokens", "cancelled"]
    rows = []
    for setting, summary in results:
        engine = engine_label(setting)
        for method, v in summary.items():
            rows.append(
                [
                    engine,
                    method,
                    f"{v['engine_time']:.0f} ± {v['engine_time_std']:.0f}",
                    f"{v['vs_grpo']:.2f}",
                    f"{v['vs_rounds']:.2f}",
                    f"{v['samples']:.0f}",
                    f"{v['tokens'] / 1000:.0f}k",
                    f"{v['cancelled_requests']:.0f}",
                ]
            )
    title = "Modelled engine time per step (decoding steps of a near-empty batch); mean ± population std over seeds"
    return format_table(headers, rows, title=title)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n", 1)[0], DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings, num_seeds = (SMOKE_SETTINGS, 1) if args.smoke else (SETTINGS, args.seeds)
    seeds = list(range(args.seed, args.seed + num_seeds))
    groups = SMOKE_TRAINED_GROUPS if args.smoke else TRAINED_GROUPS
    results = [(setting, run_setting(setting, seeds)) for setting in settings]
    with_trainer = [(setting, run_setting_with_trainer(setting, seeds, groups)) for setting in settings]
    text = "\n\n".join([table(results), trainer_table(with_trainer), ratio_table(with_trainer)])
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.txt").write_text(text + "\n")
    save_figure(plot_wall_per_group(with_trainer), args.out / "wall_per_group.png")
    data = {
        "machine": machine_description(),
        "seeds": seeds,
        "results": [
            {"setting": asdict(setting), "methods": summary, "with_trainer": trainer}
            for (setting, summary), (_, trainer) in zip(results, with_trainer, strict=True)
        ],
    }
    write_json(args.out / "results.json", data)
    return data


if __name__ == "__main__":
    main()
