"""Engine construction for the checkpoint store: SQLite (embedded default) or PostgreSQL (shared).

The URL carries a password for PostgreSQL, so it is parsed once here and never kept as text, logged or put
in a message; SQLAlchemy's own ``Engine`` repr masks it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: Accepted (backend, driver) pairs. Other drivers are refused rather than half-supported.
SUPPORTED_DRIVERS = {("sqlite", "pysqlite"), ("postgresql", "psycopg2")}
#: Airflow spells PostgreSQL URIs ``postgres://``; SQLAlchemy only knows ``postgresql``.
_BACKEND_ALIASES = {"postgres": "postgresql"}
_DEFAULT_DRIVERS = {"sqlite": "pysqlite", "postgresql": "psycopg2"}
#: How long a SQLite writer waits for another process's write lock before failing.
SQLITE_BUSY_TIMEOUT_S = 30.0
#: Fail fast when PostgreSQL is unreachable instead of hanging an Airflow worker slot.
POSTGRES_CONNECT_TIMEOUT_S = 10


def parse_url(url: str | URL) -> URL:
    """The parsed URL, or ``connection_invalid``. The cause is not chained: parse errors may quote the URL."""
    if isinstance(url, URL):
        parsed = url
    else:
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise DponeError(
                ErrorCode.CONNECTION_INVALID, "checkpoint store URL is not a valid URL"
            ) from None
    backend, _, driver = parsed.drivername.partition("+")
    backend = _BACKEND_ALIASES.get(backend, backend)
    driver = driver or _DEFAULT_DRIVERS.get(backend, "")
    if (backend, driver) not in SUPPORTED_DRIVERS:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            "checkpoint store URL must be sqlite (pysqlite) or postgresql (psycopg2)",
            details={"backend": backend, "driver": driver or None},
        )
    return parsed.set(drivername=f"{backend}+{driver}")


def create_store_engine(url: URL) -> Engine:
    """A pooled engine: connections and compiled statements are reused across writes."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_engine(
        url,
        hide_parameters=True,  # error text in task logs never carries bound values (bounds are source data)
        pool_pre_ping=True,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, "application_name": "dpone-checkpoints"},
    )


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


def _sqlite_engine(url: URL) -> Engine:
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
    if _is_memory(url):
        # One shared connection, or every pooled connection would see its own empty database.
        connect_args["check_same_thread"] = False
        engine = create_engine(url, connect_args=connect_args, poolclass=StaticPool, hide_parameters=True)
    else:
        if url.query.get("uri") not in ("true", ("true",)) and url.database is not None:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args=connect_args, hide_parameters=True)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL so a CLI writer and a reader worker share the file; FULL sync so a commit survives power loss.

    The guard's armed records must be on disk before the target is touched: NORMAL would make WAL commits
    durable only at the next checkpoint.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        _switch_to_wal(cursor)
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """Set WAL mode, waiting like the busy timeout would: SQLite does not apply its busy handler here.

    Converting a new file to WAL takes an exclusive lock and fails at once with "database is locked" when
    several processes open the new file together (seen when workers race ``ensure_schema``). Waiting for
    the lock is not a retry of a failed operation; a different error is raised immediately.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
