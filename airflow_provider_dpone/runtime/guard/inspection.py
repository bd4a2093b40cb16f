"""Read-only evidence for an operator deciding how to resolve a blocked partition.

Shows, per blocked partition, the rows the attempt recorded beside the rows the source and the target
hold within the partition's bounds. It never decides: the operator does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.guard.resolution import blocked_partitions


@dataclass(frozen=True)
class InspectionRow:
    partition_id: str
    label: str
    phase: str
    checkpoint_batch_id: str | None
    attempt_rows: int | None
    source_rows: int | None
    target_rows: int | None

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def inspect_blocked(
    latest: Sequence[PartitionCheckpoint], source: Source | None, sink: Sink, target_table: str
) -> list[InspectionRow]:
    by_id = {c.partition_id: c for c in latest}
    rows: list[InspectionRow] = []
    for block in blocked_partitions(latest):
        checkpoint = by_id[block.partition_id]
        source_rows = source.count(checkpoint.bounds) if source is not None else None
        rows.append(
            InspectionRow(
                partition_id=block.partition_id,
                label=block.label,
                phase=block.phase,
                checkpoint_batch_id=block.checkpoint_batch_id,
                attempt_rows=checkpoint.rows,
                source_rows=source_rows,
                target_rows=sink.count_rows(target_table, checkpoint.bounds),
            )
        )
    return rows
