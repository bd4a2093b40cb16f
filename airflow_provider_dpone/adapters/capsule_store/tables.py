"""The capsule store's two tables (same layout on SQLite and PostgreSQL).

``dpone_quality_capsules`` is append-only: one row per record, primary key ``(operation_id, version)``.
That key is the compare-and-set: of two writers that both saw version N, exactly one INSERT of N+1
succeeds. ``payload_text`` holds the record's canonical bytes exactly as hashed (TEXT, never JSONB, which
would reorder keys); ``record_sha256``/``prev_sha256`` repeat the chain links for SQL readers.

``dpone_reader_guards`` holds one row per (operation, generation): its owner token and state. Rows are
updated in place only by conditional UPDATEs (state and owner in the WHERE clause); nothing expires them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Column, DateTime, Integer, MetaData, PrimaryKeyConstraint, Table, Text

CAPSULE_TABLE = "dpone_quality_capsules"
READER_GUARD_TABLE = "dpone_reader_guards"


@dataclass(frozen=True)
class CapsuleTables:
    metadata: MetaData
    capsules: Table
    reader_guards: Table


def build_tables() -> CapsuleTables:
    metadata = MetaData()
    capsules = Table(
        CAPSULE_TABLE,
        metadata,
        Column("operation_id", Text, nullable=False),
        Column("version", Integer, nullable=False, autoincrement=False),
        Column("schema_version", Text, nullable=False),
        Column("kind", Text, nullable=False),
        Column("record_sha256", Text, nullable=False),
        Column("prev_sha256", Text, nullable=True),
        Column("payload_text", Text, nullable=False),
        Column("written_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("operation_id", "version", name="pk_dpone_quality_capsules"),
    )
    reader_guards = Table(
        READER_GUARD_TABLE,
        metadata,
        Column("operation_id", Text, nullable=False),
        Column("generation_key", Text, nullable=False),
        Column("owner_token", Text, nullable=False),
        Column("state", Text, nullable=False),
        Column("acquired_at", DateTime(timezone=True), nullable=False),
        Column("released_at", DateTime(timezone=True), nullable=True),
        PrimaryKeyConstraint("operation_id", "generation_key", name="pk_dpone_reader_guards"),
    )
    return CapsuleTables(metadata=metadata, capsules=capsules, reader_guards=reader_guards)
