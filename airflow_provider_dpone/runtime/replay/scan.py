"""Route-wide scan of durable quality capsules, run before any source or target I/O.

Every operation referenced by the route's latest checkpoints is classified from its stored capsule and
reader guard. An operation that published (a referenced partition is COMMITTED, or its target outcome is
unknown) owes a COMPLETE v2 capsule whose recomputed verdict passes, with its reader guard released.
Anything else blocks the route — pending, sealed core only, a failed verdict, a retained reader guard, a
missing or invalid capsule — until the operation completes or an operator resolves it. Nothing expires.
The scan is independent of ``durable_quality_replay``: turning the selector off never skips an active
v2 capsule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from airflow_provider_dpone.contracts.capsule import (
    CapsuleChain,
    CapsuleV1,
    ProbeScope,
    TargetComplete,
    TargetFailed,
)
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GuardInvalid, GuardPhase, read_guard
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.target_observation import ReaderGuard, ReaderGuardState
from airflow_provider_dpone.ports.capsule_store import CapsuleStore, ReaderGuardStore
from airflow_provider_dpone.runtime.quality.evidence import ScopeMetrics, from_observation, from_probe
from airflow_provider_dpone.runtime.quality.policy import metric_keys
from airflow_provider_dpone.runtime.quality.verdict import Verdict, evaluate
from airflow_provider_dpone.runtime.replay.ref import (
    CAPSULE_REF_KEY,
    CapsuleRef,
    RefInvalid,
    operation_id_for,
    read_ref,
)

RUNBOOK = "dpone runbook replay"  # shipped with the package: no repository path
#: What on-call is told of a blocking operation whose run ran under another version of the manifest
#: (:func:`recorded_under_another_manifest`): the blocked line, ``replay status`` and ``replay resolve``.
ANOTHER_MANIFEST = (
    "it ran under another version of this manifest: re-running its run ID with this one cannot observe "
    "it (run it with the manifest it ran with, or resolve it as failed)"
)


class OperationState(str, Enum):
    COMPLETE = "complete"  # COMPLETE record, verdict passed (or warned)
    COMPLETE_FAILED = "complete_failed"  # COMPLETE record, a required check failed
    TARGET_PENDING = "target_pending"  # pending record, no terminal record
    SEALED_CORE = "sealed_core"  # core only
    FAILED = "failed"  # terminal FAILED record (written by an operator's resolution)
    MISSING = "missing"  # referenced, but the store has no capsule
    V1 = "v1"  # a v1 (source/staged only) capsule: it never carries target evidence
    INVALID = "invalid"  # stored capsule or reference refused (tampered, malformed, wrong format)


_DECIDED_BY_ITS_RUN = frozenset(
    {
        OperationState.TARGET_PENDING,
        OperationState.SEALED_CORE,
        OperationState.COMPLETE,
        OperationState.COMPLETE_FAILED,
        OperationState.FAILED,
    }
)


@dataclass(frozen=True)
class CapsuleStores:
    capsules: CapsuleStore
    guards: ReaderGuardStore


@dataclass
class OperationRecord:
    """What the route's checkpoints and the capsule store say about one operation."""

    operation_id: str
    partitions: tuple[PartitionCheckpoint, ...]
    state: OperationState
    published: bool
    chain: CapsuleChain | None = None
    reader_guard: ReaderGuard | None = None
    verdict: Verdict | None = None
    resolved_as: str | None = None
    problem: str | None = None

    @property
    def run_id(self) -> str | None:
        if self.chain is not None:
            return self.chain.core.run_id
        return self.partitions[0].run_id if self.partitions else None

    @property
    def guard_retained(self) -> bool:
        return self.reader_guard is not None and self.reader_guard.state is ReaderGuardState.ACQUIRED

    @property
    def closed_by_operator(self) -> bool:
        return self.resolved_as == "failed"

    @property
    def blocking(self) -> bool:
        if self.closed_by_operator or not self.published:
            return False
        return self.state is not OperationState.COMPLETE or self.guard_retained

    @property
    def decided_by_its_run(self) -> bool:
        """Whether a retry of the operation's own run ID decides it without on-call: it observes the target
        again, replays the evidence, or reports the final failure (``DurableReplay.resume``). Not while a
        reader guard is retained, nor for a missing, invalid or v1 capsule."""
        return not self.guard_retained and self.state in _DECIDED_BY_ITS_RUN

    def reason(self) -> str:
        if self.problem:
            return self.problem
        if self.state is OperationState.COMPLETE and self.guard_retained:
            return "its reader guard is still held (released only after verified worker termination)"
        if self.state is OperationState.SEALED_CORE and not all(
            c.status is CheckpointStatus.COMMITTED for c in self.partitions
        ):  # armed, never committed: a crash before, during or after the load (seen: none of its rows)
            return (
                "its load may have reached the target (its partitions are not committed: `dpone guard "
                "inspect` shows what landed), and its target observation never started"
            )
        return {
            OperationState.COMPLETE: "complete",
            OperationState.COMPLETE_FAILED: "its target observation failed a required quality check",
            OperationState.TARGET_PENDING: "its target observation is pending"
            + (" and its reader guard is retained" if self.guard_retained else ""),
            OperationState.SEALED_CORE: "it published, but its target observation never started",
            OperationState.FAILED: "it was closed as failed",
            OperationState.MISSING: "its capsule is missing from the capsule store",
            OperationState.V1: "it holds a v1 capsule, which has no target evidence",
            OperationState.INVALID: "its capsule cannot be verified",
        }[self.state]

    def as_json(self) -> dict[str, object]:
        return {
            "operation_id": self.operation_id,
            "run_id": self.run_id,
            "state": self.state.value,
            "published": self.published,
            "blocking": self.blocking,
            "reader_guard": None if self.reader_guard is None else self.reader_guard.state.value,
            "verdict": None if self.verdict is None else self.verdict.label,
            "resolved_as": self.resolved_as,
            "partitions": len(self.partitions),
            "checkpoint_batch_id": None if self.chain is None else self.chain.core.checkpoint_batch_id,
            "reason": self.reason(),
        }


