"""Columnar converters in Arrow compute, for the column shapes where they provably equal ``column_values``.

Each converter takes a fetched column (Python values) and returns an :class:`ArrowColumn` holding exactly
the values the per-value converter of ``column_values`` gives for it, or ``None`` when it cannot prove
that — the caller then runs the per-value converter, which accepts or refuses (naming the column) as it
always did. So the rules stay those of ``column_values``; this module only recognises inputs where Arrow
computes the same answer faster, and never refuses anything itself:

* ``Date`` from ISO text ``YYYY-MM-DD`` only (what ``date.fromisoformat`` reads the same way), every
  value a real calendar day within ``DATE_MIN`` .. ``DATE_MAX``;
* ``DateTime`` from ``YYYY-MM-DD HH:MM:SS`` or ``...THH:MM:SS`` text only (whole seconds, no zone), hours
  00-23, within ``DATETIME_MIN`` .. ``DATETIME_MAX``;
* ``Decimal(p, s)`` with ``p`` <= 15 from integers and floats (SQLite ``NUMERIC``/``REAL``): every value
  within range and exactly a decimal at the scale, i.e. ``n / 10**s`` for an integer ``n`` whose nearest
  double is the value — the same test ``float("%.{s}f" % v) == v`` of the per-value path, in doubles:
  ``fl(n / 10**s)`` is the double nearest the decimal ``n / 10**s``, as ``float(text)`` is.

Anything else (bytes, booleans, ``date`` objects, text in another shape, NaN, an invalid day, a value out
of range) gives ``None``. ``tests/unit/test_arrow_values.py`` compares both paths value for value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_dpone.adapters.sources import column_values
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.adapters.sources.column_values import (
    DATE_MAX,
    DATE_MIN,
    DATETIME_MAX,
    DATETIME_MIN,
)
from airflow_provider_dpone.contracts.schema import ColumnSpec

#: The per-value decimal converter that builds an Arrow decimal column's Python values (it accepts every
#: column this module accepts; its column name is never shown, since it never refuses one of them).
_SPEC = ColumnSpec(name="decimal", clickhouse_type="Decimal(15, 0)")

ArrowConverter = Callable[[Sequence[object]], ArrowColumn | None]

#: The precision up to which every decimal survives a round trip through a double (see fast_decimals).
FLOAT_EXACT_DIGITS = 15
_DATE_TEXT = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
_DATETIME_TEXT = r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\z"
_NONE_TYPE = type(None)
_NUMBER_KINDS = frozenset({int, float, _NONE_TYPE})
_DATE_LOW = pa.scalar(DATE_MIN, pa.date32())
_DATE_HIGH = pa.scalar(DATE_MAX, pa.date32())
_DATETIME_LOW = pa.scalar(DATETIME_MIN, pa.timestamp("s"))
_DATETIME_HIGH = pa.scalar(DATETIME_MAX, pa.timestamp("s"))


def _all(mask: pa.Array) -> bool:
    """Every non-NULL entry true (NULLs are the column's NULLs, kept as they are)."""
    return bool(pc.all(mask).as_py() is not False)


def _texts(values: Sequence[object]) -> pa.Array | None:
    """The column as Arrow text if it holds ``str`` values and NULLs only, else ``None``.

    Arrow's own type inference decides, in the same pass that builds the array (no ``set(map(type, ...))``
    first): it infers ``string`` only when every non-NULL value is a ``str`` (a subclass too, which the
    per-value converters read as ``str``), ``binary`` once a ``bytes``-like value is among them, ``null``
    for NULLs only, and refuses numbers, booleans and dates mixed with text. A typed ``pa.array(values,
    pa.string())`` would not do: it takes ``bytes`` as text."""
    try:
        array = pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return array if isinstance(array, pa.Array) and array.type == pa.string() else None


@dataclass(frozen=True)
class _Template:
    """A fixed-width ASCII shape: the lowest and highest byte allowed at each position, and a rule for
    what a byte range cannot say (``None``: the ranges are the whole shape)."""

    low: bytes
    high: bytes
    rest: Callable[[np.ndarray], bool] | None = None


def _hour_and_separator(rows: np.ndarray) -> bool:
    """Of ``YYYY-MM-DD?HH:MM:SS`` rows: the separator is ``T`` or a space, and the hour at most 23."""
    separator, tens, units = rows[:, 10], rows[:, 11], rows[:, 12]
    return bool(
        ((separator == ord(" ")) | (separator == ord("T"))).all()
        and ((tens < ord("2")) | (units <= ord("3"))).all()
    )


#: ``_DATE_TEXT`` as a template: digits, and a dash at 4 and 7
_DATE_TEMPLATE = _Template(b"0000-00-00", b"9999-99-99")
#: ``_DATETIME_TEXT``: the date, ``T`` or a space, hours 00-23, minutes and seconds 00-59
_DATETIME_TEMPLATE = _Template(b"0000-00-00 00:00:00", b"9999-99-99T29:59:59", _hour_and_separator)


def _in_template(texts: pa.Array, template: _Template) -> bool:
    """Every text exactly in ``template``'s shape, checked on the bytes in one pass (~4x cheaper than
    writing the parsed values back as text and comparing). ``False`` whenever it cannot say so cheaply
    (NULLs, another length, another string type): the caller then judges the texts its own way, so this
    only ever shortens a ``True``."""
    count = len(texts)
    width = len(template.low)
    if count == 0 or texts.null_count or texts.type != pa.string():
        return False
    _, offsets_buffer, data = texts.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=count + 1, offset=texts.offset * 4)
    start, end = int(offsets[0]), int(offsets[-1])
    if data is None or end - start != width * count or not (np.diff(offsets) == width).all():
        return False
    rows = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start).reshape(count, width)
    low = np.frombuffer(template.low, dtype=np.uint8)
    high = np.frombuffer(template.high, dtype=np.uint8)
    if not ((rows >= low).all() and (rows <= high).all()):
        return False
    return template.rest is None or template.rest(rows)


