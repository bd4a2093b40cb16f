"""Partition planning shared by every source: manifest partitioning + a few source queries -> bounds.

The functions here are pure; each source supplies the handful of queries they need through a
:class:`PartitionProbe` (its own dialect). Only partitions that actually hold rows are planned: one
``SELECT DISTINCT`` of the truncated value is cheaper than moving and checkpointing empty partitions.
Rows whose partition value is NULL (or, on SQLite, not ISO text) would fall into no partition, so
planning refuses them instead of silently leaving them behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Protocol

from airflow_provider_dpone.adapters.bounds_sql import FixedReason, finite_number
from airflow_provider_dpone.adapters.sources.table_names import canonical_source_table
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema, require_column

ALL_LABEL = "all"

#: ClickHouse base types a partition column may have, per partitioning kind.
_CALENDAR_TYPES = ("Date", "DateTime", "String")
_INTEGER_TYPES = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64")


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """One scan of the partition column: row count, rows no partition could select, min and max."""

    rows: int
    unplaceable: int
    lower: object | None
    upper: object | None


class PartitionProbe(Protocol):
    """The per-source queries planning needs (each one statement, read-only)."""

    def column_stats(self, column: ColumnSpec, kind: PartitionKind) -> ColumnStats: ...

    def distinct_days(self, column: ColumnSpec) -> list[date]: ...

    def distinct_months(self, column: ColumnSpec) -> list[tuple[int, int]]: ...

    def distinct_range_starts(self, column: ColumnSpec, size: int) -> list[int]: ...


def read_definition(spec: SourceSpec) -> ReadDefinition:
    """The read definition (canonical table, query, columns, source type): not bounds, not the connection,
    so re-pointing a route at a replica or respelling its table keeps its partition IDs."""
    return _definition(spec, canonical_source_table(spec.type, spec.table))


def read_definition_hash(spec: SourceSpec) -> str:
    """``sha256:`` over :func:`read_definition`: the route's ``query_hash``."""
    return read_definition(spec).query_hash()


def legacy_read_definition_hash(spec: SourceSpec, table: str) -> str:
    """The hash releases before canonical table names computed (over the table as written): checkpoints
    they wrote are still matched, so an upgrade neither re-runs committed partitions nor hides guards."""
    return _definition(spec, table).query_hash()


def _definition(spec: SourceSpec, table: str) -> ReadDefinition:
    columns = tuple(spec.columns) if spec.columns is not None else None
    return ReadDefinition(source_type=spec.type.value, table=table, query=spec.query, columns=columns)


def partition_column(partitioning: Partitioning, schema: TableSchema) -> ColumnSpec | None:
    """The partition column as the source describes it; a manifest naming an unknown or unsuitable
    column is a usage error, raised before any partition query runs."""
    if partitioning.kind is PartitionKind.NONE:
        return None
    name = partitioning.column or ""
    column = require_column(schema, "source.partitioning.column", name)
    kind = partitioning.kind
    if kind in (PartitionKind.DAY, PartitionKind.MONTH) and column.clickhouse_type not in _CALENDAR_TYPES:
        raise DponeError(
            ErrorCode.MANIFEST_INVALID,
            f"{kind.value} partitioning needs a date or datetime column; {name!r} is {column.clickhouse_type}",
            details={"column": name, "partitioning": kind.value, "clickhouse_type": column.clickhouse_type},
        )
    if kind is PartitionKind.INTEGER_RANGE and column.clickhouse_type not in _INTEGER_TYPES:
        raise DponeError(
            ErrorCode.MANIFEST_INVALID,
            f"integer_range partitioning needs an integer column; {name!r} is {column.clickhouse_type}",
            details={"column": name, "partitioning": kind.value, "clickhouse_type": column.clickhouse_type},
        )
    return column


