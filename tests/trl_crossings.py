"""Counting the crossings between trl_ada's code and TRL's while a trainer generates one training batch.

A crossing is one of:

- a *call* from a function defined in `trl_ada/` into a function defined in the installed `trl` package (seen with
  `sys.setprofile`; TRL's `profiling_decorator` wrapper is named after the method it wraps);
- an *entry*: a call from TRL's code into one of our overrides of TRL's methods (the method joints of
  `_trl.JOINTS`; reward functions, which TRL calls through its public API, are not counted);
- an *attribute* read or write, from `trl_ada/`, of a TRL-private attribute of the trainer (an underscore name that
  TRL's trainer code sets on `self`, an attribute joint of `_trl.JOINTS`, or `environments`; methods are counted as
  calls instead).

`count_crossings(trainer)` counts them inside the trainer's generation of training batches (TRL's `_prepare_inputs`
when it generates); `python tests/trl_crossings.py` prints the counts of one 4-round step on the tiny model.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import trl
from trl import GRPOTrainer

import trl_ada
from trl_ada import _trl

TRL_DIR = os.path.dirname(trl.__file__) + os.sep
ADA_DIR = os.path.dirname(trl_ada.__file__) + os.sep


def trl_self_private_names() -> set[str]:
    """Underscore names TRL's trainer code reaches through `self` (`self._x`), read from the source of every TRL
    class in `GRPOTrainer`'s MRO."""
    names = set()
    for cls in GRPOTrainer.__mro__:
        if not cls.__module__.startswith("trl."):
            continue
        for node in ast.walk(ast.parse(inspect.getsource(inspect.getmodule(cls)))):
            on_self = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            if on_self and node.attr.startswith("_") and not node.attr.startswith("__"):
                names.add(node.attr)
    return names


def trl_private_attributes() -> set[str]:
    """Underscore attributes TRL's trainer code sets on `self`, and the attribute joints, less methods."""
    names = trl_self_private_names()
    names |= {joint.name for joint in _trl.JOINTS if joint.kind == "attribute"} | {"environments"}
    return {name for name in names if not callable(getattr(GRPOTrainer, name, None))}


@dataclass
class Crossings:
    sites: set = field(default_factory=set)  # (file, line) in trl_ada of every crossing
    calls: Counter = field(default_factory=Counter)  # TRL function called from trl_ada, by name
    entries: Counter = field(default_factory=Counter)  # trl_ada function called from TRL, by name
    attributes: Counter = field(default_factory=Counter)  # TRL-private attribute read or written from trl_ada

    @property
    def total(self) -> int:
        return sum(self.calls.values()) + sum(self.entries.values()) + sum(self.attributes.values())

    def summary(self) -> str:
        lines = [
            f"total {self.total}: {sum(self.calls.values())} calls into TRL, {sum(self.entries.values())} entries "
            f"from TRL, {sum(self.attributes.values())} private attribute reads/writes; {len(self.sites)} places "
            "in trl_ada's code"
        ]
        for title, counts in (("calls", self.calls), ("entries", self.entries), ("attributes", self.attributes)):
            lines.append(f"  {title}: " + ", ".join(f"{name} x{n}" for name, n in sorted(counts.items())))
        return "\n".join(lines)


def _name(frame) -> str:
    wrapped = frame.f_locals.get("func") if frame.f_code.co_name == "wrapper" else None
    return getattr(wrapped, "__qualname__", frame.f_code.co_qualname)


@contextmanager
def count_crossings(trainer) -> Iterator[Crossings]:
    """Count the crossings of `trainer` while it generates training batches (TRL's `_prepare_inputs`)."""
    crossings, counting = Crossings(), [False]
    names = trl_private_attributes()
    overrides = {joint.name for joint in _trl.JOINTS if joint.kind == "method"}
    cls = type(trainer)
    get, set_ = cls.__getattribute__, cls.__setattr__

    def record_attribute(self, name):
        if counting[0] and self is trainer and name in names:
            caller = sys._getframe(2)
            if caller.f_code.co_filename.startswith(ADA_DIR):
                crossings.attributes[name] += 1
                crossings.sites.add((caller.f_code.co_filename, caller.f_lineno))

    def counting_get(self, name):
        record_attribute(self, name)
        return get(self, name)

    def counting_set(self, name, value):
        record_attribute(self, name)
        set_(self, name, value)

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_code.co_filename, frame.f_back.f_code.co_filename
        if callee.startswith(TRL_DIR) and caller.startswith(ADA_DIR):
            crossings.calls[_name(frame)] += 1
            crossings.sites.add((caller, frame.f_back.f_lineno))
        elif callee.startswith(ADA_DIR) and caller.startswith(TRL_DIR) and frame.f_code.co_name in overrides:
            crossings.entries[frame.f_code.co_qualname] += 1
            crossings.sites.add((callee, frame.f_code.co_firstlineno))

    prepare = trainer._prepare_inputs

    def prepare_counted(batch):
        if not trainer.model.training:
            return prepare(batch)
        counting[0] = True
        sys.setprofile(profile)
        try:
            return prepare(batch)
        finally:
            sys.setprofile(None)
            counting[0] = False

    cls.__getattribute__, cls.__setattr__ = counting_get, counting_set
    trainer._prepare_inputs = prepare_counted
    try:
        yield crossings
    finally:
        del cls.__getattribute__, cls.__setattr__
        del trainer._prepare_inputs


def four_round_step(model_dir: str, output_dir: str) -> Crossings:
    """The crossings of one training step of 4 rounds (4 prompts, n = 4, 4 completions a round, no exit)."""
    from datasets import Dataset

    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"question {k}"}] for k in range(4)]})
    args = ReinforceAdaConfig(
        output_dir=output_dir,
        num_generations=4,
        samples_per_round=4,
        max_rounds=4,
        per_device_train_batch_size=16,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
    )
    trainer = ReinforceAdaTrainer(
        model=model_dir,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],  # no prompt ever exits: 4 rounds
        args=args,
        train_dataset=dataset,
    )
    with count_crossings(trainer) as crossings:
        trainer.train()
    return crossings


if __name__ == "__main__":
    import tempfile

    from trl_ada.toy import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        print(four_round_step(str(build_tiny_model(os.path.join(tmp, "model"))), os.path.join(tmp, "out")).summary())
