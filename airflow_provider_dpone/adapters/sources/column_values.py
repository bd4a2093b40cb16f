"""Column-wise value conversion: driver values -> the Python types the declared ClickHouse type takes.

This is the hot path, so each converter works on a whole column: it picks a specialised loop from the
first non-NULL value's type, and columns that need nothing (integers, floats, text) are passed through
untouched. Only when the fast loop meets an unexpected value does it fall back to the careful per-value
path, which accepts every shape the drivers produce (SQLite ISO text, pymssql's ``date``/``Decimal``, the
TDS emulator's ``datetime``/``float``) and otherwise raises ``source_read_failed`` naming the column.

Conventions (what sinks and artifact writers can rely on):
- ``Date`` -> ``datetime.date`` (a time of day other than midnight, or an offset, is refused: never
  dropped); ``DateTime`` -> naive ``datetime.datetime`` at whole seconds (ClickHouse ``DateTime`` holds
  seconds: a value with sub-second digits is refused; aware values are converted to UTC first, then made
  naive);
- ``Decimal(p, s)`` -> ``decimal.Decimal``, exactly: floats are taken at their shortest decimal form and a
  value with more digits than the type holds is refused, never rounded;
- ``Int*`` -> ``int`` only (SQLite may hold ``1.5`` or ``''`` in an INTEGER column: refused, not cast);
- ``UInt8`` flags (``bit``, SQLite ``BOOLEAN``) -> ``int`` 0/1 only (pyarrow refuses ``bool`` for uint8);
- ``UUID`` -> canonical lowercase ``str``; ``String`` -> ``str`` or, for binary columns, raw ``bytes``.
Values outside what ClickHouse ``Date``/``DateTime`` can hold fail loudly instead of wrapping.
"""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timedelta, timezone
from typing import TypeVar

from airflow_provider_dpone.adapters.sources.fast_decimals import int_float_decimals
from airflow_provider_dpone.adapters.sources.mssql_types import COARSE_BINARY
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec

Column = Sequence[object]
Converter = Callable[[Column], Column]

DATE_MIN = date(1970, 1, 1)
DATE_MAX = date(2149, 6, 6)
DATETIME_MIN = datetime(1970, 1, 1)
DATETIME_MAX = datetime(2106, 2, 7, 6, 28, 15)

_DECIMAL_CONTEXT = decimal.Context(prec=80)
_T = TypeVar("_T")


class _BadValue(Exception):
    """A value the column's type cannot hold (never carries the value itself)."""


def _first(values: Column) -> object:
    for value in values:
        if value is not None:
            return value
    return None


def _failed(column: ColumnSpec, reason: str) -> DponeError:
    return DponeError(
        ErrorCode.SOURCE_READ_FAILED,
        f"column {column.name!r} holds a value that is not a valid {column.clickhouse_type} ({reason})",
        details={"column": column.name, "clickhouse_type": column.clickhouse_type, "reason": reason},
    )


def _map_present(parse: Callable[[str], _T], values: Column) -> list[_T | None]:
    """``parse`` over every value in C (``map``), NULLs kept; a non-text value raises ``TypeError``."""
    if None in values:
        return [None if v is None else parse(v) for v in values]  # type: ignore[arg-type]
    return list(map(parse, values))  # type: ignore[arg-type]


def _checked_range(values: Column, low: object, high: object, column: ColumnSpec) -> Column:
    present = [v for v in values if v is not None] if None in values else values
    if present and (min(present) < low or max(present) > high):  # type: ignore[type-var,operator]
        raise _failed(column, f"outside the ClickHouse range {low} .. {high}")
    return values


# -- Date ------------------------------------------------------------------------------------------------


def _day_of(moment: datetime) -> date:
    """The day of a midnight moment (naive or UTC); any other time of day or offset is refused: ``Date``
    holds no time, and dropping it would change the value."""
    offset = moment.utcoffset()
    if moment.time() != time(0) or (offset is not None and offset != timedelta(0)):
        raise _BadValue("a time of day (or a UTC offset), which Date does not hold")
    return moment.date()


def _one_date(value: object) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _day_of(value)
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text)
            except ValueError:
                raise _BadValue("not an ISO date") from None
            return _day_of(moment)
    raise _BadValue(f"a {type(value).__name__} is not a date")


