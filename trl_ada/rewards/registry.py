"""The reward registry: resolve reward functions by name or `package.module:function` import path."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from ..utils import closest_name
from .scoring import RewardFunc, format_reward, math_reward

__all__ = ["REWARD_FUNCS", "get_reward_funcs", "register_reward"]


REWARD_FUNCS: dict[str, RewardFunc] = {}


def register_reward(name: str, func: RewardFunc | None = None, *, overwrite: bool = False) -> Any:
    """Register `func` under `name`; without `func`, return a decorator: `@register_reward("my_reward")`.

    Raises ValueError if `name` is taken (unless `overwrite=True`) or not a plain name (`:` marks import paths).
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"Reward name must be a non-empty string without ':', got {name!r}.")

    def _register(f: RewardFunc) -> RewardFunc:
        if not callable(f):
            raise ValueError(f"Reward {name!r} must be callable, got {f!r}.")
        if name in REWARD_FUNCS and not overwrite:
            raise ValueError(
                f"Reward {name!r} is already registered ({REWARD_FUNCS[name]!r}); pass overwrite=True to replace it."
            )
        REWARD_FUNCS[name] = f
        return f

    return _register if func is None else _register(func)


def get_reward_funcs(names: str | Iterable[str | RewardFunc]) -> list[RewardFunc]:
    """Resolve reward names (registered names, or `package.module:function` import paths) to callables.

    Callables are passed through. Raises ValueError for unknown names (listing the known ones) and failed imports.
    """
    if isinstance(names, str):
        names = [names]
    return [name if callable(name) else _resolve_reward(name) for name in names]


def _resolve_reward(name: str) -> RewardFunc:
    if not isinstance(name, str):
        raise ValueError(f"Reward must be a name or a callable, got {name!r}.")
    if name in REWARD_FUNCS:
        return REWARD_FUNCS[name]
    if ":" in name:
        return _import_reward(name)
    known = sorted(REWARD_FUNCS)
    close = closest_name(name, known)
    hint = f" Did you mean {close!r}?" if close else ""
    raise ValueError(
        f"Unknown reward function {name!r}.{hint} Known rewards: {', '.join(known)}. "
        "A custom function can be given as 'package.module:function'."
    )


def _import_reward(path: str) -> RewardFunc:
    """Import `package.module:attr.attr` and check that it is callable."""
    module_name, _, attr_path = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            target = getattr(target, attr)
    except Exception as exc:
        raise ValueError(f"Could not import reward function {path!r}: {type(exc).__name__}: {exc}") from exc
    if not callable(target):
        raise ValueError(f"Reward {path!r} resolved to {target!r}, which is not callable.")
    return target


register_reward("math", math_reward)
register_reward("format", format_reward)
