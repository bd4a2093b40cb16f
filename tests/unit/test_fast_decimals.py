"""The int/float decimal fast path gives, value by value, what the careful per-value path gives.

SQLite ``NUMERIC(12,2)`` columns hold integers (``100`` for ``100.00``) beside floats, which used to send
every chunk down the per-value path. ``fast_decimals.int_float_decimals`` must return the very same
``Decimal`` for every value (compared as text, so ``12.5`` vs ``12.50`` would show) and must step aside
(``None``) whenever the careful path would refuse a value, so the refusal and its message stay as they
are. The careful path's answer for a value is obtained by converting it beside a text ``"0"``, which keeps
the chunk off every fast path.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from airflow_provider_dpone.adapters.sources.column_values import decimals
from airflow_provider_dpone.adapters.sources.fast_decimals import int_float_decimals
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.schema import ColumnSpec

SHAPES = [(12, 2), (15, 4), (10, 0), (15, 6), (18, 2), (38, 10)]


def _column() -> ColumnSpec:
    return ColumnSpec(name="amount", clickhouse_type="Decimal(12, 2)")


def careful(value: object, precision: int, scale: int) -> object:
    """What today's per-value path gives for ``value`` (or the DponeError text it raises)."""
    try:
        return decimals(_column(), precision, scale)([value, "0"])[0]
    except DponeError as exc:
        return f"refused: {exc}"


def _corpus(precision: int, scale: int, seed: int) -> list[object]:
    rand = random.Random(seed)
    top = 10 ** (precision - scale)
    step = 10**scale
    values: list[object] = [0, 1, -1, 100, top - 1, -(top - 1), None]
    if precision <= 15:  # floats only where a double holds every decimal of the column exactly
        values += [0.0, -0.0, 100.0, float(top - 1)]
        values += [12.5, -3.25] if scale >= 2 else []
        values += [1e-05, -0.00001] if scale >= 5 else []
    for _ in range(3000):
        cents = rand.randrange(-top * step + 1, top * step)
        if rand.random() < 0.15:
            values.append(cents // step)  # an integer, as SQLite stores a value with no fraction
        elif precision <= 15:
            values.append(cents / step)
        if rand.random() < 0.02:
            values.append(None)
    return values


@pytest.mark.parametrize(("precision", "scale"), SHAPES)
def test_every_value_is_the_careful_paths_decimal(precision: int, scale: int) -> None:
    values = _corpus(precision, scale, seed=precision * 100 + scale)
    present = [v for v in values if v is not None]
    fast = int_float_decimals(values, present, precision, scale)
    assert fast is not None, "a clean int/float column takes the fast path"
    assert len(fast) == len(values)
    for value, got in zip(values, fast, strict=True):
        want = careful(value, precision, scale)
        assert type(got) is type(want) and str(got) == str(want), (value, got, want)
    # and the converter as a whole (which now tries the fast path) gives the same list
    converted = decimals(_column(), precision, scale)(values)
    assert [str(v) for v in converted] == [str(v) for v in fast]


@pytest.mark.parametrize(
    ("bad", "precision", "scale"),
    [
        (12.345, 12, 2),  # a digit past the scale
        (10**10, 12, 2),  # an integer out of range
        (1e10, 12, 2),  # a float out of range
        (0.1 + 0.2, 12, 2),  # float arithmetic: 17 digits
        (float("nan"), 12, 2),
        (float("inf"), 12, 2),
        (True, 12, 2),  # a boolean is not a decimal
        ("7.5", 12, 2),  # text: the careful path parses it
        (Decimal("1.5"), 12, 2),
        (1.5, 16, 2),  # a float beside a precision no double holds exactly
    ],
)
def test_anything_the_careful_path_would_judge_is_left_to_it(bad: object, precision: int, scale: int) -> None:
    values: list[object] = [100, 1.25, None, bad]
    present = [v for v in values if v is not None]
    assert int_float_decimals(values, present, precision, scale) is None
    converter = decimals(_column(), precision, scale)
    want = careful(bad, precision, scale)
    if isinstance(want, str) and want.startswith("refused: "):
        with pytest.raises(DponeError) as refused:
            converter(values)
        assert f"refused: {refused.value}" == want
    else:
        assert [str(v) for v in converter(values)] == [str(careful(v, precision, scale)) for v in values]


def test_columns_without_an_integer_keep_their_own_paths() -> None:
    assert int_float_decimals([1.5, None], [1.5], 12, 2) is None  # floats_at_scale's business
    assert int_float_decimals([None, None], [], 12, 2) is None
