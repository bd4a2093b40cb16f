"""Build a checkpoint store from an ``EndpointDescriptor`` (a manifest's ``checkpoints.connection``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from airflow_provider_dpone.adapters.checkpoint_sql.store import SqlCheckpointStore
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.ports.clock import Clock


def store_url_for(endpoint: EndpointDescriptor, base_dir: Path | None = None) -> URL:
    """The SQLAlchemy URL of the endpoint, built field by field (the password is never pasted into text).

    A relative SQLite path is resolved against ``base_dir`` (the manifest's folder), else the working
    directory, so an inline ``sqlite:///state.sqlite`` in a manifest means "next to the manifest".
    """
    if endpoint.kind is EndpointKind.SQLITE:
        if not endpoint.path:
            raise _invalid(endpoint, "has no database file path")
        if endpoint.path == ":memory:":
            return URL.create("sqlite+pysqlite", database=":memory:")
        path = Path(endpoint.path).expanduser()
        if not path.is_absolute():
            path = (base_dir if base_dir is not None else Path.cwd()) / path
        return URL.create("sqlite+pysqlite", database=str(path))
    if endpoint.kind is EndpointKind.POSTGRES:
        if not endpoint.host:
            raise _invalid(endpoint, "has no host")
        if not endpoint.database:
            raise _invalid(endpoint, "has no database")
        return URL.create(
            "postgresql+psycopg2",
            username=endpoint.user,
            password=endpoint.secret(),
            host=endpoint.host,
            port=endpoint.port,
            database=endpoint.database,
            query={"sslmode": "require"} if endpoint.secure else {},
        )
    raise _invalid(endpoint, "cannot hold checkpoints (use sqlite or postgres)")


def dbapi_connection(endpoint: EndpointDescriptor, base_dir: Path | None = None) -> Any:
    """A new DB-API connection to the store at :func:`store_url_for`'s URL (caller closes it).

    The checkpoint-store hook's ``get_conn``: the same URL the store writes through, so the hook
    inspects exactly the table the runtime uses. No pool: closing it closes the connection."""
    engine = create_engine(store_url_for(endpoint, base_dir), poolclass=NullPool)
    return engine.raw_connection()


def store_from_endpoint(
    endpoint: EndpointDescriptor, base_dir: Path | None = None, *, clock: Clock | None = None
) -> SqlCheckpointStore:
    """A ready-to-use store (call ``ensure_schema()`` before the first write)."""
    return SqlCheckpointStore(store_url_for(endpoint, base_dir), clock=clock)


def _invalid(endpoint: EndpointDescriptor, problem: str) -> DponeError:
    return DponeError(
        ErrorCode.CONNECTION_INVALID,
        f"checkpoint {endpoint.describe()} {problem}",
        details={"connection": endpoint.name, "kind": endpoint.kind.value},
    )