def iso_parses(text: str, *, date_only: bool) -> bool:
    """Whether the converters' parser reads ``text`` (stripped) as an ISO date (``date_only``: a date or a
    datetime, as :func:`dates` tries them) or an ISO datetime. The value audit asks this of every date or
    datetime text SQLite's functions accept but do not prove canonical, so the two never disagree on
    whether a text parses (what ``fromisoformat`` accepts grows with the Python version)."""
    text = text.strip()
    if date_only:
        try:
            date.fromisoformat(text)
            return True
        except ValueError:
            pass
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def dates(column: ColumnSpec) -> Converter:
    def convert(values: Column) -> Column:
        first = _first(values)
        out: Column
        try:
            if type(first) is date and all(type(v) is date for v in values if v is not None):
                out = values
            elif type(first) is str:
                try:
                    out = _map_present(date.fromisoformat, values)
                except (TypeError, ValueError):
                    out = [_one_date(v) for v in values]
            else:
                out = [_one_date(v) for v in values]
        except _BadValue as exc:
            raise _failed(column, str(exc)) from None
        return _checked_range(out, DATE_MIN, DATE_MAX, column)

    return convert


# -- DateTime --------------------------------------------------------------------------------------------


def _whole_second(moment: datetime) -> datetime:
    """The naive UTC moment; a fraction of a second is refused (``DateTime`` holds seconds, and dropping
    digits would change the value: a deliberate truncation is a CAST in ``source.query``)."""
    if moment.microsecond:
        raise _BadValue("sub-second digits, which DateTime does not hold")
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def _one_datetime(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _whole_second(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        try:
            return _whole_second(datetime.fromisoformat(value.strip()))
        except ValueError:
            raise _BadValue("not an ISO datetime") from None
    raise _BadValue(f"a {type(value).__name__} is not a datetime")


def datetimes(column: ColumnSpec) -> Converter:
    def convert(values: Column) -> Column:
        first = _first(values)
        try:
            if type(first) is str:
                try:
                    parsed = _map_present(datetime.fromisoformat, values)
                except (TypeError, ValueError):
                    out: Column = [_one_datetime(v) for v in values]
                else:
                    out = [
                        d if d is None or (d.tzinfo is None and not d.microsecond) else _whole_second(d)
                        for d in parsed
                    ]
            elif type(first) is datetime:
                out = [
                    v
                    if (type(v) is datetime and v.tzinfo is None and not v.microsecond) or v is None
                    else _one_datetime(v)
                    for v in values
                ]
            else:
                out = [_one_datetime(v) for v in values]
        except _BadValue as exc:
            raise _failed(column, str(exc)) from None
        return _checked_range(out, DATETIME_MIN, DATETIME_MAX, column)

    return convert


# -- Decimal ---------------------------------------------------------------------------------------------


#: Every decimal of at most 15 significant digits survives a round trip through a double (DBL_DIG), so a
#: float whose shortest form has at most 15 digits is that decimal exactly; one with 16 or 17 digits may
#: be the rounding of many decimals (or float arithmetic), and is refused.
_FLOAT_EXACT_DIGITS = 15


def decimal_fits(value: decimal.Decimal, precision: int, scale: int) -> bool:
    """``value`` is held exactly by ``Decimal(precision, scale)``: no digit past the scale, and fewer than
    ``precision - scale`` digits before the point."""
    if not value.is_finite():
        return False
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent < -scale:  # trailing zeros past the scale are not digits that would be lost
        significant = value.normalize(_DECIMAL_CONTEXT)
        exponent = significant.as_tuple().exponent
        if significant and exponent < -scale:  # type: ignore[operator]
            return False
    return abs(value) < _DECIMAL_CONTEXT.power(10, precision - scale)


def _float_decimal(value: float) -> decimal.Decimal | None:
    """The float's shortest decimal form when it has at most 15 significant digits, else ``None``."""
    parsed = decimal.Decimal(repr(value))
    return None if len(parsed.as_tuple().digits) > _FLOAT_EXACT_DIGITS else parsed


def float_fits(value: float, precision: int, scale: int) -> bool:
    """Whether :func:`decimals` takes the float ``value`` into ``Decimal(precision, scale)``. The value
    audit asks this of SQLite REALs of a decimal wider than 15 digits, where SQLite's ``round`` is not
    exact enough to decide."""
    parsed = _float_decimal(value)
    return parsed is not None and decimal_fits(parsed, precision, scale)


def decimals(column: ColumnSpec, precision: int, scale: int) -> Converter:
    """Decimals carried exactly or refused: a value with more digits than ``Decimal(p, s)`` holds (past
    the scale, or before the point) stops the read naming the column. Floats (SQLite REAL, the TDS
    emulator's DECIMAL) are taken at their shortest decimal form (``repr``) when it has at most 15
    significant digits, and refused otherwise: never rounded to fit."""
    Decimal = decimal.Decimal
    limit = _DECIMAL_CONTEXT.power(10, precision - scale)

    def one(value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool):
            raise _BadValue("a boolean is not a decimal")
        if isinstance(value, float):
            parsed = _float_decimal(value)
            if parsed is None:
                raise _BadValue("a binary float that is not exactly a decimal of 15 digits or fewer")
        elif isinstance(value, (int, Decimal)):
            parsed = Decimal(value)
        elif isinstance(value, str):
            try:
                parsed = _DECIMAL_CONTEXT.create_decimal(value.strip())
            except decimal.InvalidOperation:
                raise _BadValue("not a decimal number") from None
        else:
            raise _BadValue(f"a {type(value).__name__} is not a decimal")
        if not parsed.is_finite():
            raise _BadValue("not a finite number")
        if not decimal_fits(parsed, precision, scale):
            raise _BadValue(f"more digits than Decimal({precision}, {scale}) holds")
        return parsed

    fmt = f"%.{scale}f"

    def in_range(present: Column) -> bool:
        low, high = (min(present), max(present)) if present else (0, 0)  # type: ignore[type-var]
        try:
            return -limit < low and high < limit  # type: ignore[operator]
        except decimal.InvalidOperation:  # a NaN: the careful path refuses it as not finite
            return False

    def floats_at_scale(values: Column) -> Column | None:
        """A float column (SQLite REAL, the emulator) when every value is exactly its decimal at the
        scale: the scale's text must read back as the same double, and with at most 15 digits two decimals
        never share a double, so that text is the value's shortest form. ``None``: take the careful path."""
        texts = [None if v is None else fmt % v for v in values]
        if [None if t is None else float(t) for t in texts] != values:
            return None
        return [None if t is None else Decimal(t) for t in texts]

    def convert(values: Column) -> Column:
        present = [v for v in values if v is not None] if None in values else values
        kinds = set(map(type, present))
        try:
            if kinds <= {Decimal} and in_range(present):
                # the driver's own decimals (pymssql, Arrow artifacts: the column's own scale): bounded in C
                return values
            if kinds <= {float} and precision <= _FLOAT_EXACT_DIGITS and in_range(present):
                exact = floats_at_scale(values)
                if exact is not None:
                    return exact
            mixed = int_float_decimals(values, present, precision, scale)  # SQLite NUMERIC: ints and floats
            if mixed is not None:
                return mixed
            return [one(v) for v in values]
        except _BadValue as exc:
            raise _failed(column, str(exc)) from None

    return convert


# -- the rest --------------------------------------------------------------------------------------------


def flags(column: ColumnSpec) -> Converter:
    """0/1 integers for UInt8 flags (SQL Server ``bit``): ClickHouse 18.16 has no ``Bool``."""

    def convert(values: Column) -> Column:
        if set(map(type, values)) <= {int, _NONE_TYPE} and set(values) <= _FLAG_VALUES:
            return values
        out = [int(v) if type(v) is bool or (type(v) is float and v.is_integer()) else v for v in values]
        if not set(out) <= _FLAG_VALUES or not set(map(type, out)) <= {int, _NONE_TYPE}:
            raise _failed(column, "not a 0/1 flag")
        return out

    return convert


_FLAG_VALUES = frozenset({0, 1, None})
_NONE_TYPE = type(None)
_INTEGER_RANGES = {
    f"{kind}{bits}": ((0, 2**bits - 1) if kind == "UInt" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    for kind in ("Int", "UInt")
    for bits in (8, 16, 32, 64)
}


def integers(column: ColumnSpec) -> Converter:
    """Integers only, within the type's range: SQLite keeps ``1.5``, ``''`` or ``'abc'`` in an INTEGER
    column as they are, and a cast would turn them into 1 and 0 without a word."""
    low, high = _INTEGER_RANGES[column.clickhouse_type]

    def convert(values: Column) -> Column:
        kinds = set(map(type, values))
        if not kinds <= {int, _NONE_TYPE}:
            raise _failed(column, "not an integer")
        if _NONE_TYPE not in kinds and values:  # no NULL: skip the scan for one that _checked_range does
            if min(values) < low or max(values) > high:  # type: ignore[type-var,operator]
                raise _failed(column, f"outside the ClickHouse range {low} .. {high}")
            return values
        return _checked_range(values, low, high, column)

    return convert


def floats(column: ColumnSpec) -> Converter:
    """Numbers only: integers become floats when a double holds them exactly; text (SQLite keeps ``''``
    in a REAL column as text) and integers beyond 2**53 are refused, never guessed."""

    def one(value: object) -> object:
        if value is None or type(value) is float:
            return value
        if type(value) is bool or (type(value) is int and -(2**53) <= value <= 2**53):
            return float(value)
        raise _BadValue("not a number a Float64 holds exactly")

    def convert(values: Column) -> Column:
        if set(map(type, values)) <= {float, _NONE_TYPE}:
            return values
        try:
            return [one(v) for v in values]
        except _BadValue as exc:
            raise _failed(column, str(exc)) from None

    return convert


def _one_text(value: object) -> object:
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, time):
        return value.isoformat()
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def texts(column: ColumnSpec) -> Converter:
    """Text stays text and binary stays bytes; anything else (SQL Server ``time``, untyped SQLite
    expressions) becomes its string form."""

    def convert(values: Column) -> Column:
        return [v if type(v) is str else _one_text(v) for v in values]

    return convert


def coarse_binaries(column: ColumnSpec) -> Converter:
    """``texts`` for a coarse description's BINARY family, refusing ``time`` and datetime values: the
    driver has already cut them to microseconds and nothing says whether a seventh digit was there. The
    pre-arm audit names such a column first (``value_audit.UNKNOWN_PRECISION``); this is the last line."""

    def convert(values: Column) -> Column:
        if any(issubclass(kind, (time, datetime)) for kind in {type(v) for v in values}):
            raise _failed(column, "a date/time value of unknown precision")
        return [_one_text(v) for v in values]

    return convert


def uuids(column: ColumnSpec) -> Converter:
    """Canonical lowercase text (``6f9619ff-8b86-d011-b42d-00c04fc964ff``): clickhouse-connect writes it to
    ``UUID`` as is, and an Arrow artifact can hold it as a string, which it cannot do with ``uuid.UUID``."""

    def one(value: object) -> object:
        if value is None:
            return None
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, bytes) and len(value) == 16:
            return str(uuid.UUID(bytes_le=value))
        if isinstance(value, str):
            return str(uuid.UUID(value.strip()))
        raise ValueError("not a uuid")

    def convert(values: Column) -> Column:
        try:
            return [one(v) for v in values]
        except ValueError:
            raise _failed(column, "not a UUID") from None

    return convert


def converter_for(column: ColumnSpec, *, coerce: bool = False) -> Converter | None:
    """The converter a column needs, or ``None`` when its driver values pass through unchanged.

    ``coerce``: the driver may return other Python types than the declared type implies (a coarse
    description, SQLite's dynamic typing, SQL Server ``time``), so ``String`` columns are converted
    defensively and integer and float columns are checked (a set of the value types: cheap) and refused
    when a value is not what the declared type holds. Without it (a server that enforces its types),
    integers, floats and text pass through untouched.
    """
    base = column.clickhouse_type
    if base == "Date":
        return dates(column)
    if base == "DateTime":
        return datetimes(column)
    if base.startswith("Decimal("):
        precision, scale = (int(part) for part in base[len("Decimal(") : -1].split(","))
        return decimals(column, precision, scale)
    if base == "UUID":
        return uuids(column)
    if base == "UInt8" and (coerce or (column.source_type or "").lower().startswith(("bit", "bool"))):
        return flags(column)
    if base in _INTEGER_RANGES and coerce:
        return integers(column)
    if base == "String" and column.source_type == COARSE_BINARY:
        return coarse_binaries(column)
    if base == "String" and coerce:
        return texts(column)
    if base in ("Float64", "Float32") and coerce:
        return floats(column)
    return None
