"""GPU smoke test: `trl.GRPOTrainer` vs `ReinforceAdaTrainer(exit_rule="balance")` on a Qwen2.5-1.5B-shaped model.

A random bf16 model with Qwen2.5-1.5B's shape and vocabulary, the toy tokenizer and reward, LoRA r=16: nothing is
downloaded. It prints step times, their ratio and peak memory per method; without a CUDA GPU it says so and exits
0. The setup and the numbers: `docs/lab/benchmarks_overhead.md` ("GPU smoke test").

    python -m benchmarks.gpu_smoke                  # the 1.5B-shaped model on the GPU
    python -m benchmarks.gpu_smoke --tiny           # toy-sized model, CPU or GPU, ~20 s on a CPU
    python -m benchmarks.gpu_smoke --json out.json  # also write the numbers
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402

NO_CUDA_MESSAGE = (
    "gpu_smoke: no CUDA GPU found; nothing to do (the 1.5B-shaped model needs one). "
    "Run with --tiny to exercise the same code path with the toy-sized model on this machine."
)

# Qwen2.5-1.5B's shape (random weights): ~1.54B parameters with tied embeddings.
QWEN25_1_5B_SHAPE: dict[str, Any] = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
# trl_ada.toy's tiny model shape, with a vocabulary larger than the toy tokenizer's 384 ids like the full model's,
# so that `--tiny` also runs the id suppression.
TINY_SHAPE: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}
METHODS = ("grpo", "balance")
LABELS = {"grpo": "GRPOTrainer", "balance": "ReinforceAdaTrainer balance"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="toy-sized model on whatever device exists (CPU here)")
    parser.add_argument("--steps", type=int, default=3, help="training steps per method")
    parser.add_argument("--prompts", type=int, default=8, help="distinct prompts per step")
    parser.add_argument("--num-generations", type=int, default=4, help="n: completions kept per prompt")
    parser.add_argument("--samples-per-round", type=int, default=4, help="M")
    parser.add_argument("--max-rounds", type=int, default=3, help="N")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument(
        "--dtype", choices=("auto", "bf16", "fp32"), default="auto", help="auto: bf16 on CUDA, fp32 on CPU"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------------------------
# Model, data, trainers
# --------------------------------------------------------------------------------------------


@contextmanager
def default_dtype(dtype: torch.dtype):
    """Create new floating-point tensors in `dtype` inside the block."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def model_shape(tiny: bool, tokenizer_size: int) -> dict[str, Any]:
    """The Qwen2 configuration fields of the requested model; the tokenizer's ids must fit in its vocabulary."""
    shape = dict(TINY_SHAPE if tiny else QWEN25_1_5B_SHAPE)
    if shape["vocab_size"] < tokenizer_size:
        raise ValueError(f"vocab_size {shape['vocab_size']} is smaller than the tokenizer ({tokenizer_size} ids)")
    return shape


def build_model(shape: dict[str, Any], tokenizer: Any, device: torch.device, dtype: torch.dtype, seed: int) -> Any:
    """A randomly initialised `Qwen2ForCausalLM` of `shape`, created directly on `device` in `dtype`."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        **shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    torch.manual_seed(seed)
    with torch.device(device), default_dtype(dtype):
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    return model


def unreachable_ids(vocab_size: int, tokenizer_size: int) -> list[int]:
    """Model ids the tokenizer cannot decode; generation suppresses them."""
    return list(range(tokenizer_size, vocab_size))


def use_bf16(args: argparse.Namespace, on_cuda: bool) -> bool:
    """bf16 weights and autocast: by default on CUDA only."""
    return args.dtype == "bf16" or (args.dtype == "auto" and on_cuda)


def config_fields(args: argparse.Namespace, on_cuda: bool, output_dir: Path, suppress: list[int]) -> dict[str, Any]:
    """Config fields shared by both methods."""
    fields: dict[str, Any] = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": args.prompts * args.num_generations,
        "num_generations": args.num_generations,
        "max_completion_length": args.max_completion_length,
        "max_steps": args.steps,
        "learning_rate": 1e-5,
        "temperature": 1.0,
        "beta": 0.0,
        "loss_type": "dapo",
        "scale_rewards": "none",
        "epsilon_high": 0.28,
        "bf16": use_bf16(args, on_cuda),
        "use_cpu": not on_cuda,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "log_level": "error",
        "seed": args.seed,
    }
    if suppress:
        fields["generation_kwargs"] = {"suppress_tokens": suppress}
    return fields


def build_trainer(method: str, model: Any, tokenizer: Any, fields: dict[str, Any], args: argparse.Namespace) -> Any:
    """The trainer of `method` with LoRA r=`args.lora_r` on all linear layers."""
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
    from trl_ada.toy import make_toy_dataset, toy_reward

    lora = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, target_modules="all-linear", task_type="CAUSAL_LM")
    dataset = make_toy_dataset(args.prompts, seed=args.seed)
    common = {"processing_class": tokenizer, "train_dataset": dataset, "peft_config": lora}
    if method == "grpo":
        trainer = GRPOTrainer(model, toy_reward, args=GRPOConfig(**fields), **common)
    else:
        config = ReinforceAdaConfig(
            exit_rule=method, samples_per_round=args.samples_per_round, max_rounds=args.max_rounds, **fields
        )
        trainer = ReinforceAdaTrainer(model, toy_reward, args=config, **common)
    trainer.remove_callback(PrinterCallback)
    return trainer


# --------------------------------------------------------------------------------------------
# Running and reporting
# --------------------------------------------------------------------------------------------


def warm_median(values: list[float]) -> float:
    """Median of the values after the first (the first step pays warm-up), or of all when there is one."""
    return statistics.median(values[1:] if len(values) > 1 else values)


def step_results(log_history: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """Per-step times, samples drawn, tokens and completion lengths from TRL's log history."""
    logs = [entry for entry in log_history if "step_time" in entry]
    samples = [float(entry.get("reinforce_ada/samples", batch)) for entry in logs]
    lengths = [float(entry["completions/mean_length"]) for entry in logs]
    tokens = [
        float(entry.get("reinforce_ada/tokens", s * n)) for entry, s, n in zip(logs, samples, lengths, strict=True)
    ]
    return {
        "step_times": [float(entry["step_time"]) for entry in logs],
        "samples": samples,
        "tokens": tokens,
        "mean_completion_length": lengths,
        "rewards": [float(entry["reward"]) for entry in logs],
    }


