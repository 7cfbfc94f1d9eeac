"""The shared helpers of trl_ada/utils.py: did-you-mean lookups, the NaN-skipping mean, tables, JSON-safe values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trl_ada import PURE_CORE
from trl_ada.utils import closest_name, format_table, json_safe, mean


def test_closest_name_suggests_only_close_names():
    assert closest_name("balanse", ["pos", "balance", "none"]) == "balance"
    assert closest_name("maths", {"format", "math"}) == "math"
    assert closest_name("xyz", ["balance", "pos"]) is None
    assert closest_name("pos", []) is None


def test_mean_skips_nan_and_uses_the_default_when_nothing_is_left():
    assert mean([1.0, math.nan, 3.0]) == 2.0
    assert mean(x for x in (0.5, 1.5)) == 1.0
    assert math.isnan(mean([]))
    assert math.isnan(mean([math.nan]))
    assert mean([], default=0.0) == 0.0


def test_format_table_aligns_columns_and_puts_the_footer_after_a_rule():
    table = format_table(["name", "n"], [["a", 10], ["bbb", 2]], title="T", footer=[["all", 12]])
    assert table.splitlines() == ["T", "name   n", "--------", "a     10", "bbb    2", "--------", "all   12"]


def test_json_safe_replaces_nan_and_infinity_with_none():
    value = {"a": [1.0, math.nan, (math.inf, 2)], "b": np.float32("nan"), "c": np.int64(3), "d": "x"}
    assert json_safe(value) == {"a": [1.0, None, [None, 2]], "b": None, "c": 3, "d": "x"}


@pytest.mark.parametrize("module", PURE_CORE)
def test_the_pure_core_imports_neither_torch_nor_trl(module):
    import subprocess
    import sys

    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'trl', 'numpy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    stdlib_only = (
        "trl_ada.plan",
        "trl_ada.records",
        "trl_ada.seq",
        "trl_ada.fields_table",
        "trl_ada.utils",
        "trl_ada.exit_rules",
        "trl_ada.async_grpo.trained",
    )
    expected = [] if module in stdlib_only else ["numpy"]
    assert result.stdout.strip() == str(expected)


def test_every_pure_module_the_package_names_exists():
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    assert all((package / (name.replace(".", "/") + ".py")).is_file() for name in PURE_CORE)