def capsule_verdict(chain: CapsuleChain) -> Verdict | None:
    """Recompute the verdict of a COMPLETE chain from its own bytes: the bound policy, the sealed probes
    and the target observation. ``None`` before completion. Malformed evidence raises ``capsule_invalid``."""
    terminal = chain.terminal
    if not isinstance(terminal, TargetComplete):
        return None
    core = chain.core
    keys = metric_keys(core.policy)
    if tuple(keys) != core.target_plan.expected_keys():
        raise DponeError(
            ErrorCode.CAPSULE_INVALID,
            "the sealed target plan does not measure exactly what the sealed policy needs",
            details={"operation_id": chain.operation_id},
        )
    scopes_seen = [p.scope for p in core.probes]
    if ProbeScope.SOURCE not in scopes_seen or len(set(scopes_seen)) != len(scopes_seen):
        raise DponeError(
            ErrorCode.CAPSULE_INVALID,
            "the sealed core does not hold exactly one source probe (and at most one staged probe)",
            details={"operation_id": chain.operation_id},
        )
    scopes = [ScopeMetrics(p.scope.value, from_probe(p, keys)) for p in core.probes]
    scopes.append(ScopeMetrics("target", from_observation(terminal.observation)))
    return evaluate(core.policy, scopes)


def _published(partitions: Sequence[PartitionCheckpoint]) -> bool:
    """Did (or may) the target hold this operation's rows? Only failed_before_target says no."""
    for checkpoint in partitions:
        if checkpoint.status is CheckpointStatus.COMMITTED:
            return True
        try:
            guard = read_guard(checkpoint)
        except GuardInvalid:
            return True
        if guard is None or guard.phase is not GuardPhase.FAILED_BEFORE_TARGET:
            return True
    return False


