"""Column-at-once Native encoding for the types that dominate clickhouse-connect's insert CPU time.

clickhouse-connect encodes ``Decimal`` values one at a time as ``int(Decimal(str(x)) * 10**scale)`` (about
1.7 µs a value here) and ``Date`` as ``(x - epoch).days`` in comprehensions. The subclasses here produce
exactly the same integers (same arithmetic, same decimal context, same NULL placeholders) through ``map``
over C-level methods: about 3.5x faster for Decimal, 3x for Date (measured per 1M values; see
docs/performance.md). They are used only when the values are the types dpone's chunks carry
(``decimal.Decimal``, ``date``); anything else falls back to clickhouse-connect's own encoder, and so does
any clickhouse-connect whose internals differ from what this module was written against (checked once,
at import, by :data:`AVAILABLE`).

``DateTime`` columns are handed over as epoch seconds computed here (:func:`insert_columns`): a naive
datetime is a UTC wall time, whatever the process time zone.

Columns a source holds as Arrow (:class:`ArrowColumn`) reach the encoders as the integers Native stores,
taken from the Arrow arrays in C: ``Date`` days, ``DateTime`` epoch seconds, and a ``Decimal``'s unscaled
integers (:class:`UnscaledInts`, which :class:`FastDecimal` writes as they are): no Python ``date``,
``datetime`` or ``Decimal`` is built for them (ClickHouse 18.16 has no Arrow input format).

:func:`value_limits` is the calendar range each server version holds exactly (the source's value audit
refuses anything outside it before arming).
"""

from __future__ import annotations

import decimal
import logging
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import pyarrow as pa
from clickhouse_connect.datatypes.registry import get_from_name

from airflow_provider_dpone.adapters.clickhouse.type_names import base_type, ticks_per_second
from airflow_provider_dpone.adapters.sources.arrow_column import ArrowColumn
from airflow_provider_dpone.ports.source import ValueLimits

log = logging.getLogger(__name__)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()

#: Current engines (measured on chDB 26.9): the full UInt16 day and UInt32 second ranges.
MODERN_LIMITS = ValueLimits(
    date_min=date(1970, 1, 1),
    date_max=date(2149, 6, 6),
    datetime_min=datetime(1970, 1, 1),
    datetime_max=datetime(2106, 2, 7, 6, 28, 15),
)
#: Measured on the 18.16.1 server: a ``Date`` after 2106-02-07 or a ``DateTime`` from 2106-02-07 00:00:00
#: is stored as sent, but ``toString``, ``toYYYYMM`` (partition keys) and every date function read it as
#: 1970-01-01: the value is unusable, so it is refused.
LEGACY_LIMITS = ValueLimits(
    date_min=date(1970, 1, 1),
    date_max=date(2106, 2, 7),
    datetime_min=datetime(1970, 1, 1),
    datetime_max=datetime(2106, 2, 6, 23, 59, 59),
)
#: The first major version given the modern range. Only 18.16 and current engines were measured; the
#: versions between are given the narrower range (refusing a usable value is safe, storing a broken one is not).
MODERN_FROM_MAJOR = 22


def value_limits(server_version: str | None) -> ValueLimits:
    """The calendar range of a server by its version string (``18.16.1``, ``26.9.2.1``); an unreadable
    version gets the narrower range."""
    major = (server_version or "").split(".", 1)[0]
    if major.isdigit() and int(major) >= MODERN_FROM_MAJOR:
        return MODERN_LIMITS
    return LEGACY_LIMITS


try:  # the internals the subclasses rely on; absent or changed -> the stock encoders are used
    from clickhouse_connect.datatypes.numeric import Decimal as _StockDecimal
    from clickhouse_connect.datatypes.temporal import Date as _StockDate
    from clickhouse_connect.driver.common import write_array

    AVAILABLE = all(hasattr(cls, "_write_column_binary") for cls in (_StockDecimal, _StockDate)) and all(
        hasattr(_StockDecimal, slot) for slot in ("prec", "scale", "_mult", "_array_type")
    )
