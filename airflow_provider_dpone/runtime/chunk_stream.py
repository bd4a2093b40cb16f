"""Counting wrappers around chunk iterators: per-partition rows, timings and cursor high-water marks.

Every chunk passes the run's stop request first (:class:`CancellationToken`): a stopped task ends at the
next chunk, inside whatever stage is consuming the stream, so the guard lifecycle records that stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.runtime import cursor_mark
from airflow_provider_dpone.runtime.cancellation import CancellationToken
from airflow_provider_dpone.runtime.progress import ProgressListener


@dataclass
class PartitionTally:
    rows: int = 0
    seconds: float = 0.0
    cursor_max: object | None = None


@dataclass
class StreamTally:
    """Filled while chunks flow; read after the stream is exhausted."""

    cursor: str | None = None
    partitions: dict[str, PartitionTally] = field(default_factory=dict)
    #: checked before each chunk is read and before it is handed on
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    #: the run's monotonic clock (``Clock.monotonic``); without one, partitions report 0 seconds
    monotonic: Callable[[], float] = field(default=lambda: 0.0)

    def counted(
        self,
        partition_id: str,
        label: str,
        chunks: Iterable[ColumnChunk],
        progress: ProgressListener,
        opened: Callable[[], float | None] | None = None,
    ) -> Iterator[ColumnChunk]:
        """``chunks``, counted. ``opened``: when the partition's read was opened on :attr:`monotonic`, if a
        reading thread opened it before this stream began (read ahead): its time counts from then."""
        tally = self.partitions.setdefault(partition_id, PartitionTally())
        started = self.monotonic()
        cursor_index: int | None = None
        for chunk in self.cancellation.checked(chunks):
            tally.rows += chunk.row_count
            if self.cursor is not None and chunk.row_count:
                if cursor_index is None:
                    cursor_index = chunk.names.index(self.cursor)
                # never raises: this runs inside the target call, where an error leaves the outcome unknown
                tally.cursor_max = cursor_mark.higher(
                    tally.cursor_max, cursor_mark.highest(chunk.columns[cursor_index])
                )
            yield chunk
        tally.seconds += self.monotonic() - in_flight_from(started, opened() if opened is not None else None)
        progress.partition_moved(label, tally.rows, tally.seconds)

    def rows(self) -> dict[str, int]:
        return {pid: t.rows for pid, t in self.partitions.items()}

    def add_seconds(self, partition_id: str, seconds: float) -> None:
        """Time spent on the partition outside its stream (e.g. exporting its artifact)."""
        self.partitions.setdefault(partition_id, PartitionTally()).seconds += seconds

    def seconds(self) -> dict[str, float]:
        """Per partition: how long its stream was open (read, convert, insert of its chunks as they flowed;
        read ahead, from the opening of its read to its last chunk taken)."""
        return {pid: t.seconds for pid, t in self.partitions.items()}

    def cursor_high_water(self) -> object | None:
        return cursor_mark.highest(t.cursor_max for t in self.partitions.values())


def in_flight_from(started: float, opened: float | None) -> float:
    """When a partition's time starts: when the run began taking its rows, or earlier, when a reading
    thread opened its read ahead (``opened``, on the same clock)."""
    return started if opened is None else min(started, opened)
