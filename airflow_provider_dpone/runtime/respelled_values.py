"""Listed text values that a changed ``source.query`` delivers under another spelling.

A ``list`` partition selects its rows by the listed value, in the source and in the target alike; the
target compares bytes. When an edited ``source.query`` rewrites the list column (``RTRIM``, ``TRIM``,
``LOWER``, ``REPLACE``, a ``CASE`` mapping) and the manifest lists the rewritten values, the rows committed
under the old values arrive again under new ones: no new partition has the old bounds, so none counts or
deletes those rows, and every row was moved a second time, exit 0 (seen: 20 rows for 10, on
``incremental_append`` and ``replace_partition`` alike; ``TRIM``, ``REPLACE`` and accents the same).

Rows and their old spelling cannot be paired without keys, so the check is about values: a run stops before
arming where it moves a value no definition of the route ever committed, while the target holds rows of an
old value, committed under another query, that the source, read as this run reads it, no longer delivers
byte for byte. A value the source still delivers (a case-sensitive column holding ``EU`` and ``eu`` apart) is
a value of its own; a value committed before under the old query is that value moved again, which the
ordinary identity checks handle. ``full_refresh`` empties the whole table first and is never stopped.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition


def listed_text(bounds: PartitionBounds) -> bool:
    """A ``list`` partition of a text column (what can be respelled)."""
    return bounds.kind is BoundsKind.VALUES and bounds.value_type == "string" and bool(bounds.column)


def _column(bounds: PartitionBounds) -> str:
    return (bounds.column or "").casefold()


def new_values(
    active: Sequence[PlannedPartition], committed: Sequence[PartitionCheckpoint]
) -> list[PlannedPartition]:
    """The partitions to move none of whose listed values any definition of the route (this one too, and
    the same table's routes under other strategies) has committed."""
    seen: set[tuple[str, str]] = {
        (_column(c.bounds), value)
        for c in committed
        if c.status is CheckpointStatus.COMMITTED and listed_text(c.bounds)
        for value in c.bounds.values or ()
    }
    return [
        p
        for p in active
        if listed_text(p.bounds) and not any((_column(p.bounds), v) in seen for v in p.bounds.values or ())
    ]


def vanished_values(
    planned: Sequence[PlannedPartition], committed: Sequence[PartitionCheckpoint]
) -> list[PartitionBounds]:
    """Per old committed partition of a listed column this run moves, its values committed under another
    query that no planned partition lists, as bounds of their own (the target counts and the source reads
    them)."""
    listed = [p for p in planned if listed_text(p.bounds)]
    columns = {_column(p.bounds) for p in listed}
    queries = {p.query_hash for p in listed}
    values = {v for p in listed for v in p.bounds.values or ()}
    found: dict[tuple[str, tuple[str, ...]], PartitionBounds] = {}
    for c in committed:
        if (
            c.status is not CheckpointStatus.COMMITTED
            or not listed_text(c.bounds)
            or _column(c.bounds) not in columns
            or c.query_hash in queries
        ):
            continue
        gone = tuple(v for v in c.bounds.values or () if v not in values)
        if gone:
            label = f"{c.bounds.column}={','.join(gone)}"
            found.setdefault(
                (_column(c.bounds), gone), c.bounds.model_copy(update={"values": gone, "label": label})
            )
    return list(found.values())