def run_method(method: str, args: argparse.Namespace, device: torch.device, work: Path) -> dict[str, Any]:
    """Build a fresh model and trainer for `method`, train `args.steps` steps, return its numbers."""
    from trl_ada.toy import build_tokenizer

    on_cuda = device.type == "cuda"
    tokenizer = build_tokenizer()
    shape = model_shape(args.tiny, len(tokenizer))
    if on_cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    dtype = torch.bfloat16 if use_bf16(args, on_cuda) else torch.float32
    model = build_model(shape, tokenizer, device, dtype, args.seed)
    parameters = sum(p.numel() for p in model.parameters())
    suppress = unreachable_ids(shape["vocab_size"], len(tokenizer))
    trainer = build_trainer(method, model, tokenizer, config_fields(args, on_cuda, work / method, suppress), args)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    result = {
        "method": method,
        "parameters": parameters,
        "train_seconds": wall,
        **step_results(trainer.state.log_history, args.prompts * args.num_generations),
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if on_cuda else None,
    }
    del trainer, model
    gc.collect()
    if on_cuda:
        torch.cuda.empty_cache()
    return result


def format_results(results: dict[str, dict[str, Any]], device: str) -> str:
    """A fixed-width table and the headline ratio."""
    headers = ("method", "step times (s)", "median 2.. (s)", "samples/step", "tokens/step", "mean len", "peak GiB")
    rows = []
    for method, r in results.items():
        peak = "n/a (CPU)" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.2f}"
        rows.append(
            (
                LABELS[method],
                " ".join(f"{t:.2f}" for t in r["step_times"]),
                f"{warm_median(r['step_times']):.3f}",
                "/".join(f"{s:.0f}" for s in r["samples"]),
                f"{statistics.mean(r['tokens']):.0f}",
                f"{statistics.mean(r['mean_completion_length']):.1f}",
                peak,
            )
        )
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    grpo, ada = results["grpo"], results["balance"]
    ratio = warm_median(ada["step_times"]) / warm_median(grpo["step_times"])
    samples = statistics.mean(ada["samples"]) / statistics.mean(grpo["samples"])
    return "\n".join(
        [
            f"gpu_smoke on {device}: {grpo['parameters'] / 1e6:,.1f}M parameters (LoRA adapters not counted)",
            line(headers),
            "-" * len(line(headers)),
            *(line(row) for row in rows),
            "",
            f"step-time ratio balance / GRPO: {ratio:.2f}x for {samples:.2f}x samples drawn "
            f"({ratio / samples:.2f}x time per generated sample)",
        ]
    )


def quiet_libraries() -> None:
    """Silence transformers/TRL progress bars, warnings and info logs."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("trl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def main(argv: Sequence[str] | None = None) -> int:
    """Run both methods and print the table; exit status 0 also when there is no CUDA GPU."""
    args = parse_args(argv)
    if not torch.cuda.is_available() and not args.tiny:
        print(NO_CUDA_MESSAGE)
        return 0
    try:
        import peft  # noqa: F401
    except ImportError:
        print("gpu_smoke: peft is not installed; it is needed for the LoRA runs.", file=sys.stderr)
        return 1
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    if device.type == "cpu":
        from trl_ada.toy import configure_torch_threads

        configure_torch_threads()  # one thread: the tiny model is much faster so on a busy CPU
    quiet_libraries()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_smoke_") as tmp:
        results = {method: run_method(method, args, device, Path(tmp)) for method in METHODS}
    print(format_results(results, f"{name} ({'tiny' if args.tiny else 'Qwen2.5-1.5B shape'})"))
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"device": name, "tiny": args.tiny, "config": {k: str(v) for k, v in vars(args).items()}}
        args.json.write_text(json.dumps({**payload, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
