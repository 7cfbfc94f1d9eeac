"""Tree attention without the FlashAttention-3 kernel, so TRL's `AsyncGRPOTrainer` can train on CPU.

TRL packs each micro-batch into a prefix tree and attends with FlashAttention-3's variable-length kernel, downloaded
from the Hub (`trl/experimental/async_grpo/packing.py`, `_flash_attn`), which needs CUDA. This is the same
computation in plain PyTorch, one segment at a time: segment s holds queries `q[cu_q[s]:cu_q[s+1]]` and attends,
causally and aligned to the end, to the keys of its root-to-segment path `k[kv_index[cu_k[s]:cu_k[s+1]]]`.
Exact but slow: for tests and CPU runs of tiny models only.
"""

from __future__ import annotations

import torch
from torch.nn.functional import scaled_dot_product_attention

__all__ = ["tree_attention_reference"]


def tree_attention_reference(
    module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """TRL's tree attention (same signature), computed with `scaled_dot_product_attention` per segment."""
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # (tokens, heads, head_dim)
    k, v = k.index_select(0, tree_kv_index), v.index_select(0, tree_kv_index)
    if k.shape[1] != q.shape[1]:  # grouped-query attention
        k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
    outputs = []
    bounds_q, bounds_k = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    for s in range(len(bounds_q) - 1):
        (qa, qb), (ka, kb) = bounds_q[s : s + 2], bounds_k[s : s + 2]
        mask = torch.ones(qb - qa, kb - ka, dtype=torch.bool, device=q.device).tril(diagonal=(kb - ka) - (qb - qa))
        segment = scaled_dot_product_attention(
            q[qa:qb].transpose(0, 1), k[ka:kb].transpose(0, 1), v[ka:kb].transpose(0, 1), attn_mask=mask, scale=scaling
        )
        outputs.append(segment.transpose(0, 1))
    return torch.cat(outputs).unsqueeze(0), None
