"""Partition bounds -> ClickHouse predicates with typed literals.

``RANGE`` is ``lower <= column < upper`` (either side may be open), ``VALUES`` is ``column IN (...)`` and
``ALL`` has no predicate. Literals are typed by ``bounds.value_type`` so comparisons never depend on
implicit string conversion. A malformed bound raises :class:`BoundsError` before any statement is sent.

Time is explicit UTC end to end: a naive datetime (a bound, or a value in a chunk) is a UTC wall time,
and a ``DateTime`` literal is its epoch second, so no process or server time zone changes which rows a
predicate selects. Day and month bounds are dates; on a ``DateTime`` column they are written in the
column's own type (the epoch second of UTC midnight). ClickHouse 18.16 compares a DateTime with a
``toDate(...)`` numerically (day number against seconds), so a date literal would match nothing there
and a ``replace_partition`` re-run would delete nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time, timezone

from airflow_provider_dpone.adapters.bounds_sql import bounds_condition, finite_number, merge_adjacent
from airflow_provider_dpone.adapters.clickhouse.quoting import quote_identifier, quote_string
from airflow_provider_dpone.adapters.clickhouse.type_names import base_type
from airflow_provider_dpone.contracts.partition import PartitionBounds


class BoundsError(ValueError):
    """Bounds that cannot be expressed as a predicate. The reason never repeats the value."""


def _is_datetime(type_name: str | None) -> bool:
    return type_name is not None and base_type(type_name).startswith("DateTime")


def _is_text(type_name: str | None) -> bool:
    """A ``String`` column holding calendar text: a day partition on ``datetime(ts) AS ts`` (what the
    sources guide advises for offsets) arrives as ``String``, and a ``toDate(...)`` literal cannot be
    compared with it (no supertype): counts failed on every later run and a replace's delete blocked the
    route. The source selected the rows by comparing the text with the bound; so does the target."""
    return type_name is not None and (
        base_type(type_name) == "String" or base_type(type_name).startswith("FixedString(")
    )


def utc_epoch(moment: datetime) -> int:
    """Whole epoch seconds of ``moment``; a naive datetime is a UTC wall time (never the process zone)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp())


def literal(value: str, value_type: str, column_type: str | None = None) -> str:
    """One typed literal. ``datetime`` bounds (and date bounds on a ``DateTime`` column) become epoch
    seconds of a UTC wall time, exactly as the sink encodes the naive datetimes it inserts
    (:func:`utc_epoch`), so a predicate selects precisely the rows this client wrote. On a text column
    (:func:`_is_text`) a calendar bound, once parsed as ISO, stays the text the source compared."""
    if value_type == "integer":
        try:
            return str(int(value.strip()))
        except ValueError:
            raise BoundsError("integer bound is not an integer") from None
    if value_type == "date":
        try:
            parsed = date.fromisoformat(value.strip())
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.strip()).date()
            except ValueError:
                raise BoundsError("date bound is not an ISO date") from None
        if _is_text(column_type):
            return quote_string(value)
        if _is_datetime(column_type):
            return f"toDateTime({utc_epoch(datetime.combine(parsed, time()))})"
        return f"toDate({quote_string(parsed.isoformat())})"
    if value_type == "datetime":
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BoundsError("datetime bound is not an ISO datetime") from None
        if _is_text(column_type):
            return quote_string(value)
        return f"toDateTime({utc_epoch(moment)})"
    if _is_number(column_type):
        # a listed value of a Decimal or float column, as the source compared it: the number (the engine
        # cannot read `` 10.5`` as a Decimal, and a replace's delete failed inside the target call)
        try:
            number = finite_number(value)
        except ValueError:
            raise BoundsError("a number column's value is not a finite number") from None
        if base_type(column_type or "").startswith("Float"):
            # -0 listed: 0.0 (member adds -0.0 beside it)
            return _float_bits(float(number) or 0.0, single=base_type(column_type or "") == "Float32")
        return quote_string(format(number, "f"))
    return quote_string(value)


def _float_bits(value: float, *, single: bool = False) -> str:
    """The float ``value`` exactly, as its IEEE-754 bits (``single``: a ``Float32`` column, which holds the
    value rounded to single precision, as SQL Server's ``real`` compares a listed text: a Float64 pattern
    matched none of its rows, and each replace appended them again). 18.16 reads a quoted number as a
    Decimal only (``c IN ('10.5')`` on a Float64 column failed inside a replace's delete, the route blocked),
    parses some texts to a neighbouring double (``toFloat64('2.994')`` missed the rows it had stored: each
    run appended them again), and refuses a subnormal literal. A listed zero is ``0.0``; ``member`` adds
    ``-0.0``."""
    if single:
        try:
            packed = struct.pack("<f", value)
        except OverflowError:
            raise BoundsError("a Float32 column's value is outside its range") from None
        return f"reinterpretAsFloat32(unhex('{packed.hex()}'))"
    return f"reinterpretAsFloat64(unhex('{struct.pack('<d', value).hex()}'))"


def _is_zero(value: str) -> bool:
    try:
        return float(finite_number(value)) == 0
    except ValueError:
        return False


