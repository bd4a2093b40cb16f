"""A stop request for a running transfer: set from outside (Airflow's ``on_kill``, a signal), honoured
by the engine at the next chunk and between stages.

Why a token and not an exception thrown into the main thread: Airflow 3 calls ``on_kill`` from its
SIGTERM handler, in the main thread, and then lets the interrupted code carry on. Raising from there
would land at an arbitrary bytecode (inside a checkpoint write, a client's close). The token only
records the request; the engine raises :class:`TransferInterrupted` at a point it chose, so the normal
guard lifecycle records the truth: ``failed_before_target`` before the target call,
``target_outcome_unknown`` inside it.

``cancel`` may run inside a signal handler: it takes no lock, and its callbacks (killing a reader
worker's process group, for instance) must be just as safe to run there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class TransferInterrupted(BaseException):
    """The run stopped on request. A ``BaseException``, like ``KeyboardInterrupt``: no ``except
    Exception`` of a connector or a cleanup step may swallow it or wrap it into a load failure.

    The lifecycle treats it as any failure (its ``except BaseException`` records the phase), and the
    operator or the CLI turns it into its own safe failure at the boundary."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the transfer was interrupted: {reason}")
        self.reason = reason


class CancellationToken:
    """One run's stop request. Cheap to check; safe to set from a signal handler or another thread."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str) -> None:
        """Record the request (the first reason wins), then run every callback once, best effort."""
        if self._reason is None:
            self._reason = reason or "stop requested"
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            # a stop request must not fail; the engine still stops at its next check
            with contextlib.suppress(Exception):
                callback()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the run is cancelled (at once if it already is)."""
        if self._reason is not None:
            with contextlib.suppress(Exception):
                callback()
            return
        self._callbacks.append(callback)

    def raise_if_cancelled(self) -> None:
        if self._reason is not None:
            raise TransferInterrupted(self._reason)

    def checked(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, with a check before each is pulled and before each is handed on."""
        iterator = iter(items)
        try:
            while True:
                self.raise_if_cancelled()
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                self.raise_if_cancelled()
                yield item
        finally:
            close = getattr(iterator, "close", None)
            if callable(close):
                close()