def _shaped(texts: pa.Array, parsed: pa.Array, pattern: str, template: _Template) -> bool:
    """Every text in the shape ``pattern`` describes. Most columns are written in one fixed width, which
    ``template`` checks byte by byte; then most are written exactly as Arrow writes the parsed values back
    (``2026-10-02``, ``2026-10-02 02:51:47``), which is one comparison of the texts, cheaper than the
    regular expression; a text Arrow writes differently (``...T02:51:47``, or a shape the cast takes that
    the pattern refuses) is then judged by the pattern itself."""
    if _in_template(texts, template):
        return True  # the template is the pattern, position by position
    if _all(pc.equal(parsed.cast(pa.string()), texts)):
        return True  # a parsed value written back is in the pattern's shape, so its equal text is too
    return _all(pc.match_substring_regex(texts, pattern))


def within(array: pa.Array, low: pa.Scalar, high: pa.Scalar) -> bool:
    """Every non-NULL value in ``low``..``high`` (both inclusive); ``False`` for NULLs only."""
    bounds = pc.min_max(array)
    lowest, highest = bounds["min"], bounds["max"]
    if not lowest.is_valid:  # only NULLs: the caller never gets here (a text value was seen)
        return False
    return bool(pc.greater_equal(lowest, low).as_py() and pc.less_equal(highest, high).as_py())


def dates(values: Sequence[object]) -> ArrowColumn | None:
    texts = _texts(values)
    return None if texts is None else dates_of_texts(texts)


def dates_of_texts(texts: pa.Array) -> ArrowColumn | None:
    """:func:`dates` of a column already held as Arrow ``string`` (the SQLite Arrow read)."""
    if texts.null_count == len(texts):
        return None  # only NULLs: as the row path, whose inference gives no string column then
    try:
        days = texts.cast(pa.date32())
    except pa.ArrowException:  # not a calendar day (2023-02-30, year 0): the per-value path decides
        return None
    if not _shaped(texts, days, _DATE_TEXT, _DATE_TEMPLATE):
        return None
    return ArrowColumn(days) if within(days, _DATE_LOW, _DATE_HIGH) else None


def datetimes(values: Sequence[object]) -> ArrowColumn | None:
    texts = _texts(values)
    return None if texts is None else datetimes_of_texts(texts)


