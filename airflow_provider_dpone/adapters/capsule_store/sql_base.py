"""Engine, schema creation and error translation shared by the capsule and reader-guard stores.

The engine comes from the checkpoint store's factory (same URL rules, SQLite WAL + FULL sync, PostgreSQL
connect timeout): capsules normally live in the checkpoint database.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.engine import URL

from airflow_provider_dpone.adapters.capsule_store.tables import build_tables
from airflow_provider_dpone.adapters.checkpoint_sql.store_base import SqlStoreBase
from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.ports.clock import Clock

_SCHEMA_ATTEMPTS = 3


class CapsuleSqlStore(SqlStoreBase):
    """Base of the capsule and reader-guard stores: the shared SQL store plus both tables' creation."""

    store_name = "capsule store"
    error_code = ErrorCode.CAPSULE_STORE_FAILED

    def __init__(self, url: str | URL, *, clock: Clock | None = None) -> None:
        super().__init__(url, clock=clock)
        self._tables = build_tables()

    def ensure_schema(self) -> None:
        """Create both tables if missing; tolerate losing a creation race to another process."""
        self._check_open("ensure_schema")
        for attempt in range(1, _SCHEMA_ATTEMPTS + 1):
            try:
                with self._engine.begin() as conn:
                    for table in (self._tables.capsules, self._tables.reader_guards):
                        if not self._table_found(conn, table.name)[0]:  # a role owning no table writes rows
                            self._create_table(conn, table)
                return
            except self._db_errors as exc:
                if attempt < _SCHEMA_ATTEMPTS and "already exists" in str(getattr(exc, "orig", exc)):
                    continue
                raise self._failure("ensure_schema", exc) from exc


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; both backends store UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
