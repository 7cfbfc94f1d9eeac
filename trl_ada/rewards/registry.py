"""The reward registry: resolve reward functions by name or `package.module:function` import path, with options."""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..utils import closest_name
from .scoring import RewardFunc, format_reward, make_math_reward, math_final_reward, math_reward
from .short_answer import make_short_answer_reward, short_answer_reward

__all__ = ["REWARD_FACTORIES", "REWARD_FUNCS", "get_reward_funcs", "register_reward"]


REWARD_FUNCS: dict[str, RewardFunc] = {}
REWARD_FACTORIES: dict[str, Callable[..., RewardFunc]] = {}
"""Per reward name, the function that builds that reward with options (`reward_kwargs`)."""


def register_reward(
    name: str,
    func: RewardFunc | None = None,
    *,
    overwrite: bool = False,
    factory: Callable[..., RewardFunc] | None = None,
) -> Any:
    """Register `func` under `name`; without `func`, return a decorator: `@register_reward("my_reward")`.

    `factory`, if given, builds the reward with options: `get_reward_funcs([name], {name: {...}})` calls it with
    them. Raises ValueError if `name` is taken (unless `overwrite=True`) or not a plain name (`:` marks import
    paths).
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
        if factory is not None:
            REWARD_FACTORIES[name] = factory
        else:
            REWARD_FACTORIES.pop(name, None)
        return f

    return _register if func is None else _register(func)


def get_reward_funcs(
    names: str | Iterable[str | RewardFunc], reward_kwargs: Mapping[str, Mapping[str, Any]] | None = None
) -> list[RewardFunc]:
    """Resolve reward names (registered names, or `package.module:function` import paths) to callables.

    Callables are passed through. `reward_kwargs` gives options per reward name, e.g. `{"math": {"strict": False}}`:
    a registered name is then built by its factory (`math` by `make_math_reward`), an import path is called with
    them and must return the reward. Raises ValueError for unknown names (listing the known ones), failed imports,
    and options for a reward that is not used or takes no such option.
    """
    if isinstance(names, str) or callable(names):
        names = [names]
    names = list(names) if isinstance(names, Iterable) else names
    if not isinstance(names, list) or not all(isinstance(name, str) or callable(name) for name in names):
        raise ValueError(
            f"reward_funcs={names!r} must be a list of reward names (registered: {sorted(REWARD_FUNCS)}, or "
            "`package.module:function` paths) or callables, e.g. ['math']."
        )
    options = _check_reward_kwargs(reward_kwargs, names)
    return [_reward(name, options) for name in names]


def _reward(name: str | RewardFunc, options: dict[str, dict[str, Any]]) -> RewardFunc:
    if callable(name):
        return name
    return _build_reward(name, options[name]) if name in options else _resolve_reward(name)


def _check_reward_kwargs(reward_kwargs: Any, names: list) -> dict[str, dict[str, Any]]:
    """`reward_kwargs` as a dict of dicts, each keyed by a reward name in `names`."""
    if reward_kwargs is None:
        return {}
    if not isinstance(reward_kwargs, Mapping):
        raise ValueError(
            "reward_kwargs must map reward names to options, e.g. {'math': {'strict': False}}; "
            f"got {reward_kwargs!r}."
        )
    for name, kwargs in reward_kwargs.items():
        if name not in names:
            raise ValueError(
                f"reward_kwargs gives options for {name!r}, which is not in reward_funcs {names}: add it there or "
                "remove its options."
            )
        if not isinstance(kwargs, Mapping):
            raise ValueError(f"reward_kwargs[{name!r}] must map option names to values, got {kwargs!r}.")
    return {name: dict(kwargs) for name, kwargs in reward_kwargs.items()}


def _build_reward(name: str, kwargs: dict[str, Any]) -> RewardFunc:
    """The reward `name` built with options `kwargs` by its registered factory, or by the import path itself."""
    if name in REWARD_FACTORIES:
        factory = REWARD_FACTORIES[name]
    elif ":" in name:
        factory = _import_reward(name)
    else:
        _resolve_reward(name)  # unknown names get the usual message
        with_options = ", ".join(sorted(REWARD_FACTORIES)) or "none"
        raise ValueError(
            f"Reward {name!r} takes no options, but reward_kwargs[{name!r}] = {kwargs!r}. "
            f"Rewards with options: {with_options}."
        )
    _check_options(name, factory, kwargs)
    try:
        reward = factory(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"reward_kwargs[{name!r}]: {exc}") from exc
    if not callable(reward):
        raise ValueError(f"Reward {name!r} built with reward_kwargs returned {reward!r}, which is not callable.")
    return reward


def _check_options(name: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """A clear ValueError for an option `factory` does not take, suggesting the closest one."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return  # builtins without a signature: let the call decide
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = [p.name for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for option in kwargs:
        if option not in known:
            close = closest_name(option, known)
            hint = f" Did you mean {close!r}?" if close else ""
            raise ValueError(
                f"Unknown option {option!r} in reward_kwargs[{name!r}].{hint} Options: {', '.join(known)}."
            )


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


register_reward("math", math_reward, factory=make_math_reward)
register_reward("math_final", math_final_reward, factory=functools.partial(make_math_reward, extraction="final"))
register_reward("short_answer", short_answer_reward, factory=make_short_answer_reward)
register_reward("format", format_reward)
