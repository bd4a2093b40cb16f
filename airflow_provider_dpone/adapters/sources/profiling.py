"""Exact quality metrics of a source read (``ProfilingSource.profile``), for SQLite and SQL Server.

One aggregate statement over the union of the batch's partitions (``WHERE (p1) OR (p2) ...``, each
predicate exactly the one a read of that partition uses, over the same table or query):

* rows: ``COUNT(*)``;
* NULLs per column: ``COUNT(*) - COUNT(c)``;
* distinct values per column: ``COUNT(DISTINCT c)``, which like ClickHouse's ``uniqExact`` ignores NULL.
  Strings must compare byte for byte, as ClickHouse compares them: SQLite uses ``COLLATE BINARY`` (a
  column declared ``NOCASE`` would otherwise fold case); SQL Server compares ``CAST(c AS VARBINARY(MAX))``
  (its collations ignore case and trailing spaces).

Values are compared as each system holds them, so a lossy type mapping (sub-second times into
``DateTime``, mixed SQLite storage classes in a String column) shows up as a distinct-count mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.adapters.sources.value_audit import merged_ranges
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.ports.source import ColumnProfile


def profile_columns(schema: TableSchema, columns: Sequence[str], table: str) -> list[str]:
    """The requested columns, each a column of the read (refused by name otherwise), duplicates folded."""
    names = list(dict.fromkeys(columns))
    for name in names:
        if name not in schema.names:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"quality check column {name!r} is not a column the source read returns",
                details={"column": name, "table": table},
            )
    return names


def null_count_columns(schema: TableSchema, columns: Sequence[str], table: str) -> list[str]:
    """The columns to count NULLs of, each a column of the read (a sink names them from the schema: one
    that is not is a defect, refused as a read failure), duplicates folded."""
    names = list(dict.fromkeys(columns))
    if not names or any(name not in schema.names for name in names):
        raise DponeError(
            ErrorCode.SOURCE_READ_FAILED,
            f"NULL counts were asked of source table {table} for columns its read does not return",
            details={"table": table},
        )
    return names


def require_bounds(bounds: Sequence[PartitionBounds]) -> None:
    if not bounds:
        raise DponeError(ErrorCode.USAGE, "a source profile needs at least one partition")


# -- SQLite ------------------------------------------------------------------------------------------------


def sqlite_profile(
    source: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
) -> tuple[str, tuple[object, ...]]:
    """``(text, params)`` of the SQLite profile statement."""
    require_bounds(bounds)
    selects = ["COUNT(*)"]
    for name in columns:
        quoted = lite.quote_ident(name)
        selects += [f"COUNT(*) - COUNT({quoted})", f"COUNT(DISTINCT {quoted} COLLATE BINARY)"]
    return _sqlite_aggregate(source, bounds, selects)


def sqlite_null_counts(
    source: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
) -> tuple[str, tuple[object, ...]]:
    """``(text, params)`` of the NULL count of each column over the union of ``bounds`` (no distinct
    counts: a run asks this before arming, for the columns a target declares without ``Nullable``)."""
    require_bounds(bounds)
    return _sqlite_aggregate(
        source, bounds, [f"COUNT(*) - COUNT({lite.quote_ident(name)})" for name in columns]
    )


def _sqlite_aggregate(
    source: str, bounds: Sequence[PartitionBounds], selects: Sequence[str]
) -> tuple[str, tuple[object, ...]]:
    """One aggregate row of ``selects`` over the union of ``bounds``, each the predicate its read uses."""
    # adjacent ranges as one: an OR of ranges is SQLite's multi-index OR, which keeps every visited rowid
    union = lite.any_of(merged_ranges(bounds))  # None: one partition is the whole table, no predicate at all
    where, params = (f"\nWHERE {union[0]}", union[1]) if union is not None else ("", ())
    return f"SELECT {', '.join(selects)}\nFROM {source}{where}", params


# -- SQL Server --------------------------------------------------------------------------------------------


def mssql_profile(
    source: str, bounds: Sequence[PartitionBounds], columns: Sequence[str], schema: TableSchema
) -> tsql.Statement:
    """The SQL Server profile statement (``COUNT_BIG``; String-mapped columns compared as bytes)."""
    require_bounds(bounds)
    selects = ["COUNT_BIG(*)"]
    for name in columns:
        quoted = tsql.quote_ident(name)
        distinct = (
            f"CAST({quoted} AS VARBINARY(MAX))" if schema.column(name).clickhouse_type == "String" else quoted
        )
        selects += [f"COUNT_BIG(*) - COUNT_BIG({quoted})", f"COUNT_BIG(DISTINCT {distinct})"]
    return _mssql_aggregate(source, bounds, selects)


def mssql_null_counts(
    source: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
) -> tsql.Statement:
    """The SQL Server NULL count of each column over the union of ``bounds`` (``COUNT_BIG``)."""
    require_bounds(bounds)
    return _mssql_aggregate(
        source, bounds, [f"COUNT_BIG(*) - COUNT_BIG({tsql.quote_ident(name)})" for name in columns]
    )


def _mssql_aggregate(
    source: str, bounds: Sequence[PartitionBounds], selects: Sequence[str]
) -> tsql.Statement:
    """One aggregate row of ``selects`` over the union of ``bounds``, each the predicate its read uses."""
    statement = tsql.sql(f"SELECT {', '.join(selects)}\nFROM {source}")
    union = tsql.any_of(bounds)
    return statement if union is None else statement + "\nWHERE " + union


# -- result ------------------------------------------------------------------------------------------------


def profile_from_row(row: Sequence[object], columns: Sequence[str], table: str) -> ColumnProfile:
    """Map the one result row to a profile; anything but non-negative integers fails closed."""
    if len(row) != 1 + 2 * len(columns):
        raise _malformed(table)
    values: list[int] = []
    for value in row:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _malformed(table)
        values.append(value)
    return ColumnProfile(
        rows=values[0],
        null_counts={c: values[1 + 2 * i] for i, c in enumerate(columns)},
        distinct_counts={c: values[2 + 2 * i] for i, c in enumerate(columns)},
    )


def null_counts_from_row(row: Sequence[object], columns: Sequence[str], table: str) -> dict[str, int]:
    """Map the one result row to NULL counts; anything but non-negative integers fails closed."""
    if len(row) != len(columns):
        raise _malformed(table)
    counts: dict[str, int] = {}
    for column, value in zip(columns, row, strict=True):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _malformed(table)
        counts[column] = value
    return counts


def _malformed(table: str) -> DponeError:
    return DponeError(
        ErrorCode.SOURCE_READ_FAILED,
        f"the quality profile of source table {table} did not return exact integer counts",
        details={"table": table},
    )
