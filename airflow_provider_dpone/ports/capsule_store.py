"""Durable quality capsules (append-only, compare-and-set) and reader guards (ADR 0074)."""

from __future__ import annotations

from typing import Protocol

from airflow_provider_dpone.contracts.capsule import CapsuleChain, CapsuleRecord, CapsuleV1
from airflow_provider_dpone.contracts.target_observation import ReaderGuard


class CapsuleStore(Protocol):
    def ensure_schema(self) -> None:
        """Create the capsule table if missing (idempotent)."""

    def current_version(self, operation_id: str) -> int:
        """Highest stored version of the operation's capsule; 0 when it has none."""

    def append(self, operation_id: str, expected_version: int, record: CapsuleV1 | CapsuleRecord) -> int:
        """Append ``record`` as version ``expected_version + 1``, only if the current version is exactly
        ``expected_version`` (``quality_capsule_conflict`` otherwise, also when a concurrent writer won).

        The whole chain is re-verified with the new record first; a record that breaks the hash chain,
        names another core or would replace the sealed core is refused (``quality_capsule_invalid``).
        A v1 capsule is only ever version 1 and nothing may follow it. Returns the new version.
        """

    def read(self, operation_id: str) -> CapsuleV1 | CapsuleChain | None:
        """The verified capsule (v1 document or v2 chain), or None. Tampered rows fail closed."""

    def close(self) -> None: ...


class ReaderGuardStore(Protocol):
    def ensure_schema(self) -> None: ...

    def acquire(self, operation_id: str, generation_key: str, owner_token: str) -> ReaderGuard:
        """Hold the guard of one exact generation. Re-acquiring as the same owner returns the held guard;
        another owner while it is held gets ``reader_guard_held``. Nothing ever expires it."""

    def release(self, operation_id: str, generation_key: str, owner_token: str) -> ReaderGuard:
        """Release, only by the exact owner of a held guard (``reader_guard_held`` otherwise)."""

    def read(self, operation_id: str, generation_key: str) -> ReaderGuard | None: ...

    def close(self) -> None: ...
