"""Local columnar artifact files for the file_artifact export path."""

from __future__ import annotations

from airflow_provider_dpone.adapters.artifacts.arrow_ipc import ArrowIpcArtifactStore

__all__ = ["ArrowIpcArtifactStore"]
