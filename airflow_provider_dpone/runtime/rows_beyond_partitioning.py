"""Rows a new partitioning column cannot see: after a route's partitions moved to another column, the
target's rows whose value of that column lies in none of the partitions a run plans.

A run whose partitions overlap commits of another definition or strategy counts the target's rows within
each partition's bounds: none there, the partition's rows are new (ADR 0078: they arrived after a wider
partition was committed). That holds where the old commits selected rows by the same column. After a switch
to another column, the target's values of it are what the old loads wrote: ``NULL`` (a column the old
definition did not write, added ``Nullable`` by hand, or one the application filled later), the column's
default (added without ``Nullable``), a value the source no longer has. The counts then see no row, an
append moved every row again and a replacing run deleted nothing before inserting them (each exit 0, every
row twice). So where old commits selected by another column (or the whole table), the target's rows are
first required to lie within the planned partitions (ADR 0095): all of them, less other source tables'
rows known to lie outside them (a fan-in). One count of the table and grouped counts of the planned
partitions, only on the run that switches (or switches back).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind
from airflow_provider_dpone.contracts.route import RouteIdentity


def by_another_column(committed: Sequence[PartitionCheckpoint], column: str) -> list[PartitionCheckpoint]:
    """The commits (that may hold rows) whose partitions selected rows by another column than ``column``,
    or by none (the whole table)."""
    folded = column.casefold()
    return [
        c
        for c in committed
        if (c.rows is None or c.rows > 0)
        and (c.bounds.kind is BoundsKind.ALL or (c.bounds.column or "").casefold() != folded)
    ]


def rows_beyond_error(
    route: RouteIdentity,
    table: str,
    column: str,
    beyond: int,
    old: Sequence[PartitionCheckpoint],
    manifest_ref: str,
) -> DponeError:
    """The stop: ``beyond`` rows of the target lie outside every planned partition by ``column``."""
    columns = sorted({c.bounds.column for c in old if c.bounds.column}, key=str.casefold)
    earlier = f"by {', '.join(columns)}" if columns else "as one whole table"
    return DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"route {route.describe()} now partitions by {column}, and {beyond:,} row(s) of target table {table} "
        f"lie in none of its partitions by that column (NULL, the column's default, or a value the source no "
        f"longer has): which of them this run would move again cannot be told, so nothing was written",
        details={
            "route": route.describe(),
            "changed": ["partitioning"],
            "problem": "rows_beyond_partitioning",
            "column": column,
            "rows_beyond": beyond,
            "earlier_partitions": len(old),
        },
        hint_lines=(
            f"{len(old)} committed partition(s) of an earlier definition or strategy selected rows {earlier}; "
            f"the target's values of {column} are what those loads wrote",
            f"give the target's rows their {column} (an ALTER TABLE ... UPDATE from the source), then run again",
            f"or reload the table whole: sink.strategy full_refresh for one run of {manifest_ref}",
            "or, where those rows are history the source no longer holds and the target's values of the column "
            f"are right: dpone run {manifest_ref} --allow-nonempty-target",
            "see `dpone runbook guard`, 'The route's identity changed'",
        ),
    )