except ImportError:  # pragma: no cover - depends on the installed clickhouse-connect
    AVAILABLE = False


class UnscaledInts(list[Any]):
    """A ``Decimal`` column already as its unscaled integers (value * 10**scale, ``None`` for NULL), for
    :class:`FastDecimal` of the same scale; never handed to any other encoder. A slice stays one:
    clickhouse-connect cuts a large insert into blocks by slicing every column (a plain ``list`` slice
    would reach the encoder as integers to be scaled again)."""

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        return UnscaledInts(got) if isinstance(index, slice) else got


if AVAILABLE:

    class FastDecimal(_StockDecimal, registered=False):
        """``Decimal(P, S)`` up to 64 bits: ``int(x * 10**S)`` for a whole column at once."""

        def _write_column_binary(self, column: Sequence[Any], dest: bytearray, ctx: Any) -> None:
            if type(column) is UnscaledInts:  # from an ArrowColumn of this very scale (native_column)
                ints = [0 if v is None else v for v in column] if self.nullable and None in column else column
                write_array(self._array_type, ints, dest, ctx.column_name)
                return
            values = [0 if v is None else v for v in column] if self.nullable and None in column else column
            with decimal.localcontext() as dec_ctx:
                dec_ctx.prec = self.prec  # the context the stock encoder multiplies in
                scale = decimal.Decimal(self._mult)
                try:
                    scaled = list(map(int, map(scale.__mul__, values)))
                except TypeError:  # a float, str or other value: Decimal * it is NotImplemented
                    super()._write_column_binary(column, dest, ctx)
                    return
            write_array(self._array_type, scaled, dest, ctx.column_name)

    class FastDate(_StockDate, registered=False):
        """``Date``: days since 1970-01-01 from ``toordinal`` (equal to ``(x - epoch).days``)."""

        def _write_column_binary(self, column: Sequence[Any], dest: bytearray, ctx: Any) -> None:
            ordinal, epoch = date.toordinal, _EPOCH_ORDINAL
            try:
                if self.nullable and None in column:
                    days = [0 if v is None else ordinal(v) - epoch for v in column]
                else:
                    days = [o - epoch for o in map(ordinal, column)]
            except TypeError:  # ints (already days) or another type: the stock encoder decides
                super()._write_column_binary(column, dest, ctx)
                return
            write_array(self._array_type, days, dest, ctx.column_name)


_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)


def _one_utc_second(value: Any) -> Any:
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is not None:
        return int(value.timestamp())
    return (value - _EPOCH) // _SECOND


