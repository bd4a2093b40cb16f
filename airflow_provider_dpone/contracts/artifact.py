"""Reference to one partition's local columnar artifact file (file_artifact export path)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ArtifactRef(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    partition_id: str
    path: str
    artifact_sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    rows: int = Field(ge=0)
    bytes: int = Field(ge=0)
