"""``SqlReaderGuardStore``: the durable reader guard of one exact generation (ADR 0074).

Every transition is one conditional statement, so the database arbitrates races:

* acquire: INSERT a held row (the primary key admits one row per operation and generation); when a row
  exists, re-take it only with ``UPDATE ... WHERE state = 'released'``; the same owner re-acquiring a held
  guard gets it back unchanged; anyone else gets ``reader_guard_held``.
* release: ``UPDATE ... WHERE owner_token = :owner AND state = 'acquired'``; no other owner, and no
  timeout, can release a held guard. A dead owner's guard stays held until an operator resolves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import Row, and_, select
from sqlalchemy.exc import IntegrityError

from airflow_provider_dpone.adapters.capsule_store.sql_base import CapsuleSqlStore, as_utc
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import ReaderGuard, ReaderGuardState

if TYPE_CHECKING:
    from airflow_provider_dpone.ports.capsule_store import ReaderGuardStore


class SqlReaderGuardStore(CapsuleSqlStore):
    """``ReaderGuardStore`` on one SQLite file or PostgreSQL database (table ``dpone_reader_guards``)."""

    store_name = "reader guard store"

    def read(self, operation_id: str, generation_key: str) -> ReaderGuard | None:
        self._check_open("read")
        details = {"operation_id": operation_id, "generation_key": generation_key}
        with self._translated("read", **details), self._engine.connect() as conn:
            row = conn.execute(self._select(operation_id, generation_key)).first()
        return None if row is None else self._parse(row, details)

    def acquire(self, operation_id: str, generation_key: str, owner_token: str) -> ReaderGuard:
        self._check_open("acquire")
        now = self._now()
        # Validate the inputs through the contract before touching the database.
        wanted = self._guard(operation_id, generation_key, owner_token, ReaderGuardState.ACQUIRED, now)
        details = {"operation_id": operation_id, "generation_key": generation_key}
        t = self._tables.reader_guards
        try:
            with self._engine.connect() as conn:
                try:
                    conn.execute(
                        t.insert(),
                        {
                            "operation_id": operation_id,
                            "generation_key": generation_key,
                            "owner_token": owner_token,
                            "state": ReaderGuardState.ACQUIRED.value,
                            "acquired_at": now,
                            "released_at": None,
                        },
                    )
                    conn.commit()
                    return wanted
                except IntegrityError:
                    conn.rollback()
                retaken = conn.execute(
                    t.update()
                    .where(
                        self._key(operation_id, generation_key), t.c.state == ReaderGuardState.RELEASED.value
                    )
                    .values(
                        owner_token=owner_token,
                        state=ReaderGuardState.ACQUIRED.value,
                        acquired_at=now,
                        released_at=None,
                    )
                )
                conn.commit()
                if retaken.rowcount == 1:
                    return wanted
                row = conn.execute(self._select(operation_id, generation_key)).first()
        except self._db_errors as exc:
            raise self._failure("acquire", exc, **details) from exc
        current = None if row is None else self._parse(row, details)
        if (
            current is not None
            and current.state is ReaderGuardState.ACQUIRED
            and current.owner_token == owner_token
        ):
            return current
        raise DponeError(
            ErrorCode.READER_GUARD_HELD,
            "the reader guard of this generation is held by another owner; it never expires on its own",
            details=details,
        )

    def release(self, operation_id: str, generation_key: str, owner_token: str) -> ReaderGuard:
        self._check_open("release")
        details = {"operation_id": operation_id, "generation_key": generation_key}
        t = self._tables.reader_guards
        now = self._now()
        try:
            with self._engine.connect() as conn:
                conn.execute(
                    t.update()
                    .where(
                        self._key(operation_id, generation_key),
                        t.c.owner_token == owner_token,
                        t.c.state == ReaderGuardState.ACQUIRED.value,
                    )
                    .values(state=ReaderGuardState.RELEASED.value, released_at=now)
                )
                conn.commit()
                row = conn.execute(self._select(operation_id, generation_key)).first()
        except self._db_errors as exc:
            raise self._failure("release", exc, **details) from exc
        current = None if row is None else self._parse(row, details)
        if (
            current is not None
            and current.owner_token == owner_token
            and current.state is ReaderGuardState.RELEASED
        ):
            return current  # released now, or already released by this same owner (idempotent)
        raise DponeError(
            ErrorCode.READER_GUARD_HELD,
            "only the exact owner of a held reader guard may release it",
            details={**details, "guard_exists": current is not None},
        )

    # -- internals -------------------------------------------------------------------------------------

    def _key(self, operation_id: str, generation_key: str) -> Any:
        t = self._tables.reader_guards
        return and_(t.c.operation_id == operation_id, t.c.generation_key == generation_key)

    def _select(self, operation_id: str, generation_key: str) -> Any:
        return select(self._tables.reader_guards).where(self._key(operation_id, generation_key))

    def _guard(
        self, operation_id: str, generation_key: str, owner_token: str, state: ReaderGuardState, at: Any
    ) -> ReaderGuard:
        try:
            return ReaderGuard(
                operation_id=operation_id,
                generation_key=generation_key,
                owner_token=owner_token,
                state=state,
                acquired_at=at,
            )
        except ValidationError:
            raise DponeError(
                ErrorCode.CAPSULE_INVALID,
                "reader guard request has a malformed operation id, generation key or owner token",
            ) from None

    def _parse(self, row: Row[Any], details: dict[str, Any]) -> ReaderGuard:
        try:
            return ReaderGuard(
                operation_id=row.operation_id,
                generation_key=row.generation_key,
                owner_token=row.owner_token,
                state=ReaderGuardState(row.state),
                acquired_at=as_utc(row.acquired_at),
                released_at=None if row.released_at is None else as_utc(row.released_at),
            )
        except (ValueError, ValidationError):
            raise DponeError(
                ErrorCode.CAPSULE_INVALID, "a stored reader guard is malformed", details=details
            ) from None


if TYPE_CHECKING:

    def _conforms(store: SqlReaderGuardStore) -> ReaderGuardStore:
        return store
