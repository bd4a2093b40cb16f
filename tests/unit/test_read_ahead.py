"""The read-ahead thread: the same stream, bounded, never started early, always stopped and closed."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.runtime.read_ahead import read_ahead

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
        self.closed_in: str | None = None
        self.pull_threads: set[str] = set()
        self.pulled_event = threading.Condition()

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        self.pull_threads.add(threading.current_thread().name)
        if self.fail_at is not None and self.pulled == self.fail_at:
            raise self.error
        if self.pulled >= len(self.items):
            raise StopIteration
        item = self.items[self.pulled]
        with self.pulled_event:
            self.pulled += 1
            self.pulled_event.notify_all()
        return item

    def close(self) -> None:
        self.closed_in = threading.current_thread().name

    def wait_pulled(self, count: int) -> bool:
        with self.pulled_event:
            return self.pulled_event.wait_for(lambda: self.pulled >= count, timeout=WAIT)


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.integers(), max_size=40), depth=st.integers(min_value=0, max_value=5))
def test_every_item_arrives_once_in_order_whatever_the_depth(items: list[int], depth: int) -> None:
    stream = Stream(items)
    assert list(read_ahead(stream, depth)) == items
    assert not _threads_named("dpone-read-ahead")


def test_the_stream_is_not_touched_before_the_first_item_is_asked_for() -> None:
    stream = Stream([1, 2, 3])
    ahead = read_ahead(stream, 2)
    time.sleep(0.05)
    assert stream.pulled == 0 and not stream.pull_threads  # a direct load reads nothing before arming
    assert next(ahead) == 1
    ahead.close()


def test_reads_run_in_another_thread_while_the_consumer_holds_an_item() -> None:
    stream = Stream(list(range(10)))
    ahead = read_ahead(stream, 2)
    assert next(ahead) == 0
    # the consumer still holds item 0 (inserting it): the thread reads on meanwhile
    assert stream.wait_pulled(3)
    assert stream.pull_threads == {"dpone-read-ahead"}
    assert list(ahead) == list(range(1, 10))


def test_at_most_depth_items_wait_beyond_the_one_held_and_the_one_being_put() -> None:
    stream = Stream(list(range(100)))
    ahead = read_ahead(stream, 3)
    assert next(ahead) == 0
    assert stream.wait_pulled(1 + 3 + 1)
    time.sleep(0.1)  # a thread that ignored the bound would read on here
    assert stream.pulled == 1 + 3 + 1
    ahead.close()


def test_a_failure_arrives_as_the_same_object_after_the_items_before_it() -> None:
    error = ValueError("partition read failed")
    stream = Stream(list(range(10)), fail_at=4, error=error)
    got: list[int] = []
    with pytest.raises(ValueError) as raised:
        for item in read_ahead(stream, 2):
            got.append(item)
    assert raised.value is error
    assert raised.value.__traceback__ is not None
    assert got == [0, 1, 2, 3]
    assert stream.closed_in == "dpone-read-ahead"
    assert not _threads_named("dpone-read-ahead")


def test_a_consumer_that_stops_early_stops_the_thread_and_closes_the_stream() -> None:
    stream = Stream(list(range(1000)))
    with contextlib.closing(read_ahead(stream, 2)) as ahead:
        assert next(ahead) == 0
        assert stream.wait_pulled(3)
    # close() returned: the thread has ended and closed the stream itself, far from its end
    assert stream.closed_in == "dpone-read-ahead"
    assert not _threads_named("dpone-read-ahead")
    assert stream.pulled <= 1 + 2 + 2


def test_a_failing_consumer_stops_the_thread_and_closes_the_stream() -> None:
    stream = Stream(list(range(1000)))

    def insert_that_fails(chunks: Iterator[int]) -> None:
        for index, _ in enumerate(chunks):
            if index == 5:
                raise ConnectionError("target went away")

    with pytest.raises(ConnectionError), contextlib.closing(read_ahead(stream, 2)) as ahead:
        insert_that_fails(ahead)
    assert stream.closed_in == "dpone-read-ahead"
    assert not _threads_named("dpone-read-ahead")


def test_depth_zero_reads_in_line_in_the_consumers_thread() -> None:
    stream = Stream([1, 2, 3])
    assert list(read_ahead(stream, 0)) == [1, 2, 3]
    assert stream.pull_threads == {threading.current_thread().name}


def test_a_stream_that_never_started_starts_no_thread_and_stays_untouched() -> None:
    stream = Stream([1, 2, 3])
    read_ahead(stream, 2).close()
    assert stream.pulled == 0 and stream.closed_in is None
    assert not _threads_named("dpone-read-ahead")
