"""The pass-rate memory: keys, posterior maths, the hash table, checkpoints and bad states."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from refusals import names, refusal

from trl_ada.memory import MEMORY_FORMAT, MEMORY_VERSION, PassRateMemory, prompt_key, prompt_keys


def test_prompt_key_is_blake2b_64_of_canonical_json():
    expected = int.from_bytes(hashlib.blake2b(b'"What is 1+1?"', digest_size=8).digest(), "little")
    assert prompt_key("What is 1+1?") == expected
    messages = [{"role": "user", "content": "é?"}]
    canonical = '[{"content":"é?","role":"user"}]'.encode()
    assert prompt_key(messages) == int.from_bytes(hashlib.blake2b(canonical, digest_size=8).digest(), "little")


def test_prompt_key_ignores_dict_key_order_but_not_content():
    a = [{"role": "user", "content": "x"}]
    assert prompt_key(a) == prompt_key([{"content": "x", "role": "user"}])
    assert prompt_key(a) != prompt_key([{"role": "user", "content": "y"}])
    assert prompt_key("x") != prompt_key(a)
    keys = prompt_keys(["x", a])
    assert keys.dtype == np.uint64 and keys.tolist() == [prompt_key("x"), prompt_key(a)]


def test_unseen_prompt_gets_the_prior_and_no_hit():
    memory = PassRateMemory(prior=(2.0, 3.0))
    alpha, beta, hit = memory.posterior([7, 8])
    assert alpha.tolist() == [2.0, 2.0] and beta.tolist() == [3.0, 3.0] and hit.tolist() == [False, False]
    assert memory.visits([7]).tolist() == [0] and len(memory) == 0


def test_decayed_posterior_matches_hand_computation():
    memory = PassRateMemory(decay=0.5)  # prior Beta(1, 1)
    memory.update([11, 12], positives=[1, 0], negatives=[3, 4])
    alpha, beta, hit = memory.posterior([11, 12])
    assert alpha.tolist() == [2.0, 1.0] and beta.tolist() == [4.0, 5.0] and hit.all()
    memory.update([11], positives=[2], negatives=[0])  # s = 0.5 * 1 + 2, f = 0.5 * 3 + 0
    alpha, beta, _ = memory.posterior([11, 12])
    assert alpha.tolist() == [3.5, 1.0] and beta.tolist() == [2.5, 5.0]
    memory.update([11], positives=[0], negatives=[8])  # s = 0.5 * 2.5, f = 0.5 * 1.5 + 8
    alpha, beta, _ = memory.posterior([11])
    assert alpha.tolist() == [2.25] and beta.tolist() == [9.75]
    assert memory.visits([11, 12, 13]).tolist() == [3, 1, 0]


def test_decay_one_keeps_all_evidence():
    memory = PassRateMemory(decay=1.0, prior=(0.5, 0.5))
    for k in range(4):
        memory.update([3], [k], [1])
    alpha, beta, _ = memory.posterior([3])
    assert alpha.tolist() == [0.5 + 0 + 1 + 2 + 3] and beta.tolist() == [0.5 + 4]


def test_a_prompt_in_several_slots_of_one_step_is_one_visit():
    memory = PassRateMemory(decay=0.5)
    memory.update([5], [4], [0])
    memory.update([5, 6, 5], [1, 2, 1], [3, 0, 1])  # prompt 5 twice: one visit with 2 positives, 4 negatives
    alpha, beta, _ = memory.posterior([5, 6])
    assert alpha.tolist() == [1 + 0.5 * 4 + 2, 1 + 2] and beta.tolist() == [1 + 4, 1 + 0]
    assert memory.visits([5, 6]).tolist() == [2, 1]


def test_table_grows_and_keeps_every_entry():
    memory = PassRateMemory(decay=1.0)
    keys = np.arange(1, 5001, dtype=np.uint64) * np.uint64(7919)  # structured keys, many share hash bits
    memory.update(keys, keys % 5, np.ones(keys.size))
    assert len(memory) == 5000 and memory.capacity >= 10000 and memory.capacity & (memory.capacity - 1) == 0
    alpha, beta, hit = memory.posterior(keys)
    assert hit.all() and np.array_equal(alpha, 1.0 + keys % 5) and np.all(beta == 2.0)
    assert not memory.posterior([np.uint64(7919 * 5001)])[2][0]


def test_a_million_prompts_fit_in_24_bytes_per_slot():
    memory = PassRateMemory()
    keys = np.random.default_rng(0).integers(1, 2**63, 1_000_000, dtype=np.uint64)
    memory.update(keys, np.zeros(keys.size), np.ones(keys.size))
    assert len(memory) == 1_000_000
    assert memory.nbytes == 24 * memory.capacity <= 48 * 2**20  # 2^21 slots, at most half full
    assert memory.posterior(keys[-3:])[2].all()


def test_state_round_trip_through_a_file(tmp_path):
    memory = PassRateMemory(decay=0.75, prior=(0.5, 2.0))
    keys = prompt_keys([f"prompt {i}" for i in range(3000)])
    memory.update(keys, np.arange(3000) % 7, np.arange(3000) % 3)
    memory.update(keys[:10], np.ones(10), np.zeros(10))
    path = tmp_path / "memory.npz"
    memory.save(str(path))
    restored = PassRateMemory.load(str(path))
    assert restored.decay == 0.75 and restored.prior == (0.5, 2.0) and len(restored) == 3000
    for got, want in zip(restored.posterior(keys), memory.posterior(keys), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(restored.visits(keys), memory.visits(keys))
    memory.update(keys[:5], [1] * 5, [2] * 5)  # both continue identically
    restored.update(keys[:5], [1] * 5, [2] * 5)
    np.testing.assert_array_equal(restored.posterior(keys)[0], memory.posterior(keys)[0])


def test_state_dict_has_format_and_version():
    state = PassRateMemory().state_dict()
    assert state["format"] == MEMORY_FORMAT and state["version"] == MEMORY_VERSION == 1
    assert state["keys"].dtype == np.uint64 and state["keys"].size == 0


def _state(**changes):
    memory = PassRateMemory()
    memory.update([1, 2], [1, 1], [1, 1])
    state = memory.state_dict()
    state.update(changes)
    return state


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"version": 2}, "version 2 .*reads version 1"),
        ({"format": "something else"}, "Not a pass-rate memory: format is 'something else'"),
        ({"keys": np.array([1, 1], dtype=np.uint64)}, "keys must be distinct non-zero uint64"),
        ({"keys": np.array([0, 1], dtype=np.uint64)}, "keys must be distinct non-zero uint64"),
        ({"keys": np.array([1.0, 2.0])}, "keys must be distinct non-zero uint64"),
        ({"successes": np.array([1.0])}, "must be 1-D arrays of one length"),
        ({"failures": np.array([1.0, -1.0], dtype=np.float32)}, "finite and non-negative"),
        ({"successes": np.array([np.nan, 1.0], dtype=np.float32)}, "finite and non-negative"),
        ({"decay": np.array([0.5, 0.5])}, "'decay' must be a single value"),
        ({"decay": 0.0}, "decay=0.0: must be in \\(0, 1\\]"),
        ({"skips": np.array([1])}, "skips .*non-negative integers"),
        ({"skips": np.array([1.5, 0.0])}, "skips .*non-negative integers"),
        ({"skips": np.array([-1, 0])}, "skips .*non-negative integers"),
    ],
)
def test_bad_state_is_refused_with_a_reason(changes, match):
    memory = PassRateMemory()
    with pytest.raises(ValueError, match=match):
        memory.load_state_dict(_state(**changes))


def test_skip_streaks_count_skips_since_the_last_visit():
    memory = PassRateMemory()
    memory.update([1, 2], [0, 4], [4, 0])
    memory.record_skips([1, 1, 2, 3])  # a key twice is one skip; key 3 was never visited: nothing to record
    memory.record_skips([1])
    assert memory.skip_streaks([1, 2, 3]).tolist() == [2, 1, 0] and 3 not in memory._keys
    alpha, beta, _ = memory.posterior([1])
    assert (alpha[0], beta[0]) == (1.0, 5.0) and memory.visits([1]).tolist() == [1]  # a skip is no evidence
    memory.update([1], [0], [4])
    assert memory.skip_streaks([1, 2]).tolist() == [0, 1]


def test_skip_streaks_survive_a_checkpoint_and_a_growing_table(tmp_path):
    memory = PassRateMemory()
    keys = np.arange(1, 2001, dtype=np.uint64)
    memory.update(keys[:10], np.zeros(10), np.ones(10))
    memory.record_skips(keys[:3])
    memory.update(keys[10:], np.zeros(1990), np.ones(1990))  # the table grows
    memory.save(str(tmp_path / "memory.npz"))
    assert PassRateMemory.load(str(tmp_path / "memory.npz")).skip_streaks(keys[:4]).tolist() == [1, 1, 1, 0]


def test_a_state_written_before_skip_streaks_loads_with_every_streak_at_zero():
    state = _state()
    del state["skips"]
    memory = PassRateMemory()
    memory.load_state_dict(state)
    assert memory.skip_streaks([1, 2]).tolist() == [0, 0] and memory.visits([1, 2]).tolist() == [1, 1]


def test_state_without_an_entry_names_it():
    state = _state()
    del state["visits"]
    names(refusal(PassRateMemory().load_state_dict, state), "no 'visits' entry", "(entries: [")


def test_corrupt_or_incompatible_file_is_an_error_naming_the_file(tmp_path):
    memory = PassRateMemory()
    memory.update([1, 2, 3], [1, 0, 2], [1, 2, 0])
    good = tmp_path / "memory.npz"
    memory.save(str(good))
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:-40])
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a memory")
    for path in (truncated, garbage):
        with pytest.raises(ValueError, match=f"Corrupt pass-rate memory file {path}"):
            PassRateMemory.load(str(path))
    future = tmp_path / "future.npz"
    np.savez(future, **{**memory.state_dict(), "version": 9})
    refused = refusal(PassRateMemory.load, str(future))
    names(refused, f"{future}: ", "version 9", f"reads version {MEMORY_VERSION}", "without the checkpoint")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"decay": 0.0}, "decay=0.0: must be in \\(0, 1\\]"),
        ({"decay": 1.5}, "decay=1.5"),
        ({"prior": (0.0, 1.0)}, "prior=\\(0.0, 1.0\\): must be two positive numbers"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PassRateMemory(**kwargs)


def test_update_checks_its_counts():
    memory = PassRateMemory()
    refused = refusal(memory.update, [1, 2], [1], [1, 1])
    names(refused, "2 keys", "1 positive counts", "2 negative counts", "one of each per prompt")
    with pytest.raises(ValueError, match="must be non-negative"):
        memory.update([1], [-1], [1])


def test_default_decay_is_the_configs_memory_decay():
    memory = PassRateMemory()  # ReinforceAdaConfig.memory_decay defaults to 0.5 (tests/test_est_trainer.py checks)
    assert memory.decay == 0.5 and memory.prior == (1.0, 1.0) and memory.capacity == 1024
    memory.update([4], [2], [0])
    memory.update([4], [0], [2])  # s = 0.5 * 2, f = 2
    assert memory.posterior([4])[0].tolist() == [2.0] and memory.posterior([4])[1].tolist() == [3.0]


def test_a_key_that_hashes_to_zero_becomes_one(monkeypatch):
    class ZeroDigest:
        def __init__(self, data, digest_size):
            assert digest_size == 8

        def digest(self):
            return bytes(8)

    monkeypatch.setattr(hashlib, "blake2b", ZeroDigest)
    assert prompt_key("anything") == 1  # 0 marks an empty slot


def test_prompt_keys_are_uint64_even_when_every_key_fits_in_int64():
    small = [p for p in (f"p{i}" for i in range(64)) if prompt_key(p) < 2**63][:3]
    assert len(small) == 3
    keys = prompt_keys(small)
    assert keys.dtype == np.uint64 and keys.tolist() == [prompt_key(p) for p in small]
    assert prompt_keys([]).dtype == np.uint64 and prompt_keys([]).size == 0


@pytest.mark.parametrize(
    ("asked", "capacity"), [(1, 1024), (1024, 1024), (1025, 2048), (2048, 2048), (2049, 4096), (5000, 8192)]
)
def test_capacity_is_rounded_up_to_a_power_of_two_of_at_least_1024(asked, capacity):
    assert PassRateMemory(capacity=asked).capacity == capacity
    assert PassRateMemory(capacity=asked).nbytes == 24 * capacity


def test_home_slots_cover_the_whole_table():
    from trl_ada.memory import _hash_slots

    keys = np.random.default_rng(1).integers(1, 2**63, 4096, dtype=np.uint64)
    for capacity in (1024, 4096):
        slots = _hash_slots(keys, capacity)
        assert slots.min() >= 0 and slots.max() < capacity
        assert np.unique(slots).size > capacity // 2 and (slots >= capacity // 2).mean() > 0.4  # both halves used


def test_growing_a_table_that_holds_entries_keeps_them():
    memory = PassRateMemory(decay=0.5)  # 1024 slots: room for 512 entries
    first = np.arange(1, 401, dtype=np.uint64)
    memory.update(first, first % 3, np.full(first.size, 2.0))
    assert memory.capacity == 1024 and len(memory) == 400
    second = np.arange(301, 701, dtype=np.uint64)  # 100 seen again, 300 new: 700 > 512, the table doubles
    memory.update(second, np.ones(second.size), np.zeros(second.size))
    assert memory.capacity == 2048 and len(memory) == 700
    alpha, beta, hit = memory.posterior(np.arange(1, 701, dtype=np.uint64))
    assert hit.all()
    only_first, both, only_second = slice(0, 300), slice(300, 400), slice(400, 700)
    np.testing.assert_array_equal(alpha[only_first], 1.0 + first[:300] % 3)
    np.testing.assert_array_equal(beta[only_first], 3.0)
    np.testing.assert_array_equal(alpha[both], 1.0 + 0.5 * (first[300:] % 3) + 1.0)
    np.testing.assert_array_equal(beta[both], 1.0 + 0.5 * 2.0)
    np.testing.assert_array_equal(alpha[only_second], 2.0)
    np.testing.assert_array_equal(beta[only_second], 1.0)
    assert memory.visits(np.array([1, 350, 700], dtype=np.uint64)).tolist() == [1, 2, 1]


def test_the_table_is_kept_at_most_half_full():
    memory = PassRateMemory()
    memory.update(np.arange(1, 513, dtype=np.uint64), np.zeros(512), np.ones(512))
    assert (len(memory), memory.capacity) == (512, 1024)  # exactly half full: no growth
    memory.update([513], [0], [1])
    assert (len(memory), memory.capacity) == (513, 2048)
    fresh = PassRateMemory()
    fresh.update(np.arange(1, 1025, dtype=np.uint64), np.zeros(1024), np.ones(1024))
    assert (len(fresh), fresh.capacity) == (1024, 2048)  # grows to the smallest table at most half full


def test_len_counts_distinct_prompts_across_updates():
    memory = PassRateMemory()
    memory.update([1, 2], [0, 0], [1, 1])
    memory.update([2, 3, 3], [1, 1, 1], [0, 0, 0])
    assert len(memory) == 3
    memory.update([1], [1], [1])
    assert len(memory) == 3


def test_keys_of_any_shape_are_read_as_a_flat_list():
    memory = PassRateMemory(decay=1.0)
    memory.update(np.uint64(9), 2, 1)
    memory.update([[9, 10]], [[1, 0]], [[0, 3]])
    alpha, beta, hit = memory.posterior(9)
    assert alpha.tolist() == [4.0] and beta.tolist() == [2.0] and hit.tolist() == [True]
    alpha, beta, hit = memory.posterior([[9], [10]])
    assert alpha.shape == (2,) and alpha.tolist() == [4.0, 1.0] and beta.tolist() == [2.0, 4.0]
    visits = memory.visits(np.array([[9, 10], [11, 9]], dtype=np.uint64))
    assert visits.dtype == np.int64 and visits.tolist() == [2, 1, 0, 2]
    assert memory.visits(10).tolist() == [1]


def test_posterior_is_float64():
    memory = PassRateMemory(decay=0.5)
    memory.update([1], [1], [0])
    alpha, beta, _ = memory.posterior([1, 2])
    assert alpha.dtype == beta.dtype == np.float64


def test_negative_negatives_are_refused():
    memory = PassRateMemory()
    names(refusal(memory.update, [1], [1], [-1]), "update: ", "negative counts", "non-negative")
    assert len(memory) == 0


@pytest.mark.parametrize(
    ("changes", "fragments"),
    [
        ({"successes": np.array([1.0])}, ["keys, successes, failures and visits", "1-D", "[(2,), (1,), (2,), (2,)]"]),
        ({"keys": np.array([3, 3], dtype=np.uint64)}, ["keys", "distinct non-zero uint64"]),
        ({"failures": np.array([0.0, -1.0], dtype=np.float32)}, ["evidence counts", "finite and non-negative"]),
        ({"successes": np.array([np.inf, 0.0], dtype=np.float32)}, ["evidence counts", "finite and non-negative"]),
    ],
)
def test_a_corrupt_state_gets_its_exact_reason(changes, fragments):
    names(refusal(PassRateMemory().load_state_dict, _state(**changes)), "Corrupt pass-rate memory: ", *fragments)


def test_a_memory_file_with_a_pickled_entry_is_refused(tmp_path):
    memory = PassRateMemory()
    memory.update([1, 2], [1, 0], [0, 1])
    path = tmp_path / "pickled.npz"
    np.savez(path, **memory.state_dict(), extra=np.array([{"code": "object"}], dtype=object))
    refused = refusal(PassRateMemory.load, str(path))
    names(refused, f"Corrupt pass-rate memory file {path}: ", "ValueError: Object arrays")


def test_load_restores_a_memory_that_keeps_learning(tmp_path):
    memory = PassRateMemory(decay=0.25, prior=(2.0, 0.5))
    keys = np.arange(1, 513, dtype=np.uint64)  # 512 entries
    memory.update(keys, keys % 4, np.ones(keys.size))
    path = tmp_path / "memory.npz"
    memory.save(str(path))
    restored = PassRateMemory.load(str(path))
    assert (restored.decay, restored.prior, len(restored)) == (0.25, (2.0, 0.5), 512)
    new = np.arange(513, 1537, dtype=np.uint64)  # 1024 more after the load: the loaded table grows with its entries
    restored.update(new, np.zeros(new.size), np.full(new.size, 3.0))
    assert len(restored) == 1536 and restored.capacity >= 2 * 1536
    alpha, beta, hit = restored.posterior(np.concatenate([keys, new]))
    assert hit.all()
    np.testing.assert_array_equal(alpha[:512], 2.0 + keys % 4)
    np.testing.assert_array_equal(beta[:512], 1.5)
    np.testing.assert_array_equal(alpha[512:], 2.0)
    np.testing.assert_array_equal(beta[512:], 3.5)
