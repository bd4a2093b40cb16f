"""The ADBC SQLite driver behind ``sqlite_arrow``: the only module that imports it.

Optional at run time: without the package (or with ``DPONE_SQLITE_ARROW_READ=0``, the switch an operator
turns off if the Arrow read is ever in doubt) every SQLite read takes the row path (``sqlite3``), as it
did before the Arrow read existed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_provider_dpone.adapters.sources.sqlite_arrow import BATCH_ROWS, ArrowReadBroken

#: The environment switch: ``0`` keeps every SQLite read on the row path.
SWITCH = "DPONE_SQLITE_ARROW_READ"
_DRIVER = "adbc_driver_sqlite"
#: How long a read waits for another connection's write lock before it fails (SQLite's busy timeout). An
#: application writing the source file holds that lock while it commits (the whole transaction in rollback
#: journal mode, once it spills); without waiting, a read failed at once, inside the guarded target call on
#: ``lazy_plan + direct``, and blocked the route (seen: 4 runs in 5 beside a writer committing every 50 ms).
BUSY_TIMEOUT_S = 60.0


def _driver_errors() -> tuple[type[BaseException], ...]:
    try:
        import adbc_driver_manager
    except ImportError:
        return ()
    return (adbc_driver_manager.Error,)


#: What a read through the driver may raise: the driver's own errors, a stream error, Arrow refusing a
#: batch (invalid UTF-8) and the read's own proof failing; each becomes ``source_read_failed``.
READ_ERRORS: tuple[type[BaseException], ...] = (
    *_driver_errors(),
    OSError,
    pa.ArrowException,
    ArrowReadBroken,
)


def wanted() -> bool:
    """Whether SQLite reads may use the Arrow driver: not switched off, and it loads."""
    if os.environ.get(SWITCH, "").strip() == "0":
        return False
    return _loads()


#: Partitions a run may read at once when every one takes the Arrow read: ``DEFAULT_READS`` unless set
#: (1 to ``MAX_READS``).
READS_SETTING = "DPONE_SQLITE_ARROW_READS"
DEFAULT_READS = 2
MAX_READS = 4


def reads_at_once(default: int) -> int:
    """``DPONE_SQLITE_ARROW_READS`` when set to a whole number from 1 to ``MAX_READS``; ``default`` when
    unset; 1 when set to anything else (the fewest connections, never a failed run)."""
    text = os.environ.get(READS_SETTING, "").strip()
    if not text:
        return default
    return min(int(text), MAX_READS) if text.isdigit() and int(text) >= 1 else 1


@functools.lru_cache(maxsize=1)
def _loads() -> bool:
    """The driver imports and its native library opens a database (a broken install keeps the row read,
    never fails a run)."""
    if importlib.util.find_spec(_DRIVER) is None:
        return False
    failures: tuple[type[BaseException], ...] = (ImportError, OSError, *_driver_errors())
    try:
        importlib.import_module(_DRIVER).connect().close()  # an in-memory database: the native library loads
    except failures:
        return False
    return True


class Connection:
    """One read-only driver connection, through ADBC's low-level API (``adbc_driver_sqlite.connect`` and
    ``adbc_driver_manager``'s handles). The DB-API layer on top of it imports ``pyarrow.dataset`` (~15 ms,
    and ~30-40 ms of a run with its own checks and cursors) for nothing these reads use."""

    def __init__(self, database: Any, connection: Any) -> None:
        self._database = database
        self.handle = connection

    def close(self) -> None:
        try:
            self.handle.close()
        finally:
            self._database.close()


def connect(path: Path) -> Connection:
    """A read-only connection in autocommit (the low-level API's default): every statement its own
    snapshot, as on the row path. It waits for a writer's lock as the row path's connection does
    (``BUSY_TIMEOUT_S``): the driver's own default is not to wait at all."""
    import adbc_driver_manager
    import adbc_driver_sqlite

    database = adbc_driver_sqlite.connect(path.resolve().as_uri() + "?mode=ro")
    try:
        connection = Connection(database, adbc_driver_manager.AdbcConnection(database))
    except BaseException:
        database.close()
        raise
    try:
        _execute(connection, f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    except BaseException:
        connection.close()
        raise
    return connection


@contextmanager
def batches(
    connection: Connection, statement: tuple[str, tuple[object, ...]], rows: int | None = None
) -> Iterator[Iterator[pa.RecordBatch]]:
    """The statement's record batches of at most ``rows`` (default :data:`BATCH_ROWS`) rows; the stream and
    the statement released after. Parameters are bound as one row of Arrow values, as the DB-API layer
    binds them."""
    import adbc_driver_manager

    handle = adbc_driver_manager.AdbcStatement(connection.handle)
    reader: pa.RecordBatchReader | None = None
    try:
        size = BATCH_ROWS if rows is None else rows
        handle.set_options(**{"adbc.sqlite.query.batch_rows": str(size)})
        handle.set_sql_query(statement[0])
        if statement[1]:
            handle.bind(
                pa.record_batch(
                    [[value] for value in statement[1]], names=[str(i) for i in range(len(statement[1]))]
                )
            )
        stream, _ = handle.execute_query()
        reader = pa.RecordBatchReader._import_from_c(stream.address)
        yield iter(reader)
    finally:
        try:
            if reader is not None:
                reader.close()
        finally:
            handle.close()


@contextmanager
def snapshot(connection: Connection) -> Iterator[None]:
    """The statements run inside see one snapshot of the file: a read transaction (``BEGIN`` ...
    ``COMMIT``) instead of one per statement, so several statements prove the same rows as one would.
    A failure inside ends it with ``ROLLBACK`` (best effort: a connection that cannot end it is closed by
    its owner, which sees the error)."""
    _execute(connection, "BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(*READ_ERRORS):
            _execute(connection, "ROLLBACK")
        raise
    _execute(connection, "COMMIT")


def _execute(connection: Connection, sql: str) -> None:
    with batches(connection, (sql, ())) as rows:
        for _ in rows:
            pass
