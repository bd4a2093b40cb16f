"""The next partitions' chunks read while the target takes the current one: bounded reading threads.

A direct load used to alternate: read and convert a chunk, insert it, read the next. The SQLite Arrow
driver and Arrow IPC artifacts read in C, and chDB inserts in C, each mostly without the GIL, so reading
threads that pull partitions ahead overlap reading with inserting; a source that allows it
(``ConcurrentSource``) has several partitions read at once.

What the stream means is unchanged: every partition's chunks, partitions in order, each partition's in
its order. No partition is opened before the consumer asks for the first chunk (a direct load reads
nothing before arming). A failure of a partition's read reaches the consumer as the same exception object,
after that partition's chunks that preceded it and after every earlier partition. When the consumer stops
early (a failed insert, a stop request, ``close()``), the threads are told to stop, each open read is
closed in the thread that ran it, and the consumer returns only after every thread has ended: no read
outlives the load. Memory is bounded: at most ``depth`` chunks read by one thread wait for the consumer,
whichever partitions they belong to, and one more is being built in each thread. The end of a partition
takes no room: a thread that has read a partition's last chunk opens the next partition while that chunk
waits (with one chunk of room it used to wait for the consumer first, at every partition of a day-sized
load).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from queue import Empty, Queue
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: How often a reading thread waiting for room looks whether it was told to stop (seconds).
_POLL_S = 0.05


class _Done:
    """The partition's read ended."""


class _Failed:
    """The partition's read raised ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class PartitionReads(Generic[T]):
    """The reads ``opens`` (one callable per partition, opening its stream), run ahead by ``workers``
    threads (at least one); :meth:`chunks` hands each partition's items to the consumer, in order. Use as a
    context manager: leaving it stops the threads."""

    def __init__(
        self,
        opens: Sequence[Callable[[], Iterator[T]]],
        *,
        workers: int,
        depth: int,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._opens = list(opens)
        self._clock = clock
        #: when each partition's read was opened (``clock``), for the time a partition was in flight
        self._opened: list[float | None] = [None] * len(self._opens)
        self._workers = max(1, min(workers, len(self._opens)))
        #: each partition's chunks and its end (unbounded: the room below bounds the chunks)
        self._queues: list[Queue[Any]] = [Queue() for _ in self._opens]
        #: each thread's room for chunks the consumer has not taken; the consumer frees it as it takes one
        self._room = [threading.Semaphore(depth) for _ in range(self._workers)]
        #: which thread reads each partition (set before its first chunk is put)
        self._reader_of: list[int] = [0] * len(self._opens)
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> PartitionReads[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def chunks(self, index: int) -> Generator[T, None, None]:
        """Partition ``index``'s items; asked for in order, from 0. The threads start at the first item."""
        if not self._threads:
            self._start()
        queue = self._queues[index]
        while True:
            item = queue.get()
            if isinstance(item, _Done):
                return
            if isinstance(item, _Failed):
                raise item.error
            self._room[self._reader_of[index]].release()
            yield item

    def opened_at(self, index: int) -> float | None:
        """When partition ``index``'s read was opened, on ``clock`` (``None``: not yet, or no clock)."""
        return self._opened[index]

    def _open(self, index: int) -> Iterator[T]:
        if self._clock is not None:
            self._opened[index] = self._clock()
        return self._opens[index]()

    def close(self) -> None:
        """Stop the threads and wait for them; chunks read ahead and never used are released."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for queue in self._queues:
            _drain(queue)

    def _start(self) -> None:
        for number in range(self._workers):
            context = contextvars.copy_context()  # the run's logging context goes with the reads
            thread = threading.Thread(
                target=context.run, args=(self._work, number), name=f"dpone-read-ahead-{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _take(self) -> int | None:
        with self._lock:
            if self._stop.is_set() or self._next >= len(self._opens):
                return None
            index = self._next
            self._next += 1
            return index

    def _work(self, number: int) -> None:
        """Read partitions in turn, one chunk of room each. The room is never held against the consumer:
        this thread takes partitions in increasing order and the consumer takes them in order, so when the
        thread waits, its unconsumed chunks belong to the partition the consumer is on or will reach next."""
        room = self._room[number]
        while (index := self._take()) is not None:
            self._reader_of[index] = number
            queue = self._queues[index]
            stream: Iterator[T] | None = None
            try:
                stream = self._open(index)
                for item in stream:
                    if not self._wait_for(room):
                        return
                    queue.put(item)
                queue.put(_Done())
            except BaseException as error:  # handed to the consumer, which raises it in its turn
                queue.put(_Failed(error))
                return
            finally:
                if stream is not None:
                    _close(stream)

    def _wait_for(self, room: threading.Semaphore) -> bool:
        """Take room for one chunk; ``False`` when told to stop first."""
        while not self._stop.is_set():
            if room.acquire(timeout=_POLL_S):
                return True
        return False


def _close(stream: Iterator[Any]) -> None:
    close = getattr(stream, "close", None)
    if callable(close):
        close()


def _drain(queue: Queue[Any]) -> None:
    while True:
        try:
            queue.get_nowait()
        except Empty:
            return
