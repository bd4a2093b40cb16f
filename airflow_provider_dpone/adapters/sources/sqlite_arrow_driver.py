"""The ADBC SQLite driver behind ``sqlite_arrow``: the only module that imports it.

Optional at run time: without the package (or with ``DPONE_SQLITE_ARROW_READ=0``, the switch an operator
turns off if the Arrow read is ever in doubt) every SQLite read takes the row path (``sqlite3``), as it
did before the Arrow read existed.
"""

from __future__ import annotations

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
        importlib.import_module(f"{_DRIVER}.dbapi")
        importlib.import_module(_DRIVER).connect().close()  # an in-memory database: the native library loads
    except failures:
        return False
    return True


def connect(path: Path) -> Any:
    """A read-only connection in autocommit: every statement its own snapshot, as on the row path. It waits
    for a writer's lock as the row path's connection does (``BUSY_TIMEOUT_S``): the driver's own default is
    not to wait at all."""
    from adbc_driver_sqlite import dbapi

    connection = dbapi.connect(path.resolve().as_uri() + "?mode=ro", autocommit=True)
    try:
        cursor = connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cursor.fetchall()
        finally:
            cursor.close()
    except BaseException:
        connection.close()
        raise
    return connection


@contextmanager
def batches(
    connection: Any, statement: tuple[str, tuple[object, ...]], rows: int | None = None
) -> Iterator[Iterator[pa.RecordBatch]]:
    """The statement's record batches of at most ``rows`` (default :data:`BATCH_ROWS`) rows; the cursor
    closed after."""
    cursor = connection.cursor()
    try:
        size = BATCH_ROWS if rows is None else rows
        cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(size)})
        cursor.execute(statement[0], statement[1])
        yield iter(cursor.fetch_record_batch())
    finally:
        cursor.close()