def _is_number(type_name: str | None) -> bool:
    return type_name is not None and base_type(type_name).startswith(("Decimal", "Float"))


ColumnTypes = Mapping[str, str]


class ClickHouseBounds:
    """ClickHouse's half of :func:`~airflow_provider_dpone.adapters.bounds_sql.bounds_condition`: literals in
    the bound column's own type (``column_types``: name -> ClickHouse type). The target reader passes its
    own stricter identifier quoting and literal validation."""

    def __init__(
        self,
        column_types: ColumnTypes | None = None,
        *,
        quote: Callable[[str], str] = quote_identifier,
        render: Callable[[str, str, str | None], str] = literal,
    ) -> None:
        self._types = column_types or {}
        self._quote = quote
        self._render = render

    def compare(self, column: str, operator: str, value: str, value_type: str) -> str:
        return f"{self._quote(column)} {operator} {self._render(value, value_type, self._types.get(column))}"

    def all_of(self, parts: Sequence[str]) -> str:
        return " AND ".join(parts)

    def member(self, column: str, values: Sequence[str], value_type: str) -> str:
        column_type = self._types.get(column)
        rendered = [self._render(v, value_type, column_type) for v in values]
        if base_type(column_type or "").startswith("Float") and any(_is_zero(v) for v in values):
            # IN compares a float's bits, = its value: a listed 0 selects -0.0 in a source (SQL equality)
            # and missed it in the target's delete (each run appended those rows again)
            rendered.append(_float_bits(-0.0, single=base_type(column_type or "") == "Float32"))
        return f"{self._quote(column)} IN ({', '.join(rendered)})"

    def nothing(self) -> str:
        return "0"  # an empty list selects nothing

    def invalid(self, reason: str) -> Exception:
        return BoundsError(reason)


def predicate(bounds: PartitionBounds, column_types: ColumnTypes | None = None) -> str | None:
    """The WHERE condition selecting one partition, or ``None`` for ``ALL``.

    ``column_types`` (name -> ClickHouse type) lets bounds be written in the column's own type."""
    return bounds_condition(bounds, ClickHouseBounds(column_types))


def any_of(all_bounds: Sequence[PartitionBounds], column_types: ColumnTypes | None = None) -> str | None:
    """One condition covering several partitions (``None`` when any of them is the whole table).

    Used to delete every armed partition with a single mutation instead of one per partition.
    """
    conditions: list[str] = []
    for bounds in all_bounds:
        condition = predicate(bounds, column_types)
        if condition is None:
            return None
        conditions.append(f"({condition})")
    if not conditions:
        return "0"
    return " OR ".join(conditions)


#: The most ranges one delete statement names. A replacing run deletes every armed partition's rows; as one
#: ``OR`` of 4,000 day ranges the statement was 328,000 characters, past the server's ``max_query_size``
#: (262,144 by default; chDB first refuses its AST: ``max_ast_elements``, 50,000), and the run failed inside
#: the target call on every retry. 100 ranges are ~8 KB and ~700 AST elements; measured on chDB, deleting
#: 1,200 separate days took 2.1 s in statements of 100 ranges, 2.7 s of 250 and 7.7 s of 500 (the engine's
#: index analysis of one long ``OR`` grows faster than its length).
RANGES_PER_DELETE = 100


def _ordered(low: str | None, high: str | None, value_type: str) -> bool:
    """``low <= high`` as the typed literals compare (``False`` for text, an open side, or a bound that does
    not parse)."""
    if low is None or high is None:
        return False
    try:
        if value_type == "integer":
            return int(low) <= int(high)
        if value_type == "date":
            return (
                date.fromisoformat(low[:10]) <= date.fromisoformat(high[:10]) and len(low) == len(high) == 10
            )
        if value_type == "datetime":
            return datetime.fromisoformat(low) <= datetime.fromisoformat(high)
    except ValueError:
        return False
    return False


def adjacent_merged(all_bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
    """The same rows as the union of ``all_bounds``, with each run of adjacent ranges (``[a, b)`` then
    ``[b, c)`` on one column and value type, ``a <= b <= c``) as one range ``[a, c)``: consecutive days are
    one range however many there are. Lists, open-ended and text ranges stay as they are."""
    return merge_adjacent(all_bounds, _ordered)


def delete_conditions(
    all_bounds: Sequence[PartitionBounds], column_types: ColumnTypes | None = None
) -> list[str] | None:
    """The conditions of the statements that delete the rows of ``all_bounds`` (``None``: the whole table):
    adjacent ranges merged (:func:`adjacent_merged`), at most :data:`RANGES_PER_DELETE` in each."""
    merged = adjacent_merged(all_bounds)
    conditions: list[str] = []
    for start in range(0, len(merged), RANGES_PER_DELETE):
        condition = any_of(merged[start : start + RANGES_PER_DELETE], column_types)
        if condition is None:
            return None
        conditions.append(condition)
    return conditions or ["0"]


def where_clause(bounds: PartitionBounds | None, column_types: ColumnTypes | None = None) -> str:
    condition = predicate(bounds, column_types) if bounds is not None else None
    return f" WHERE {condition}" if condition is not None else ""