def classify(
    operation_id: str,
    partitions: Sequence[PartitionCheckpoint],
    stores: CapsuleStores,
    *,
    resolved_as: str | None = None,
) -> OperationRecord:
    """One operation's record. Store failures (``quality_capsule_store_failed``) propagate."""
    record = OperationRecord(
        operation_id=operation_id,
        partitions=tuple(partitions),
        state=OperationState.MISSING,
        published=_published(partitions) if partitions else False,
        resolved_as=resolved_as,
    )
    try:
        stored = stores.capsules.read(operation_id)
    except DponeError as exc:
        if exc.code is not ErrorCode.CAPSULE_INVALID:
            raise
        record.state, record.problem = OperationState.INVALID, "its stored capsule fails verification"
        return record
    if stored is None:
        return record
    if isinstance(stored, CapsuleV1):
        record.state = OperationState.V1
        return record
    record.chain = stored
    terminal = stored.terminal
    try:
        if isinstance(terminal, TargetComplete):
            record.verdict = capsule_verdict(stored)
            assert record.verdict is not None
            record.state = (
                OperationState.COMPLETE if record.verdict.passed else OperationState.COMPLETE_FAILED
            )
        elif isinstance(terminal, TargetFailed):
            record.state = OperationState.FAILED
        elif stored.pending is not None:
            record.state = OperationState.TARGET_PENDING
        else:
            record.state = OperationState.SEALED_CORE
    except DponeError as exc:
        if exc.code is not ErrorCode.CAPSULE_INVALID:
            raise
        record.state, record.problem = OperationState.INVALID, "its capsule evidence is malformed"
        return record
    generation_key = stored.core.target_plan.generation_key()
    record.reader_guard = stores.guards.read(operation_id, generation_key)
    return record


def referenced_operations(
    latest: Iterable[PartitionCheckpoint],
) -> tuple[dict[str, list[PartitionCheckpoint]], dict[str, str | None], list[PartitionCheckpoint]]:
    """Group the route's latest checkpoints by referenced operation.

    Returns (partitions per operation, the operator resolution per operation, checkpoints whose reference
    is malformed). An operation counts as resolved only if every one of its referenced partitions says so.
    """
    groups: dict[str, list[PartitionCheckpoint]] = {}
    refs: dict[str, list[CapsuleRef]] = {}
    invalid: list[PartitionCheckpoint] = []
    # only the checkpoints that carry a reference are sorted: a long route's tens of thousands have none
    # (0.06 s per 50,000 sorted by label before; read_ref answers None exactly when the key is absent)
    referenced = [c for c in latest if CAPSULE_REF_KEY in c.diagnostics]
    for checkpoint in sorted(referenced, key=lambda c: (c.bounds.label, c.partition_id)):
        try:
            ref = read_ref(checkpoint)
        except RefInvalid:
            invalid.append(checkpoint)
            continue
        if ref is None:
            continue
        groups.setdefault(ref.operation_id, []).append(checkpoint)
        refs.setdefault(ref.operation_id, []).append(ref)
    resolutions: dict[str, str | None] = {}
    for operation_id, found in refs.items():
        kinds = {r.resolved_as for r in found}
        resolutions[operation_id] = kinds.pop() if len(kinds) == 1 else None
    return groups, resolutions, invalid


def scan_capsules(
    latest: Sequence[PartitionCheckpoint], open_stores: Callable[[], CapsuleStores]
) -> tuple[list[OperationRecord], list[PartitionCheckpoint]]:
    """Every referenced operation's record (stores opened only when a reference exists), and the
    checkpoints whose reference is malformed."""
    groups, resolutions, invalid = referenced_operations(latest)
    if not groups:
        return [], invalid
    stores = open_stores()
    records = [
        classify(op, parts, stores, resolved_as=resolutions.get(op)) for op, parts in sorted(groups.items())
    ]
    return records, invalid


def _short(value: str | None) -> str:
    if value is None:
        return "-"
    return value[:19] + "..." if len(value) > 22 else value


def recorded_under_another_manifest(record: OperationRecord, identity: str) -> bool:
    """Did ``record``'s run run under another version of this manifest? Its operation ID is then not the
    one this manifest gives its run ID, so re-running that run ID with this manifest cannot observe it."""
    run_id = record.run_id
    return run_id is not None and operation_id_for(identity, run_id) != record.operation_id


