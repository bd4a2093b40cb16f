"""A target column declared without ``Nullable`` takes a nullable source column once the run proved no NULL.

ClickHouse tables are declared without ``Nullable`` where their owners can (it costs a byte per row and
slows every read), while SQL Server declares most columns nullable, rows that hold no NULL included. Such a
target was refused outright. Now, before arming, the run counts the NULLs those columns hold in the
partitions it moves (one read-only aggregate, ``NullCountingSource``): none, and the load runs with those
columns declared non-nullable (the staging table and export files too, so a NULL that arrives after the
count is refused by the staging insert or the target's encoder, never written as ``''`` or ``0``); any,
and the run stops naming the column and the count, with nothing written and no checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source


def schema_for_target(
    sink: Sink,
    source: Source,
    table: str,
    schema: TableSchema,
    order_by: tuple[str, ...],
    bounds: Sequence[PartitionBounds],
) -> TableSchema:
    """``schema`` with the columns the target declares without ``Nullable`` made non-nullable, once the
    rows within ``bounds`` proved to hold no NULL there; ``schema`` itself when there is none. Raises
    ``target_table_incompatible`` naming each column that holds NULL (never a value)."""
    refusing_null = getattr(sink, "columns_refusing_null", None)
    if not callable(refusing_null) or not bounds or not any(c.nullable for c in schema.columns):
        return schema  # nothing to prove: no read of the target
    columns: list[str] = refusing_null(table, schema, order_by)
    if not columns:
        return schema
    count_nulls = getattr(source, "count_nulls", None)
    if not callable(count_nulls):
        raise _holds_null(table, dict.fromkeys(columns))
    counts: dict[str, int] = count_nulls(bounds, columns)
    holding = {c: counts[c] for c in columns if counts[c]}
    if holding:
        raise _holds_null(table, dict(holding))
    return schema.with_not_null(columns)


def _holds_null(table: str, holding: dict[str, int | None]) -> DponeError:
    first, rows = next(iter(holding.items()))
    measured = "cannot count its NULLs in the rows" if rows is None else f"holds NULL in {rows} row(s)"
    return DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {table} is incompatible: column {first!r} is not Nullable there, and the source "
        f"{measured} of the partitions this run moves; nothing was written",
        details={
            "table": table,
            "column": first,
            "problems": [
                {
                    "column": column,
                    "reason": (
                        "holds NULL in the rows to move; the target column is not Nullable"
                        if count is not None
                        else "its NULLs cannot be counted; the target column is not Nullable"
                    ),
                    **({} if count is None else {"rows": count}),
                }
                for column, count in holding.items()
            ],
        },
        hint_lines=(
            "nothing was written and no checkpoint recorded: the route is not blocked",
            *(f"column {column} holds NULL in the rows this run moves" for column in holding),
            "declare the target column Nullable (ALTER TABLE ... MODIFY COLUMN <column> Nullable(<type>)), "
            "or give the NULLs a value in source.query (COALESCE)",
        ),
    )
