"""The engine reads the next chunks while the target takes the current one, on the direct and staged loads.

A sink that, holding the first chunk, waits for the source to have produced the second proves the reads
overlap the insert: read in line, the wait would time out. A source that allows two reads at once has two
partitions read at the same time. The rows still arrive whole and in order, nothing is read before
arming, and a source failure mid-stream still ends the run as before.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterable, Iterator

import pytest

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.runtime.transfer import TransferEngine
from tests.doubles import (
    FixedClock,
    InjectedFault,
    MemoryArtifactStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)

UTC = dt.timezone.utc
WAIT_S = 10.0  # reached only when the reads do not overlap


class CountingSource(MemorySource):
    """Counts the chunks produced, and notes the threads that produced them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.produced = 0
        self.threads: set[str] = set()
        self.changed = threading.Condition()

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        for chunk in super().read(partition_id, bounds, chunk_rows):
            with self.changed:
                self.produced += 1
                self.threads.add(threading.current_thread().name)
                self.changed.notify_all()
            yield chunk

    def wait_produced(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.produced >= count, timeout=WAIT_S)


class WaitingSink(RecordingSink):
    """Holding the first chunk, waits until the source has produced ``ahead`` chunks in all."""

    def __init__(self, source: CountingSource, ahead: int) -> None:
        super().__init__()
        self.source = source
        self.ahead = ahead
        self.overlapped: bool | None = None
        self.produced_at_load: int | None = None

    def _held(self, chunks: Iterable[ColumnChunk]) -> Iterator[ColumnChunk]:
        for index, chunk in enumerate(chunks):
            if index == 0:
                self.overlapped = self.source.wait_produced(self.ahead)
            yield chunk

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        self.produced_at_load = self.source.produced
        return super().load(permit, table, schema, self._held(chunks))

    def stage(self, staging_table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> int:
        self.produced_at_load = self.source.produced
        return super().stage(staging_table, schema, self._held(chunks))


def _engine(
    source: MemorySource, sink: RecordingSink, load: str, export: str = "lazy_plan"
) -> TransferEngine:
    return transfer_engine(
        source=source,
        sink=sink,
        clock=FixedClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
        artifacts=MemoryArtifactStore() if export == "file_artifact" else None,
        export=export,
        load=load,
        chunk_rows=2,
    )


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_the_next_chunks_are_read_while_the_target_holds_the_first(load: str) -> None:
    rows = orders_rows(days=3)  # 4 rows a day in chunks of 2: six chunks
    source = CountingSource(rows)
    sink = WaitingSink(source, ahead=2)
    report = _engine(source, sink, load).run("run-1")
    assert sink.produced_at_load == 0, "the source is read only once the load asks for rows"
    assert sink.overlapped, "the second chunk was never read while the first was held"
    assert source.threads == {"dpone-read-ahead-0"}  # one reading thread: the source names no more
    assert sorted(sink.tables["analytics.orders"]) == sorted(rows)
    assert [p.rows for p in report.partitions] == [4, 4, 4]


def test_a_source_failure_mid_stream_still_fails_the_run_and_stops_the_reading_thread() -> None:
    source = MemorySource(orders_rows(days=3), fail_read_after_chunks=3)
    sink = RecordingSink()
    with pytest.raises(InjectedFault):
        _engine(source, sink, "direct").run("run-1")
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-read-ahead")]


class TwoAtOnceSource(CountingSource):
    """Allows two reads at once; each read waits until the other partition's read has begun too."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.started: list[str] = []
        self.asked: list[int] = []
        self.chunk_rows: list[int] = []
        self.both_open = threading.Barrier(2, timeout=WAIT_S)

    def concurrent_reads(self, bounds: list[PartitionBounds]) -> int:
        self.asked.append(len(bounds))
        return 2

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        self.started.append(bounds.label)
        self.chunk_rows.append(chunk_rows)
        if len(self.started) <= 2:
            self.both_open.wait()  # broken (a timeout) unless the first two partitions are read at once
        yield from super().read(partition_id, bounds, chunk_rows)


@pytest.mark.parametrize("export", ["lazy_plan", "file_artifact"])
def test_a_source_that_allows_two_reads_has_two_partitions_read_at_once(export: str) -> None:
    # lazy_plan: while the target loads; file_artifact: while the export writes the files, before arming
    rows = orders_rows(days=4)
    source = TwoAtOnceSource(rows)
    sink = RecordingSink()
    report = _engine(source, sink, "direct", export).run("run-1")
    assert source.asked == [4]
    assert len(source.threads) == 2
    assert sorted(sink.tables["analytics.orders"]) == sorted(rows)
    assert [p.rows for p in report.partitions] == [4, 4, 4, 4]


def test_two_reads_at_once_each_take_half_a_chunk_so_no_more_rows_wait_than_with_one() -> None:
    rows = orders_rows(days=4)
    source = TwoAtOnceSource(rows)
    sink = RecordingSink()
    transfer_engine(
        source=source,
        sink=sink,
        clock=FixedClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
        load="direct",
        chunk_rows=4,
    ).run("run-1")
    assert source.chunk_rows == [2, 2, 2, 2]
    assert sorted(sink.tables["analytics.orders"]) == sorted(rows)


def test_an_export_that_fails_removes_the_files_it_had_written() -> None:
    store = MemoryArtifactStore()
    source = MemorySource(orders_rows(days=3), fail_read_after_chunks=3)  # two chunks a day: fails on day 2
    with pytest.raises(InjectedFault):
        transfer_engine(
            source=source,
            open_sink=RecordingSink,
            clock=FixedClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
            artifacts=store,
            export="file_artifact",
            chunk_rows=2,
        ).run("run-1")
    assert len(store.removed) == 1, "the first day's file was written, then removed"
    assert store.files == {}