def plan(partitioning: Partitioning, schema: TableSchema, probe: PartitionProbe) -> list[PartitionBounds]:
    """Bounds of every partition that holds rows, in ascending (or manifest list) order."""
    column = partition_column(partitioning, schema)
    if column is None:
        return [all_rows()]
    kind = partitioning.kind
    if kind is PartitionKind.LIST:
        return list_partitions(column, partitioning.values or ())
    stats = probe.column_stats(column, kind)
    if stats.unplaceable:
        raise DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"partition column {column.name!r} has {stats.unplaceable} rows that no {kind.value} partition "
            "would select (NULL or not a valid value); filter them in the source query or pick another column",
            details={
                "column": column.name,
                "partitioning": kind.value,
                "unplaceable_rows": stats.unplaceable,
            },
        )
    if stats.rows == 0:
        return []
    if kind is PartitionKind.DAY:
        return day_partitions(column.name, probe.distinct_days(column))
    if kind is PartitionKind.MONTH:
        return month_partitions(column.name, probe.distinct_months(column))
    size = partitioning.size or 0
    return integer_range_partitions(column.name, probe.distinct_range_starts(column, size), size)


def all_rows() -> PartitionBounds:
    return PartitionBounds(kind=BoundsKind.ALL, label=ALL_LABEL)


def _calendar_end(column: str) -> DponeError:
    """A value in the calendar's last day or month (9999-12-31): no partition can end after it. Refused
    before anything is written, naming the column (no target holds such a value either)."""
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"partition column {column!r} holds values in the calendar's last day or month, which no partition "
        "can end after (no ClickHouse date type holds them either)",
        details={"column": column, "reason": "partition_bound_outside_target_range"},
        hint_lines=(
            "nothing was written and no checkpoint recorded: the route is not blocked",
            "map or filter such placeholder values (9999-12-31) in source.query",
        ),
    )


def day_partitions(column: str, days: Sequence[date]) -> list[PartitionBounds]:
    if any(day == date.max for day in days):
        raise _calendar_end(column)
    return [
        PartitionBounds(
            kind=BoundsKind.RANGE,
            column=column,
            lower=day.isoformat(),
            upper=(day + timedelta(days=1)).isoformat(),
            value_type="date",
            label=f"{column}={day.isoformat()}",
        )
        for day in sorted(set(days))
    ]


def month_partitions(column: str, months: Sequence[tuple[int, int]]) -> list[PartitionBounds]:
    if any(year == date.max.year and month == 12 for year, month in months):
        raise _calendar_end(column)
    bounds = []
    for year, month in sorted(set(months)):
        first = date(year, month, 1)
        following = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
        bounds.append(
            PartitionBounds(
                kind=BoundsKind.RANGE,
                column=column,
                lower=first.isoformat(),
                upper=following.isoformat(),
                value_type="date",
                label=f"{column}={year:04d}-{month:02d}",
            )
        )
    return bounds


def range_start(value: int, size: int) -> int:
    """The multiple of ``size`` at or below ``value`` (floor, also for negatives)."""
    return value - value % size


def integer_range_partitions(column: str, starts: Sequence[int], size: int) -> list[PartitionBounds]:
    if size < 1:
        raise DponeError(ErrorCode.MANIFEST_INVALID, "integer_range size must be at least 1")
    aligned = sorted({range_start(int(s), size) for s in starts})
    return [
        PartitionBounds(
            kind=BoundsKind.RANGE,
            column=column,
            lower=str(lower),
            upper=str(lower + size),
            value_type="integer",
            label=f"{column}=[{lower},{lower + size})",
        )
        for lower in aligned
    ]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def list_value_type(column: ColumnSpec) -> str:
    if column.clickhouse_type in _INTEGER_TYPES:
        return "integer"
    if column.clickhouse_type == "Date":
        return "date"
    if column.clickhouse_type == "DateTime":
        return "datetime"
    return "string"


