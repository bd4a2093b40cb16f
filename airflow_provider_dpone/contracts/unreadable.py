"""A stand-in for a stored checkpoint row that cannot be read, so the operator can see and repair it.

Bad JSON, an unknown status, a payload whose partition or route disagrees with its row: such a row is
still the partition's *latest* statement, and nothing is known about what its attempt did to the target.
The store returns this stand-in instead of failing the whole read: the guard scan reports it as an invalid
guard (``native_transfer_target_commit_guard_invalid``, exit 3) naming its partition, the listings show it
as ``INVALID``, and ``dpone guard resolve`` appends a resolution over it. Whatever of the payload can be
read (bounds, hashes) is kept, so the resolution describes the right partition; nothing else is shown.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone

from pydantic import ValidationError

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import UNREADABLE_KEY
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity

UNREADABLE_LABEL = "unreadable"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def unreadable_checkpoint(
    partition_id: str, route: RouteIdentity, row_id: int, payload_text: str
) -> PartitionCheckpoint:
    salvaged = _salvage(payload_text)
    bounds = salvaged.get("bounds")
    return PartitionCheckpoint(
        partition_id=partition_id,
        route=route,
        run_id="unreadable",
        status=CheckpointStatus.FAILED,
        started_at=_EPOCH,
        query_hash=_text(salvaged.get("query_hash")),
        schema_hash=_text(salvaged.get("schema_hash")),
        bounds=bounds
        if isinstance(bounds, PartitionBounds)
        else PartitionBounds(kind=BoundsKind.ALL, label=UNREADABLE_LABEL),
        diagnostics={UNREADABLE_KEY: {"checkpoint_row_id": row_id}},
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else "unknown"


def _salvage(payload_text: str) -> dict[str, object]:
    try:
        raw = json.loads(payload_text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    found: dict[str, object] = {k: raw.get(k) for k in ("query_hash", "schema_hash")}
    with contextlib.suppress(ValidationError, TypeError, ValueError):
        found["bounds"] = PartitionBounds.model_validate_json(json.dumps(raw.get("bounds")))
    return found
