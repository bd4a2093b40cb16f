"""The Arrow converters give, value for value, what the per-value converters give — or step aside.

For every generated column: when ``arrow_values`` returns a column, the per-value converter of
``column_values`` must accept the same input and return equal values of the same Python types (and, for
decimals, the same unscaled integers Native writes); when it returns ``None``, the per-value converter
decides (accept or refuse). The builder that combines both (``ChunkBuilder``) must then produce exactly
the per-value result, refusals included (same code, same details naming the column).
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import arrow_values
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.chunking import ChunkBuilder
from airflow_provider_dpone.adapters.sources.column_values import converter_for
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

PROFILE = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _spec(clickhouse_type: str) -> ColumnSpec:
    return ColumnSpec(name="c", clickhouse_type=clickhouse_type, nullable=True, source_type="x")


def _reference(spec: ColumnSpec, values: list[object]) -> tuple[str, Any]:
    convert = converter_for(spec, coerce=True)
    assert convert is not None
    try:
        return "ok", list(convert(list(values)))
    except DponeError as exc:
        return "refused", (exc.code, exc.details)


def _built(spec: ColumnSpec, values: list[object], *, columnar: bool) -> tuple[str, Any]:
    builder = ChunkBuilder("p", TableSchema(columns=(spec,)), lambda _: True, columnar=columnar)
    try:
        chunk = builder.build([(v,) for v in values])
    except DponeError as exc:
        return "refused", (exc.code, exc.details)
    return "ok", list(chunk.columns[0])


def _same_values(fast: list[object], careful: list[object]) -> None:
    assert len(fast) == len(careful)
    for a, b in zip(fast, careful, strict=True):
        assert type(a) is type(b)
        assert a == b
        assert str(a) == str(b)  # the same form too (Decimal('100') is not written as '100.00')
        if isinstance(a, datetime):
            assert a.tzinfo is None and b.tzinfo is None  # type: ignore[union-attr]


def _check(spec: ColumnSpec, values: list[object]) -> ArrowColumn | None:
    convert = arrow_values.arrow_converter_for(spec)
    assert convert is not None
    fast = convert(list(values))
    reference = _reference(spec, values)
    if fast is not None:
        assert reference[0] == "ok", "the Arrow path accepted a column the per-value path refuses"
        _same_values(fast.values(), reference[1])
    # what a source actually does (Arrow first, per-value fallback) is exactly the per-value result
    built = _built(spec, values, columnar=True)
    assert built[0] == reference[0]
    if built[0] == "ok":
        _same_values(built[1], reference[1])
    else:
        assert built[1] == reference[1]
    return fast


# -- Date ------------------------------------------------------------------------------------------------

_days = st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))
_near_dates = st.one_of(
    _days.map(date.isoformat),
    _days.map(lambda d: d.isoformat() + " "),
    _days.map(lambda d: d.strftime("%Y%m%d")),
    _days.map(lambda d: d.isoformat() + "T00:00:00"),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"),  # invalid days and months too
    st.text(max_size=12),
)
_date_values = st.lists(st.one_of(st.none(), _near_dates, st.integers(), st.floats(), st.binary(max_size=4)))


@PROFILE
@given(st.lists(st.one_of(st.none(), _days.map(date.isoformat)), min_size=1))
@example(["2023-02-30"])
@example(["0000-01-01"])
@example(["1969-12-31", "2000-01-01"])
@example(["2149-06-06", "2149-06-07"])
def test_dates_from_iso_text(values: list[object]) -> None:
    _check(_spec("Date"), values)


@PROFILE
@given(_date_values)
def test_dates_from_anything(values: list[object]) -> None:
    _check(_spec("Date"), values)


def test_the_demo_dates_take_the_arrow_path() -> None:
    assert _check(_spec("Date"), ["2026-01-01", None, "2026-03-01"]) is not None


# -- DateTime --------------------------------------------------------------------------------------------

_moments = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))
_zones = st.sampled_from([timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5))])
_near_datetimes = st.one_of(
    _moments.map(lambda m: m.replace(microsecond=0).isoformat(sep=" ")),
    _moments.map(lambda m: m.replace(microsecond=0).isoformat()),
    _moments.map(lambda m: m.isoformat(sep=" ")),  # sub-second digits: refused by the per-value path
    st.tuples(_moments, _zones).map(lambda p: p[0].replace(microsecond=0, tzinfo=p[1]).isoformat()),
    _moments.map(lambda m: m.replace(microsecond=0).isoformat() + "Z"),
    _moments.map(lambda m: m.date().isoformat()),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}\Z"),
    st.text(max_size=20),
)


@PROFILE
@given(
    st.lists(
        st.one_of(st.none(), _moments.map(lambda m: m.replace(microsecond=0).isoformat(sep=" "))), min_size=1
    )
)
@example(["2023-01-01 24:00:00"])
@example(["2023-01-01 23:59:60"])
@example(["1969-12-31 23:59:59"])
@example(["2106-02-07 06:28:15", "2106-02-07 06:28:16"])
@example(["2023-01-01T10:00:00", "2023-01-01 10:00:01"])
def test_datetimes_from_iso_text(values: list[object]) -> None:
    _check(_spec("DateTime"), values)


@PROFILE
@given(st.lists(st.one_of(st.none(), _near_datetimes, st.integers(), st.floats())))
def test_datetimes_from_anything(values: list[object]) -> None:
    _check(_spec("DateTime"), values)


def test_the_demo_datetimes_take_the_arrow_path() -> None:
    assert _check(_spec("DateTime"), ["2026-01-01 10:11:12", "2026-01-01T00:00:00"]) is not None


# -- what decides that a column is text -------------------------------------------------------------------


class _Text(str):
    """A ``str`` subclass: Arrow infers it as text and the per-value converters read it as ``str``."""


_text_like = st.one_of(
    st.none(),
    _days.map(date.isoformat),
    _moments.map(lambda m: m.replace(microsecond=0).isoformat(sep=" ")),
    _days.map(lambda d: _Text(d.isoformat())),
    _moments.map(lambda m: _Text(m.replace(microsecond=0).isoformat(sep=" "))),
    _days.map(lambda d: d.isoformat().encode()),  # bytes: Arrow would take them as text if asked to
    st.binary(max_size=4).map(bytearray),
    st.booleans(),
    _days,  # a date object
)


@PROFILE
@given(st.lists(_text_like, min_size=1))
@example(["2026-01-01", b"2026-01-02"])
@example([b"2026-01-02", "2026-01-01"])
@example(["2026-01-01", bytearray(b"2026-01-02")])
@example([_Text("2026-01-01"), None])
@example([None, None])
@example(["2026-01-01", True])
def test_text_columns_mixed_with_other_kinds(values: list[object]) -> None:
    for clickhouse_type in ("Date", "DateTime"):
        _check(_spec(clickhouse_type), values)


def test_only_str_values_take_the_arrow_path() -> None:
    assert _check(_spec("Date"), ["2026-01-01", b"2026-01-02"]) is None
    assert _check(_spec("Date"), [None, None]) is None
    assert _check(_spec("Date"), [_Text("2026-01-01"), None]) is not None


def test_texts_arrow_writes_differently_are_judged_by_the_pattern() -> None:
    """``T``-separated moments are not Arrow's written form: the pattern accepts them (as before)."""
    assert _check(_spec("DateTime"), ["2026-01-01T10:11:12", "2026-01-01T00:00:00"]) is not None
    assert _check(_spec("DateTime"), ["2026-01-01", "2026-01-01 00:00:00"]) is None  # a day alone


