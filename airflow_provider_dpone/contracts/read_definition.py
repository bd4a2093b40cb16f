"""What a route reads from its source: the definition its ``query_hash`` is the digest of.

A ``replace_partition`` run whose definition differs from the one that committed a partition it replaces
deletes that definition's rows there and loads its own. Whether it leaves some out can only be told by
running the earlier read beside this one on the source, so each definition a run commits under is kept in
the checkpoint store (``dpone_route_definitions``, ADR 0090), keyed by this digest. The text of a
``source.query`` is kept as written, at rest in the store only: never printed, logged or put in an error.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.contracts.partition import canonical_json, sha256_tag


class ReadDefinition(BaseModel):
    """The source type, the canonical table, the ``source.query`` and the pinned ``source.columns`` of a
    route, exactly as its ``query_hash`` hashes them (no bounds, no connection)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    source_type: str = Field(min_length=1)
    table: str = Field(min_length=1)
    query: str | None = None
    columns: tuple[str, ...] | None = None

    def canonical_text(self) -> str:
        """The canonical JSON hashed and stored (keys sorted; ``columns`` a list, as releases hashed it)."""
        return canonical_json(
            {
                "table": self.table,
                "query": self.query,
                "columns": list(self.columns) if self.columns is not None else None,
                "source_type": self.source_type,
            }
        )

    def query_hash(self) -> str:
        """``sha256:`` over :meth:`canonical_text`: a checkpoint's ``query_hash``."""
        return sha256_tag(self.canonical_text())

    @classmethod
    def from_text(cls, text: str) -> ReadDefinition:
        """The definition stored as :meth:`canonical_text` (``ValidationError`` when it is not one)."""
        return cls.model_validate_json(text)


#: Partitions a stop over rows a new definition leaves out names (``details.partitions``): a comparison counts
#: regions one by one only until regions of so many partitions are found holding rows.
PARTITIONS_NAMED = 20


class LeftOutCounts(BaseModel):
    """What one comparison of an earlier definition's read with this one's counted over a list of regions.

    ``total``: the rows left out (a row as often as the current read misses it), from the statements that
    count many regions at once (exact whatever was counted alone). ``regions``: per region, in order, the
    rows left out within it (0 where its statement found none); ``None`` where its statement found rows but
    it was not counted on its own, since regions of :data:`PARTITIONS_NAMED` partitions holding rows were
    found before it (a stop names no more, and counting every partition one by one cost minutes on a large
    table without an index)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    total: int = Field(ge=0)
    regions: tuple[int | None, ...]

    @property
    def complete(self) -> bool:
        """Whether every region was counted (none left ``None``)."""
        return None not in self.regions


class NotCompared(str, Enum):
    """Why a run could not compare an earlier definition's read with its own: each a fixed phrase (never a
    driver's message), said in the notice of a run that goes on."""

    NOT_RECORDED = "not_recorded"
    EARLIER_READ_FAILS = "earlier_read_fails"
    TYPE_NOT_COMPARABLE = "type_not_comparable"
    NO_SHARED_COLUMNS = "no_shared_columns"
    OTHER_SOURCE = "other_source"
    SOURCE_CANNOT_COMPARE = "source_cannot_compare"

    @property
    def phrase(self) -> str:
        return _PHRASES[self]


_PHRASES = {
    NotCompared.NOT_RECORDED: "the earlier definition is not recorded (committed by an earlier release, or under another strategy)",
    NotCompared.EARLIER_READ_FAILS: (
        "the earlier definition's read fails on the source now (a table or column it reads is gone)"
    ),
    NotCompared.TYPE_NOT_COMPARABLE: (
        "the columns both definitions read cannot be compared on the source (two types that do not convert, "
        "or nothing but SQL Server image columns)"
    ),
    NotCompared.NO_SHARED_COLUMNS: "the two definitions read no column in common",
    NotCompared.OTHER_SOURCE: "the earlier definition read another kind of source or another table",
    NotCompared.SOURCE_CANNOT_COMPARE: "this source cannot compare two definitions",
}
