"""A relational source read in bounded columnar chunks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime
from typing import Protocol, TypedDict

from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.key_fingerprint import KeyFingerprint
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.read_definition import LeftOutCounts, NotCompared, ReadDefinition
from airflow_provider_dpone.contracts.schema import TableSchema


class Source(Protocol):
    def describe(self) -> TableSchema:
        """Columns of the configured table or query, mapped to ClickHouse types. Unsupported types raise
        ``unsupported_column_type`` naming the column, before any extraction."""

    def query_hash(self) -> str:
        """``sha256:`` over the normalized read definition (table, query, columns) — not the bounds."""

    def read_definition(self) -> ReadDefinition:
        """The read definition :meth:`query_hash` is the digest of (``ReadDefinition.query_hash``)."""

    def plan_partitions(self) -> list[PartitionBounds]:
        """Bounds of every partition the configured partitioning yields, in a stable order."""

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        """Rows of one partition, ordered deterministically, at most ``chunk_rows`` per chunk."""

    def count(self, bounds: PartitionBounds) -> int:
        """Rows the source holds within the bounds (read-only; for inspection and quality)."""

    def count_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """Rows the source holds now within each of ``bounds``, in order (read-only; drift checks).

        One grouped query covers every bounds of the configured partitioning; other bounds (an earlier
        partitioning's, list values) are counted one by one, so each count equals ``count(bounds)``."""

    def close(self) -> None: ...


class KeyFingerprintingSource(Source, Protocol):
    """A source that can fingerprint, read-only, the key columns of the rows within partitions."""

    def key_columns(self) -> list[str]:
        """The primary key of the configured table (``[]`` for a query, or a table without one)."""

    def key_fingerprints(
        self, bounds: Sequence[PartitionBounds], columns: Sequence[str]
    ) -> list[KeyFingerprint]:
        """One aggregate statement over ``bounds`` (pairwise disjoint; several are bounds of one column): per
        bounds, in order, the rows a read of it returns and the integer aggregates of ``columns`` (integer
        columns of the read), as ``contracts.key_fingerprint`` defines them."""


class ColumnProfile(TypedDict):
    """Exact metrics of a set of partitions: ``rows``; per column ``null_counts`` and ``distinct_counts``."""

    rows: int
    null_counts: dict[str, int]
    distinct_counts: dict[str, int]


class ProfilingSource(Source, Protocol):
    """A source that can measure the exact quality metrics of the rows a read of ``bounds`` returns."""

    def profile(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> ColumnProfile:
        """One read-only aggregate over the union of ``bounds``: ``COUNT(*)``, per column the NULL count
        and the exact distinct count (NULL is not a value; strings compare byte for byte, as ClickHouse's
        ``uniqExact`` does). Raises ``source_read_failed`` when a metric cannot be had exactly."""


class ValueLimits(TypedDict):
    """The calendar range a target holds exactly, both ends inclusive (naive UTC for ``DateTime``)."""

    date_min: date
    date_max: date
    datetime_min: datetime
    datetime_max: datetime


class AuditingSource(Source, Protocol):
    """A source that can find, read-only and before arming, the values its reads would refuse."""

    def audit_values(self, bounds: Sequence[PartitionBounds], limits: ValueLimits | None) -> None:
        """Aggregate checks over the union of ``bounds`` (no row reaches Python): raises
        ``manifest_invalid`` naming the column and the reason (never a value) when a read would refuse a
        value or store it changed. ``limits``: the target's calendar range (``None``: the widest)."""


class NullCountingSource(Source, Protocol):
    """A source that can count, read-only, the NULLs of some columns within partitions."""

    def count_nulls(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> dict[str, int]:
        """One aggregate over the union of ``bounds``: how many rows a read would return with NULL in each
        of ``columns`` (refused by name when one is not a column of the read)."""


class ListSpellingSource(Source, Protocol):
    """A source that can tell, read-only, whether a listed text value selects rows stored otherwise."""

    def lists_stored_otherwise(self, bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
        """Those of ``bounds`` (``list`` partitions of a text column) whose read selects a row stored under
        another spelling than the listed values: the source's collation ignores case, accents or trailing
        spaces, or the column pads its text. The target keeps such rows as stored, outside the partition."""

    def lists_holding_non_text(self, bounds: Sequence[PartitionBounds]) -> list[PartitionBounds]:
        """Those of ``bounds`` (``list`` partitions of a column the target keeps as text) whose column holds
        numbers or bytes: its listed values then compare by the column's affinity, not as the target's text,
        selecting none of them or several spellings at once (SQLite)."""

    def delivers_spelling(self, bounds: PartitionBounds) -> bool:
        """Whether a read of ``bounds`` (a ``list`` partition of a text column) delivers a row whose value is
        exactly one of the listed values, byte for byte. False after a ``source.query`` normalised the
        column (``RTRIM``, ``LOWER``): the rows stored under those spellings now arrive under others."""


class ConcurrentSource(Source, Protocol):
    """A source whose partition reads may run at once, each in a thread of its own."""

    def concurrent_reads(self, bounds: Sequence[PartitionBounds]) -> int:
        """How many reads of these partitions may be open at the same time (1: one after the other). Asked
        after the value audit and only for partitions it covered; each read then runs in one thread."""


class ValuesUnproven(Exception):
    """A proving read (``ProvingSource``) met a value it cannot prove arrives exactly. Never reported: the
    value audit then decides (naming what is wrong, or proving the values for the source's other read),
    and the reads run again."""


class ProvingSource(AuditingSource, Protocol):
    """A source whose reads can prove, chunk by chunk, what its value audit proves before a run."""

    def prove_while_reading(self, bounds: Sequence[PartitionBounds], limits: ValueLimits | None) -> bool:
        """Whether the reads of ``bounds`` from now on check every value the value audit would, raising
        :class:`ValuesUnproven` from the first chunk they cannot prove (``False``: the audit must run
        first). For a path that reads every partition before arming (``file_artifact``'s export,
        ``staged``'s staging insert): those reads are then the audit, and the source is read once."""


class DefinitionsNotComparable(Exception):
    """A comparison of two definitions' reads (``DefinitionComparingSource``) cannot be made: ``reason`` is
    a fixed phrase; the driver's error, if any, is chained but never shown."""

    def __init__(self, reason: NotCompared) -> None:
        super().__init__(reason.value)
        self.reason = reason


class DefinitionComparingSource(Source, Protocol):
    """A source that can tell, read-only, which rows an earlier read definition of its route returns that its
    own read does not (a ``replace_partition`` run would delete them and not load them again)."""

    def rows_left_out(
        self, earlier: ReadDefinition, regions: Sequence[Sequence[PartitionBounds]]
    ) -> LeftOutCounts:
        """Per region (the rows within every bounds it lists; its first bounds are its partition's), in
        order, and in all: how many rows ``earlier``'s read returns there beyond those this source's read
        returns, over the columns both read, as multisets (a row returned twice and once counts once; NULLs
        compare equal). Regions are counted together, many per statement; within a statement that finds
        rows, region by region until regions of
        ``PARTITIONS_NAMED`` partitions hold rows (``LeftOutCounts``). Raises :class:`DefinitionsNotComparable` when ``earlier`` cannot be
        read or compared now (a dropped table or column, a type the engine cannot compare), and
        ``source_read_failed`` on any other failure."""
