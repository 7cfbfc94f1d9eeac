"""CPU attention of the asynchronous trainer against the synchronous trainer's: ms per decoder layer, forward+backward.

What it measures
----------------
One micro-batch like the real-model benchmark's (`benchmarks.real_learning`): `--prompts` prompts of about
`--prompt-tokens` tokens, the first `--shared-prefix` of them common to every prompt (a chat template's system
turn), each with `--completions` completions of up to `--completion-tokens` random tokens, attended at
SmolLM2-135M's shape (9 query heads, 3 key/value heads, head dimension 64). Per arm, the attention alone (the
projections and the MLP are outside it), forward and backward, for one decoder layer:

- `per-segment loop`: the asynchronous trainer's CPU attention before issue 34, one `scaled_dot_product_attention`
  call per segment of the packed prefix tree, over its path's gathered keys;
- `one dense mask`: one call over the whole packed micro-batch, every query against every token, masked to its path;
- `segment rows (trl_ada)`: `trl_ada.async_grpo.cpu_attention.tree_attention_cpu`, one batched call over padded rows
  of at most 32 queries (an 8th of the longest path if more) of one segment and the keys of its path;
- `synchronous (padded)`: what transformers' sdpa attention does for `GRPOTrainer`: left-padded prompts and
  right-padded completions in one batch, a causal and padding mask, keys and values repeated per query head. The
  baseline of the ratio column.

The tree arms reuse what is built once per micro-batch (the mask, the rows); the time to build it is reported
apart. Arms run interleaved, in an order that rotates each repetition, after `--warmup` untimed repetitions; the
table gives the median and the interquartile range. `scores per head` counts the query-key products each arm
computes (CPU kernels compute masked ones too). Before timing, every arm's output on every real token is checked
against the per-segment loop's.

    python -m benchmarks.async_attention                # 10 warm-up and 200 timed repetitions x 4 arms
    python -m benchmarks.async_attention --threads 2    # torch's intra-op threads (default: torch's choice)
    python -m benchmarks.async_attention --smoke        # a tiny batch and head size, 3 repetitions

Writes `table.md` and `results.json` into `--out` (default `benchmarks/results/async_attention/`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.functional import scaled_dot_product_attention

from benchmarks.common import machine_description, make_parser, markdown, write_json

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "async_attention"
BASELINE = "synchronous (padded)"
Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Settings:
    """The micro-batch, the attention's shape and the repetitions."""

    prompts: int = 4
    completions: int = 4  # per prompt: 16 in all
    prompt_tokens: int = 40
    shared_prefix: int = 20
    completion_tokens: int = 32
    heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    repeats: int = 200
    warmup: int = 10

    @classmethod
    def smoke(cls) -> Settings:
        return cls(
            prompts=2,
            completions=2,
            prompt_tokens=8,
            shared_prefix=3,
            completion_tokens=6,
            heads=4,
            kv_heads=2,
            head_dim=16,
            repeats=3,
            warmup=1,
        )


# --------------------------------------------------------------------------------------------
# The micro-batch
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MicroBatch:
    tree: dict[str, torch.Tensor]
    """TRL's packing of the samples (`TreeRow.pack`)."""
    grid: torch.Tensor
    """`(samples, prompt + completion)`: the packed position of each token of the synchronous padded batch, -1 at
    padding (prompts left-padded, completions right-padded, as `GRPOTrainer` lays them out)."""


