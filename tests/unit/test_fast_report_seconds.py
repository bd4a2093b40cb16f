"""The run report's per-partition ``seconds``: how long each moved partition's rows were streaming.

Before, every partition reported 0.0. A source that takes a known time per chunk shows it: each moved
partition reports at least that time, on every path (lazy_plan: read, convert and insert as the rows
stream; file_artifact: the export plus the load from its artifact; direct and staged); partitions a run
skips report 0.0.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemoryArtifactStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)

UTC = dt.timezone.utc
PAUSE_S = 0.02  # per chunk; 4 rows a day in chunks of 2: two chunks, at least 0.04 s a partition


class SlowSource(MemorySource):
    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        for chunk in super().read(partition_id, bounds, chunk_rows):
            time.sleep(PAUSE_S)
            yield chunk


class RealTimeClock(FixedClock):
    """Fixed timestamps, but durations on the real monotonic clock: the source's pace must show."""

    def monotonic(self) -> float:
        return time.monotonic()


def _engine(store: InMemoryCheckpointStore, sink: RecordingSink, export: str, load: str) -> TransferEngine:
    return transfer_engine(
        store=store,
        source=SlowSource(orders_rows(days=3)),
        sink=sink,
        clock=RealTimeClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
        artifacts=MemoryArtifactStore() if export == "file_artifact" else None,
        export=export,
        load=load,
    )


@pytest.mark.parametrize("export", ["lazy_plan", "file_artifact"])
@pytest.mark.parametrize("load", ["direct", "staged"])
def test_moved_partitions_report_their_seconds_and_skipped_ones_zero(export: str, load: str) -> None:
    store, sink = InMemoryCheckpointStore(), RecordingSink()
    first = _engine(store, sink, export, load).run("run-1")
    assert (first.export, first.load) == (export, load)  # the path under test is the one that ran
    moved = [p for p in first.partitions if p.decision == "run"]
    assert len(moved) == 3 and all(p.rows == 4 for p in moved)
    # the source's pace is in every partition's time: its stream (lazy_plan) or its export (file_artifact)
    assert all(p.seconds >= 2 * PAUSE_S for p in moved), [p.seconds for p in moved]
    assert all(p.seconds <= first.seconds for p in moved)

    second = _engine(store, sink, export, load).run("run-2")
    assert [p.decision for p in second.partitions] == ["skip"] * 3
    assert all(p.seconds == 0.0 for p in second.partitions)
