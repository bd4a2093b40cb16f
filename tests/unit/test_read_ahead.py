"""The reading threads: the same partitions and chunks, bounded, never started early, always stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.runtime.read_ahead import PartitionReads

WAIT = 10.0  # seconds: generous, only reached when the behaviour is broken


class Stream:
    """An iterator double that records which thread pulled and closed it, and how far it was pulled."""

    def __init__(
        self, items: list[int], fail_at: int | None = None, error: BaseException | None = None
    ) -> None:
        self.items = items
        self.fail_at = fail_at
        self.error = error or RuntimeError("source broke")
        self.pulled = 0
        self.opened = False
        self.closed_in: str | None = None
        self.pull_threads: set[str] = set()
        self.changed = threading.Condition()

    def open(self) -> Stream:
        self.opened = True
        return self

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        self.pull_threads.add(threading.current_thread().name)
        if self.fail_at is not None and self.pulled == self.fail_at:
            raise self.error
        if self.pulled >= len(self.items):
            raise StopIteration
        item = self.items[self.pulled]
        with self.changed:
            self.pulled += 1
            self.changed.notify_all()
        return item

    def close(self) -> None:
        self.closed_in = threading.current_thread().name

    def wait_pulled(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.pulled >= count, timeout=WAIT)


def _opens(streams: list[Stream]) -> list[Callable[[], Iterator[int]]]:
    return [stream.open for stream in streams]


def _reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("dpone-read-ahead")]


def _consume(reads: PartitionReads[int], count: int) -> list[list[int]]:
    return [list(reads.chunks(index)) for index in range(count)]


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.lists(st.lists(st.integers(), max_size=12), max_size=8),
    workers=st.integers(min_value=1, max_value=3),
    depth=st.integers(min_value=1, max_value=4),
)
def test_every_partition_arrives_whole_and_in_order_whatever_the_threads(
    partitions: list[list[int]], workers: int, depth: int
) -> None:
    streams = [Stream(items) for items in partitions]
    with PartitionReads(_opens(streams), workers=workers, depth=depth) as reads:
        assert _consume(reads, len(streams)) == partitions
    assert not _reading_threads()
    assert all(s.closed_in is not None for s in streams)


def test_nothing_is_opened_before_the_first_chunk_is_asked_for() -> None:
    streams = [Stream([1, 2]), Stream([3])]
    with PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        time.sleep(0.05)
        assert not any(s.opened for s in streams)  # a direct load reads nothing before arming
        assert not _reading_threads()
        assert _consume(reads, 2) == [[1, 2], [3]]


def test_two_partitions_are_read_at_once_while_the_consumer_holds_a_chunk() -> None:
    streams = [Stream(list(range(10))), Stream(list(range(10)))]
    with PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        first = reads.chunks(0)
        assert next(first) == 0
        # the consumer holds partition 0's first chunk: both partitions are being read meanwhile
        assert streams[0].wait_pulled(3) and streams[1].wait_pulled(3)
        assert len({*streams[0].pull_threads, *streams[1].pull_threads}) == 2
        assert [0, *first] == list(range(10))
        assert list(reads.chunks(1)) == list(range(10))


def test_at_most_depth_chunks_wait_per_thread_beyond_the_one_being_put() -> None:
    streams = [Stream(list(range(100))), Stream(list(range(100))), Stream(list(range(100)))]
    with PartitionReads(_opens(streams), workers=2, depth=3) as reads:
        assert next(reads.chunks(0)) == 0
        assert streams[0].wait_pulled(1 + 3 + 1) and streams[1].wait_pulled(3 + 1)
        time.sleep(0.2)  # threads that ignored the bound would read on here
        assert (streams[0].pulled, streams[1].pulled, streams[2].pulled) == (1 + 3 + 1, 3 + 1, 0)


def test_a_thread_opens_the_next_partition_while_the_last_chunk_of_its_partition_waits() -> None:
    # day-sized partitions are one chunk each: the end of a partition must not wait for the consumer
    streams = [Stream([0]), Stream([1]), Stream([2]), Stream([3])]
    with PartitionReads(_opens(streams), workers=1, depth=1) as reads:
        assert list(reads.chunks(0)) == [0]
        # partition 1's only chunk waits, unconsumed; the thread has already read partition 2's
        assert streams[2].wait_pulled(1)
        time.sleep(0.2)  # a thread that ignored its room would read partition 3 here
        assert (streams[1].pulled, streams[2].pulled, streams[3].opened) == (1, 1, False)
        assert [list(reads.chunks(index)) for index in (1, 2, 3)] == [[1], [2], [3]]


def test_the_room_is_each_threads_whichever_partitions_its_chunks_belong_to() -> None:
    streams = [Stream([0, 1]), Stream([2, 3]), Stream([4, 5]), Stream([6, 7]), Stream([8, 9])]
    with PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        first = reads.chunks(0)
        assert next(first) == 0
        assert streams[2].wait_pulled(1) and streams[3].wait_pulled(1)
        time.sleep(0.2)
        # thread A: 1 waits (partition 0), 4 waits (partition 2), 5 is read and waits for room;
        # thread B: 2 and 3 wait (partition 1), 6 is read and waits for room; partition 4 is not opened
        assert [s.pulled for s in streams] == [2, 2, 2, 1, 0]
        assert [0, *first, *reads.chunks(1), *reads.chunks(2), *reads.chunks(3), *reads.chunks(4)] == list(
            range(10)
        )


def test_a_failure_arrives_as_the_same_object_after_everything_before_it() -> None:
    error = ValueError("partition read failed")
    streams = [Stream([1, 2]), Stream([3, 4, 5, 6], fail_at=2, error=error), Stream([7])]
    got: list[int] = []
    with pytest.raises(ValueError) as raised, PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        for index in range(3):
            got.extend(reads.chunks(index))
    assert raised.value is error
    assert raised.value.__traceback__ is not None
    assert got == [1, 2, 3, 4]
    assert streams[1].closed_in is not None and streams[1].closed_in.startswith("dpone-read-ahead")
    assert not _reading_threads()


def test_a_consumer_that_stops_early_stops_the_threads_and_closes_every_open_read() -> None:
    streams = [Stream(list(range(1000))), Stream(list(range(1000))), Stream(list(range(1000)))]
    with PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        assert next(reads.chunks(0)) == 0
        assert streams[1].wait_pulled(2)
    # the context closed: the threads have ended and closed what they had open, far from its end
    assert not _reading_threads()
    assert streams[0].closed_in and streams[1].closed_in
    assert not streams[2].opened
    assert streams[0].pulled <= 1 + 2 + 1 and streams[1].pulled <= 2 + 1


def test_a_failing_consumer_stops_the_threads() -> None:
    streams = [Stream(list(range(1000))) for _ in range(4)]

    def insert_that_fails(chunks: Iterator[int]) -> None:
        for index, _ in enumerate(chunks):
            if index == 5:
                raise ConnectionError("target went away")

    with pytest.raises(ConnectionError), PartitionReads(_opens(streams), workers=2, depth=2) as reads:
        insert_that_fails(reads.chunks(0))
    assert not _reading_threads()
    assert all(s.closed_in is not None for s in streams if s.opened)
