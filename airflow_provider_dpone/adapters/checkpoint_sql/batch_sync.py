"""One fsync per checkpoint batch on SQLite, with every row still its own transaction.

The store appends a batch one row at a time, each row committed on its own (never one atomic batch: the
guard must be correct without atomicity). On SQLite in WAL mode with ``synchronous = FULL`` every one of
those commits waits for an fsync of the WAL: two per partition for arm + promote, 2-5 ms each on a busy
disk, which was the whole guard cost on SQLite.

In WAL mode a commit appends its frames to the one WAL file, in order. ``synchronous = NORMAL`` commits
without the fsync (still durable across a crash of the process: the frames are in the file); a later
commit under ``FULL`` fsyncs the WAL file, which makes every frame before it durable with it. So the rows
of a batch before its last commit under NORMAL and the last one under FULL: when ``write_batch`` returns,
every row of the batch is on disk, as before, and the target is only ever invoked after that return. A
power loss in the middle of the batch keeps a prefix of it (the WAL is replayed up to its first torn
frame), which is what a failure in the middle left before.

Anything but a file in WAL mode (an in-memory database, a rollback journal, PostgreSQL) keeps one sync
per commit. The connection goes back to the pool under ``FULL`` or not at all (invalidated).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Connection

log = logging.getLogger(__name__)


def _noop() -> None:
    return None


@contextmanager
def one_sync_per_batch(conn: Connection, backend: str, rows: int) -> Iterator[Callable[[], None]]:
    """Within the block, commits skip the fsync until the yielded function is called, right before the
    batch's last row; from then on (and after the block, whatever happened) the connection syncs every
    commit again. A no-op unless ``conn`` is a SQLite file in WAL mode and the batch has 2 rows or more."""
    if backend != "sqlite" or rows < 2 or not _wal(conn):
        yield _noop
        return
    conn.exec_driver_sql("PRAGMA synchronous = NORMAL")
    synced = False

    def sync_from_now() -> None:
        nonlocal synced
        conn.exec_driver_sql("PRAGMA synchronous = FULL")
        synced = True

    try:
        yield sync_from_now
    finally:
        if not synced:
            _restore_full(conn)


def _wal(conn: Connection) -> bool:
    mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    return isinstance(mode, str) and mode.lower() == "wal"


def _restore_full(conn: Connection) -> None:
    """Back to one sync per commit; a connection that cannot be set back is discarded, never pooled.
    Runs while an exception may propagate: its own failure is logged, never raised in its place."""
    try:
        conn.exec_driver_sql("PRAGMA synchronous = FULL")
    except Exception as exc:
        log.warning(
            "could not restore synchronous = FULL (%s); discarding the connection", type(exc).__name__
        )
        conn.invalidate()