def next_steps(
    blocking: Sequence[OperationRecord],
    invalid_refs: bool,
    manifest_ref: str,
    *,
    selector_on: bool = True,
    identity: str | None = None,
) -> list[str]:
    """What on-call does next, one line per kind of blocking operation present: a retry settles a pending
    or unobserved operation only while its reader guard is free, with the selector on and under the manifest
    its run used; never a failed check (a retry of its run ID reports the same failure) and never a missing
    or unverifiable capsule."""
    states = {r.state for r in blocking}
    resolve = f"dpone replay resolve {manifest_ref} --run-id RUN"
    lines: list[str] = []
    if any(r.guard_retained for r in blocking):
        lines.append(
            f"retained: verify its worker is gone (runbook step 1), then {resolve} --as retry "
            "--reason TEXT, then re-run its run ID"
        )
    retriable = [
        r for r in blocking if r.decided_by_its_run and r.state is not OperationState.COMPLETE_FAILED
    ]
    if retriable and not selector_on:
        # a run with the selector off never observes an operation (the retry printed the same block again)
        lines.append(
            "retry:    set sink.options.durable_quality_replay back to true, then re-run the blocked "
            "operation's run ID (dpone run with --run-id RUN, or clear its Airflow task); with it off, a retry "
            f"never observes it; or close it: {resolve} --as failed --reason TEXT"
        )
    elif retriable and identity and all(recorded_under_another_manifest(r, identity) for r in retriable):
        lines.append(
            "retry:    the blocked run ran under another version of this manifest: re-run its run ID with "
            f"that version (its checks), or close it: {resolve} --as failed --reason TEXT"
        )
    elif retriable:
        lines.append(
            "retry:    re-run the blocked operation's run ID (dpone run with --run-id RUN, or clear its "
            "Airflow task): it observes the target again or replays its evidence"
        )
    if OperationState.COMPLETE_FAILED in states:
        lines.append(
            "failed:   a retry of its run ID reports the same failure; find why the target differs (the "
            f"values: dpone run --json of that run), repair it if needed, then {resolve} --as failed "
            "--reason TEXT"
        )
    if states & {OperationState.MISSING, OperationState.INVALID, OperationState.V1} or invalid_refs:
        lines.append(
            "unverifiable: a capsule is missing, invalid or v1; find who changed the checkpoint or capsule "
            f"store before anything else (never resolve blindly; {resolve} --as failed closes it)"
        )
    return lines


def require_clear_capsules(
    route: RouteIdentity,
    records: Sequence[OperationRecord],
    invalid_refs: Sequence[PartitionCheckpoint],
    manifest_ref: str,
    *,
    selector_on: bool,
    identity: str | None,
) -> None:
    """Raise ``quality_replay_unresolved`` (exit 3) when any operation of the route blocks it. An
    operation recorded under another version of the manifest (``identity`` names its run's operation
    differently; None: not known) is said to be one: re-running its run ID with this manifest cannot
    observe it."""
    blocking = [r for r in records if r.blocking]
    if not blocking and not invalid_refs:
        return
    lines = [
        f"{len(blocking) + len(invalid_refs)} operation(s) of this route have unresolved durable quality "
        "evidence; this attempt read nothing from the source and wrote nothing to the target.",
        *(
            f"operation {_short(r.operation_id)}  run={r.run_id}  state={r.state.value}  "
            f"reader_guard={'retained' if r.guard_retained else 'free'}  ({r.reason()})"
            + (f"; {ANOTHER_MANIFEST}" if identity and recorded_under_another_manifest(r, identity) else "")
            for r in blocking
        ),
        *(
            f"partition {c.bounds.label}  id={_short(c.partition_id)}  problem=malformed capsule reference"
            for c in invalid_refs
        ),
        f"inspect:  dpone replay status {manifest_ref}",
        *next_steps(blocking, bool(invalid_refs), manifest_ref, selector_on=selector_on, identity=identity),
        f"runbook:  {RUNBOOK}",
    ]
    if not selector_on:
        lines.insert(
            1, "sink.options.durable_quality_replay is off, but an active v2 capsule is never skipped."
        )
    raise DponeError(
        ErrorCode.QUALITY_REPLAY_UNRESOLVED,
        f"route {route.describe()} is blocked by unresolved durable quality evidence",
        details={
            "route": route.model_dump(mode="json"),
            "operations": [r.as_json() for r in blocking],
            "invalid_references": [c.partition_id for c in invalid_refs],
        },
        hint_lines=tuple(lines),
    )
