"""The next chunks read while the target takes the current one: one bounded read-ahead thread.

A direct load used to alternate: read and convert a chunk, insert it, read the next. The SQLite Arrow
driver and Arrow IPC artifacts read in C, and chDB inserts in C, each without the GIL, so one thread that
pulls the stream ``depth`` chunks ahead overlaps the two. Memory stays bounded: at most ``depth`` chunks
wait in the queue, one is being built and one is being inserted.

What the stream meant is unchanged: the same chunks in the same order, the stream is not touched before
the consumer asks for its first chunk (a direct load reads nothing before arming), and a failure of the
stream is raised to the consumer as the same exception object, after the chunks that preceded it. When
the consumer stops early (a failed insert, a stop request, ``close()``), the thread is told to stop, the
stream is closed in the thread that ran it, and the consumer returns only after the thread has ended: no
read outlives the load.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Generator, Iterator
from queue import Empty, Queue
from typing import Any, TypeVar, Union

T = TypeVar("T")


class _Done:
    """The stream ended."""


class _Failed:
    """The stream raised ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(stream: Iterator[T], depth: int) -> Generator[T, None, None]:
    """``stream``'s items, pulled up to ``depth`` ahead by a thread; ``depth < 1`` reads in line."""
    if depth < 1:
        yield from stream
        return
    queue: Queue[Union[T, _Done, _Failed]] = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in stream:
                queue.put(item)
                if stop.is_set():
                    return
            queue.put(_Done())
        except BaseException as error:  # handed to the consumer, which raises it
            queue.put(_Failed(error))
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                close()

    context = contextvars.copy_context()  # the run's logging context goes with the reads
    thread = threading.Thread(target=context.run, args=(produce,), name="dpone-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = queue.get()
            if isinstance(item, _Done):
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        # After ``stop`` the thread puts at most one more item; emptying the queue makes room for it.
        _drain(queue)
        thread.join()
        _drain(queue)  # chunks read ahead and never used: released now, not when the generator is freed


def _drain(queue: Queue[Any]) -> None:
    while True:
        try:
            queue.get_nowait()
        except Empty:
            return
