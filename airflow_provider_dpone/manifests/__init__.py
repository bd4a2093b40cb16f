"""Manifest loading, strict validation with friendly problems, normalization and semantic identity."""

from __future__ import annotations

from airflow_provider_dpone.manifests.identity import (
    IDENTITY_EXCLUDED_PATHS,
    canonical_manifest_json,
    identity_material,
    normalize,
    semantic_identity,
)
from airflow_provider_dpone.manifests.loader import LoadedManifest, load_manifest, load_manifest_dict
from airflow_provider_dpone.manifests.problems import ManifestProblem, ProblemKind

__all__ = [
    "IDENTITY_EXCLUDED_PATHS",
    "LoadedManifest",
    "ManifestProblem",
    "ProblemKind",
    "canonical_manifest_json",
    "identity_material",
    "load_manifest",
    "load_manifest_dict",
    "normalize",
    "semantic_identity",
]
