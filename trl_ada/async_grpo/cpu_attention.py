"""Tree attention without the FlashAttention-3 kernel, so TRL's `AsyncGRPOTrainer` can train on CPU.

TRL packs each micro-batch into a prefix tree and attends with FlashAttention-3's variable-length kernel, downloaded
from the Hub (`trl/experimental/async_grpo/packing.py`, `_flash_attn`), which needs CUDA. [`tree_attention_cpu`] is
the same computation in plain PyTorch: segment s holds the queries `q[cu_q[s]:cu_q[s+1]]` and attends, causally and
aligned to the end, to the keys of its root-to-segment path `k[kv_index[cu_k[s]:cu_k[s+1]]]`.

It makes one batched `scaled_dot_product_attention` call per layer. Each row of the batch holds up to `query_block`
consecutive queries of one segment and the keys of its path that they may see, padded to the longest row and masked
([`TreeRows`]). A single boolean mask over the whole packed micro-batch (queries × tokens) would also be one call, but
CPU kernels do not skip masked blocks: it would compute every query against every token, several times the scores the
synchronous trainer's padded batch computes (`benchmarks/async_attention.py` counts them). The rows are the same in
every layer of a forward pass, so they are built once per micro-batch ([`TreeRowsCache`]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.functional import scaled_dot_product_attention

__all__ = [
    "KEYS_PER_QUERY_BLOCK",
    "QUERY_BLOCK",
    "TreeRows",
    "TreeRowsCache",
    "query_block",
    "tree_attention_cpu",
    "tree_rows",
]

QUERY_BLOCK = 32
"""The most queries in one row, unless paths are long: a longer segment is cut into blocks, so that it does not widen
every other row."""
KEYS_PER_QUERY_BLOCK = 8
"""With paths longer than `KEYS_PER_QUERY_BLOCK × QUERY_BLOCK`, a row holds up to 1/`KEYS_PER_QUERY_BLOCK` of the
longest path's queries instead: every row copies the keys of a longest path, and fewer, wider rows bound those
copies to about `KEYS_PER_QUERY_BLOCK` × the tokens, plus one longest path per segment."""


@dataclass(frozen=True)
class TreeRows:
    """A packed prefix tree as padded rows for one batched attention call. Row r holds consecutive queries of one
    segment and the keys of the segment's path up to the last one's position; padding repeats a real position and is
    masked out (a padding query sees only its row's first key, so no row of the mask is empty)."""

    query_index: torch.Tensor
    """`(rows, row_queries)`: the packed position of each query."""
    key_index: torch.Tensor
    """`(rows, row_keys)`: the packed position of each key."""
    mask: torch.Tensor
    """`(rows, 1, row_queries, row_keys)` booleans: query i of a row may attend key j of the row."""
    output_index: torch.Tensor
    """`(tokens,)`: where each packed query lies among the flattened `(rows × row_queries)` outputs."""


def tree_rows(
    kv_index: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, block: int | None = None
) -> TreeRows:
    """Lay out TRL's packed tree (`tree_kv_index`, `tree_cu_seqlens_q`, `tree_cu_seqlens_k`) as [`TreeRows`], rows
    of at most `block` queries (default: [`query_block`]). Query a of a segment with Lq queries and a path of Lk keys
    sees path keys `0 .. a + Lk - Lq`. Raises `ValueError` for a path shorter than its segment (a query would see no
    key; TRL's trees never have one)."""
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    block = block or query_block(max(b - a for a, b in zip(cu_k[:-1], cu_k[1:], strict=True)))
    starts, counts, lasts, keys = zip(*_blocks(kv_index.tolist(), cu_q, cu_k, block), strict=True)
    device, width = kv_index.device, max(map(len, keys))
    query, key = torch.arange(max(counts), device=device), torch.arange(width, device=device)
    counts_t, lasts_t = torch.tensor(counts, device=device)[:, None], torch.tensor(lasts, device=device)[:, None]
    real = query < counts_t  # (rows, row_queries)
    query_index = torch.tensor(starts, device=device)[:, None] + torch.minimum(query, counts_t - 1)
    key_index = torch.tensor([row + row[:1] * (width - len(row)) for row in keys], device=device)
    causal = key <= (query + lasts_t)[:, :, None]  # (rows, row_queries, row_keys)
    mask = torch.where(real[:, :, None], causal, key == 0)
    output_index = (torch.arange(len(counts), device=device)[:, None] * len(query) + query)[real]
    return TreeRows(query_index, key_index, mask[:, None], output_index)


def query_block(longest_path: int) -> int:
    """The most queries in one row: `QUERY_BLOCK`, or 1/`KEYS_PER_QUERY_BLOCK` of the longest path if more."""
    return max(QUERY_BLOCK, -(-longest_path // KEYS_PER_QUERY_BLOCK))


def _blocks(
    kv_index: list[int], cu_q: list[int], cu_k: list[int], block: int
) -> list[tuple[int, int, int, list[int]]]:
    """Per row: its first packed query, its number of queries, the last key its first query sees (an index into the
    row's keys), and its keys (the segment's path up to what its last query sees)."""
    rows = []
    for s in range(len(cu_q) - 1):
        queries, path = cu_q[s + 1] - cu_q[s], kv_index[cu_k[s] : cu_k[s + 1]]
        if len(path) < queries:
            raise ValueError(f"segment {s}: {queries} queries but a key path of {len(path)}, some would see no key.")
        for a in range(0, queries, block):
            count, last = min(block, queries - a), a + len(path) - queries
            rows.append((cu_q[s] + a, count, last, path[: last + count]))
    return rows


class TreeRowsCache:
    """[`tree_rows`] of the last tree asked for: every layer of one forward pass gets the rows built by the first.
    A tree is recognised by the contents of its index tensors (kept as copies), never by the tensors' identities, so
    a new micro-batch never gets stale rows."""

    def __init__(self) -> None:
        self._tree: tuple[torch.Tensor, ...] | None = None
        self._rows: TreeRows | None = None
        self.builds = 0

    def __call__(self, kv_index: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor) -> TreeRows:
        tree = (kv_index, cu_seqlens_q, cu_seqlens_k)
        if self._rows is None or not _same_tensors(self._tree, tree):
            self._rows = tree_rows(*tree)
            self._tree = tuple(t.clone() for t in tree)
            self.builds += 1
        return self._rows


def _same_tensors(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    """Whether two tuples of tensors hold the same values on the same devices."""
    return all(x.device == y.device and torch.equal(x, y) for x, y in zip(a, b, strict=True))


_ROWS = TreeRowsCache()


def tree_attention_cpu(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's tree attention (same signature) in one batched `scaled_dot_product_attention` call over the rows of
    [`tree_rows`]. `query` is `(1, heads, tokens, head_dim)`, `key` and `value` have as many heads or a divisor of
    them (grouped-query attention); returns `(1, tokens, heads, head_dim)`, as transformers' attention functions do.

    Memory per layer: the queries, keys and values gathered into rows (each row copies up to a longest path's keys:
    about `KEYS_PER_QUERY_BLOCK` × the tokens plus a longest path per segment, the order of the synchronous trainer's
    padded batch), and the rows' mask, rows × row_queries × row_keys booleans, built once per micro-batch. On the
    real-model benchmark's micro-batch (16 samples, ~450 tokens, SmolLM2-135M's heads) each is 2 MB or less.
    """
    if sliding_window or softcap:
        raise NotImplementedError("the CPU tree attention has no sliding window and no logit softcapping.")
    rows = _ROWS(tree_kv_index, tree_cu_seqlens_q, tree_cu_seqlens_k)
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # (tokens, heads, head_dim)
    out = scaled_dot_product_attention(
        _gather(q, rows.query_index),  # (rows, heads, row_queries, head_dim)
        _gather(k, rows.key_index),
        _gather(v, rows.key_index),
        attn_mask=rows.mask.to(query.device),
        scale=scaling,
        enable_gqa=k.shape[1] != q.shape[1],
    )
    return out.transpose(1, 2).flatten(0, 1).index_select(0, rows.output_index).unsqueeze(0), None


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`(rows, heads, row_length, head_dim)` from `x` `(tokens, heads, head_dim)` and `index` `(rows, row_length)`."""
    return x.index_select(0, index.flatten()).unflatten(0, index.shape).transpose(1, 2)
