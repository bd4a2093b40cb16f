"""Where a route finds its capsules: a reference in each published partition's checkpoint diagnostics.

The capsule store is keyed by operation only. So that a run can find every operation of its route that
still owes target evidence, the armed, committed (and failed) checkpoints of an operation with a v2
capsule carry, beside the target commit guard::

    "quality_capsule": {
      "schema_version": "dpone.quality_capsule_ref.v1",
      "operation_id": "sha256:...",
      "capsule_schema": "dpone.quality_capsule.v2",
      "resolution": {"as": "failed", "by": "...", "at": "...", "reason": "..."}   # operator only
    }

Like the guard, the reference lives in the open diagnostics map: no checkpoint schema change. The scan is
route-wide (latest checkpoint of every partition), independent of the current query, schema and selector.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dpone.contracts.capsule import CAPSULE_V2_SCHEMA, OPERATION_ID_PATTERN
from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import canonical_json

CAPSULE_REF_KEY = "quality_capsule"
REF_SCHEMA_VERSION = "dpone.quality_capsule_ref.v1"
RESOLUTION_KEYS = frozenset({"as", "by", "at", "reason"})
RESOLVED_AS = ("failed", "retry")

_OPERATION_RE = re.compile(OPERATION_ID_PATTERN)
_REF_KEYS = frozenset({"schema_version", "operation_id", "capsule_schema"})


def operation_id_for(identity: str, run_id: str) -> str:
    """``sha256:`` over the manifest's semantic identity and the run ID: one operation per run of a route."""
    material = canonical_json({"identity": identity, "run_id": run_id})
    return "sha256:" + hashlib.sha256(material.encode("utf-8")).hexdigest()


class RefInvalid(ValueError):
    """A present but malformed capsule reference. Reasons are fixed phrases."""


@dataclass(frozen=True)
class CapsuleRef:
    operation_id: str
    resolution: Mapping[str, Any] | None = None

    @property
    def resolved_as(self) -> str | None:
        return None if self.resolution is None else str(self.resolution["as"])


def capsule_ref(operation_id: str) -> dict[str, str]:
    return {
        "schema_version": REF_SCHEMA_VERSION,
        "operation_id": operation_id,
        "capsule_schema": CAPSULE_V2_SCHEMA,
    }


def read_ref(checkpoint: PartitionCheckpoint) -> CapsuleRef | None:
    """The checkpoint's capsule reference, ``None`` when it has none, or :class:`RefInvalid`."""
    raw = checkpoint.diagnostics.get(CAPSULE_REF_KEY)
    if raw is None and CAPSULE_REF_KEY not in checkpoint.diagnostics:
        return None
    if not isinstance(raw, dict):
        raise RefInvalid("capsule reference is not an object")
    keys = frozenset(raw)
    if keys - {"resolution"} != _REF_KEYS:
        raise RefInvalid("capsule reference keys are missing or unexpected")
    if raw.get("schema_version") != REF_SCHEMA_VERSION or raw.get("capsule_schema") != CAPSULE_V2_SCHEMA:
        raise RefInvalid("unknown capsule reference schema")
    operation_id = raw.get("operation_id")
    if not isinstance(operation_id, str) or not _OPERATION_RE.fullmatch(operation_id):
        raise RefInvalid("malformed operation id in capsule reference")
    resolution = raw.get("resolution")
    if resolution is not None and (
        not isinstance(resolution, dict)
        or frozenset(resolution) != RESOLUTION_KEYS
        or resolution.get("as") not in RESOLVED_AS
        or not all(isinstance(resolution.get(k), str) for k in RESOLUTION_KEYS)
    ):
        raise RefInvalid("malformed operator resolution in capsule reference")
    return CapsuleRef(operation_id=operation_id, resolution=resolution)


def with_resolution(checkpoint: PartitionCheckpoint, resolution: Mapping[str, str]) -> dict[str, Any]:
    """The checkpoint's diagnostics with ``resolution`` recorded on its capsule reference."""
    diagnostics: dict[str, Any] = dict(checkpoint.diagnostics)
    ref = dict(diagnostics[CAPSULE_REF_KEY])
    ref["resolution"] = dict(resolution)
    diagnostics[CAPSULE_REF_KEY] = ref
    return diagnostics
