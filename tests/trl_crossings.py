"""Counting the crossings between trl_ada's code and TRL's while a trainer generates one training batch.

A crossing is one of:

- a *call* from a function defined in `trl_ada/` into a function defined in the installed `trl` package (seen with
  `sys.setprofile`; TRL's `profiling_decorator` wrapper is named after the method it wraps);
- an *entry*: a call from TRL's code into one of our overrides of TRL's methods (the method joints of
  `_trl.JOINTS`; reward functions, which TRL calls through its public API, are not counted);
- an *attribute* read or write, from `trl_ada/`, of a TRL-private attribute of the trainer (an underscore name that
  TRL's trainer code sets on `self`, an attribute joint of `_trl.JOINTS`, or `environments`; methods are counted as
  calls instead).

Beside the crossings it records the path a step takes: the `trl_ada` modules whose code runs (`modules`), and every
*move*, a call whose caller and callee are in different layers (`LAYERS`: docs/architecture.md's layers of `trl_ada`,
and TRL; calls into other libraries are not moves).

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
    modules: set = field(default_factory=set)  # trl_ada modules whose code ran, relative to the package
    moves: Counter = field(default_factory=Counter)  # (caller layer, callee layer) of every call between layers

    @property
    def total(self) -> int:
        return sum(self.calls.values()) + sum(self.entries.values()) + sum(self.attributes.values())

    @property
    def total_moves(self) -> int:
        return sum(self.moves.values())

    def summary(self) -> str:
        lines = [
            f"total {self.total}: {sum(self.calls.values())} calls into TRL, {sum(self.entries.values())} entries "
            f"from TRL, {sum(self.attributes.values())} private attribute reads/writes; {len(self.sites)} places "
            "in trl_ada's code",
            f"  {len(self.modules)} modules: " + ", ".join(sorted(self.modules)),
            f"  {self.total_moves} moves between layers: "
            + ", ".join(f"{a} -> {b} x{n}" for (a, b), n in self.moves.most_common()),
        ]
        for title, counts in (("calls", self.calls), ("entries", self.entries), ("attributes", self.attributes)):
            lines.append(f"  {title}: " + ", ".join(f"{name} x{n}" for name, n in sorted(counts.items())))
        return "\n".join(lines)


LAYERS = {
    "plan": ("plan.py", "records.py", "seq.py", "fields_table.py"),
    "core": (
        "exit_rules.py",
        "groups.py",
        "beta.py",
        "sampling.py",
        "candidates.py",
        "memory.py",
        "objectives.py",
        "advantages.py",
        "simulation.py",
        "async_grpo/rollout.py",
        "async_grpo/trained.py",
    ),
    "schedules": ("schedules/",),
    "joints": ("_trl.py",),
    "glue": ("config.py", "trainer.py"),
}
"""docs/architecture.md's layers of `trl_ada` (a module in none of them is "around"), by path in the package."""


def module(filename: str) -> str | None:
    """A source file's path inside `trl_ada/` (None outside it)."""
    return filename[len(ADA_DIR) :] if filename.startswith(ADA_DIR) else None


def layer(filename: str) -> str | None:
    """The layer of a source file (`LAYERS`, else "around"), `trl` for the whole TRL package, else None."""
    if filename.startswith(TRL_DIR):
        return "trl"
    path = module(filename)
    if path is None:
        return None
    return next((name for name, paths in LAYERS.items() if path.startswith(paths)), "around")


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
        callee_layer, caller_layer = layer(callee), layer(caller)
        if callee.startswith(ADA_DIR):
            crossings.modules.add(module(callee))
        if None not in (callee_layer, caller_layer) and callee_layer != caller_layer:
            crossings.moves[caller_layer, callee_layer] += 1
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
