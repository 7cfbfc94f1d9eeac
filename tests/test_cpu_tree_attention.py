"""The CPU tree attention (`trl_ada.async_grpo.cpu_attention`) against a naive per-query softmax over each query's
root-to-segment path, on trees packed by TRL's `TreeRow`: outputs, gradients, the rows and their cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from trl.experimental.async_grpo.packing import TreeRow

from trl_ada.async_grpo.cpu_attention import (
    QUERY_BLOCK,
    TreeRows,
    TreeRowsCache,
    query_block,
    tree_attention_cpu,
    tree_rows,
)

TREE_FIELDS = ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")


def packed_tree(samples: list[list[int]]) -> dict[str, torch.Tensor]:
    """TRL's packing of `samples` (token lists; those sharing a prefix share its tokens)."""
    row = TreeRow()
    for ids in samples:
        row.add(
            {
                "input_ids": np.array(ids),
                "completion_mask": np.ones(len(ids), dtype=np.int64),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32),
                "advantage": 0.0,
                "group_id": 0,
            }
        )
    return row.pack()


def grouped_samples(rng: np.random.Generator, groups: int, per_group: int, vocab: int) -> list[list[int]]:
    """`groups` prompts of 3-8 tokens, each followed by `per_group` completions of 1-6 tokens; a small vocabulary
    makes completions of a prompt share prefixes too."""
    samples = []
    for _ in range(groups):
        prompt = rng.integers(0, 50, size=int(rng.integers(3, 9))).tolist()
        samples += [prompt + rng.integers(0, vocab, size=int(rng.integers(1, 7))).tolist() for _ in range(per_group)]
    return samples


def naive_tree_attention(q, k, v, tree: dict[str, torch.Tensor], scaling: float | None) -> torch.Tensor:
    """Every query's softmax over the keys of its path up to its own position, one query and head at a time."""
    heads, kv_heads, head_dim = q.shape[1], k.shape[1], q.shape[3]
    scale = head_dim**-0.5 if scaling is None else scaling
    kv_index, cu_q, cu_k = (tree[name].tolist() for name in TREE_FIELDS)
    rows = []
    for s in range(len(cu_q) - 1):
        path, queries = kv_index[cu_k[s] : cu_k[s + 1]], cu_q[s + 1] - cu_q[s]
        for a in range(queries):
            seen = torch.tensor(path[: a + len(path) - queries + 1])
            per_head = []
            for h in range(heads):
                keys, values = k[0, h * kv_heads // heads, seen], v[0, h * kv_heads // heads, seen]
                weights = torch.softmax(keys @ q[0, h, cu_q[s] + a] * scale, dim=0)
                per_head.append(weights @ values)
            rows.append(torch.stack(per_head))
    return torch.stack(rows).unsqueeze(0)  # (1, tokens, heads, head_dim)


def random_qkv(tokens: int, heads: int, kv_heads: int, seed: int, head_dim: int = 8) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(1, heads, tokens, head_dim), (1, kv_heads, tokens, head_dim), (1, kv_heads, tokens, head_dim)]
    return [torch.randn(shape, generator=generator, requires_grad=True) for shape in shapes]


def attend(q, k, v, tree: dict[str, torch.Tensor], scaling: float | None) -> torch.Tensor:
    out, _ = tree_attention_cpu(
        None,
        q,
        k,
        v,
        None,
        tree_kv_index=tree["tree_kv_index"],
        tree_cu_seqlens_q=tree["tree_cu_seqlens_q"],
        tree_cu_seqlens_k=tree["tree_cu_seqlens_k"],
        scaling=scaling,
    )
    return out


def assert_matches_naive(tree: dict[str, torch.Tensor], heads: int, kv_heads: int, scaling: float | None, seed: int):
    """Outputs and the gradients of q, k and v equal the naive computation's to float32 rounding."""
    q, k, v = random_qkv(len(tree["input_ids"]), heads, kv_heads, seed)
    fast, naive = attend(q, k, v, tree, scaling), naive_tree_attention(q, k, v, tree, scaling)
    torch.testing.assert_close(fast, naive, atol=1e-6, rtol=1e-5)
    upstream = torch.randn(fast.shape, generator=torch.Generator().manual_seed(seed + 1))
    fast_grads = torch.autograd.grad(fast, (q, k, v), upstream)
    naive_grads = torch.autograd.grad(naive, (q, k, v), upstream)
    for got, want in zip(fast_grads, naive_grads, strict=True):  # a key's gradient sums over many queries
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (9, 3)])
@pytest.mark.parametrize("scaling", [None, 0.3])
def test_outputs_and_gradients_match_the_naive_attention(heads, kv_heads, scaling):
    tree = packed_tree(grouped_samples(np.random.default_rng(heads), groups=3, per_group=4, vocab=3))
    assert len(tree["tree_cu_seqlens_q"]) > 8  # several segments under shared prompts
    assert_matches_naive(tree, heads, kv_heads, scaling, seed=heads)


def visible_keys(rows: TreeRows) -> list[list[int]]:
    """The packed keys each packed query may attend, read off the rows."""
    seen: dict[int, list[int]] = {}
    for queries, keys, mask in zip(rows.query_index, rows.key_index, rows.mask[:, 0], strict=True):
        for position, allowed in zip(queries.tolist(), mask, strict=True):
            seen.setdefault(position, sorted(keys[allowed].tolist()))  # padding repeats the row's last query
    return [seen[p] for p in range(len(seen))]


