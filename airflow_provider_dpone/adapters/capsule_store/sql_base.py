"""Engine, schema creation and error translation shared by the capsule and reader-guard stores.

The engine comes from the checkpoint store's factory (same URL rules, SQLite WAL + FULL sync, PostgreSQL
connect timeout): capsules normally live in the checkpoint database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateTable

from airflow_provider_dpone.adapters.capsule_store.tables import build_tables
from airflow_provider_dpone.adapters.checkpoint_sql.engine import create_store_engine, parse_url
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.ports.clock import Clock

_SCHEMA_ATTEMPTS = 3


class SqlStoreBase:
    _store_name = "capsule store"

    def __init__(self, url: str | URL, *, clock: Clock | None = None) -> None:
        parsed = parse_url(url)
        self._backend = parsed.get_backend_name()
        self._closed = False
        try:
            self._engine = create_store_engine(parsed)
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure("open", exc) from exc
        self._db_errors: tuple[type[BaseException], ...] = (
            SQLAlchemyError,
            self._engine.dialect.loaded_dbapi.Error,
        )
        self._clock = clock
        self._tables = build_tables()

    @property
    def backend(self) -> str:
        return self._backend

    def __repr__(self) -> str:
        return f"{type(self).__name__}(backend={self._backend!r})"

    def ensure_schema(self) -> None:
        """Create both tables if missing; tolerate losing a creation race to another process."""
        self._check_open("ensure_schema")
        for attempt in range(1, _SCHEMA_ATTEMPTS + 1):
            try:
                with self._engine.begin() as conn:
                    for table in (self._tables.capsules, self._tables.reader_guards):
                        conn.execute(CreateTable(table, if_not_exists=True))
                return
            except self._db_errors as exc:
                if attempt < _SCHEMA_ATTEMPTS and "already exists" in str(getattr(exc, "orig", exc)):
                    continue
                raise self._failure("ensure_schema", exc) from exc

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    def _now(self) -> datetime:
        now = self._clock.now() if self._clock is not None else datetime.now(timezone.utc)
        return now.astimezone(timezone.utc)

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise DponeError(
                ErrorCode.CAPSULE_STORE_FAILED,
                f"{self._store_name} is closed",
                details={"operation": operation, "backend": self._backend},
            )

    @contextmanager
    def _translated(self, operation: str, **details: Any) -> Iterator[None]:
        try:
            yield
        except self._db_errors as exc:
            raise self._failure(operation, exc, **details) from exc

    def _failure(self, operation: str, exc: BaseException, **details: Any) -> DponeError:
        """Safe: operation, backend and the driver's exception class, never its message."""
        cause = getattr(exc, "orig", None) or exc
        return DponeError(
            ErrorCode.CAPSULE_STORE_FAILED,
            f"{self._store_name} operation {operation} failed on {self._backend}",
            details={
                "operation": operation,
                "backend": self._backend,
                "cause": type(cause).__name__,
                **details,
            },
        )


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; both backends store UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
