"""Which columns a read returns, and the order that makes it deterministic (shared by all sources)."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema


def checked_schema(columns: Sequence[ColumnSpec]) -> TableSchema:
    """A described schema, refusing what no ClickHouse table can hold: unnamed or repeated columns."""
    seen: set[str] = set()
    for position, column in enumerate(columns, start=1):
        if column.name in seen:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"the source returns column {column.name!r} twice; alias one of them in the query",
                details={"column": column.name, "position": position},
            )
        seen.add(column.name)
    if not columns:
        raise DponeError(ErrorCode.MANIFEST_INVALID, "the source returns no columns")
    return TableSchema(columns=tuple(columns))


def unnamed_column(position: int) -> DponeError:
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"column #{position} of the source query has no name; give it an alias",
        details={"position": position},
    )


def project(full: TableSchema, columns: Sequence[str] | None) -> TableSchema:
    """The manifest's ``columns`` (in that order), or every column of the source."""
    if columns is None:
        return full
    picked = []
    for name in columns:
        try:
            picked.append(full.column(name))
        except KeyError:
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"column {name!r} listed in source.columns is not a column of the source",
                details={"column": name},
            ) from None
    return checked_schema(picked)


def order_columns(full: TableSchema, partition_column: str | None, key_columns: Sequence[str]) -> list[str]:
    """Partition column, then the primary key (or the first column): stable chunk order across runs."""
    order: list[str] = []
    for name in (partition_column, *(key_columns or full.names[:1])):
        if name and name not in order:
            order.append(name)
    return order