def path_keys(tree: dict[str, torch.Tensor]) -> list[list[int]]:
    """The packed keys each packed query may attend, by the definition."""
    kv_index, cu_q, cu_k = (tree[name].tolist() for name in TREE_FIELDS)
    seen = []
    for s in range(len(cu_q) - 1):
        path, queries = kv_index[cu_k[s] : cu_k[s + 1]], cu_q[s + 1] - cu_q[s]
        seen += [sorted(path[: a + len(path) - queries + 1]) for a in range(queries)]
    return seen


def rows_of(tree: dict[str, torch.Tensor], **kwargs) -> TreeRows:
    return tree_rows(*(tree[name] for name in TREE_FIELDS), **kwargs)


@pytest.mark.parametrize("block", [1, 2, 32])
def test_rows_of_a_small_tree(block):
    # [1, 2, 3] and [1, 2, 4] fork one token before they differ: segments [1], [2, 3] and [2, 4]
    tree = packed_tree([[1, 2, 3], [1, 2, 4]])
    assert tree["input_ids"].tolist() == [1, 2, 3, 2, 4]
    rows = rows_of(tree, block=block)
    assert visible_keys(rows) == [[0], [0, 1], [0, 1, 2], [0, 3], [0, 3, 4]]
    assert rows.query_index.shape[0] == {1: 5, 2: 3, 32: 3}[block]
    assert bool(rows.mask.any(dim=-1).all())  # no query, padding included, sees no key


@pytest.mark.parametrize(("prompt_length", "rows"), [(70, 5), (300, 10)])
def test_a_long_segment_is_cut_into_blocks(prompt_length, rows):
    rng = np.random.default_rng(prompt_length)
    prompt = rng.integers(0, 50, size=prompt_length).tolist()
    tree = packed_tree([prompt + [1, 2, 3], prompt + [4, 5]])
    # the prompt up to its fork in blocks of 32 queries, or of an 8th of the longest path (38 of 303), then 2 branches
    block = query_block(int(tree["tree_cu_seqlens_k"].diff().max()))
    assert block == (QUERY_BLOCK if prompt_length == 70 else 38)
    assert rows_of(tree).query_index.shape == (rows, block)
    assert_matches_naive(tree, 4, 2, None, seed=3)


def test_the_cache_builds_rows_once_per_tree():
    first, second = packed_tree([[1, 2, 3, 4], [1, 2, 5]]), packed_tree([[1, 2, 3], [1, 2, 5, 6]])
    assert all(first[n].shape == second[n].shape for n in TREE_FIELDS) and any(
        not torch.equal(first[n], second[n]) for n in TREE_FIELDS
    )  # same sizes, different trees
    cache = TreeRowsCache()
    built = [cache(*(tree[n].clone() for n in TREE_FIELDS)) for tree in (first, first, second)]
    assert cache.builds == 2  # the second call (equal copies, other tensors) reused the first rows
    assert built[0] is built[1] and visible_keys(built[2]) == path_keys(second) != path_keys(first)

    tensors = [first[n].clone() for n in TREE_FIELDS]
    cache(*tensors)
    for tensor, n in zip(tensors, TREE_FIELDS, strict=True):
        tensor.copy_(second[n])  # the same tensors, changed in place
    assert visible_keys(cache(*tensors)) == path_keys(second)
    assert cache.builds == 4


def test_consecutive_micro_batches_get_their_own_rows():
    rng = np.random.default_rng(7)
    for seed in range(2):  # the module's cache holds the first tree when the second comes
        assert_matches_naive(packed_tree(grouped_samples(rng, 2, 3, vocab=2)), 4, 2, None, seed)


def test_malformed_trees_and_unsupported_options_are_refused():
    cu_q = torch.tensor([0, 2], dtype=torch.int32)
    with pytest.raises(ValueError, match="some would see no key"):
        tree_rows(torch.tensor([0]), cu_q, torch.tensor([0, 1], dtype=torch.int32))
    tree = packed_tree([[1, 2, 3]])
    q, k, v = random_qkv(3, 2, 2, seed=0)
    with pytest.raises(NotImplementedError, match="sliding window"):
        tree_attention_cpu(
            None,
            q,
            k,
            v,
            None,
            tree_kv_index=tree["tree_kv_index"],
            tree_cu_seqlens_q=tree["tree_cu_seqlens_q"],
            tree_cu_seqlens_k=tree["tree_cu_seqlens_k"],
            sliding_window=2,
        )


@settings(max_examples=25, deadline=None)
@given(
    groups=st.integers(1, 3),
    per_group=st.integers(1, 4),
    vocab=st.integers(1, 4),
    kv_heads=st.sampled_from([1, 2]),
    scaling=st.sampled_from([None, 0.5]),
    block=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_any_tree_matches_the_naive_attention(groups, per_group, vocab, kv_heads, scaling, block, seed):
    tree = packed_tree(grouped_samples(np.random.default_rng(seed), groups, per_group, vocab))
    assert visible_keys(rows_of(tree, block=block)) == path_keys(tree)
    assert_matches_naive(tree, 2 * kv_heads, kv_heads, scaling, seed)
