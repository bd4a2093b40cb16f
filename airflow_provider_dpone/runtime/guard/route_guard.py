"""Route-wide guard validation, run before any target I/O.

The scan covers the latest checkpoint of every partition the route has ever had, so a change of query,
schema or partitioning cannot hide an older unsafe attempt. Invalid guards are reported before
unresolved ones: a record we cannot read is the stronger reason to stop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import (
    ALLOWED_PAIRS,
    GuardInvalid,
    RetryMeaning,
    read_guard,
)
from airflow_provider_dpone.contracts.route import RouteIdentity

RUNBOOK = "dpone runbook guard"  # shipped with the package: no repository path


@dataclass(frozen=True)
class BlockedPartition:
    partition_id: str
    label: str
    phase: str
    checkpoint_batch_id: str | None

    def as_json(self) -> dict[str, str | None]:
        return {
            "partition_id": self.partition_id,
            "bounds": self.label,
            "phase": self.phase,
            "checkpoint_batch_id": self.checkpoint_batch_id,
        }


@dataclass(frozen=True)
class RouteGuardScan:
    invalid: tuple[BlockedPartition, ...]
    unresolved: tuple[BlockedPartition, ...]

    @property
    def clear(self) -> bool:
        return not self.invalid and not self.unresolved


def scan_route(latest: Iterable[PartitionCheckpoint]) -> RouteGuardScan:
    """Classify every latest checkpoint of a route; never raises on bad records."""
    invalid: list[BlockedPartition] = []
    unresolved: list[BlockedPartition] = []
    for checkpoint in sorted(latest, key=lambda c: (c.bounds.label, c.partition_id)):
        try:
            guard = read_guard(checkpoint)
        except GuardInvalid as exc:
            invalid.append(
                BlockedPartition(checkpoint.partition_id, checkpoint.bounds.label, exc.reason, None)
            )
            continue
        if guard is None:
            continue
        if ALLOWED_PAIRS[(checkpoint.status, guard.phase)][1] is RetryMeaning.BLOCK:
            unresolved.append(
                BlockedPartition(
                    checkpoint.partition_id,
                    checkpoint.bounds.label,
                    guard.phase.value,
                    guard.checkpoint_batch_id,
                )
            )
    return RouteGuardScan(tuple(invalid), tuple(unresolved))


def _short(value: str | None) -> str:
    if value is None:
        return "-"
    return value[:19] + "..." if len(value) > 22 else value


def require_clear_route(
    route: RouteIdentity, latest: Iterable[PartitionCheckpoint], manifest_ref: str
) -> None:
    """Raise the stable blocked error when any partition of the route has an invalid or unresolved guard."""
    scan = scan_route(latest)
    if scan.clear:
        return
    inspect = f"inspect:  dpone checkpoints {manifest_ref}"
    if scan.invalid:
        lines = [
            f"{len(scan.invalid)} partition(s) hold a target commit guard that cannot be read; "
            "this attempt wrote nothing to the target.",
            *(f"partition {b.label}  id={_short(b.partition_id)}  problem={b.phase}" for b in scan.invalid),
            inspect,
            f"resolve:  dpone guard resolve {manifest_ref} --partition ID --as committed|not-applied "
            "--reason TEXT",
            f"runbook:  {RUNBOOK}",
        ]
        raise DponeError(
            ErrorCode.GUARD_INVALID,
            f"route {route.describe()} is blocked by a malformed target commit guard",
            details={
                "route": route.model_dump(mode="json"),
                "partitions": [b.as_json() for b in scan.invalid],
            },
            hint_lines=tuple(lines),
        )
    width = max(len(b.label) for b in scan.unresolved)
    lines = [
        f"{len(scan.unresolved)} partition(s) have an unresolved target commit guard; "
        "this attempt wrote nothing to the target.",
        *(
            f"partition {b.label.ljust(width)}  id={_short(b.partition_id)}  phase={b.phase.ljust(22)}  "
            f"batch={_short(b.checkpoint_batch_id)}"
            for b in scan.unresolved
        ),
        inspect,
        f"compare:  dpone guard inspect {manifest_ref}",
        f"resolve:  dpone guard resolve {manifest_ref} --partition ID --as committed|not-applied --reason TEXT",
        f"runbook:  {RUNBOOK}",
    ]
    raise DponeError(
        ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
        f"route {route.describe()} is blocked",
        details={
            "route": route.model_dump(mode="json"),
            "partitions": [b.as_json() for b in scan.unresolved],
        },
        hint_lines=tuple(lines),
    )
