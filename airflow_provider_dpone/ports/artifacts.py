"""Local columnar artifact files for the file_artifact export path."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from airflow_provider_dpone.contracts.artifact import ArtifactRef
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.schema import TableSchema


class ArtifactStore(Protocol):
    def write(self, partition_id: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> ArtifactRef:
        """Write one partition's rows to a file and return its digest (``sha256:<hex>`` of the bytes)."""

    def verify(self, ref: ArtifactRef) -> None:
        """Re-hash the whole file; ``artifact_invalid`` if it changed. Called before arming, so a bad
        artifact is found before any partition of the batch reaches the target."""

    def read(self, ref: ArtifactRef, chunk_rows: int) -> Iterator[ColumnChunk]:
        """Stream the file back in chunks after verifying its digest (``artifact_invalid`` if changed)."""

    def remove(self, ref: ArtifactRef) -> None: ...
