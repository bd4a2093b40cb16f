"""What every SQL store of the project shares: the engine, the open/closed state, UTC stamps and safe errors.

The checkpoint store and the capsule/reader-guard stores normally live in the same database, so they open
it the same way (``engine.py``) and translate driver failures the same way: operation, backend and the
driver's exception class name — never its message, the URL, SQL or values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, ClassVar

from sqlalchemy import Connection, MetaData, Table, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateTable

from airflow_provider_dpone.adapters.checkpoint_sql.engine import (
    acquire_store_engine,
    parse_url,
    release_store_engine,
)
from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.ports.clock import Clock


class SqlStoreBase:
    """Subclasses set ``store_name`` (for messages) and ``error_code`` (what their failures are)."""

    store_name: ClassVar[str] = "store"
    error_code: ClassVar[ErrorCode] = ErrorCode.CHECKPOINT_STORE_FAILED

    def __init__(self, url: str | URL, *, clock: Clock | None = None) -> None:
        parsed = parse_url(url)
        self._backend = parsed.get_backend_name()
        self._closed = False
        try:
            self._engine = acquire_store_engine(parsed)
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure("open", exc) from exc
        self._db_errors: tuple[type[BaseException], ...] = (
            SQLAlchemyError,
            self._engine.dialect.loaded_dbapi.Error,
        )
        self._clock = clock

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._backend

    def __repr__(self) -> str:
        return f"{type(self).__name__}(backend={self._backend!r})"

    def close(self) -> None:
        """Dispose of the pooled connections. Idempotent; the store cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            release_store_engine(self._engine)

    def _now(self) -> datetime:
        now = self._clock.now() if self._clock is not None else datetime.now(timezone.utc)
        return now.astimezone(timezone.utc)

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise DponeError(
                self.error_code,
                f"{self.store_name} is closed",
                details={"operation": operation, "backend": self._backend},
            )

    @contextmanager
    def _translated(self, operation: str, **details: Any) -> Iterator[None]:
        try:
            yield
        except self._db_errors as exc:
            raise self._failure(operation, exc, **details) from exc

    def _failure(self, operation: str, exc: BaseException, **details: Any) -> DponeError:
        """A safe error: operation, backend and the driver's exception class name, never its message."""
        cause = getattr(exc, "orig", None) or exc
        return DponeError(
            self.error_code,
            f"{self.store_name} operation {operation} failed on {self._backend} ({type(cause).__name__})",
            details={
                "operation": operation,
                "backend": self._backend,
                "cause": type(cause).__name__,
                **details,
            },
        )

    def _table_found(self, conn: Connection, name: str) -> tuple[bool, str | None]:
        """Whether the table exists where unqualified statements find it (PostgreSQL's search_path), and its
        schema (None: the default). A store creates only what is missing: PostgreSQL checks a ``CREATE ...
        IF NOT EXISTS``'s privileges before it looks, which a role that writes rows but owns no table lacks."""
        if self._backend != "postgresql":
            return inspect(conn).has_table(name), None
        schema = conn.execute(
            text(
                "SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                "ON n.oid = c.relnamespace WHERE c.oid = to_regclass(:name)"
            ),
            {"name": name},
        ).scalar()
        return schema is not None, schema

    def _create_table(self, conn: Connection, table: Table) -> None:
        """Create a missing table of the store beside the checkpoint table when that exists (PostgreSQL): a
        schema put before it on a role's search_path later (a per-user schema) would otherwise take the new
        table, where another role does not look."""
        home = self._table_found(conn, CHECKPOINT_TABLE)[1] if self._backend == "postgresql" else None
        created = table if home is None else table.to_metadata(MetaData(), schema=home)
        conn.execute(CreateTable(created, if_not_exists=True))
