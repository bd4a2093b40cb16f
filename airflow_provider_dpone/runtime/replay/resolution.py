"""What an operator sees of a route's durable quality capsules, and how they resolve a blocked one.

``status`` lists every operation the route's latest checkpoints reference (and, on request, one run's
own operation), plus the committed partitions that have no capsule at all: those are REQUIRED/UNVERIFIED
when durable replay is selected, and nothing produced now (a scan, a report) can certify them. Both commands
read what a run's capsule scan reads (the route under every stored spelling: ``RouteFamily.own``), so every
operation that blocks a run is listed and can be resolved.

An operation is found by the run ID its checkpoints record, not only by the ID this manifest gives that
run: the ID hashes the manifest's semantic identity, so after any edit of the manifest (a check loosened, the
table respelled) the operation a run is blocked by has another one, and only the run ID still names it.

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
    RUNBOOK,
    CapsuleStores,
    OperationRecord,
    OperationState,
    classify,
    recorded_under_another_manifest,
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
    #: the operations whose run ran under another version of this manifest (``recorded_under_another_manifest``)
    under_another_manifest: frozenset[str] = frozenset()

    @property
    def blocked(self) -> bool:
        return any(r.blocking for r in self.operations) or bool(self.invalid_references)

    def as_json(self) -> dict[str, object]:
        return {
            "durable_quality_replay": self.selector_on,
            "blocked": self.blocked,
            "operations": [
                {**r.as_json(), "under_another_manifest": r.operation_id in self.under_another_manifest}
                for r in self.operations
            ],
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
    latest: Sequence[PartitionCheckpoint],
    open_stores: Callable[[], CapsuleStores],
    identity: str,
    *,
    selector_on: bool,
    run_id: str | None = None,
) -> ReplayStatus:
    """``latest``: the route's latest checkpoints under every stored spelling (what a run scans)."""
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
    other = frozenset(r.operation_id for r in records if recorded_under_another_manifest(r, identity))
    return ReplayStatus(tuple(records), tuple(unverified), tuple(invalid), selector_on, other)


def resolve_replay(
    store: CheckpointStore,
    latest: Sequence[PartitionCheckpoint],
    stores: CapsuleStores,
    clock: Clock,
    route: RouteIdentity,
    identity: str,
    request: ReplayResolutionRequest,
) -> tuple[OperationRecord, list[PartitionCheckpoint]]:
    """Apply one operator resolution to the operation of ``request.run_id`` among those ``latest`` (the
    route's latest checkpoints under every stored spelling) references; returns the operation as it now
    stands and the audit records."""
    reason = request.reason.strip()
    if not reason:
        raise DponeError(ErrorCode.USAGE, "--reason must say what was checked")
    if len(reason) > MAX_REASON_CHARS:
        raise DponeError(ErrorCode.USAGE, f"--reason is limited to {MAX_REASON_CHARS} characters")
    record = _operation_of_run(latest, stores, route, identity, request)
    partitions = record.partitions
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
    return classify(record.operation_id, audit, stores, resolved_as=resolved), audit


def _operation_of_run(
    latest: Sequence[PartitionCheckpoint],
    stores: CapsuleStores,
    route: RouteIdentity,
    identity: str,
    request: ReplayResolutionRequest,
) -> OperationRecord:
    """The referenced operation of ``request.run_id``: the one this manifest's identity names, or one whose
    checkpoints record that run ID (an edited manifest names the same run's operation differently). Of
    several, the one the resolution applies to (it blocks; for ``retry``, it retains its guard)."""
    run_id = request.run_id
    named = operation_id_for(identity, run_id)
    groups, resolutions, _ = referenced_operations(latest)
    # the run ID its capsule records too: a guard rebaseline's copy of a commit (a recorded move) carries the
    # reference under the rebaseline's own run ID, and the blocked line names the capsule's
    classified = (
        classify(operation_id, partitions, stores, resolved_as=resolutions.get(operation_id))
        for operation_id, partitions in sorted(groups.items())
    )
    found = [
        record
        for record in classified
        if record.operation_id == named
        or record.run_id == run_id
        or any(c.run_id == run_id for c in record.partitions)
    ]
    if not found:
        raise DponeError(
            ErrorCode.USAGE,
            f"no checkpoint of route {route.describe()} references a capsule of run {run_id}",
            details={"operation_id": named, "run_id": run_id},
            hint_lines=("the operations that block a run, with their run IDs: dpone replay status MANIFEST",),
        )
    if len(found) > 1:
        applies = [
            r
            for r in found
            if r.blocking and (request.resolve_as is ReplayResolveAs.FAILED or r.guard_retained)
        ]
        if len(applies) != 1:
            raise DponeError(
                ErrorCode.USAGE,
                f"{len(found)} operations of route {route.describe()} record run {run_id} and "
                f"{len(applies)} of them can be resolved as {request.resolve_as.value}: "
                "resolve by run ID needs exactly one",
                details={"run_id": run_id, "operations": [r.as_json() for r in found]},
                hint_lines=(f"runbook: {RUNBOOK}",),
            )
        return applies[0]
    return found[0]


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
