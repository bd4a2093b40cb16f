"""Every value arrives exactly or the read stops naming the column (never the value).

SQLite is dynamically typed: the declared type is the contract, so an INTEGER column holding ``1.5`` or
``''``, a BOOLEAN holding 2, a REAL holding text or a DECIMAL(12,2) holding a value with more digits is
refused instead of being cast into something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import sqlite_types
from airflow_provider_dpone.adapters.sources.column_values import converter_for, decimal_fits
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode


def _convert(declared: str, values: Sequence[object]) -> list[object]:
    column = sqlite_types.column_spec("c", declared, False)
    convert = converter_for(column, coerce=sqlite_types.needs_coercion(column))
    assert convert is not None, declared
    return list(convert(values))


def _refused(declared: str, values: Sequence[object]) -> DponeError:
    with pytest.raises(DponeError) as caught:
        _convert(declared, values)
    error = caught.value
    assert error.code is ErrorCode.SOURCE_READ_FAILED
    assert error.details["column"] == "c" and "'c'" in error.safe_message
    for value in values:
        if value not in (None, 0, 1):
            assert repr(value) not in error.render() and repr(value) not in str(error.details)
    return error


@pytest.mark.parametrize("value", [1.5, "", "abc", b"\x01", 2.0])
def test_an_integer_column_holding_anything_but_an_integer_is_refused(value: object) -> None:
    _refused("INTEGER", [1, None, value])


def test_integers_pass_through_unchanged() -> None:
    values = [1, None, -(2**63), 2**63 - 1]
    assert _convert("BIGINT", values) == values


@pytest.mark.parametrize("value", [2, -1, 0.5, "1", b"\x01"])
def test_a_boolean_column_holds_only_0_and_1(value: object) -> None:
    _refused("BOOLEAN", [0, 1, value])


def test_booleans_0_and_1_arrive_as_flags() -> None:
    converted = _convert("BOOLEAN", [0, 1, None, True, False, 1.0])
    assert converted == [0, 1, None, 1, 0, 1]
    assert {type(v) for v in converted} == {int, type(None)}


@pytest.mark.parametrize("value", ["", "1.5", 2**60])
def test_a_real_column_holding_text_or_an_inexact_integer_is_refused(value: object) -> None:
    _refused("REAL", [1.5, value])


def test_reals_and_small_integers_arrive_as_floats() -> None:
    assert _convert("REAL", [1.5, 7, None, 2**53]) == [1.5, 7.0, None, float(2**53)]


@pytest.mark.parametrize(
    "value",
    [
        12345678901234.56,  # the reported case: 14 digits before the point of a DECIMAL(12,2)
        "12345678901234.56",
        1.234,  # a digit past the scale, as REAL
        "1.234",  # ... and as text
        0.1 + 0.2,  # float arithmetic: 0.30000000000000004
        10_000_000_000,  # an integer with 11 digits before the point
        "NaN",
        "",
    ],
)
def test_a_decimal_that_does_not_fit_exactly_is_refused(value: object) -> None:
    _refused("DECIMAL(12,2)", [Decimal("1.00"), value])


def test_decimals_that_fit_arrive_exactly() -> None:
    assert _convert("DECIMAL(12,2)", [9999999999.99, "-9999999999.99", 17, "1.230", 0.3, None]) == [
        Decimal("9999999999.99"),
        Decimal("-9999999999.99"),
        Decimal(17),
        Decimal("1.230"),
        Decimal("0.3"),
        None,
    ]


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**12), max_value=10**12),
    st.integers(min_value=1, max_value=18),
    st.integers(min_value=0, max_value=6),
)
def test_decimal_fits_agrees_with_quantizing_and_bounding(value: Decimal, precision: int, scale: int) -> None:
    scale = min(scale, precision)
    exact_at_scale = value == value.quantize(Decimal(1).scaleb(-scale))
    expected = exact_at_scale and abs(value) < Decimal(10) ** (precision - scale)
    assert decimal_fits(value, precision, scale) is expected


@pytest.mark.parametrize("value", [1.234, 0.1 + 0.2, 12345678901234.56, float("nan"), float("inf")])
def test_a_float_only_column_is_refused_on_its_fast_path_too(value: float) -> None:
    _refused("DECIMAL(12,2)", [1.5, None, value])


@given(st.lists(st.one_of(st.none(), st.decimals(places=2, min_value=-(10**9), max_value=10**9)), min_size=1))
def test_a_float_only_column_arrives_as_the_shortest_decimal_of_each_float(
    values: list[Decimal | None],
) -> None:
    floats = [None if v is None else float(v) for v in values]
    converted = _convert("DECIMAL(12,2)", floats)
    assert converted == [None if f is None else Decimal(repr(f)) for f in floats]
    assert converted == values


# -- the pre-arm audit agrees with the converters ------------------------------------------------------------
#
# ``value_audit`` re-states the converters' rules in SQL so a bad value is found before arming. For every
# value below, stored by SQLite under the declared type's affinity, the audit must refuse exactly when the
# streaming converter refuses (one direction would block good runs, the other reach the target call).

_AUDIT_CASES: dict[str, list[object]] = {
    "INTEGER": [0, -(2**63), 2**63 - 1, 1.5, "", "abc", b"\x01", 2.0],
    "BOOLEAN": [0, 1, 1.0, 0.0, 2, 0.5, -1, "", "yes", b"\x01"],
    "REAL": [0.5, 1e308, 2**53, 2**53 + 1, -(2**53) - 1, "", "n/a", float("inf")],
    "NUMERIC(12,2)": [
        1.25,
        0.1,
        1.234,
        9999999999.99,
        10000000000.0,
        -9999999999.99,
        12345678901234.56,
        0.30000000000000004,
        7,
        10**10,
        -(10**10),
        "12345678901234.56",
        "1.20",
        "1.234",
        "abc",
        "",
        "+5.5",
        "-0.01",
        b"\x00",
        float("inf"),
    ],
    "DECIMAL(18,4)": [
        1.2345,
        1.23456,
        123456789012.1234,
        0.1 + 0.2,
        "99999999999999.9999",
        "100000000000000",
        "12\x00",  # SQLite's text functions stop at the NUL; the converter does not
        12345678901234.5,  # 14 + 4 digits: SQLite's round() is not exact that wide
    ],
    "DECIMAL(38,10)": [
        123456789012.34,
        "123456789012.34",
        12345678901234.5,
        0.1 + 0.2,
        1e-10,
        1.5e-11,
        1e27,
        1e28,
        -987654321.0123456,
    ],
    "DATE": [
        "2026-11-30",
        "1970-01-01",
        "1969-12-31",
        "2149-06-06",
        "2149-06-07",
        "2026-02-30",
        "30/11/2026",
        "2026-11-30T10:00:00",
        "2026-11-30 10:00:00+05:00",
        "2026-11-30 00:00:00",
        "2026-11-30T00:00:00Z",
        "2026-11-30 00:00:00+00:00",
        "2026-11-30 00:00:00-05:00",
        "2026-11-30 00:00:00.000",
        "2026-11-30 00:00:00.001",
        "2026-11-30 00:00:01",
        "2026-11-30 00:00",
        "2026-11-30 23:59:59",
        "2026-13-01",
        20261130,
        2.5,
        " 2026-11-30 ",
    ],
    "DATETIME": [
        "2026-11-30 10:00:00",
        "2026-11-30T10:00:00",
        "2026-11-30",
        "2026-11-30 10:00",
        "1970-01-01 00:00:00",
        "1969-12-31 23:59:59",
        "2106-02-07 06:28:15",
        "2106-02-07 06:28:16",
        "2026-11-30 10:00:00.000",
        "2026-11-30 10:00:00.250",
        "2026-11-30 10:00:00.000001",
        "2026-11-30T10:00:00-05:00",
        "2026-11-30T10:00:00.5+01:00",
        "2026-11-30T10:00:00Z",
        "2026-02-30 10:00:00",
        "not a time",
        1234,
        0.5,
        "1970-01-01T04:00:00+05:00",
        "2026-11-30 24:00:00",  # SQLite's functions accept these four; the converters' parser does not
        "2026-11-30  10:00:00",
        "2026-11-30 10:00:00z",
        "2026-11-30 T10:00:00",
    ],
}


def _audit_refuses(declared: str, value: object, *, partition: bool = False) -> bool:
    import sqlite3

    from airflow_provider_dpone.adapters.sources import value_audit
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
    from airflow_provider_dpone.contracts.schema import TableSchema

    db = sqlite3.connect(":memory:")
    value_audit.register_functions(db)
    db.execute(f"CREATE TABLE t (c {declared})")
    db.execute("INSERT INTO t VALUES (?)", (value,))
    schema = TableSchema(columns=(sqlite_types.column_spec("c", declared, False),))
    bounds = (
        PartitionBounds(
            kind=BoundsKind.RANGE,
            column="c",
            lower="2026-11-01",
            upper="2026-12-31",
            value_type="date",
            label="p",
        )
        if partition
        else PartitionBounds(kind=BoundsKind.ALL, label="all")
    )
    plan = value_audit.sqlite_plan(schema, [bounds], None)
    assert plan is not None
    row = db.execute(*plan.statement('"t"', [bounds])).fetchone()
    stored = db.execute("SELECT c FROM t").fetchone()[0]
    db.close()
    try:
        value_audit.require_clean(plan.checks, row, "t")
    except DponeError as refused:
        assert refused.code is ErrorCode.MANIFEST_INVALID and refused.details["column"] == "c"
        assert repr(stored) not in refused.render()
        return True
    return False


def _converter_refuses(declared: str, value: object) -> bool:
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t (c {declared})")
    db.execute("INSERT INTO t VALUES (?)", (value,))
    stored = db.execute("SELECT c FROM t").fetchone()[0]
    db.close()
    try:
        _convert(declared, [stored])
    except DponeError:
        return True
    return False


@pytest.mark.parametrize(
    ("declared", "value"), [(d, v) for d, values in _AUDIT_CASES.items() for v in values], ids=repr
)
def test_the_audit_refuses_exactly_what_the_converter_refuses(declared: str, value: object) -> None:
    assert _audit_refuses(declared, value) == _converter_refuses(declared, value)


@given(st.decimals(min_value=-(10**12), max_value=10**12, places=4, allow_nan=False, allow_infinity=False))
def test_the_decimal_audit_agrees_with_the_converter_on_any_float_or_text(value: Decimal) -> None:
    for stored in (float(value), str(value)):
        for declared in ("NUMERIC(12,2)", "DECIMAL(18,3)", "DECIMAL(20,6)", "DECIMAL(38,10)"):
            assert _audit_refuses(declared, stored) == _converter_refuses(declared, stored), (
                declared,
                stored,
            )


_MOMENTS = st.tuples(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2149, 6, 5)),
    st.sampled_from([" ", "T"]),
    st.sampled_from(["", "Z", "+00:00", "-05:00", "+01:30"]),
    st.sampled_from([0, 3, 6]),
    st.booleans(),
)


@given(_MOMENTS)
def test_a_date_column_keeps_a_day_and_refuses_any_other_moment_in_the_audit_and_the_converter(
    shape: tuple[datetime, str, str, int, bool],
) -> None:
    moment, separator, offset, digits, at_midnight = shape
    if at_midnight:
        moment = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    text = moment.isoformat(sep=separator, timespec="microseconds" if digits else "seconds")
    if digits == 3:
        text = text[:-3]
    text += offset
    shown = moment.replace(
        microsecond={0: 0, 3: moment.microsecond // 1000 * 1000, 6: moment.microsecond}[digits]
    )
    exact_day = shown.time() == time(0) and offset in ("", "Z", "+00:00")
    assert _audit_refuses("DATE", text) == _converter_refuses("DATE", text) == (not exact_day), text
    if exact_day:
        assert _convert("DATE", [text]) == [shown.date()]


_PIECES = st.tuples(
    st.sampled_from(["2026-11-30", "2026-02-29", "1970-01-01", "2026-1-30"]),
    st.sampled_from([" ", "T", "t", "  ", " T", "\t", "_"]),
    st.integers(0, 25),
    st.integers(0, 60),
    st.sampled_from(["", ":00", ":59", ":60", ":5"]),
    st.sampled_from(["", ".", ".0", ".000", ".000000", ".0000000", ".5", ",0"]),
    st.sampled_from(["", "Z", "z", "+05:00", "+0500", "+05", "-00:00", " +05:00", "+05:00:30", "+24:00"]),
)


@settings(max_examples=600)
@given(_PIECES)
def test_the_audit_never_passes_a_date_or_datetime_text_the_converter_refuses(
    pieces: tuple[str, str, int, int, str, str, str],
) -> None:
    day, separator, hour, minute, seconds, fraction, offset = pieces
    text = f"{day}{separator}{hour:02d}:{minute:02d}{seconds}{fraction}{offset}"
    for declared in ("DATE", "DATETIME"):
        if _converter_refuses(declared, text):
            assert _audit_refuses(declared, text), (declared, text)


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("2026-11-30T23:30:00-05:00", True),  # its text's date is not its UTC date
        ("2026-11-30T10:00:00+02:00", True),
        ("2026-11-30T10:00:00Z", False),  # UTC: the text's date is the stored date
        ("2026-11-30 10:00:00", False),
    ],
)
def test_a_day_partition_column_refuses_values_with_a_utc_offset(value: str, refused: bool) -> None:
    assert _audit_refuses("DATETIME", value, partition=True) is refused


@pytest.mark.parametrize(
    ("version", "modern"),
    [
        ("18.16.1", False),
        ("21.8.15.7", False),
        (None, False),
        ("", False),
        ("dev", False),
        ("22.3.1", True),
        ("26.9.2.1", True),
    ],
)
def test_the_calendar_range_follows_the_server_version_and_an_unreadable_one_gets_the_narrow_range(
    version: str | None, modern: bool
) -> None:
    from datetime import date, datetime

    from airflow_provider_dpone.adapters.clickhouse.column_encoders import value_limits

    limits = value_limits(version)
    assert limits["date_min"] == date(1970, 1, 1) and limits["datetime_min"] == datetime(1970, 1, 1)
    if modern:
        assert (limits["date_max"], limits["datetime_max"]) == (
            date(2149, 6, 6),
            datetime(2106, 2, 7, 6, 28, 15),
        )
    else:  # measured on 18.16.1: later values read back as 1970-01-01
        assert (limits["date_max"], limits["datetime_max"]) == (
            date(2106, 2, 7),
            datetime(2106, 2, 6, 23, 59, 59),
        )
