"""A part of a target table that is detached from it: its rows are out of the table, and ATTACH brings them back.

``ALTER TABLE ... DETACH PARTITION`` (or ``DETACH PART``) moves parts into the table's ``detached`` folder;
ClickHouse itself moves parts there too (a broken part at start-up, a part a merge already covers). A run
that writes the partition meanwhile cannot see those rows, and an ``ATTACH`` afterwards puts them back beside
what the run loaded (ADR 0093). The target adapter lists them; the runtime decides whether one lies where
the run writes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from airflow_provider_dpone.contracts.partition import PartitionBounds


class DetachedPart(BaseModel):
    """One detached part of a target table, as the target lists it (names and IDs only, never rows)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    #: the part's name in the ``detached`` folder (``<partition id>_<blocks>_<level>``, with ClickHouse's
    #: prefix when it detached the part itself)
    name: str
    #: the partition ID the target gives the part (``20261129``; a digest for a text key; ``all`` for a table
    #: without a partition key); None where the target cannot read it from the name
    partition_id: str | None
    #: why it is detached: empty for an ``ALTER TABLE ... DETACH``; otherwise the word ClickHouse prefixed
    #: (``broken``, ``ignored``, ``clone``, ``covered-by-broken``, ...)
    reason: str
    #: the values of one column of the table that its partition holds (a range, conservatively wide), or
    #: None where the table's partition key does not tell them (no key, a text or compound key, another
    #: expression): such a part may hold rows of any partition
    covers: PartitionBounds | None = None