def canonical_value(value: str | int, value_type: str) -> str:
    """The one string form of a list value for its column type (so ``7`` and ``"07"`` are one partition).

    Raises ``ValueError`` when it does not parse as that type: a ``FixedReason`` (a phrase safe to show)
    where the reason is known, else one whose message may quote the value.
    """
    if isinstance(value, bool):
        raise FixedReason("a boolean is not a partition value")
    text = str(value).strip()
    if value_type == "integer":
        try:
            number = int(text)
        except ValueError:
            raise FixedReason("not an integer") from None  # int()'s own message holds the value
        if not _INT64_MIN <= number <= _INT64_MAX:
            # a source binds such a value as a float, which rounds to the nearest 64-bit integer: a listed
            # -2**63-1 selected the row holding -2**63 (moved twice, exit 0)
            raise FixedReason("an integer outside the 64-bit range")
        return str(number)
    if value_type == "date":
        return date.fromisoformat(text).isoformat()
    if value_type == "datetime":
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is not None:
            # sources and targets hold naive times: SQLite's datetime() shifts '10:00:00+02:00' to 08:00, and
            # the run stopped later with a message about the type's range
            raise FixedReason(
                "a date and time with a UTC offset: list it as the source stores it, without one"
            )
        if moment.microsecond:
            # SQLite's datetime() and ClickHouse's DateTime compare whole seconds: '10:00:00.5' selected the
            # '10:00:00' rows, and beside '10:00:00' moved them twice (exit 0)
            raise FixedReason(
                "a date and time with a fraction of a second: sources and targets compare whole seconds"
            )
        return moment.isoformat(sep=" ")
    return str(value)


#: A listed number's most significant digits: two decimals of at most 15 never share a double, so the
#: number, SQLite's double of it and SQL Server's decimal of it are equal exactly when the numbers are.
MAX_LIST_NUMBER_DIGITS = 15


def _numeric_key(value: str, column: ColumnSpec) -> object:
    """What a ``Decimal`` or float column's source compares a listed text value as: its number (``10.5``,
    ``10.50`` and `` 10.5`` select the same rows). ``FixedReason`` when it is no finite number, or one whose
    digits a source would round before comparing (more than ``MAX_LIST_NUMBER_DIGITS``, or past the column's
    scale): SQLite reads ``0.10000000000000000001`` as the double 0.1 and SQL Server casts it to the column's
    scale, so it would select ``0.1``'s rows under another partition."""
    number = finite_number(value).normalize()
    _, digits, exponent = number.as_tuple()
    if len(digits) > MAX_LIST_NUMBER_DIGITS:
        raise FixedReason("a number of more than 15 significant digits")
    scale = decimal_scale(column.clickhouse_type)
    if scale is not None and isinstance(exponent, int) and -exponent > scale:
        raise FixedReason("a number with more fractional digits than the column's scale")
    return number


def decimal_scale(clickhouse_type: str) -> int | None:
    """``s`` of ``Decimal(p, s)``, else None."""
    if not clickhouse_type.startswith("Decimal(") or not clickhouse_type.endswith(")"):
        return None
    parts = clickhouse_type[len("Decimal(") : -1].split(",")
    return int(parts[1]) if len(parts) == 2 else None


def list_partitions(column: ColumnSpec, values: Sequence[str | int]) -> list[PartitionBounds]:
    """One ``VALUES`` partition per listed value, in manifest order, duplicates folded.

    On a ``Decimal`` or float column, values are folded by their number, not their spelling: the source
    compares numbers, so ``[10.5, "10.50"]`` were two partitions that each moved the same rows (an append
    loaded them twice, exit 0). Such a value must be a number (a text one was refused only inside the
    target call, where the delete of a replacing route could not compare it, and the route blocked)."""
    value_type = list_value_type(column)
    numeric = column.clickhouse_type.startswith(("Decimal(", "Float"))
    seen: set[object] = set()
    bounds: list[PartitionBounds] = []
    for position, raw in enumerate(values):
        try:
            value = canonical_value(raw, value_type)
            key = _numeric_key(value, column) if numeric else value
        except ValueError as exc:
            why = f" ({exc})" if isinstance(exc, FixedReason) else ""  # never the value
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"partition value #{position + 1} is not a valid {'number' if numeric else value_type} "
                f"for column {column.name!r}{why}",
                details={"column": column.name, "position": position + 1, "value_type": value_type},
            ) from None
        if key in seen:
            continue
        seen.add(key)
        bounds.append(
            PartitionBounds(
                kind=BoundsKind.VALUES,
                column=column.name,
                values=(value,),
                value_type=value_type,
                label=f"{column.name}={value}",
            )
        )
    return bounds
