"""Engine construction for the checkpoint store: SQLite (embedded default) or PostgreSQL (shared).

The URL carries a password for PostgreSQL, so it is parsed once here and never kept as text, logged or put
in a message; SQLAlchemy's own ``Engine`` repr masks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: Accepted (backend, driver) pairs. Other drivers are refused rather than half-supported.
SUPPORTED_DRIVERS = {("sqlite", "pysqlite"), ("postgresql", "psycopg2")}
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
    pair = (parsed.get_backend_name(), parsed.get_driver_name())
    if pair not in SUPPORTED_DRIVERS:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            "checkpoint store URL must be sqlite (pysqlite) or postgresql (psycopg2)",
            details={"backend": pair[0], "driver": pair[1]},
        )
    return parsed


def create_store_engine(url: URL) -> Engine:
    """A pooled engine: connections and compiled statements are reused across writes."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_engine(
        url,
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
        engine = create_engine(url, connect_args=connect_args, poolclass=StaticPool)
    else:
        if url.query.get("uri") not in ("true", ("true",)) and url.database is not None:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args=connect_args)
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
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()
