"""What an operator sees of a route's durable quality capsules, and how they resolve a blocked one.

``status`` lists every operation the route's latest checkpoints reference (and, on request, one run's
own operation), plus the committed partitions that have no capsule at all: those are REQUIRED/UNVERIFIED
when durable replay is selected, and nothing produced now (a scan, a report) can certify them.

``resolve`` is deliberate and audited (who, when, why, on the operation's checkpoints); it never touches
the target and never fabricates evidence:

* ``retry``  — the operator verified the worker of a retained reader guard is gone (see the runbook):
  the guard is released by its recorded owner token, so a retry of the same run ID observes again (or,
  for a COMPLETE capsule, replays). The route stays blocked until that retry completes.
* ``failed`` — close the operation as failed: a pending capsule gets its terminal FAILED record
  (reason ``operator_closed``), a retained guard is released, and the route is unblocked. The operation
  stays failed forever: a retry of its run ID reports a quality failure, never a success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from airflow_provider_dpone.contracts.capsule import (
    CapsuleChain,
    CapsuleRecord,
    TargetFailed,
    TargetPending,
)
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.target_observation import ReaderOutcomeKind
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.replay.ref import (
    RefInvalid,
    operation_id_for,
    read_ref,
    with_resolution,
)
from airflow_provider_dpone.runtime.replay.scan import (
    CapsuleStores,
    OperationRecord,
    OperationState,
    classify,
    referenced_operations,
    scan_capsules,
)

MAX_REASON_CHARS = 500
OPERATOR_CLOSED = "operator_closed"


class ReplayResolveAs(str, Enum):
    RETRY = "retry"
    FAILED = "failed"


@dataclass(frozen=True)
class ReplayResolutionRequest:
    run_id: str
    resolve_as: ReplayResolveAs
    reason: str
    actor: str


@dataclass(frozen=True)
class ReplayStatus:
    operations: tuple[OperationRecord, ...]
    unverified: tuple[PartitionCheckpoint, ...]
    invalid_references: tuple[PartitionCheckpoint, ...]
    selector_on: bool

    @property
    def blocked(self) -> bool:
        return any(r.blocking for r in self.operations) or bool(self.invalid_references)

    def as_json(self) -> dict[str, object]:
        return {
            "durable_quality_replay": self.selector_on,
            "blocked": self.blocked,
            "operations": [r.as_json() for r in self.operations],
            "unverified_partitions": [
                {
                    "partition_id": c.partition_id,
                    "bounds": c.bounds.label,
                    "run_id": c.run_id,
                    "quality": "REQUIRED/UNVERIFIED" if self.selector_on else "no capsule",
                }
                for c in self.unverified
            ],
            "invalid_references": [c.partition_id for c in self.invalid_references],
        }


def replay_status(
    store: CheckpointStore,
    open_stores: Callable[[], CapsuleStores],
    route: RouteIdentity,
    identity: str,
    *,
    selector_on: bool,
    run_id: str | None = None,
) -> ReplayStatus:
    latest = store.list_latest(route)
    records, invalid = scan_capsules(latest, open_stores)
    if run_id is not None:
        operation_id = operation_id_for(identity, run_id)
        if all(r.operation_id != operation_id for r in records):
            own = classify(operation_id, (), open_stores())
            if own.state is not OperationState.MISSING:
                records.append(own)
    unverified = []
    for checkpoint in sorted(latest, key=lambda c: (c.bounds.label, c.partition_id)):
        if checkpoint.status is not CheckpointStatus.COMMITTED:
            continue
        try:
            ref = read_ref(checkpoint)
        except RefInvalid:
            continue
        if ref is None:
            unverified.append(checkpoint)
    return ReplayStatus(tuple(records), tuple(unverified), tuple(invalid), selector_on)


def resolve_replay(
    store: CheckpointStore,
    stores: CapsuleStores,
    clock: Clock,
    route: RouteIdentity,
    identity: str,
    request: ReplayResolutionRequest,
) -> tuple[OperationRecord, list[PartitionCheckpoint]]:
    """Apply one operator resolution; returns the operation as it now stands and the audit records."""
    reason = request.reason.strip()
    if not reason:
        raise DponeError(ErrorCode.USAGE, "--reason must say what was checked")
    if len(reason) > MAX_REASON_CHARS:
        raise DponeError(ErrorCode.USAGE, f"--reason is limited to {MAX_REASON_CHARS} characters")
    operation_id = operation_id_for(identity, request.run_id)
    groups, resolutions, _ = referenced_operations(store.list_latest(route))
    partitions = groups.get(operation_id)
    if not partitions:
        raise DponeError(
            ErrorCode.USAGE,
            f"no checkpoint of route {route.describe()} references the capsule of run {request.run_id}",
            details={"operation_id": operation_id, "run_id": request.run_id},
        )
    record = classify(operation_id, partitions, stores, resolved_as=resolutions.get(operation_id))
    if record.closed_by_operator:
        raise DponeError(ErrorCode.USAGE, "this operation is already closed as failed")
    if request.resolve_as is ReplayResolveAs.RETRY:
        if not record.guard_retained:
            raise DponeError(
                ErrorCode.USAGE,
                "this operation's reader guard is not retained; re-run its run ID to observe the target again",
                details={"operation": record.as_json()},
            )
        _release_retained(stores, record)
    else:
        if not record.blocking:
            raise DponeError(
                ErrorCode.USAGE,
                "this operation does not block the route; there is nothing to close",
                details={"operation": record.as_json()},
            )
        if record.chain is not None and record.chain.terminal is None:
            _close_chain(stores, record.chain, clock)
        if record.guard_retained:
            _release_retained(stores, record)
    at = clock.now()
    resolution = {
        "as": request.resolve_as.value,
        "by": request.actor,
        "at": at.isoformat(),
        "reason": reason,
    }
    audit = [
        previous.model_copy(
            update={
                "started_at": at,
                "completed_at": at,
                "diagnostics": with_resolution(previous, resolution),
            }
        )
        for previous in partitions
    ]
    store.write_batch(audit)
    resolved = None if request.resolve_as is ReplayResolveAs.RETRY else request.resolve_as.value
    return classify(operation_id, audit, stores, resolved_as=resolved), audit


def _release_retained(stores: CapsuleStores, record: OperationRecord) -> None:
    guard = record.reader_guard
    assert guard is not None
    stores.guards.release(guard.operation_id, guard.generation_key, guard.owner_token)


def _close_chain(stores: CapsuleStores, chain: CapsuleChain, clock: Clock) -> None:
    """Terminal FAILED record (after the TARGET_PENDING it needs, when the core is alone)."""
    records: Sequence[CapsuleRecord] = chain.records
    core_sha = records[0].sha256()
    plan = chain.core.target_plan
    head = chain.head_sha256
    version = chain.version
    if chain.pending is None:
        pending = CapsuleRecord(
            operation_id=chain.operation_id,
            version=2,
            prev_sha256=head,
            body=TargetPending(
                core_sha256=core_sha,
                request_sha256=plan.sha256(),
                generation_key=plan.generation_key(),
                recorded_at=clock.now(),
            ),
        )
        stores.capsules.append(chain.operation_id, version, pending)
        head, version = pending.sha256(), 2
    failed = CapsuleRecord(
        operation_id=chain.operation_id,
        version=3,
        prev_sha256=head,
        body=TargetFailed(
            core_sha256=core_sha,
            outcome=ReaderOutcomeKind.REJECTED,
            reason=OPERATOR_CLOSED,
            termination_verified=False,
            recorded_at=clock.now(),
        ),
    )
    stores.capsules.append(chain.operation_id, version, failed)
