"""The ClickHouse target. Every mutating call takes an open :class:`TargetPermit`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.detached_part import DetachedPart
from airflow_provider_dpone.contracts.key_fingerprint import KeyFingerprint
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.schema import TableSchema


class Sink(Protocol):
    def prepare_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        """Create the database/table when missing; refuse an existing table with incompatible columns
        (``target_table_incompatible``). Writes no rows."""

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        """The direct (legacy) path: apply the strategy's scope for ``permit`` (truncate for full_refresh,
        delete the armed bounds for replace_partition), then insert every chunk. Returns rows inserted."""

    def count_rows(self, table: str, bounds: PartitionBounds | None) -> int:
        """Rows the target holds within the bounds (read-only)."""

    def close(self) -> None: ...


class CheckingSink(Sink, Protocol):
    """A sink that can refuse, read-only, what ``prepare_target`` would refuse."""

    def check_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        """What ``prepare_target`` refuses (an ``order_by`` column the schema lacks, a name the client
        cannot write, an existing table of incompatible columns), without creating anything: a run that
        reads the whole source before preparing the target finds a user mistake before reading."""


class DescribingSink(Sink, Protocol):
    """A sink that can say, read-only, which columns an existing target table declares."""

    def target_schema(self, table: str) -> TableSchema | None:
        """The columns a load writes into ``table`` (not the computed ones), in the table's order and with
        its types; ``None`` before the table exists."""


class KeyFingerprintingSink(Sink, Protocol):
    """A sink that can fingerprint, read-only, the key columns of a table's rows within partitions."""

    def key_fingerprints(
        self, table: str, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint] | None:
        """What ``KeyFingerprintingSource.key_fingerprints`` computes, over ``table``'s rows within each of
        ``bounds`` (pairwise disjoint; several are bounds of one column), in one statement; ``None`` when the
        table does not exist."""


class GroupedCountingSink(Sink, Protocol):
    """A sink that can count, read-only, a table's rows within many partitions in one statement."""

    def count_rows_each(self, table: str, bounds: Sequence[PartitionBounds]) -> list[int]:
        """What ``count_rows`` counts within each of ``bounds`` (pairwise disjoint, as ``key_fingerprints``
        takes them), in order, in one statement; 0 each when the table does not exist."""


class InFlightCheckingSink(Sink, Protocol):
    """A sink that can tell whether statements it sent to change a table still run on the server."""

    def require_no_writes_in_flight(self, table: str) -> None:
        """Raise ``route_busy`` while a statement that changes ``table`` or a mutation of it is unfinished:
        an operator's decision on its row counts would count part of them (read-only)."""


@runtime_checkable
class SettledCountingSink(Sink, Protocol):
    """A sink that can tell whether a table's row counts are final: no mutation of it is pending."""

    def require_no_pending_mutation(self, table: str) -> None:
        """Raise ``route_busy`` while any mutation of ``table`` is unfinished (an owner's ``ALTER ... DELETE``
        still deleting): counts taken now would count rows about to go (read-only)."""


@runtime_checkable
class TtlReportingSink(Sink, Protocol):
    """A sink that can say, read-only, whether a target table has a TTL that deletes rows."""

    def deleting_ttl(self, table: str) -> bool:
        """Whether ``table`` has a table TTL that deletes rows (or changes values) once they expire, as
        ``prepare_target`` refuses one; ``False`` when the table does not exist (read-only)."""


class DetachedListingSink(Sink, Protocol):
    """A sink that can list, read-only, the parts detached from a target table (ADR 0093)."""

    def detached_parts(self, table: str) -> list[DetachedPart] | None:
        """Every part of ``table`` in its ``detached`` folder, each with the values its partition holds where
        the partition key tells them; ``[]`` when there is none or the table does not exist; ``None`` when
        this target cannot list them (ClickHouse 18.16 has no ``system.detached_parts``)."""


class ViewListingSink(Sink, Protocol):
    """A sink that can say, read-only, which views an insert into a table feeds."""

    def views_fed_by(self, table: str) -> list[str]:
        """``db.table`` of every view an insert into ``table`` reaches (materialized, live or window; not a
        plain view), sorted; ``[]`` when the table does not exist."""


class NullRefusingSink(Sink, Protocol):
    """A sink whose existing target may declare a column non-nullable that the source may fill with NULL."""

    def columns_refusing_null(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> list[str]:
        """Read-only: the nullable ``schema`` columns that the existing target declares without
        ``Nullable`` (otherwise compatible). A run loads them only after proving the rows it moves hold no
        NULL there, with the schema declaring them non-nullable. ``[]`` when the table does not exist yet."""


@runtime_checkable
class StagedSink(Sink, Protocol):
    def begin_staging(
        self, table: str, schema: TableSchema, operation_id: str, order_by: tuple[str, ...] = ()
    ) -> str:
        """Create an empty staging table for ``operation_id``, keyed as the target (``order_by``), first
        dropping a leftover of the same operation; returns its name. Not a target mutation. The runtime
        passes the route's key, so every attempt of a route reuses one staging table."""

    def stage(self, staging_table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> int:
        """Insert chunks into the staging table. Returns rows staged."""

    def finalize_staged_load(self, permit: TargetPermit, staging_table: str, table: str) -> int:
        """Publish the staging table into the target under the permit's strategy scope; drop staging."""

    def abort_staged_load(self, staging_table: str) -> None:
        """Drop the staging table (best effort, idempotent)."""
