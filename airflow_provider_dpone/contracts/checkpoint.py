"""The partition checkpoint record: one row of the append-only checkpoint table."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, JsonValue
from pydantic_core import core_schema

from airflow_provider_dpone.contracts.partition import PartitionBounds, canonical_json
from airflow_provider_dpone.contracts.route import RouteIdentity


class CheckpointStatus(str, Enum):
    PLANNED = "PLANNED"
    EXPORTED = "EXPORTED"
    LOADED = "LOADED"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"


class _UtcOnly:
    """A datetime with a UTC offset of exactly zero: a naive one, or any other offset, is refused.

    Checked inside pydantic's own datetime validator (``tz_constraint=0``), not by a Python validator:
    a route scan validates two timestamps of every latest checkpoint, tens of thousands of them.
    """

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.datetime_schema(tz_constraint=0, strict=True)


UtcDatetime = Annotated[datetime, _UtcOnly]


class PartitionCheckpoint(BaseModel):
    """One durable statement about one partition at one moment.

    ``diagnostics`` is an open JSON map that round-trips unchanged; the target commit guard lives in it
    under ``target_commit_guard`` so no schema or status migration was needed.
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    partition_id: str = Field(min_length=1)
    route: RouteIdentity
    run_id: str = Field(min_length=1)
    status: CheckpointStatus
    started_at: UtcDatetime
    completed_at: UtcDatetime | None = None
    rows: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    query_hash: str
    schema_hash: str
    bounds: PartitionBounds
    diagnostics: dict[str, JsonValue] = Field(default_factory=dict)

    def to_payload(self) -> str:
        """Canonical JSON stored in the ``payload`` column."""
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_payload(cls, payload: str) -> PartitionCheckpoint:
        return cls.model_validate_json(payload)


def checkpoint_moment(checkpoint: PartitionCheckpoint) -> datetime:
    """When a checkpoint's step ended (its start where it records no end): how records are ordered in time."""
    return checkpoint.completed_at or checkpoint.started_at