def micro_batch(settings: Settings, seed: int) -> MicroBatch:
    """Random prompts sharing their first tokens, random completions of 1/4 to full length, packed by TRL."""
    from trl.experimental.async_grpo.packing import TreeRow

    rng = np.random.default_rng(seed)
    shared = rng.integers(0, 50_000, settings.shared_prefix).tolist()
    samples = []
    for _ in range(settings.prompts):
        spread = settings.prompt_tokens // 10
        length = int(rng.integers(settings.prompt_tokens - spread, settings.prompt_tokens + spread + 1))
        prompt = shared + rng.integers(0, 50_000, max(1, length - len(shared))).tolist()
        for _ in range(settings.completions):
            completion = rng.integers(
                0, 50_000, int(rng.integers(settings.completion_tokens // 4, 1 + settings.completion_tokens))
            )
            samples.append((prompt, completion.tolist()))
    row = TreeRow()
    for prompt, completion in samples:
        ids = prompt + completion
        row.add(
            {
                "input_ids": np.array(ids),
                "completion_mask": np.array([0] * len(prompt) + [1] * len(completion)),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32),
                "advantage": 0.0,
                "group_id": len(prompt),
            }
        )
    tree = row.pack()
    return MicroBatch(tree, padded_grid(tree))


def padded_grid(tree: dict[str, torch.Tensor]) -> torch.Tensor:
    """The synchronous batch's layout over the packed positions. A sample ends on a leaf segment (the last position
    of its path is on no other path), whose path is the sample's tokens in order; its prompt ends at the first
    position that predicts a trained token."""
    kv_index, cu_k, labels = tree["tree_kv_index"], tree["tree_cu_seqlens_k"].tolist(), tree["shift_labels"]
    uses = torch.bincount(kv_index, minlength=len(labels))
    paths = [kv_index[a:b] for a, b in zip(cu_k[:-1], cu_k[1:], strict=True)]
    samples = [path for path in paths if uses[path[-1]] == 1]
    prompts = [int((labels[path] != -100).int().argmax()) + 1 for path in samples]
    width = max(prompts)
    grid = torch.full((len(samples), width + max(len(s) - p for s, p in zip(samples, prompts, strict=True))), -1)
    for row, path, prompt in zip(grid, samples, prompts, strict=True):
        row[width - prompt : width - prompt + len(path)] = path
    return grid


# --------------------------------------------------------------------------------------------
# The arms
# --------------------------------------------------------------------------------------------


@dataclass
class Arm:
    name: str
    inputs: Tensors
    """The queries, keys and values this arm attends (leaves that require grad)."""
    forward: Callable[..., torch.Tensor]
    scores: int
    """Query-key products per head."""
    positions: torch.Tensor
    """The packed position of each real token, in the order `real` returns their outputs."""
    real: Callable[[torch.Tensor], torch.Tensor]
    """The outputs of the real tokens, `(tokens, heads, head_dim)`."""


def segment_loop_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tree: dict) -> torch.Tensor:
    """The per-segment loop: each segment's queries against its path's gathered keys, causal, aligned to the end."""
    q, k, v = (x[0].transpose(0, 1) for x in (q, k, v))  # (tokens, heads, head_dim)
    k, v = (x.index_select(0, tree["tree_kv_index"]).repeat_interleave(q.shape[1] // x.shape[1], 1) for x in (k, v))
    cu_q, cu_k, outputs = tree["tree_cu_seqlens_q"].tolist(), tree["tree_cu_seqlens_k"].tolist(), []
    for s in range(len(cu_q) - 1):
        (qa, qb), (ka, kb) = cu_q[s : s + 2], cu_k[s : s + 2]
        mask = torch.ones(qb - qa, kb - ka, dtype=torch.bool).tril(diagonal=(kb - ka) - (qb - qa))
        segment = scaled_dot_product_attention(
            q[qa:qb].transpose(0, 1), k[ka:kb].transpose(0, 1), v[ka:kb].transpose(0, 1), attn_mask=mask
        )
        outputs.append(segment.transpose(0, 1))
    return torch.cat(outputs).unsqueeze(0)


def dense_tree_mask(tree: dict[str, torch.Tensor]) -> torch.Tensor:
    """`(tokens, tokens)` booleans: packed query i may attend packed key j."""
    cu_q, cu_k, kv_index = (
        tree["tree_cu_seqlens_q"].tolist(),
        tree["tree_cu_seqlens_k"].tolist(),
        tree["tree_kv_index"],
    )
    mask = torch.zeros(cu_q[-1], cu_q[-1], dtype=torch.bool)
    for s in range(len(cu_q) - 1):
        queries, keys = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
        mask[cu_q[s] : cu_q[s + 1], kv_index[cu_k[s] : cu_k[s + 1]]] = torch.ones(
            queries, keys, dtype=torch.bool
        ).tril(keys - queries)
    return mask


def leaves(*tensors: torch.Tensor) -> Tensors:
    return tuple(t.detach().clone().requires_grad_() for t in tensors)


def tree_arms(batch: MicroBatch, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[Arm]:
    """The three attentions over the packed tree (`q` `(1, heads, tokens, head_dim)`, `k`, `v` with fewer heads)."""
    from trl_ada.async_grpo.cpu_attention import tree_attention_cpu, tree_rows

    tree, tokens = batch.tree, q.shape[2]
    cu_q, cu_k = tree["tree_cu_seqlens_q"].diff(), tree["tree_cu_seqlens_k"].diff()
    fields = {name: tree[name] for name in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")}
    rows = tree_rows(*fields.values())
    mask = dense_tree_mask(tree)
    every, real = torch.arange(tokens), lambda out: out[0]

    def rows_forward(q, k, v):
        return tree_attention_cpu(None, q, k, v, None, **fields)[0]

    def dense_forward(q, k, v):
        return scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).transpose(1, 2)

    return [
        Arm(
            "per-segment loop",
            leaves(q, k, v),
            lambda *x: segment_loop_attention(*x, tree),
            int((cu_q * cu_k).sum()),
            every,
            real,
        ),
        Arm("one dense mask", leaves(q, k, v), dense_forward, tokens * tokens, every, real),
        Arm("segment rows (trl_ada)", leaves(q, k, v), rows_forward, rows.mask[:, 0].numel(), every, real),
    ]


def synchronous_arm(batch: MicroBatch, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Arm:
    """transformers' sdpa attention over the padded batch of the same tokens (their queries, keys and values)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    grid, real = batch.grid, batch.grid >= 0
    padded = [x[0][:, grid.clamp(min=0)].transpose(0, 1) for x in (q, k, v)]  # (samples, heads, length, head_dim)
    length = grid.shape[1]
    mask = torch.ones(length, length, dtype=torch.bool).tril()[None, None] & real[:, None, None, :]
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = q.shape[1] // k.shape[1], True

    def forward(q, k, v):
        return sdpa_attention_forward(module, q, k, v, mask, dropout=0.0, scaling=None)[0]

    return Arm(BASELINE, leaves(*padded), forward, grid.numel() * length, grid[real], lambda out: out[real])


def check(arms: list[Arm]) -> dict[str, float]:
    """Largest difference of each arm's outputs on the real tokens from the first arm's."""
    with torch.no_grad():
        reference = arms[0].real(arms[0].forward(*arms[0].inputs))
        return {
            arm.name: float((arm.real(arm.forward(*arm.inputs)) - reference[arm.positions]).abs().max())
            for arm in arms
        }


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def time_arms(arms: list[Arm], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Milliseconds of each forward+backward, arms interleaved in a rotating order; warm-up repetitions dropped."""
    upstream = {arm.name: torch.randn_like(arm.forward(*arm.inputs).detach()) for arm in arms}
    times: dict[str, list[float]] = {arm.name: [] for arm in arms}
    for repeat in range(warmup + repeats):
        for arm in arms[repeat % len(arms) :] + arms[: repeat % len(arms)]:
            start = time.perf_counter()
            torch.autograd.grad(arm.forward(*arm.inputs), arm.inputs, upstream[arm.name])
            elapsed = 1e3 * (time.perf_counter() - start)
            if repeat >= warmup:
                times[arm.name].append(elapsed)
    return times


def build_times(batch: MicroBatch, repeats: int) -> dict[str, float]:
    """Median milliseconds to build what the tree arms build once per micro-batch."""
    from trl_ada.async_grpo.cpu_attention import tree_rows

    fields = [batch.tree[name] for name in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")]
    builders = {
        "one dense mask": lambda: dense_tree_mask(batch.tree),
        "segment rows (trl_ada)": lambda: tree_rows(*fields),
    }
    result = {}
    for name, build in builders.items():
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            build()
            samples.append(1e3 * (time.perf_counter() - start))
        result[name] = statistics.median(samples)
    return result


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def summary(times: dict[str, list[float]], scores: dict[str, int], tokens: dict[str, int]) -> list[dict[str, Any]]:
    baseline = statistics.median(times[BASELINE])
    rows = []
    for name, samples in times.items():
        quartiles = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
        median = statistics.median(samples)
        rows.append(
            {
                "arm": name,
                "ms": median,
                "iqr": (quartiles[0], quartiles[2]),
                "ratio": median / baseline,
                "scores": scores[name],
                "tokens": tokens[name],
            }
        )
    return rows


def per_batch_mean(values: list[dict[str, int]]) -> dict[str, int]:
    return {name: round(statistics.mean(v[name] for v in values)) for name in values[0]}


def table(rows: list[dict[str, Any]]) -> str:
    headers = ["arm", "ms per layer (median)", "IQR", f"× {BASELINE}", "scores per head", "tokens"]
    body = [
        [
            row["arm"],
            f"{row['ms']:.2f}",
            f"{row['iqr'][0]:.2f}–{row['iqr'][1]:.2f}",
            f"{row['ratio']:.2f}",
            f"{row['scores']:,}",
            f"{row['tokens']:,}",
        ]
        for row in rows
    ]
    return markdown(headers, body)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = make_parser(__doc__.split("\n\n", 1)[0], DEFAULT_OUT, default_seeds=1)
    sizes = ("prompts", "completions", "prompt_tokens", "shared_prefix", "completion_tokens", "repeats", "warmup")
    for name in sizes:
        option = "--" + name.replace("_", "-")
        parser.add_argument(option, type=int, help=f"default: {getattr(Settings(), name)}, smoke: smaller")
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's choice)")
    options = parser.parse_args(argv)
    settings = Settings.smoke() if options.smoke else Settings()
    settings = replace(
        settings, **{name: getattr(options, name) for name in sizes if getattr(options, name) is not None}
    )
    if options.threads:
        torch.set_num_threads(options.threads)
    torch.manual_seed(options.seed)
    times: dict[str, list[float]] = {}
    differences, builds, scores, attended = [], [], [], []
    for seed in range(options.seed, options.seed + options.seeds):
        batch = micro_batch(settings, seed)
        tokens = len(batch.tree["input_ids"])
        q = torch.randn(1, settings.heads, tokens, settings.head_dim)
        k, v = (torch.randn(1, settings.kv_heads, tokens, settings.head_dim) for _ in range(2))
        arms = [*tree_arms(batch, q, k, v), synchronous_arm(batch, q, k, v)]
        differences.append(check(arms))
        scores.append({arm.name: arm.scores for arm in arms})
        attended.append({arm.name: arm.inputs[0].shape[0] * arm.inputs[0].shape[2] for arm in arms})
        builds.append(build_times(batch, max(3, settings.repeats // 10)))
        for name, samples in time_arms(arms, settings.repeats, settings.warmup).items():
            times.setdefault(name, []).extend(samples)
    rows = summary(times, per_batch_mean(scores), per_batch_mean(attended))
    header = (
        f"Attention of one decoder layer, forward+backward, at {settings.heads} query heads, {settings.kv_heads} "
        f"key/value heads, head dimension {settings.head_dim}: {settings.prompts} prompts of "
        f"~{settings.prompt_tokens} tokens ({settings.shared_prefix} shared) x {settings.completions} completions "
        f"of up to {settings.completion_tokens} tokens; {options.seeds} micro-batch(es) x {settings.repeats} "
        f"repetitions, {torch.get_num_threads()} torch threads. {machine_description()}."
    )
    build = {name: statistics.median(b[name] for b in builds) for name in builds[0]}
    lines = [
        "Built once per micro-batch: "
        + ", ".join(f"{name} {ms:.2f} ms" for name, ms in build.items())
        + " (spread over every layer of the model's forward).",
        "Largest output difference from the per-segment loop: "
        + ", ".join(f"{name} {max(d[name] for d in differences):.1e}" for name in differences[0])
        + ".",
    ]
    text = table(rows)
    print(header, "", text, "", *lines, sep="\n")
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text("\n".join([header, "", text, "", *lines]) + "\n")
    results = {
        "settings": asdict(settings),
        "machine": machine_description(),
        "threads": torch.get_num_threads(),
        "rows": rows,
        "build_ms": build,
        "differences": differences,
        "times_ms": times,
    }
    write_json(out / "results.json", results)
    return results


if __name__ == "__main__":
    main()
