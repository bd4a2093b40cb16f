"""``SqlCapsuleStore``: append-only, compare-and-set storage of quality capsules (ADR 0074).

* ``append(operation_id, expected_version, record)`` reads the stored records, refuses unless their
  highest version is exactly ``expected_version``, re-verifies the whole chain with the new record, and
  INSERTs it as ``expected_version + 1``. The primary key ``(operation_id, version)`` makes the last step
  the compare-and-set: a concurrent writer that checked the same version loses with a key violation and
  gets ``quality_capsule_conflict``, never a second record at that version.
* Records are never updated or deleted. Reads re-verify every stored byte (hash columns, canonical form,
  chain), so a tampered row fails closed with ``quality_capsule_invalid``.
* A v1 capsule is a single record at version 1; nothing can follow it (no upgrade of old evidence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, bindparam, select
from sqlalchemy.exc import IntegrityError

from airflow_provider_dpone.adapters.capsule_store.sql_base import CapsuleSqlStore
from airflow_provider_dpone.contracts.capsule import (
    CAPSULE_V1_SCHEMA,
    CAPSULE_V2_SCHEMA,
    CapsuleCapacityExceeded,
    CapsuleChain,
    CapsuleInvalid,
    CapsuleRecord,
    CapsuleV1,
    RecordKind,
    reserve_capacity,
    sha256_of,
    validate_chain,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

if TYPE_CHECKING:
    from airflow_provider_dpone.ports.capsule_store import CapsuleStore

_V1_KIND = "capsule_v1"


class SqlCapsuleStore(CapsuleSqlStore):
    """``CapsuleStore`` on one SQLite file or PostgreSQL database (table ``dpone_quality_capsules``)."""

    store_name = "capsule store"

    def _select_rows(self) -> Any:
        t = self._tables.capsules
        return (
            select(
                t.c.version,
                t.c.schema_version,
                t.c.kind,
                t.c.record_sha256,
                t.c.prev_sha256,
                t.c.payload_text,
            )
            .where(t.c.operation_id == bindparam("operation_id"))
            .order_by(t.c.version)
        )

    def current_version(self, operation_id: str) -> int:
        rows = self._rows("current_version", operation_id)
        return int(rows[-1].version) if rows else 0

    def read(self, operation_id: str) -> CapsuleV1 | CapsuleChain | None:
        rows = self._rows("read", operation_id)
        return self._parse(operation_id, rows) if rows else None

    def append(self, operation_id: str, expected_version: int, record: CapsuleV1 | CapsuleRecord) -> int:
        self._check_open("append")
        details = {"operation_id": operation_id, "expected_version": expected_version}
        if record.operation_id != operation_id:
            raise self._invalid("record belongs to another operation", details)
        rows = self._rows("append", operation_id)
        current = int(rows[-1].version) if rows else 0
        if current != expected_version:
            raise self._conflict(details, current)
        existing = self._parse(operation_id, rows) if rows else None
        try:
            payload = record.to_canonical()
        except CapsuleCapacityExceeded as exc:
            raise self._capacity(exc, details) from exc
        if isinstance(record, CapsuleV1):
            if expected_version != 0:
                raise self._invalid("a v1 capsule is only ever the first record", details)
            row = self._row(operation_id, 1, CAPSULE_V1_SCHEMA, _V1_KIND, payload, None)
        else:
            if isinstance(existing, CapsuleV1):
                raise self._invalid("a v1 capsule takes no further records", details)
            if record.version != expected_version + 1:
                raise self._invalid("record version does not follow the expected version", details)
            prior = existing.records if existing is not None else ()
            try:
                validate_chain((*prior, record))
            except CapsuleInvalid as exc:
                raise self._invalid(str(exc), details) from exc
            if record.kind is RecordKind.SEALED_CORE:
                try:
                    reserve_capacity(record)
                except CapsuleCapacityExceeded as exc:
                    raise self._capacity(exc, details) from exc
            row = self._row(
                operation_id,
                record.version,
                CAPSULE_V2_SCHEMA,
                record.kind.value,
                payload,
                record.prev_sha256,
            )
        try:
            with self._engine.connect() as conn:
                conn.execute(self._tables.capsules.insert(), row)
                conn.commit()
        except IntegrityError as exc:
            raise self._conflict(details, None) from exc
        except self._db_errors as exc:
            raise self._failure("append", exc, **details) from exc
        return int(row["version"])

    # -- internals -------------------------------------------------------------------------------------

    def _row(
        self, operation_id: str, version: int, schema: str, kind: str, payload: bytes, prev: str | None
    ) -> dict[str, Any]:
        return {
            "operation_id": operation_id,
            "version": version,
            "schema_version": schema,
            "kind": kind,
            "record_sha256": sha256_of(payload),
            "prev_sha256": prev,
            "payload_text": payload.decode("utf-8"),
            "written_at": self._now(),
        }

    def _rows(self, operation: str, operation_id: str) -> Sequence[Row[Any]]:
        self._check_open(operation)
        with self._translated(operation, operation_id=operation_id), self._engine.connect() as conn:
            return conn.execute(self._select_rows(), {"operation_id": operation_id}).all()

    def _parse(self, operation_id: str, rows: Sequence[Row[Any]]) -> CapsuleV1 | CapsuleChain:
        """Verify every stored row; anything inconsistent fails closed."""
        details = {"operation_id": operation_id}
        try:
            for row in rows:
                if sha256_of(row.payload_text.encode("utf-8")) != row.record_sha256:
                    raise CapsuleInvalid("stored record does not match its digest")
            if rows[0].schema_version == CAPSULE_V1_SCHEMA:
                if len(rows) != 1 or rows[0].version != 1 or rows[0].kind != _V1_KIND:
                    raise CapsuleInvalid("a v1 capsule is exactly one record at version 1")
                capsule = CapsuleV1.from_canonical(rows[0].payload_text.encode("utf-8"))
                if capsule.operation_id != operation_id:
                    raise CapsuleInvalid("stored capsule belongs to another operation")
                return capsule
            records: list[CapsuleRecord] = []
            for row in rows:
                if row.schema_version != CAPSULE_V2_SCHEMA:
                    raise CapsuleInvalid("chain mixes capsule schema versions")
                record = CapsuleRecord.from_canonical(row.payload_text.encode("utf-8"))
                if (
                    record.operation_id != operation_id
                    or record.version != row.version
                    or record.kind.value != row.kind
                    or record.prev_sha256 != row.prev_sha256
                ):
                    raise CapsuleInvalid("stored record disagrees with its row")
                records.append(record)
            return validate_chain(records)
        except CapsuleInvalid as exc:
            raise self._invalid(f"stored capsule is invalid: {exc}", details) from exc

    def _invalid(self, reason: str, details: dict[str, Any]) -> DponeError:
        return DponeError(ErrorCode.CAPSULE_INVALID, f"quality capsule refused: {reason}", details=details)

    def _conflict(self, details: dict[str, Any], current: int | None) -> DponeError:
        extra = {} if current is None else {"current_version": current}
        return DponeError(
            ErrorCode.CAPSULE_CONFLICT,
            "quality capsule changed concurrently: its current version is not the expected one",
            details={**details, **extra},
        )

    def _capacity(self, exc: CapsuleCapacityExceeded, details: dict[str, Any]) -> DponeError:
        return DponeError(
            ErrorCode.CAPSULE_CAPACITY_EXCEEDED,
            f"quality capsule refused: {exc}",
            details={**details, "worst_case_bytes": exc.worst_case_bytes, "limit_bytes": exc.limit_bytes},
        )


if TYPE_CHECKING:

    def _conforms(store: SqlCapsuleStore) -> CapsuleStore:
        return store
