"""The operator's deliberate repair of a blocked route. Appends audited checkpoints; never touches the target.

Resolving ``committed`` records that the operator verified the target holds the partition's rows;
``not-applied`` records that it does not, which makes the partition retryable (phase
``failed_before_target``). Nothing here infers the answer: automatic reconciliation is out of scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.route_guard import BlockedPartition, scan_route

MAX_REASON_CHARS = 500


class ResolveAs(str, Enum):
    COMMITTED = "committed"
    NOT_APPLIED = "not-applied"


@dataclass(frozen=True)
class ResolutionRequest:
    partition_ids: tuple[str, ...] | None  # None: every blocked partition
    resolve_as: ResolveAs
    reason: str
    actor: str


def blocked_partitions(latest: Sequence[PartitionCheckpoint]) -> list[BlockedPartition]:
    scan = scan_route(latest)
    return [*scan.invalid, *scan.unresolved]


MIN_PREFIX_HEX = 8


def _expand_prefix(given: str, latest: dict[str, PartitionCheckpoint]) -> str:
    """Accept the short IDs the table shows (``sha256:0123abcd...``) when they name exactly one partition."""
    given = given.strip().removesuffix("...")
    if given in latest or len(given.removeprefix("sha256:")) < MIN_PREFIX_HEX:
        return given
    matches = [pid for pid in latest if pid.startswith(given)]
    if len(matches) > 1:
        raise DponeError(ErrorCode.USAGE, "a partition ID prefix matches several partitions; give more of it")
    return matches[0] if matches else given


def resolve(
    store: CheckpointStore,
    clock: Clock,
    route: RouteIdentity,
    request: ResolutionRequest,
    *,
    latest: Sequence[PartitionCheckpoint] | None = None,
) -> list[PartitionCheckpoint]:
    """Append one resolution checkpoint per chosen blocked partition, sharing one timestamp.

    ``latest`` is what the route's runs scan (its target-wide family); by default the route's own rows.
    Each resolution is written under the route its blocked checkpoint was stored with.
    """
    reason = request.reason.strip()
    if not reason:
        raise DponeError(ErrorCode.USAGE, "--reason must say why the partition is being resolved")
    if len(reason) > MAX_REASON_CHARS:
        raise DponeError(ErrorCode.USAGE, f"--reason is limited to {MAX_REASON_CHARS} characters")
    rows = store.list_latest(route) if latest is None else latest
    by_id = {c.partition_id: c for c in rows}
    blocked = {b.partition_id: b for b in blocked_partitions(list(by_id.values()))}
    if request.partition_ids is None:
        chosen = sorted(blocked)
        if not chosen:
            raise DponeError(ErrorCode.USAGE, f"route {route.describe()} has no blocked partition")
    else:
        chosen = list(dict.fromkeys(_expand_prefix(pid, by_id) for pid in request.partition_ids))
        unknown = [pid for pid in chosen if pid not in by_id]
        if unknown:
            raise DponeError(
                ErrorCode.USAGE,
                "no checkpoint of this route has that partition ID",
                details={"partitions": unknown},
            )
        not_blocked = [pid for pid in chosen if pid not in blocked]
        if not_blocked:
            raise DponeError(
                ErrorCode.USAGE,
                "only blocked partitions can be resolved; see `dpone checkpoints`",
                details={"partitions": not_blocked},
            )
    at = clock.now()
    records: list[PartitionCheckpoint] = []
    for pid in chosen:
        previous = by_id[pid]
        block = blocked[pid]
        batch = block.checkpoint_batch_id or checkpoint_batch_id(f"resolution:{at.isoformat()}", [pid])
        if request.resolve_as is ResolveAs.COMMITTED:
            status, phase = CheckpointStatus.COMMITTED, GuardPhase.CHECKPOINT_COMMITTED
        else:
            status, phase = CheckpointStatus.FAILED, GuardPhase.FAILED_BEFORE_TARGET
        diagnostics: dict[str, object] = {
            k: v for k, v in previous.diagnostics.items() if k not in (GUARD_KEY, "resolution")
        }
        diagnostics[GUARD_KEY] = TargetCommitGuard.for_phase(phase, batch).to_json()
        diagnostics["resolution"] = {
            "as": request.resolve_as.value,
            "by": request.actor,
            "at": at.isoformat(),
            "reason": reason,
            "previous_status": previous.status.value,
            "previous_phase": block.phase,
        }
        records.append(
            previous.model_copy(
                update={
                    "status": status,
                    "started_at": at,
                    "completed_at": at,
                    "diagnostics": diagnostics,
                }
            )
        )
    store.write_batch(records)
    return records
