"""Rounds against streaming on a modelled GPU engine: what the 2-core CPU engine of `vllm_step_time` cannot show.

A model, not a measurement. An engine with continuous batching decodes up to `capacity` sequences at once (vLLM's
`max_num_seqs`; more wait in a FIFO queue); one decoding step costs `1 + batch_cost · running / capacity` units (a
GPU far from compute-bound: a full batch costs little more than a small one). Completion lengths are log-normal,
capped at `max_length`; a completion is right with its prompt's pass rate (the paper's base-model distribution of
`sampling_efficiency`), independent of its length. The samplers are the library's own: `AdaptiveSampler` for GRPO
n=4 and round-based balance (M=8, N=4), `StreamingScheduler` over it for streaming balance, with the default window
(M completions of a prompt in flight) and with the whole cap M·N in flight (`streaming_window=32`). Rounds wait for
their longest completion; streaming issues and cancels requests as results arrive. Scoring, weight sync and the
loss are not modelled (they cost the same under both schedules), so the ratios are of engine time only.

    python -m benchmarks.engine_schedule           # 4 engine settings x 4 methods x 5 seeds: ~1-2 min
    python -m benchmarks.engine_schedule --smoke   # 1 setting, 16 prompts, 1 seed: a second

Writes `results.json` and `table.txt` into `--out` (default `benchmarks/results/engine_schedule/`). Results and
what they mean: `docs/benchmarks_vllm.md`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import derive_seed, format_table, machine_description, make_parser, mean_and_std, write_json
from benchmarks.sampling_efficiency import PROMPT_SETS
from trl_ada.plan import SamplingPlan
from trl_ada.sampling import AdaptiveSampler
from trl_ada.streaming import StreamingScheduler

DEFAULT_OUT = Path("benchmarks/results/engine_schedule")
METHODS = ("GRPO n=4", "balance rounds", "balance streaming", "balance streaming, window M·N")
WINDOWS = {"balance streaming": None, "balance streaming, window M·N": 32}
"""`StreamingScheduler(window=...)` of each streaming method: `samples_per_round` (the default), the whole cap."""


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

    def advance(self) -> list[int]:
        """Decode until at least one running sequence ends; the keys that ended."""
        free = self.setting.capacity - self.keys.size
        if free > 0 and self.queue:
            admitted, self.queue = self.queue[:free], self.queue[free:]
            self.keys = np.concatenate([self.keys, [k for k, _ in admitted]])
            self.remaining = np.concatenate([self.remaining, [n for _, n in admitted]])
        steps = int(self.remaining.min())
        running = self.keys.size
        self.time += steps * (1.0 + self.setting.batch_cost * running / self.setting.capacity)
        self.tokens += steps * running
        self.remaining = self.remaining - steps
        ended = self.remaining == 0
        finished = self.keys[ended].tolist()
        self.keys, self.remaining = self.keys[~ended], self.remaining[~ended]
        return finished


def completion_lengths(setting: EngineSetting, rng: np.random.Generator, size: int) -> np.ndarray:
    """Log-normal lengths around `median_length`, capped at `max_length`."""
    lengths = np.rint(rng.lognormal(math.log(setting.median_length), setting.length_sigma, size))
    return np.clip(lengths, 1, setting.max_length).astype(np.int64)


PLANS = {
    "GRPO n=4": SamplingPlan(num_generations=4, exit_rule="none"),
    "balance": SamplingPlan(num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balance"),
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
    scheduler = StreamingScheduler(sampler, window=window)
    cancelled = 0

    def send(requests) -> None:
        for request in requests:
            engine.submit(request.id, int(completion_lengths(engine.setting, rng, 1)[0]))

    send(scheduler.start())
    while not scheduler.done:
        for key in engine.advance():
            request = scheduler.in_flight.get(key)
            if request is None:
                continue
            update = scheduler.receive(key, (rng.random(request.size) < rates[request.prompt]).astype(float))
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


def table(results: list[tuple[EngineSetting, dict[str, dict[str, Any]]]]) -> str:
    headers = ["engine", "method", "engine time", "vs GRPO n=4", "vs balance rounds", "samples", "tokens", "cancelled"]
    rows = []
    for setting, summary in results:
        engine = f"B={setting.prompts} cap={setting.capacity} sigma={setting.length_sigma}"
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
    title = "Modelled engine time per step (decoding steps of a near-empty batch); mean ± std over seeds"
    return format_table(headers, rows, title=title)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n", 1)[0], DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings, num_seeds = (SMOKE_SETTINGS, 1) if args.smoke else (SETTINGS, args.seeds)
    seeds = list(range(args.seed, args.seed + num_seeds))
    results = [(setting, run_setting(setting, seeds)) for setting in settings]
    text = table(results)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.txt").write_text(text + "\n")
    data = {
        "machine": machine_description(),
        "seeds": seeds,
        "results": [{"setting": asdict(setting), "methods": summary} for setting, summary in results],
    }
    write_json(args.out / "results.json", data)
    return data


if __name__ == "__main__":
    main()