# -- Decimal ---------------------------------------------------------------------------------------------

_scales = st.sampled_from([(12, 2), (15, 0), (15, 4), (9, 3), (5, 5), (18, 2), (38, 10)])


def _cents(scale: int) -> st.SearchStrategy[float]:
    """Floats that are exactly a decimal at the scale (what SQLite NUMERIC(p, s) holds), and neighbours."""
    exact = st.integers(-(10**13), 10**13).map(lambda n: float(Decimal(n).scaleb(-scale)))
    return st.one_of(exact, exact.map(lambda f: math.nextafter(f, math.inf)))


@st.composite
def _decimal_columns(draw: st.DrawFn) -> tuple[tuple[int, int], list[object]]:
    precision, scale = draw(_scales)
    value = st.one_of(
        st.none(),
        _cents(scale),
        st.integers(-(10**16), 10**16),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.sampled_from([0.125, 0.005, -0.0, 1e15, 2**53 + 1, 10**15 - 1, 0.1, 0.7, 1.005]),
    )
    return (precision, scale), draw(st.lists(value))


@PROFILE
@given(_decimal_columns())
@example(((12, 2), [100, 1.5, None, 0.07, -3.33]))  # the demo's amount column: ints and floats
@example(((12, 2), [0.125]))
@example(((12, 2), [True, 1.5]))
@example(((12, 2), [float("nan")]))
@example(((12, 2), [9999999999.99, -9999999999.99, 10**10]))
@example(((15, 0), [10**15 - 1, 2**53]))
def test_decimals_from_numbers(column: tuple[tuple[int, int], list[object]]) -> None:
    (precision, scale), values = column
    spec = _spec(f"Decimal({precision}, {scale})")
    convert = arrow_values.arrow_converter_for(spec)
    if convert is None:
        assert precision > arrow_values.FLOAT_EXACT_DIGITS
        return
    fast = _check(spec, values)
    if fast is not None:  # and the integers Native stores are what the per-value Decimals scale to
        assert fast.unscaled is not None
        _status, careful = _reference(spec, values)
        expected = [None if v is None else int(Decimal(v).scaleb(scale)) for v in careful]
        assert fast.unscaled.to_pylist() == expected


def test_the_demo_amounts_take_the_arrow_path() -> None:
    assert _check(_spec("Decimal(12, 2)"), [100, 1.5, 0.07, None]) is not None


