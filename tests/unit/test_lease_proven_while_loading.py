"""A run proves its lease before each chunk reaches the target, and writes nothing more once it is gone.

A PostgreSQL lease is a session the server can end under a live run; another run may then take the lease
and move the same partitions. Seen with a slow source: the first run went on inserting beside the run
that took over, every row twice, both exit 0. In-memory store and a streaming sink double; the hold is a
test double that ends after a given number of proofs.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.schema import TableSchema
from tests.doubles import InMemoryCheckpointStore, RecordingSink, phase_of, transfer_engine


class EndingHold:
    """A lease hold whose session ends after ``proofs`` successful proofs."""

    def __init__(self, proofs: int) -> None:
        self.left = proofs
        self.calls = 0

    def require_held(self) -> None:
        self.calls += 1
        if self.left <= 0:
            raise DponeError(
                ErrorCode.ROUTE_BUSY, "lease ended", details={"target_table": "t", "problem": "lease_lost"}
            )
        self.left -= 1


class StreamingSink(RecordingSink):
    """Writes each chunk as it arrives, as the ClickHouse sink's inserts do."""

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        permit.require_open(table)
        rows = 0
        for chunk in chunks:
            self.tables.setdefault(table, []).extend(zip(*chunk.columns, strict=True))
            rows += chunk.row_count
        return rows


def test_a_lease_that_ends_mid_load_stops_the_stream_before_the_next_chunk() -> None:
    sink = StreamingSink()
    hold = EndingHold(proofs=4)  # before arming, after arming, then two chunks of two rows
    with pytest.raises(DponeError) as lost:
        transfer_engine(sink=sink, lease=hold).run("run-1")
    assert lost.value.details["problem"] == "lease_lost" and lost.value.details["loading"] is True
    assert "while it loaded the target" in lost.value.safe_message  # said as what it leaves
    assert len(sink.tables["analytics.orders"]) == 4  # the chunks proven before it ended, none after


def test_a_lease_that_ends_before_arming_writes_no_record_of_the_run() -> None:
    """The pre-arm failure record (failed_before_target) is not written either: another run may own the
    partitions by now, and a record of this run's would become their latest over that run's commits."""
    store = InMemoryCheckpointStore()
    hold = EndingHold(proofs=0)
    with pytest.raises(DponeError) as lost:
        transfer_engine(sink=StreamingSink(), store=store, lease=hold, load="staged").run("run-1")
    assert lost.value.details["problem"] == "lease_lost"
    assert "armed" not in lost.value.details  # nothing armed: no on-call, said as the plain lease_lost
    written = [c for c in store.rows if c.run_id == "run-1"]
    assert all(c.status is CheckpointStatus.PLANNED for c in written), [phase_of(c) for c in written]