def utc_seconds(values: Sequence[Any]) -> list[Any]:
    """``DateTime`` values as epoch seconds, a naive datetime read as a UTC wall time (NULLs kept).

    clickhouse-connect would call ``datetime.timestamp()``, which reads a naive value in the process's
    time zone: under ``TZ=America/New_York`` a DST-gap ``02:30`` moved by an hour and every value by the
    zone's offset. Handing it integers (which it writes as they are) makes the process zone irrelevant.
    """
    epoch, second = _EPOCH, _SECOND
    try:
        if None in values:
            return [None if v is None else (v - epoch) // second for v in values]
        return [(v - epoch) // second for v in values]
    except TypeError:  # aware values or integers already: the careful path
        return [_one_utc_second(v) for v in values]


def _is_datetime(type_name: str) -> bool:
    """``DateTime`` or ``DateTime('zone')``, not ``DateTime64`` (which holds sub-second ticks)."""
    base = base_type(type_name)
    return base == "DateTime" or base.startswith("DateTime(")


def _decimal_of(type_name: str) -> tuple[int, int] | None:
    base = base_type(type_name)
    if not base.startswith("Decimal(") or not base.endswith(")"):
        return None
    precision, _, scale = base[len("Decimal(") : -1].partition(",")
    try:
        return int(precision), int(scale)
    except ValueError:
        return None


def native_column(type_name: str, column: ArrowColumn, encoder: Any = None) -> Sequence[Any]:
    """What the encoder of ``type_name`` writes from an Arrow column: the integers Native stores where the
    types match exactly, otherwise the column's Python values (the stock encoders then decide). Unscaled
    decimals only for a :class:`FastDecimal` ``encoder`` of the same scale."""
    kind = column.array.type
    if pa.types.is_date32(kind) and base_type(type_name) in ("Date", "Date32"):
        return column.array.cast(pa.int32()).to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_timestamp(kind) and kind.unit == "s" and kind.tz is None:
        if _is_datetime(type_name):
            return column.array.cast(pa.int64()).to_pylist()  # type: ignore[no-any-return]
        ticks = ticks_per_second(type_name)
        if ticks is not None:
            return in_ticks(column.array.cast(pa.int64()).to_pylist(), ticks)
    target = _decimal_of(type_name)
    if (
        AVAILABLE
        and type(encoder) is FastDecimal
        and pa.types.is_decimal(kind)
        and column.unscaled is not None
        and target is not None
        and target[1] == kind.scale == encoder.scale
    ):
        return UnscaledInts(column.unscaled.to_pylist())
    values = column.values()
    return one_text_kind(values) if _is_text(type_name) else values


def insert_columns(
    type_names: Sequence[str], columns: Sequence[Sequence[Any]], encoders: Sequence[Any] | None = None
) -> list[Sequence[Any]]:
    """The columns of one insert with every ``DateTime`` column as UTC epoch seconds (others untouched)
    and every Arrow column as what its encoder (``encoders[i]``, the context's types) writes
    (:func:`native_column`)."""
    chosen: Sequence[Any] = encoders if encoders is not None else [None] * len(type_names)
    return [
        native_column(name, values, encoder)
        if isinstance(values, ArrowColumn)
        else utc_seconds(values)
        if _is_datetime(name)
        else in_ticks(utc_seconds(values), ticks)
        if (ticks := ticks_per_second(name)) is not None
        else one_text_kind(values)
        if _is_text(name)
        else values
        for name, values, encoder in zip(type_names, columns, chosen, strict=True)
    ]


def _is_text(type_name: str) -> bool:
    base = base_type(type_name)
    return base == "String" or base.startswith("FixedString(")


def one_text_kind(values: Sequence[Any]) -> Sequence[Any]:
    """A text column's values all ``bytes`` when some are: clickhouse-connect's encoder picks str or bytes
    from the first value and fails on the other (SQLite keeps a blob as stored in a TEXT column, and the
    source hands it over as bytes). On a target type without an Arrow form (``LowCardinality(String)`` on
    the server, a zoned ``DateTime`` beside it) that failure came inside the target call, after part of
    the rows were written: the route blocked. Text becomes its UTF-8 bytes, which is what the column
    stores either way."""
    if bytes not in set(map(type, values)):  # a third of the cost of an isinstance scan
        return values
    return [value.encode("utf-8") if isinstance(value, str) else value for value in values]


def in_ticks(seconds: Sequence[Any], ticks: int) -> list[Any]:
    """Epoch seconds as ``DateTime64`` ticks (``ticks`` per second), NULLs kept. clickhouse-connect writes
    integers as they are; a naive datetime it would turn into ticks in the process's time zone."""
    return [None if s is None else s * ticks for s in seconds]


def column_types(type_names: Sequence[str]) -> list[Any]:
    """clickhouse-connect type objects for an insert, with the fast encoders where they apply."""
    types: list[Any] = [get_from_name(name) for name in type_names]
    if not AVAILABLE:
        return types
    out: list[Any] = []
    for stock in types:
        fast: Any = stock
        try:
            if type(stock) is _StockDecimal:
                fast = FastDecimal(stock.type_def, stock.prec, stock.byte_size * 8, stock.scale)
            elif type(stock) is _StockDate:
                fast = FastDate.build(stock.type_def)
        except Exception:  # a constructor that changed shape: keep the stock encoder
            log.debug("fast encoder unavailable for %s", stock.name, exc_info=True)
            fast = stock
        if fast is not stock and fast.name != stock.name:
            fast = stock  # the Native header must carry exactly the stock type name
        out.append(fast)
    return out
