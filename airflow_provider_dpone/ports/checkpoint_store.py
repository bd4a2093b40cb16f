"""Durable checkpoint storage. Append-only; a batch is written one row at a time (not atomic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.route import RouteIdentity


class CheckpointStore(Protocol):
    def ensure_schema(self) -> None:
        """Create the store's tables and indexes if missing (idempotent)."""

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        """Append each checkpoint in order, one row at a time. A failure may leave a prefix written."""

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        """Latest checkpoint of every partition of the route, whatever its query or schema hash, in the
        order they were written (oldest first): the newest commit is found from the end of the list."""

    def list_routes(self, target_table: str | None = None) -> list[RouteIdentity]:
        """Every route with at least one checkpoint, as stored (older releases stored raw spellings); only
        those writing ``target_table`` (as stored, exactly) when it is given."""

    def read_latest(
        self, route: RouteIdentity, partition_ids: Sequence[str]
    ) -> dict[str, PartitionCheckpoint]:
        """Latest checkpoint of each named partition that has one (used for exact reconciliation)."""

    def history(self, route: RouteIdentity, partition_id: str) -> list[PartitionCheckpoint]:
        """Every checkpoint ever written for one partition, oldest first (audit)."""

    def record_definition(self, route: RouteIdentity, definition: ReadDefinition) -> None:
        """Keep ``definition`` under (route, its query hash) unless one is kept there already: one insert
        that does nothing when the key is taken. A failure raises ``checkpoint_store_failed``."""

    def read_definitions(
        self, route: RouteIdentity, query_hashes: Sequence[str]
    ) -> dict[str, ReadDefinition]:
        """The definitions kept for ``route`` among ``query_hashes``, by hash; a stored row that is no valid
        definition, or that does not hash to its key, is left out (as if never kept)."""

    def close(self) -> None: ...


class SourceStateStore(Protocol):
    """Per-route incremental state (e.g. the cursor high-water mark), advanced only after commit."""

    def read_state(self, route: RouteIdentity) -> dict[str, object] | None: ...

    def advance_state(self, route: RouteIdentity, state: dict[str, object]) -> None: ...