def datetimes_of_texts(texts: pa.Array) -> ArrowColumn | None:
    """:func:`datetimes` of a column already held as Arrow ``string`` (the SQLite Arrow read)."""
    if texts.null_count == len(texts):
        return None
    try:
        moments = texts.cast(pa.timestamp("s"))
    except pa.ArrowException:  # not a moment Arrow reads: the per-value path decides
        return None
    if not _shaped(texts, moments, _DATETIME_TEXT, _DATETIME_TEMPLATE):
        return None
    return ArrowColumn(moments) if within(moments, _DATETIME_LOW, _DATETIME_HIGH) else None


@dataclass(frozen=True)
class _DecimalShape:
    """``Decimal(p, s)`` with ``p`` <= 15, built from doubles: see the module docstring."""

    precision: int
    scale: int

    def of_doubles(self, numbers: pa.Array, python: Callable[[], list[object]]) -> ArrowColumn | None:
        """The column, or ``None`` unless every double is exactly a decimal at the scale within range."""
        if numbers.null_count == len(numbers) or pc.any(pc.is_nan(numbers)).as_py():
            return None
        limit = float(10 ** (self.precision - self.scale))  # exact: at most 10**15
        multiplier = float(10**self.scale)
        bounds = pc.min_max(numbers)
        if not (-limit < bounds["min"].as_py() and bounds["max"].as_py() < limit):
            return None  # an integer beyond 2**53 is beyond the limit too, so the doubles are exact here
        scaled = pc.round(pc.multiply(numbers, multiplier))
        if not _all(pc.equal(pc.divide(scaled, multiplier), numbers)):
            return None
        unscaled = scaled.cast(pa.int64())
        wide = unscaled.cast(pa.decimal128(19, 0))  # the integer n in Decimal128's 16-byte layout
        arrow_type = pa.decimal128(self.precision, self.scale)
        array = pa.Array.from_buffers(arrow_type, len(wide), wide.buffers(), null_count=wide.null_count)
        # Python values only if something iterates the column: the per-value path's own, same form too
        return ArrowColumn(array, unscaled, python=python)


def decimals(precision: int, scale: int) -> ArrowConverter | None:
    if precision > FLOAT_EXACT_DIGITS:
        return None
    careful = column_values.decimals(_SPEC, precision, scale)
    shape = _DecimalShape(precision, scale)

    def convert(values: Sequence[object]) -> ArrowColumn | None:
        kinds = set(map(type, values))
        if not kinds - {_NONE_TYPE} or not kinds <= _NUMBER_KINDS:  # bool is not int here: refused later
            return None
        try:
            numbers = pa.array(values, pa.float64())
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            return None
        return shape.of_doubles(numbers, lambda: list(careful(list(values))))

    return convert


def decimals_of_doubles(precision: int, scale: int) -> Callable[[pa.Array], ArrowColumn | None] | None:
    """:func:`decimals` of a column already held as Arrow ``double`` (the SQLite Arrow read, which widens
    integers to doubles: exact here, the audit bounds them). Its Python values are the per-value
    converter's of those doubles: equal to the row path's, in the form of a column of REALs."""
    if precision > FLOAT_EXACT_DIGITS:
        return None
    careful = column_values.decimals(_SPEC, precision, scale)
    shape = _DecimalShape(precision, scale)

    def convert(numbers: pa.Array) -> ArrowColumn | None:
        if not pa.types.is_float64(numbers.type):
            return None
        return shape.of_doubles(numbers, lambda: list(careful(numbers.to_pylist())))

    return convert


def from_arrow_for(column: ColumnSpec) -> Callable[[pa.Array], ArrowColumn | None] | None:
    """The Arrow-input converter of a column's type (``string`` for dates and datetimes, ``double`` for
    decimals), or ``None``; like the others it returns ``None`` where it cannot prove equality."""
    base = column.clickhouse_type
    if base == "Date":
        return dates_of_texts
    if base == "DateTime":
        return datetimes_of_texts
    if base.startswith("Decimal("):
        precision, scale = (int(part) for part in base[len("Decimal(") : -1].split(","))
        return decimals_of_doubles(precision, scale)
    return None


def arrow_converter_for(column: ColumnSpec) -> ArrowConverter | None:
    """The Arrow converter of a column's type, or ``None`` (the per-value path only)."""
    base = column.clickhouse_type
    if base == "Date":
        return dates
    if base == "DateTime":
        return datetimes
    if base.startswith("Decimal("):
        precision, scale = (int(part) for part in base[len("Decimal(") : -1].split(","))
        return decimals(precision, scale)
    return None
