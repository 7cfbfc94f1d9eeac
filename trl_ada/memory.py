"""Pass-rate memory (Reinforce-Ada-Est): a decayed Beta posterior over each prompt's pass rate, across steps.

Pure numpy, no torch and no TRL. Every process of a run holds the same memory because it is updated from the
gathered pool counts of each step.

Model. A prompt's pass rate p gets the prior Beta(a₀, b₀) (`prior`, default Beta(1, 1)). Each visit (one training
step in which the prompt was sampled) adds its positives k and negatives m − k as evidence and first multiplies the
older evidence by the decay λ (`decay`):

    s ← λ·s + k,    f ← λ·f + (m − k),    posterior = Beta(a₀ + s, b₀ + f)

so the evidence from the j-th previous visit weighs λʲ (λ = 1: never forget). The policy moves between visits;
λ < 1 lets the posterior follow it. A prompt that appears in several slots of one step makes one visit.

Identity. A prompt is keyed by `prompt_key`: the first 8 bytes of BLAKE2b over its canonical JSON (a string, or a
list of chat messages; keys sorted, no whitespace, UTF-8), read as a little-endian unsigned 64-bit integer, with 0
reserved for empty slots. The same prompt text or messages always gets the same key, on every machine and run.

Skip streaks. Pre-rollout skipping (`trl_ada.candidates.skip_before_rollout`) records each skip of a remembered prompt
(`record_skips`); a visit ends the streak. The streak is what guarantees a skipped prompt is sampled again
(`skip_max_consecutive`), and it lives here so that a checkpoint keeps it.

Storage. An open-addressing hash table (linear probing) in five flat numpy arrays: the key (uint64), s and f
(float32), the visit count and the skip streak (uint32); 24 bytes per slot, kept at most half full, so 1M prompts
take ~50 MB.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MEMORY_FORMAT", "MEMORY_VERSION", "PassRateMemory", "prompt_key", "prompt_keys"]

MEMORY_FORMAT = "trl_ada.pass_rate_memory"
MEMORY_VERSION = 1
_EMPTY = np.uint64(0)
_MIN_CAPACITY = 1024
_MAX_LOAD = 0.5


def prompt_key(prompt: Any) -> int:
    """Stable 64-bit identity of a prompt (text or chat messages): BLAKE2b-64 of its canonical JSON, never 0."""
    canonical = json.dumps(prompt, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    key = int.from_bytes(hashlib.blake2b(canonical.encode("utf-8"), digest_size=8).digest(), "little")
    return key or 1


def prompt_keys(prompts: Sequence[Any]) -> np.ndarray:
    """`prompt_key` of each prompt, as a uint64 array."""
    return np.array([prompt_key(prompt) for prompt in prompts], dtype=np.uint64)


def _hash_slots(keys: np.ndarray, capacity: int) -> np.ndarray:
    """Home slot of each key: Fibonacci hashing of the (already uniform) key bits."""
    with np.errstate(over="ignore"):
        mixed = keys * np.uint64(0x9E3779B97F4A7C15)
    shift = np.uint64(64 - int(capacity).bit_length() + 1)
    return (mixed >> shift).astype(np.int64)


class PassRateMemory:
    """Per-prompt decayed Beta posterior over the pass rate, keyed by `prompt_key`.

    Args:
        decay (`float`, *optional*, defaults to `0.5`):
            λ in (0, 1]: the weight of a visit's evidence is multiplied by λ at each later visit (the default is
            `ReinforceAdaConfig.memory_decay`'s; 1 keeps all evidence).
        prior (`tuple[float, float]`, *optional*, defaults to `(1.0, 1.0)`):
            (a₀, b₀) of the Beta prior of a prompt never seen.
        capacity (`int`, *optional*, defaults to `1024`):
            Initial number of slots (rounded up to a power of two); the table doubles when half full.
    """

    def __init__(self, decay: float = 0.5, prior: tuple[float, float] = (1.0, 1.0), capacity: int = _MIN_CAPACITY):
        if not 0.0 < float(decay) <= 1.0:
            raise ValueError(f"decay={decay!r}: must be in (0, 1] (1 keeps all evidence; smaller forgets faster).")
        if len(prior) != 2 or not all(np.isfinite(v) and v > 0 for v in prior):
            raise ValueError(f"prior={prior!r}: must be two positive numbers (a₀, b₀) of a Beta distribution.")
        self.decay = float(decay)
        self.prior = (float(prior[0]), float(prior[1]))
        self._allocate(1 << max(int(capacity) - 1, _MIN_CAPACITY - 1).bit_length())

    def _allocate(self, capacity: int) -> None:
        self._keys = np.zeros(capacity, dtype=np.uint64)
        self._successes = np.zeros(capacity, dtype=np.float32)
        self._failures = np.zeros(capacity, dtype=np.float32)
        self._visits = np.zeros(capacity, dtype=np.uint32)
        self._skips = np.zeros(capacity, dtype=np.uint32)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        """Number of slots of the hash table."""
        return self._keys.size

    @property
    def nbytes(self) -> int:
        """Bytes held by the table."""
        return sum(a.nbytes for a in (self._keys, self._successes, self._failures, self._visits, self._skips))

    # -- hash table ----------------------------------------------------------------------------

    def _find(self, keys: np.ndarray) -> np.ndarray:
        """Slot of each key: where it is stored, or the empty slot where it would go."""
        mask = self.capacity - 1
        slots = _hash_slots(keys, self.capacity)
        pending = np.arange(keys.size)
        while pending.size:
            here = self._keys[slots[pending]]
            settled = (here == keys[pending]) | (here == _EMPTY)
            pending = pending[~settled]
            slots[pending] = (slots[pending] + 1) & mask
        return slots

    def _insert(self, keys: np.ndarray) -> np.ndarray:
        """Slots of distinct `keys`, adding the missing ones; where several claim one empty slot, the first wins."""
        if (self._size + keys.size) > _MAX_LOAD * self.capacity:
            self._grow(self._size + keys.size)
        mask = self.capacity - 1
        slots = self._find(keys)
        pending = np.flatnonzero(self._keys[slots] != keys)
        self._size += pending.size
        while pending.size:
            free = self._keys[slots[pending]] == _EMPTY
            _, first = np.unique(slots[pending[free]], return_index=True)
            winners = pending[free][first]
            self._keys[slots[winners]] = keys[winners]
            pending = np.setdiff1d(pending, winners, assume_unique=True)
            slots[pending] = (slots[pending] + 1) & mask
        return slots

    def _grow(self, needed: int) -> None:
        capacity = self.capacity
        while needed > _MAX_LOAD * capacity:
            capacity *= 2
        used = self._keys != _EMPTY
        old = self._keys[used], self._successes[used], self._failures[used], self._visits[used], self._skips[used]
        self._allocate(capacity)
        self._store(*old)

    def _store(self, keys, successes, failures, visits, skips) -> None:
        slots = self._insert(np.asarray(keys, dtype=np.uint64))
        self._successes[slots] = successes
        self._failures[slots] = failures
        self._visits[slots] = visits
        self._skips[slots] = skips

    # -- the posterior -------------------------------------------------------------------------

    def posterior(self, keys: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(alpha, beta, hit) per key: Beta(a₀ + s, b₀ + f) and whether the prompt was seen before."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        slots = self._find(keys)
        hit = self._keys[slots] == keys
        s = np.where(hit, self._successes[slots], 0.0).astype(np.float64)
        f = np.where(hit, self._failures[slots], 0.0).astype(np.float64)
        return self.prior[0] + s, self.prior[1] + f, hit

    def visits(self, keys: Sequence[int] | np.ndarray) -> np.ndarray:
        """How many visits each key has had (0 if never seen)."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        slots = self._find(keys)
        return np.where(self._keys[slots] == keys, self._visits[slots], 0).astype(np.int64)

    def skip_streaks(self, keys: Sequence[int] | np.ndarray) -> np.ndarray:
        """How many times in a row each key was skipped since its last visit (0 if never seen)."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        slots = self._find(keys)
        return np.where(self._keys[slots] == keys, self._skips[slots], 0).astype(np.int64)

    def record_skips(self, keys: Sequence[int] | np.ndarray) -> None:
        """One more skip for each distinct remembered key (a key never visited has no posterior to skip on)."""
        keys = np.unique(np.asarray(keys, dtype=np.uint64).reshape(-1))
        slots = self._find(keys)
        remembered = slots[self._keys[slots] == keys]
        self._skips[remembered] += 1

    def update(self, keys: Sequence[int] | np.ndarray, positives: Sequence[int], negatives: Sequence[int]) -> None:
        """One visit per distinct key: decay its evidence by λ, then add the visit's positives and negatives."""
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        positives = np.asarray(positives, dtype=np.float64).reshape(-1)
        negatives = np.asarray(negatives, dtype=np.float64).reshape(-1)
        if not keys.size == positives.size == negatives.size:
            raise ValueError(
                f"update got {keys.size} keys, {positives.size} positive counts and {negatives.size} negative "
                "counts; expected one of each per prompt."
            )
        if np.any(positives < 0) or np.any(negatives < 0):
            raise ValueError("update: positive and negative counts must be non-negative.")
        unique, inverse = np.unique(keys, return_inverse=True)
        k = np.zeros(unique.size)
        m_minus_k = np.zeros(unique.size)
        np.add.at(k, inverse, positives)
        np.add.at(m_minus_k, inverse, negatives)
        slots = self._insert(unique)
        self._successes[slots] = self.decay * self._successes[slots] + k
        self._failures[slots] = self.decay * self._failures[slots] + m_minus_k
        self._visits[slots] += 1
        self._skips[slots] = 0

    # -- checkpoints ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the memory: the settings and the occupied entries (numpy arrays).

        Version 1 of the format; the `skips` entry was added later, and a state without it (an earlier file) loads
        with every streak at 0, while an earlier trl_ada ignores it."""
        used = self._keys != _EMPTY
        return {
            "format": MEMORY_FORMAT,
            "version": MEMORY_VERSION,
            "decay": self.decay,
            "prior": np.array(self.prior),
            "keys": self._keys[used].copy(),
            "successes": self._successes[used].copy(),
            "failures": self._failures[used].copy(),
            "visits": self._visits[used].copy(),
            "skips": self._skips[used].copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the memory by `state` (from `state_dict`); a ValueError says what is wrong with a bad state."""
        fmt, version = str(_scalar(state, "format")), _scalar(state, "version")
        if fmt != MEMORY_FORMAT:
            raise ValueError(f"Not a pass-rate memory: format is {fmt!r}, expected {MEMORY_FORMAT!r}.")
        if int(version) != MEMORY_VERSION:
            raise ValueError(
                f"Pass-rate memory format version {int(version)} is not supported by this trl_ada (it reads version "
                f"{MEMORY_VERSION}). Resume with the trl_ada version that wrote it, or start without the checkpoint."
            )
        keys = np.asarray(_entry(state, "keys"))
        arrays = [np.asarray(_entry(state, name)) for name in ("successes", "failures", "visits")]
        if keys.ndim != 1 or any(a.shape != keys.shape for a in arrays):
            raise ValueError(
                "Corrupt pass-rate memory: keys, successes, failures and visits must be 1-D arrays of one length; "
                f"got shapes {[keys.shape, *[a.shape for a in arrays]]}."
            )
        successes, failures, visits = arrays
        skips = np.asarray(state.get("skips", np.zeros(keys.shape, dtype=np.uint32)))
        if skips.shape != keys.shape or not np.issubdtype(skips.dtype, np.integer) or np.any(skips < 0):
            raise ValueError(
                f"Corrupt pass-rate memory: skips must be non-negative integers, one per key; got dtype {skips.dtype} "
                f"and shape {skips.shape} for {keys.size} keys."
            )
        if keys.dtype != np.uint64 or np.any(keys == _EMPTY) or np.unique(keys).size != keys.size:
            raise ValueError("Corrupt pass-rate memory: keys must be distinct non-zero uint64 values.")
        if not (np.all(np.isfinite(successes)) and np.all(np.isfinite(failures))) or np.any(
            np.minimum(successes, failures) < 0
        ):
            raise ValueError("Corrupt pass-rate memory: evidence counts must be finite and non-negative.")
        decay, prior = float(_scalar(state, "decay")), tuple(float(v) for v in np.asarray(_entry(state, "prior")))
        self.__init__(decay=decay, prior=prior, capacity=int(keys.size / _MAX_LOAD) + 1)
        self._store(keys, successes, failures, visits, skips)

    def save(self, path: str) -> None:
        """Write the state to `path` (a `.npz` file)."""
        with open(path, "wb") as file:
            np.savez(file, **self.state_dict())

    @classmethod
    def load(cls, path: str) -> PassRateMemory:
        """Read a memory written by `save`; a ValueError names the file if it is corrupt or incompatible."""
        try:
            with np.load(path, allow_pickle=False) as data:
                state = {name: data[name] for name in data.files}
        except Exception as error:  # noqa: BLE001 - the zip and npy readers raise several unrelated types
            raise ValueError(f"Corrupt pass-rate memory file {path}: {type(error).__name__}: {error}") from error
        memory = cls()
        try:
            memory.load_state_dict(state)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
        return memory


def _entry(state: dict[str, Any], name: str) -> Any:
    if name not in state:
        raise ValueError(f"Corrupt pass-rate memory: the state has no {name!r} entry (entries: {sorted(state)}).")
    return state[name]


def _scalar(state: dict[str, Any], name: str) -> Any:
    value = np.asarray(_entry(state, name))
    if value.size != 1:
        raise ValueError(f"Corrupt pass-rate memory: {name!r} must be a single value, got shape {value.shape}.")
    return value.item()
