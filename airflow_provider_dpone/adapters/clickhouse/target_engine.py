"""The engines a target table may have: those that keep every inserted row as it was inserted.

dpone's promise is that the target holds exactly the source's rows of every committed partition. A target
table created by hand with another engine breaks it after the run reported success:

- the row-merging MergeTree variants (Replacing, Summing, Aggregating, Collapsing, VersionedCollapsing,
  Graphite, Coalescing, their Replicated forms) replace, add up or cancel rows in background merges, so
  values change and rows disappear after the partition was committed;
- ``Null`` keeps nothing, ``Memory``, ``Buffer``, ``Set`` and ``Join`` keep nothing durable, ``Distributed``
  forwards rows in the background, and views, ``Merge`` and the integration engines (Kafka, S3, URL, File,
  MySQL, ...) are not tables whose rows dpone can count, delete and read back.

So the target's engine is read before arming and anything but a plain MergeTree (``MergeTree``,
``ReplicatedMergeTree``, ``SharedMergeTree``) is refused with ``target_table_incompatible``, naming the
engine. A table dpone creates is always ``MergeTree``.
"""

from __future__ import annotations

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

ROW_KEEPING_ENGINES = frozenset({"MergeTree", "ReplicatedMergeTree", "SharedMergeTree"})


def table_engine(client: Client, name: TableName) -> str | None:
    """The table's engine as ``system.tables`` names it (``None``: no such table)."""
    rows = client.query(
        "SELECT engine FROM system.tables WHERE database = "
        f"{quote_string(name.database)} AND name = {quote_string(name.table)}"
    ).result_rows
    return str(rows[0][0]) if rows else None


def require_row_keeping_engine(client: Client, name: TableName) -> None:
    """Read-only, before arming: refuse a target whose engine does not keep the rows inserted into it."""
    engine = table_engine(client, name)
    if engine is None or engine in ROW_KEEPING_ENGINES:
        return
    raise DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {name} has engine {engine}: it does not keep every inserted row as inserted (rows "
        "merged away, summed, kept in memory only, forwarded or not stored), so the target could not hold "
        "exactly the source's rows. Load into a MergeTree table (let dpone create it, or create it with "
        "ENGINE = MergeTree / ReplicatedMergeTree) and build other engines from it (a materialized view)",
        details={"table": str(name), "step": "prepare", "engine": engine},
    )
