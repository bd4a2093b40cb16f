"""The partition checkpoint record: one row of the append-only checkpoint table."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from airflow_provider_dpone.contracts.partition import PartitionBounds, canonical_json
from airflow_provider_dpone.contracts.route import RouteIdentity


class CheckpointStatus(str, Enum):
    PLANNED = "PLANNED"
    EXPORTED = "EXPORTED"
    LOADED = "LOADED"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"


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
    started_at: datetime
    completed_at: datetime | None = None
    rows: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    query_hash: str
    schema_hash: str
    bounds: PartitionBounds
    diagnostics: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("started_at", "completed_at")
    @classmethod
    def _utc_aware(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return value
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("timestamps must be timezone-aware UTC")
        if value.utcoffset() != timezone.utc.utcoffset(None):
            raise ValueError("timestamps must be in UTC")
        return value

    def to_payload(self) -> str:
        """Canonical JSON stored in the ``payload`` column."""
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_payload(cls, payload: str) -> PartitionCheckpoint:
        return cls.model_validate_json(payload)
