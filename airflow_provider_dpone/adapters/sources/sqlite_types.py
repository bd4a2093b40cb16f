"""SQLite declared column types -> ClickHouse types.

SQLite stores values by affinity, derived from the declared type with its documented substring rules
(INT -> INTEGER; CHAR/CLOB/TEXT -> TEXT; BLOB or none -> BLOB; REAL/FLOA/DOUB -> REAL; else NUMERIC).
Dates have no storage class of their own, so a declared ``DATE``/``DATETIME``/``TIMESTAMP`` (read as ISO-8601
text) is recognised first. Choices a user may trip over:
- ``NUMERIC(p,s)``/``DECIMAL(p,s)`` -> ``Decimal(p, s)``; a bare ``NUMERIC``/``DECIMAL`` -> ``Float64``
  (there is no scale to keep, and SQLite holds such values as INTEGER or REAL anyway);
- ``BOOLEAN`` -> ``UInt8`` (0/1); ``TIME``, ``UUID``/``GUID``, ``BLOB`` and untyped columns -> ``String``.
"""

from __future__ import annotations

import re

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec

_DECIMAL = re.compile(r"\b(?:NUMERIC|DECIMAL)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_DATE_WORD = re.compile(r"\bDATE\b")
MAX_DECIMAL_PRECISION = 38


def clickhouse_type(column: str, declared: str) -> str:
    """The ClickHouse base type of a column with this declared SQLite type."""
    upper = declared.strip().upper()
    if not upper:
        return "String"
    if "DATETIME" in upper or "TIMESTAMP" in upper:
        return "DateTime"
    if _DATE_WORD.search(upper):
        return "Date"
    if "BOOL" in upper:
        return "UInt8"
    if "INT" in upper:
        return "Int64"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT", "BLOB", "TIME", "UUID", "GUID")):
        return "String"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "Float64"
    match = _DECIMAL.search(upper)
    if match:
        precision = int(match.group(1))
        scale = int(match.group(2) or 0)
        if not (1 <= precision <= MAX_DECIMAL_PRECISION and scale <= precision):
            raise DponeError(
                ErrorCode.UNSUPPORTED_COLUMN_TYPE,
                f"column {column!r} is declared {declared.strip()!r}; ClickHouse decimals hold at most "
                f"{MAX_DECIMAL_PRECISION} digits with a scale no larger than the precision",
                details={"column": column, "source_type": declared.strip()},
            )
        return f"Decimal({precision}, {scale})"
    return "Float64"


def column_spec(name: str, declared: str, not_null: bool) -> ColumnSpec:
    return ColumnSpec(
        name=name,
        clickhouse_type=clickhouse_type(name, declared or ""),
        nullable=not not_null,
        source_type=(declared or "").strip() or "untyped",
    )


def needs_coercion(column: ColumnSpec) -> bool:
    """Columns whose stored values may be of another kind than the declared type says: every integer,
    flag and float column (SQLite keeps ``1.5`` in an INTEGER column, ``''`` in a REAL one: checked and
    refused, never cast) and String columns that may hold numbers or bytes (untyped, BLOB, TIME, UUID).
    TEXT-affinity columns always return ``str`` and pass through untouched."""
    if column.clickhouse_type in ("Int64", "UInt8", "Float64"):
        return True
    if column.clickhouse_type != "String":
        return False
    upper = (column.source_type or "").upper()
    return upper == "UNTYPED" or not any(word in upper for word in ("CHAR", "CLOB", "TEXT"))
