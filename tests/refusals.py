"""What a user relies on in a refusal: one line that names the field and its value, and (where the test gives one) a
fix that works when followed. Tests check these, not the wording."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def refusal(build: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The message of the ValueError `build(*args, **kwargs)` raises; it must be one line."""
    with pytest.raises(ValueError) as refused:
        build(*args, **kwargs)
    message = str(refused.value)
    assert "\n" not in message, message
    return message


def names(message: str, *fragments: str) -> None:
    """Every fragment (a field with its value, the fix) is in the refusal."""
    missing = [fragment for fragment in fragments if fragment not in message]
    assert not missing, f"{missing} not in {message!r}"