@pytest.mark.parametrize("clickhouse_type", ["Int64", "String", "Float64", "UInt8", "UUID", "Decimal(18, 2)"])
def test_other_types_stay_on_the_per_value_path(clickhouse_type: str) -> None:
    assert arrow_values.arrow_converter_for(_spec(clickhouse_type)) is None


@pytest.mark.parametrize("values", [[float("nan")], [1, float("nan")], [float("nan"), 1.5], [float("inf")]])
def test_a_nan_or_infinite_decimal_is_refused_naming_the_column(values: list[object]) -> None:
    status, (code, details) = _built(_spec("Decimal(12, 2)"), values, columnar=True)
    assert status == "refused" and details["column"] == "c"
    assert _built(_spec("Decimal(12, 2)"), values, columnar=False) == (status, (code, details))


# -- Int (the per-value converter's NULL-free shortcut) ------------------------------------------------------


@PROFILE
@given(
    st.sampled_from(["Int8", "UInt8", "Int32", "UInt64", "Int64"]),
    st.lists(st.one_of(st.integers(min_value=-(2**64), max_value=2**65), st.none()), max_size=8),
)
def test_integer_ranges_are_checked_alike_with_and_without_nulls(
    clickhouse_type: str, values: list[object]
) -> None:
    """A column without NULLs skips the scan for them; it must accept and refuse what the NULL-aware check
    does (the same column with a NULL added)."""
    spec = ColumnSpec(name="c", clickhouse_type=clickhouse_type, nullable=True, source_type="INTEGER")
    convert = converter_for(spec, coerce=True)
    assert convert is not None
    present = [v for v in values if v is not None]

    def outcome(column: list[object]) -> tuple[str, Any]:
        try:
            return "ok", [v for v in convert(list(column)) if v is not None]
        except DponeError as exc:
            return "refused", (exc.code, exc.details)

    assert outcome(present) == outcome([*present, None])


# -- the fixed-width shape check ---------------------------------------------------------------------------

#: ``_DATE_TEXT`` and ``_DATETIME_TEXT`` in Python's dialect (``\Z`` is RE2's ``\z``)
_PATTERNS = {
    10: re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"),
    19: re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\Z"),
}
_TEMPLATES = {10: arrow_values._DATE_TEMPLATE, 19: arrow_values._DATETIME_TEMPLATE}
#: every character the shapes hold, their neighbours in ASCII, and some that are not ASCII
_SHAPE_CHARACTERS = "0123456789-:T /;St\x00\x7fé€"


def _shaped_like(width: int) -> st.SearchStrategy[str]:
    """Texts near ``width`` characters, most of them near the shape (a canonical one with a few
    characters swapped), the rest anything."""
    canonical = "2026-10-02" if width == 10 else "2026-10-02 13:45:59"
    swap = st.tuples(st.integers(0, width - 1), st.sampled_from(_SHAPE_CHARACTERS))
    near = st.lists(swap, max_size=3).map(
        lambda swaps: "".join(dict(swaps).get(index, character) for index, character in enumerate(canonical))
    )
    return st.one_of(near, st.text(_SHAPE_CHARACTERS, min_size=width - 1, max_size=width + 1))


@PROFILE
@given(
    st.sampled_from([10, 19]).flatmap(lambda w: st.tuples(st.just(w), st.lists(_shaped_like(w), min_size=1)))
)
@example((19, ["2026-10-02 24:00:00"]))
@example((19, ["2026-10-02 23:60:00"]))
@example((19, ["2026-10-02U13:45:59"]))
@example((19, ["2026-10-02 19:45:59", "2026-10-02T20:00:00"]))
@example((10, ["2026-1-002"]))
def test_the_fixed_width_check_says_only_what_the_pattern_says(case: tuple[int, list[str]]) -> None:
    width, texts = case
    matched = all(_PATTERNS[width].match(text) for text in texts)
    array = pa.array(texts, pa.string())
    for one in (array, pa.concat_arrays([pa.array(["x"], pa.string()), array]).slice(1)):  # an offset too
        in_template = arrow_values._in_template(one, _TEMPLATES[width])
        if all(len(text.encode()) == width for text in texts):
            assert in_template == matched
        else:
            assert not in_template  # another width is left to the cast and the pattern


def test_the_fixed_width_check_steps_aside_for_nulls_and_other_widths() -> None:
    assert arrow_values._in_template(pa.array(["2026-10-02 13:45:59"]), arrow_values._DATETIME_TEMPLATE)
    assert not arrow_values._in_template(pa.array(["2026-10-02", None]), arrow_values._DATE_TEMPLATE)
    assert not arrow_values._in_template(pa.array([], pa.string()), arrow_values._DATE_TEMPLATE)
    assert not arrow_values._in_template(
        pa.array(["2026-10-02"], pa.large_string()), arrow_values._DATE_TEMPLATE
    )
    # a shape the template leaves to the other checks is still accepted (T-separated moments, as before)
    assert _check(_spec("DateTime"), ["2026-01-01T10:11:12", "2026-01-01 00:00:00"]) is not None
