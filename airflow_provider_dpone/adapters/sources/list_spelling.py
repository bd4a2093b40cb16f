"""Whether the listed values of ``list`` partitions select only rows stored exactly as listed.

A source compares text under its collation: SQL Server's usual ones ignore case and trailing spaces, and a
SQLite column may be declared ``COLLATE NOCASE`` or ``RTRIM``. A listed ``eu`` then also selects the rows
stored as ``EU``; the target keeps every row as stored and compares bytes, so those rows sit outside the
partition that moved them: ``replace_partition`` never deletes them (each run appends them again), and two
listed values that differ only so (``EU`` and ``eu``) move the same rows twice. A fixed-width ``char``
column is the same case: it hands its values back padded with spaces.

SQLite asks the question itself (``COLLATE BINARY``); SQL Server's answer is read row by row, because the
comparison it would need (a binary collation) is not one every server speaking its protocol knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import time

from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
from airflow_provider_dpone.adapters.sources import sqlite_sql as lite
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import TableSchema


def text_lists(bounds: Sequence[PartitionBounds], schema: TableSchema) -> list[PartitionBounds]:
    """The partitions whose rows are selected by comparing text with listed values: a ``list`` column the
    target keeps as text. Numbers, UUIDs and dates compare by value in the source and in the target alike
    (seen: every listed amount of a SQL Server ``decimal`` column refused as spelled otherwise)."""
    text_columns = {c.name.casefold() for c in schema.columns if "String" in c.clickhouse_type}
    known = {c.name.casefold() for c in schema.columns}
    return [
        b
        for b in bounds
        if b.kind is BoundsKind.VALUES
        and b.value_type == "string"
        and b.column
        and (b.column.casefold() in text_columns or b.column.casefold() not in known)
    ]


def stored_otherwise(value: object, bounds: PartitionBounds) -> bool:
    """A row value the partition's read delivers that the target does not hold as one of its listed values,
    byte for byte (SQL Server ``time`` arrives as its ISO text, binary as its bytes)."""
    listed = bounds.values or ()
    if isinstance(value, str):
        return value not in listed
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value) not in {v.encode("utf-8") for v in listed}
    if isinstance(value, time):
        return value.isoformat() not in listed
    return True


def sqlite_statement(source: str, bounds: PartitionBounds) -> tuple[str, lite.Params]:
    """One row when the partition's read selects a row stored under another spelling, none otherwise."""
    condition = lite.predicate(bounds)
    if condition is None or bounds.column is None:
        raise lite.SqlBuildError("a list partition has values and a column")
    column = lite.quote_ident(bounds.column)
    values = tuple(bounds.values or ())
    marks = ", ".join("?" for _ in values)
    text = (
        f"SELECT 1\nFROM {source}\nWHERE ({condition[0]}) AND NOT ({column} COLLATE BINARY IN ({marks}))\n"
        "LIMIT 1"
    )
    return text, (*condition[1], *values)


def sqlite_non_text_statement(source: str, column: str) -> tuple[str, lite.Params]:
    """One row when ``column`` holds a number or bytes anywhere, none otherwise.

    A SQLite ``list`` column the target keeps as text but which has no TEXT affinity (no declared type, a
    ``BLOB``, ``TIME`` or ``UUID`` declaration, an expression of ``source.query``) keeps values as numbers
    or bytes, and its listed values compare with them by that affinity, not as the target's text: text
    never equals a number stored without affinity (0 rows of 30 moved, every value committed empty, exit 0),
    and under a numeric affinity (``CAST(x AS INTEGER)``, a ``TIME`` column) ``'1'`` and ``'01'`` select the
    same rows (moved twice)."""
    quoted = lite.quote_ident(column)
    return f"SELECT 1\nFROM {source}\nWHERE typeof({quoted}) IN ('integer', 'real', 'blob')\nLIMIT 1", ()


def sqlite_spelled_statement(source: str, bounds: PartitionBounds) -> tuple[str, lite.Params]:
    """One row when the read delivers a value spelled exactly as one of the listed ones, none otherwise."""
    if bounds.column is None or not bounds.values:
        raise lite.SqlBuildError("a list partition has values and a column")
    column = lite.quote_ident(bounds.column)
    marks = ", ".join("?" for _ in bounds.values)
    return f"SELECT 1\nFROM {source}\nWHERE {column} COLLATE BINARY IN ({marks})\nLIMIT 1", tuple(
        bounds.values
    )


def spelled_as_listed(value: object, bounds: PartitionBounds) -> bool:
    """A row value the target holds as one of the partition's listed values, byte for byte."""
    return (value is not None) and not stored_otherwise(value, bounds)


def mssql_statement(source: str, bounds: PartitionBounds) -> tsql.Statement:
    """The partition's values of its list column, as its read selects them."""
    if bounds.column is None:
        raise tsql.SqlBuildError("a list partition has a column")
    return tsql.select_rows(source, [bounds.column], bounds, ())
