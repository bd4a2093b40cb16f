"""The checkpoint store's tables, built for one SQL dialect.

``dpone_partition_checkpoints`` (a public contract: scripts and runbooks query it) is append-only. Its
``id`` is the append order: "latest" always means the highest ``id`` of a partition.

Payload design: the product needs two things from the stored checkpoint JSON that one PostgreSQL column
cannot give at once — reads must return the exact canonical text that was written (byte-identical, so
digests and round-trip tests hold), and SQL users want a real JSON column to query. JSONB reorders keys
and drops whitespace, so it cannot be the source of reads. Hence:

* ``payload_text`` (TEXT, both dialects) holds the canonical JSON exactly as written; the store reads only
  this column.
* ``payload`` is a *generated* column the database derives from ``payload_text``: on PostgreSQL a STORED
  ``JSONB`` (``payload_text::jsonb``), queryable with ``->``/``->>`` and indexable; on SQLite a VIRTUAL
  ``TEXT`` equal to ``payload_text`` (no second copy on disk; ``json_extract(payload, ...)`` works).

Being generated, ``payload`` can never disagree with ``payload_text`` and the insert sends the JSON once.
PostgreSQL's JSONB cannot hold the character U+0000, so a diagnostics string containing it is rejected by
PostgreSQL (the write fails with ``checkpoint_store_failed``); SQLite accepts it.

``dpone_route_definitions`` keeps each read definition a ``replace_partition`` route ran under (its
``source.query`` as written, its pinned ``source.columns``), one row per (route, query hash), written once
and never changed: a later definition's run compares the two reads on the source before it replaces what
the earlier one committed (ADR 0090). Its ``definition`` holds ``ReadDefinition.canonical_text()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Computed,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB

CHECKPOINT_TABLE = "dpone_partition_checkpoints"
SOURCE_STATE_TABLE = "dpone_source_state"
DEFINITIONS_TABLE = "dpone_route_definitions"
CHECKPOINT_INDEX_ROUTE_PARTITION = "ix_dpone_partition_checkpoints_route_partition_id"
CHECKPOINT_INDEX_ROUTE = "ix_dpone_partition_checkpoints_route_id"
#: Covers ``list_routes`` (the stored routes writing one target, as stored): read from this index alone, and
#: only its range for the target, not the whole table with its payloads (100k history rows: 0.16-0.21 s ->
#: 0.025 s on SQLite) nor every other route's rows (a store kept by many routes: 1.4 s cold at 900k rows). A
#: store made by an older release gets it from ``ensure_schema`` on its next run, once; the index of those
#: releases (``ix_dpone_partition_checkpoints_routes``, source first) is left where it is, unused.
CHECKPOINT_INDEX_TARGET_ROUTES = "ix_dpone_partition_checkpoints_target_routes"


@dataclass(frozen=True)
class StoreTables:
    metadata: MetaData
    checkpoints: Table
    source_state: Table
    definitions: Table


def build_tables(dialect_name: str) -> StoreTables:
    """Table objects for ``sqlite`` or ``postgresql`` (the only two dialects the store accepts)."""
    metadata = MetaData()
    if dialect_name == "postgresql":
        id_column = Column("id", BigInteger, primary_key=True, autoincrement=True)
        payload_column = Column("payload", JSONB, Computed("CAST(payload_text AS JSONB)", persisted=True))
        table_kwargs: dict[str, Any] = {}
    else:
        # INTEGER PRIMARY KEY AUTOINCREMENT: ids are never reused, even if an operator deletes rows.
        id_column = Column("id", Integer, primary_key=True, autoincrement=True)
        payload_column = Column("payload", Text, Computed("payload_text", persisted=False))
        table_kwargs = {"sqlite_autoincrement": True}
    checkpoints = Table(
        CHECKPOINT_TABLE,
        metadata,
        id_column,
        Column("route_key", Text, nullable=False),
        Column("source_table", Text, nullable=False),
        Column("target_table", Text, nullable=False),
        Column("strategy", Text, nullable=False),
        Column("partition_id", Text, nullable=False),
        Column("run_id", Text, nullable=False),
        Column("status", Text, nullable=False),
        Column("written_at", DateTime(timezone=True), nullable=False),
        Column("payload_text", Text, nullable=False),
        payload_column,
        Index(CHECKPOINT_INDEX_ROUTE_PARTITION, "route_key", "partition_id", "id"),
        Index(CHECKPOINT_INDEX_ROUTE, "route_key", "id"),
        Index(CHECKPOINT_INDEX_TARGET_ROUTES, "target_table", "source_table", "strategy"),
        **table_kwargs,
    )
    source_state = Table(
        SOURCE_STATE_TABLE,
        metadata,
        Column("route_key", Text, primary_key=True),
        Column("payload", Text, nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
    )
    definitions = Table(
        DEFINITIONS_TABLE,
        metadata,
        Column("route_key", Text, primary_key=True),
        Column("query_hash", Text, primary_key=True),
        Column("definition", Text, nullable=False),
        Column("written_at", DateTime(timezone=True), nullable=False),
    )
    return StoreTables(
        metadata=metadata, checkpoints=checkpoints, source_state=source_state, definitions=definitions
    )
