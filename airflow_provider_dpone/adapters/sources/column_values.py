"""Column-wise value conversion: driver values -> the Python types the declared ClickHouse type takes.

This is the hot path, so each converter works on a whole column: it picks a specialised loop from the
first non-NULL value's type, and columns that need nothing (integers, floats, text) are passed through
untouched. Only when the fast loop meets an unexpected value does it fall back to the careful per-value
path, which accepts every shape the drivers produce (SQLite ISO text, pymssql's ``date``/``Decimal``, the
TDS emulator's ``datetime``/``float``) and otherwise raises ``source_read_failed`` naming the column.

Conventions (what sinks and artifact writers can rely on):
- ``Date`` -> ``datetime.date``; ``DateTime`` -> naive ``datetime.datetime`` at whole seconds (ClickHouse
  ``DateTime`` holds seconds; aware values are converted to UTC first, then made naive);
- ``Decimal(p, s)`` -> ``decimal.Decimal`` (floats are rounded to ``s`` digits via their decimal text);
- ``UInt8`` flags (``bit``, SQLite ``BOOLEAN``) -> ``int`` 0/1 (pyarrow refuses ``bool`` for uint8);
- ``UUID`` -> canonical lowercase ``str``; ``String`` -> ``str`` or, for binary columns, raw ``bytes``.
Values outside what ClickHouse ``Date``/``DateTime`` can hold fail loudly instead of wrapping.
"""

from __future__ import annotations

import decimal
import uuid
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timezone
from typing import TypeVar

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


def _one_date(value: object) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text)
        except ValueError:
            try:
                return datetime.fromisoformat(text).date()
            except ValueError:
                raise _BadValue("not an ISO date") from None
    raise _BadValue(f"a {type(value).__name__} is not a date")


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
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.replace(microsecond=0) if moment.microsecond else moment


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


def decimals(column: ColumnSpec, scale: int) -> Converter:
    """Decimals kept exact; floats (SQLite REAL, the emulator's DECIMAL) rounded at the column's scale."""
    fmt = f"%.{scale}f"
    Decimal = decimal.Decimal

    def one(value: object) -> object:
        if value is None or type(value) is Decimal:
            return value
        if isinstance(value, bool):
            raise _BadValue("a boolean is not a decimal")
        if isinstance(value, float):
            return Decimal(fmt % value)
        if isinstance(value, int):
            return Decimal(value)
        if isinstance(value, Decimal):
            return value
        if isinstance(value, str):
            try:
                parsed = _DECIMAL_CONTEXT.create_decimal(value.strip())
            except decimal.InvalidOperation:
                raise _BadValue("not a decimal number") from None
            if not parsed.is_finite():
                raise _BadValue("not a finite number")
            return parsed
        raise _BadValue(f"a {type(value).__name__} is not a decimal")

    def convert(values: Column) -> Column:
        first = _first(values)
        try:
            if type(first) is str and None not in values:
                try:  # decimal text (a TDS 7.1 server, SQLite TEXT): parse it all in C
                    return list(map(Decimal, values))  # type: ignore[arg-type]
                except (TypeError, ValueError, decimal.InvalidOperation):
                    pass
            return [Decimal(fmt % v) if type(v) is float else None if v is None else one(v) for v in values]
        except _BadValue as exc:
            raise _failed(column, str(exc)) from None

    return convert


# -- the rest --------------------------------------------------------------------------------------------


def flags(column: ColumnSpec) -> Converter:
    """0/1 integers for UInt8 flags (SQL Server ``bit``): ClickHouse 18.16 has no ``Bool``."""

    def convert(values: Column) -> Column:
        try:
            return [v if v is None or type(v) is int else int(v) for v in values]  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise _failed(column, "not a 0/1 flag") from None

    return convert


def floats(column: ColumnSpec) -> Converter:
    """Only for columns whose driver may hand back integers or booleans (coarse descriptions)."""

    def convert(values: Column) -> Column:
        try:
            return [v if v is None or type(v) is float else float(v) for v in values]  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise _failed(column, "not a number") from None

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
    description, an untyped SQLite expression, SQL Server ``time``), so ``String`` and ``Float`` columns
    are converted defensively too. Without it, integers, floats and text pass through untouched.
    """
    base = column.clickhouse_type
    if base == "Date":
        return dates(column)
    if base == "DateTime":
        return datetimes(column)
    if base.startswith("Decimal("):
        scale = int(base[len("Decimal(") : -1].split(",")[1])
        return decimals(column, scale)
    if base == "UUID":
        return uuids(column)
    if base == "UInt8" and (coerce or (column.source_type or "").lower().startswith(("bit", "bool"))):
        return flags(column)
    if base == "String" and coerce:
        return texts(column)
    if base in ("Float64", "Float32") and coerce:
        return floats(column)
    return None
