"""A partitioned route writes its partition column, unless it refreshes the whole table.

The target's rows of a partition are found by the partition column: the counts the guard takes before
arming (the first-run, lost-rows and overlap checks) and in ``guard inspect``/``resolve``, and the delete
of a ``replace_partition`` run. A route whose ``source.columns`` leaves it out (the source filters on it,
the target never sees it) ran once and then could count nothing, so every later run stopped; a replacing
one armed and blocked inside the target call on its first delete; and where a hand-made target filled the
column with a default, the delete selected rows by that default (rows moved to another day were appended
again on every run). Checked right after the source described its read, before any checkpoint.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Manifest, PartitionKind
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import TableSchema


def require_partition_column_written(manifest: Manifest, schema: TableSchema) -> None:
    """``manifest_invalid`` when a partitioned route does not write its partition column (``schema``: the
    columns the read returns, after ``source.columns``). A ``full_refresh`` needs it only under durable
    quality replay, whose reader measures the target per partition (it published, then its reader's query
    failed, and every later run was blocked)."""
    partitioning = manifest.source.partitioning
    column = partitioning.column
    measured_by_partition = manifest.sink.options.durable_quality_replay
    if (
        (manifest.sink.strategy is Strategy.FULL_REFRESH and not measured_by_partition)
        or partitioning.kind is PartitionKind.NONE
        or column is None
        or column in schema.names
    ):
        return
    raise DponeError(
        ErrorCode.MANIFEST_INVALID,
        f"source.partitioning.column names column {column!r}, which source.columns leaves out; "
        f"sink.strategy {manifest.sink.strategy.value} finds a partition's rows in the target by that "
        "column (the guard counts them, replace_partition deletes them, durable quality replay measures "
        "them): list it in source.columns",
        details={"field": "source.columns", "column": column, "strategy": manifest.sink.strategy.value},
        hint_lines=("nothing was written and no checkpoint recorded: the route is not blocked",),
    )
