"""Read-only commands open an existing checkpoint store or refuse: they never create one.

Opening a store for writing creates the SQLite file, its WAL and the tables (``ensure_schema``), so a
read-only command pointed at the wrong path would report an empty, unblocked route from a store it just
made. This check looks without writing: the SQLite file is opened read-only, PostgreSQL is asked through
its catalog. A missing store is ``usage_error`` (exit 2) "no checkpoint store at ...".
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import URL

from airflow_provider_dpone.adapters.checkpoint_sql.engine import create_store_engine
from airflow_provider_dpone.adapters.checkpoint_sql.from_endpoint import store_url_for
from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode


def require_checkpoint_store(endpoint: EndpointDescriptor, base_dir: Path | None = None) -> None:
    """Return if the endpoint holds the checkpoint table; else ``usage_error`` "no checkpoint store at ..."."""
    url = store_url_for(endpoint, base_dir)
    if url.get_backend_name() == "sqlite":
        _require_sqlite(endpoint, url)
    else:
        _require_server(endpoint, url)


def _missing(endpoint: EndpointDescriptor, where: str) -> DponeError:
    return DponeError(
        ErrorCode.USAGE,
        f"no checkpoint store at {where}: nothing has run against it (read-only commands never create one)",
        details={
            "connection": endpoint.name,
            "kind": endpoint.kind.value,
            "reason": "checkpoint_store_missing",
        },
        hint_lines=(
            "check checkpoints.connection in the manifest (a relative SQLite path is read next to the manifest)",
        ),
    )


def _unreadable(endpoint: EndpointDescriptor, exc: BaseException) -> DponeError:
    return DponeError(
        ErrorCode.CHECKPOINT_STORE_FAILED,
        f"could not look for the checkpoint store of {endpoint.describe()}",
        details={"connection": endpoint.name, "error_class": type(exc).__name__},
    )


def _require_sqlite(endpoint: EndpointDescriptor, url: URL) -> None:
    database = url.database or ""
    if database == ":memory:":
        raise _missing(endpoint, "an in-memory SQLite database")
    path = Path(database)
    if not path.is_file():
        raise _missing(endpoint, str(path))
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHECKPOINT_TABLE,)
            ).fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise _unreadable(endpoint, exc) from exc
    if found is None:
        raise _missing(endpoint, f"{path} (no table {CHECKPOINT_TABLE})")


def _require_server(endpoint: EndpointDescriptor, url: URL) -> None:
    engine = create_store_engine(url)
    try:
        present = inspect(engine).has_table(CHECKPOINT_TABLE)
    except Exception as exc:  # the driver's class name only: its message may carry the URL
        raise _unreadable(endpoint, exc) from exc
    finally:
        engine.dispose()
    if not present:
        where = f"{endpoint.describe()} (no table {CHECKPOINT_TABLE})"
        raise _missing(endpoint, where)


def checkpoint_store_absent(endpoint: EndpointDescriptor, base_dir: Path | None = None) -> bool:
    """Whether nothing at all is there yet: no SQLite file (nor anything else) at the path, no checkpoint
    table in any schema of the PostgreSQL database (a link to nothing is nothing). A store this role cannot see
    (a schema without ``USAGE``, off its ``search_path``) or a folder at the path is not absent: reading it fails and says so,
    where calling it "nothing has run yet" let a blocked route through (``RouteClearSensor``)."""
    url = store_url_for(endpoint, base_dir)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database == ":memory:" or not os.path.exists(database):  # a link to nothing: the run creates it
            return database != ":memory:"
        if not Path(database).is_file():
            return False  # a folder: opening it fails and says so
        try:
            _require_sqlite(endpoint, url)
        except DponeError as missing:  # an empty file (an earlier release's sensor left one): no table yet
            return missing.details.get("reason") == "checkpoint_store_missing"
        return False
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM pg_catalog.pg_class WHERE relname = :name LIMIT 1"),
                {"name": CHECKPOINT_TABLE},
            ).first()
    except Exception as exc:  # the driver's class name only: its message may carry the URL
        raise _unreadable(endpoint, exc) from exc
    finally:
        engine.dispose()
    return found is None
