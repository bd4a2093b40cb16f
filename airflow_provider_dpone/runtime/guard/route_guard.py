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
    GUARD_KEY,
    UNREADABLE_KEY,
    GuardInvalid,
    RetryMeaning,
    TargetCommitGuard,
    read_guard,
)
from airflow_provider_dpone.contracts.route import RouteIdentity

RUNBOOK = "dpone runbook guard"  # shipped with the package: no repository path
_GUARD_FIELDS = 4  # schema_version, checkpoint_batch_id, phase, recovery


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
    """Classify every latest checkpoint of a route; never raises on bad records.

    Every checkpoint is read with :func:`read_guard`. A checkpoint batch writes the same guard object
    into each of its partitions, so the verdict is remembered per (status, guard values) when the guard
    is an object of exactly four string values: :func:`read_guard` is a function of those alone then.
    Anything else (no guard, another shape, an unreadable stand-in) is read on its own. Only the
    blocked partitions are sorted (by bounds label, then ID), not the whole route.
    """
    invalid: list[BlockedPartition] = []
    unresolved: list[BlockedPartition] = []
    verdicts: dict[tuple[object, ...], TargetCommitGuard | GuardInvalid] = {}
    clear: set[tuple[object, ...]] = set()  # keys read already whose verdict does not block (most of them)
    for checkpoint in latest:
        key = _verdict_key(checkpoint)
        if key in clear:
            continue
        verdict = verdicts.get(key) if key is not None else None
        if verdict is None:
            try:
                guard = read_guard(checkpoint)
            except GuardInvalid as exc:
                verdict = exc
            else:
                if guard is None:
                    continue
                verdict = guard
            if key is not None:
                verdicts[key] = verdict
        if isinstance(verdict, GuardInvalid):
            invalid.append(
                BlockedPartition(checkpoint.partition_id, checkpoint.bounds.label, verdict.reason, None)
            )
        elif ALLOWED_PAIRS[(checkpoint.status, verdict.phase)][1] is RetryMeaning.BLOCK:
            unresolved.append(
                BlockedPartition(
                    checkpoint.partition_id,
                    checkpoint.bounds.label,
                    verdict.phase.value,
                    verdict.checkpoint_batch_id,
                )
            )
        elif key is not None:
            clear.add(key)
    invalid.sort(key=_order)
    unresolved.sort(key=_order)
    return RouteGuardScan(tuple(invalid), tuple(unresolved))


def _order(blocked: BlockedPartition) -> tuple[str, str]:
    return (blocked.label, blocked.partition_id)


def _verdict_key(checkpoint: PartitionCheckpoint) -> tuple[object, ...] | None:
    """What :func:`read_guard` depends on, when the guard is an object of four strings; else ``None``."""
    diagnostics = checkpoint.diagnostics
    raw = diagnostics.get(GUARD_KEY)
    if type(raw) is not dict or len(raw) != _GUARD_FIELDS or UNREADABLE_KEY in diagnostics:
        return None
    version, batch, phase, recovery = (
        raw.get("schema_version"),
        raw.get("checkpoint_batch_id"),
        raw.get("phase"),
        raw.get("recovery"),
    )
    # a missing key reads as None here: read on its own (tested one by one, not by a generator: 50,000 a scan)
    if type(version) is str and type(batch) is str and type(phase) is str and type(recovery) is str:
        return (checkpoint.status, version, batch, phase, recovery)
    return None


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
