"""Durable quality replay of one operation (ADR 0074), in the order of its flowchart:

    resume     right after the route guard scan, before any source access: replay a COMPLETE capsule,
               re-observe a published pending one, or block on another operation's unresolved capsule
    prepare    before extraction: the reader plan of the exact generation, worst-case capacity of the
               complete envelope and the reader frame, proof that a worker can be spawned, killed, reaped
    seal       before publication: the immutable sealed core (policy, identity binding, run/operation and
               load IDs, source/staged probes, target plan); its reference rides on the armed checkpoints
    observe    after publication and after the sink client is closed: reader guard for the generation,
               TARGET_PENDING, the bounded reader, validation, COMPLETE, the fresh receipt under the guard,
               verified release

A timeout or an uncertain worker lifecycle leaves TARGET_PENDING in place. The reader guard is released
after a failed observation only when the worker's termination was verified and its output revoked: the
parent closed both pipes, reads nothing more, and never persists or accepts a frame from that attempt.
Otherwise the guard is retained. Nothing expires; an owner's death never grants success.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum

from airflow_provider_dpone.contracts.capsule import (
    GENESIS_SHA256,
    CapsuleCapacityExceeded,
    CapsuleChain,
    CapsuleRecord,
    ProbeEvidence,
    ProbeScope,
    QualityPolicy,
    SealedCore,
    TargetComplete,
    TargetPending,
    reserve_capacity,
)
from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.target_observation import (
    METRIC_VALUE_MAX,
    MetricValue,
    ObservationInterrupted,
    ObservationInvalid,
    ReaderGuardState,
    ReaderOutcome,
    ReaderOutcomeKind,
    TargetReadRequest,
)
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.host import HostIdentity
from airflow_provider_dpone.ports.target_reader import TargetMetricsReader
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.quality.generation import target_plan
from airflow_provider_dpone.runtime.quality.verdict import Verdict
from airflow_provider_dpone.runtime.replay.budget import observation_budget
from airflow_provider_dpone.runtime.replay.ref import capsule_ref, operation_id_for
from airflow_provider_dpone.runtime.replay.scan import (
    RUNBOOK,
    CapsuleStores,
    OperationRecord,
    OperationState,
    capsule_verdict,
    classify,
    require_clear_capsules,
    scan_capsules,
)
from airflow_provider_dpone.runtime.route_family import replaced_the_target

_MAX_STAMP = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)


@dataclass
class ReplayPorts:
    """What durable replay needs beyond the transfer: capsule stores (opened lazily), the bounded reader
    and the sink's admitted endpoint (the reader builds its own client from it)."""

    stores: Callable[[], CapsuleStores]
    reader: TargetMetricsReader
    target: EndpointDescriptor
    #: the machine's name (operator text) and random lease tokens
    host: HostIdentity
    #: ``DPONE_REPLAY_OBSERVATION_BUDGET_S`` when set (bounded by the ADR's 60 s), else 60 s
    budget_s: float = field(default_factory=observation_budget)


class WorkerLifecycle(Enum):
    """What an observation knows about its reader worker: the reader guard may be released only when no
    worker was spawned, or one ended and its termination was verified (ADR 0074: retain when unknown)."""

    NONE_SPAWNED = "none_spawned"
    MAY_BE_ALIVE = "may_be_alive"
    ENDED_VERIFIED = "ended_verified"
    #: the guard was released or retained explicitly; a later failure changes nothing
    SETTLED = "settled"

    @classmethod
    def ended(cls, termination_verified: bool) -> WorkerLifecycle:
        return cls.ENDED_VERIFIED if termination_verified else cls.MAY_BE_ALIVE

    @property
    def releasable(self) -> bool:
        return self in (WorkerLifecycle.NONE_SPAWNED, WorkerLifecycle.ENDED_VERIFIED)


@dataclass(frozen=True)
class Fresh:
    """Run normally. ``stored_core``: this run's core sealed by an attempt that never published."""

    stored_core: SealedCore | None = None


@dataclass(frozen=True)
class Replayed:
    """This run's operation is COMPLETE and passed: succeed from the capsule alone."""

    record: OperationRecord


@dataclass(frozen=True)
class ObserveAgain:
    """This run's operation published but its target evidence is still owed: observe again."""

    record: OperationRecord


Resume = Fresh | Replayed | ObserveAgain


#: States past the sealed core (a pending or terminal record exists): a retry of the run ID never runs afresh.
_PAST_ITS_CORE = frozenset(
    {
        OperationState.TARGET_PENDING,
        OperationState.COMPLETE,
        OperationState.COMPLETE_FAILED,
        OperationState.FAILED,
    }
)


@dataclass(frozen=True)
class ReplayResult:
    operation_id: str
    chain: CapsuleChain
    verdict: Verdict


class DurableReplay:
    def __init__(
        self,
        ports: ReplayPorts,
        *,
        clock: Clock,
        route: RouteIdentity,
        identity: str,
        target_table: str,
        manifest_ref: str,
    ) -> None:
        self._ports = ports
        self._clock = clock
        self._route = route
        self._identity = identity
        self._target_table = target_table
        self._manifest_ref = manifest_ref
        self._stores: CapsuleStores | None = None

    def stores(self) -> CapsuleStores:
        if self._stores is None:
            self._stores = self._ports.stores()
        return self._stores

    def operation_id(self, run_id: str) -> str:
        return operation_id_for(self._identity, run_id)

    # -- resume: before any source access ------------------------------------------------------------

    def resume(
        self,
        run_id: str,
        latest: Sequence[PartitionCheckpoint],
        target_wide: Sequence[PartitionCheckpoint] | None = None,
    ) -> Resume:
        """How a run of ``run_id`` resumes from its capsule. ``latest``: the route's latest checkpoints;
        ``target_wide``: every route's of the target (another strategy or source replacing rows within the
        operation's partitions makes its evidence stale; None: ``latest`` alone)."""
        operation_id = self.operation_id(run_id)
        records, invalid_refs = scan_capsules(latest, self.stores)
        own = next((r for r in records if r.operation_id == operation_id), None)
        if own is None:
            own = classify(operation_id, (), self.stores())
            if own.state is OperationState.MISSING:
                own = None
            elif own.state in _PAST_ITS_CORE:
                raise self._outlived(run_id, own)
        if own is not None:
            decided = self._resume_own(run_id, own, latest if target_wide is None else target_wide)
            if decided is not None:
                return decided
        others = [r for r in records if r.operation_id != operation_id]
        require_clear_capsules(
            self._route, others, invalid_refs, self._manifest_ref, selector_on=True, identity=self._identity
        )
        return Fresh(stored_core=own.chain.core if own is not None and own.chain is not None else None)

    def _resume_own(
        self, run_id: str, own: OperationRecord, latest: Sequence[PartitionCheckpoint]
    ) -> Resume | None:
        if own.chain is not None:
            self._check_binding(run_id, own.chain)
        if not own.published:
            if own.state is OperationState.SEALED_CORE:
                return None  # sealed before an attempt that never reached the target: reuse if identical
            if own.state is OperationState.V1:
                raise DponeError(
                    ErrorCode.CAPSULE_CONFLICT,
                    "this run ID already has a v1 (source/staged only) quality capsule; a v1 capsule is never "
                    "upgraded. Start a new run ID for durable replay",
                    details={"operation_id": own.operation_id, "run_id": run_id},
                )
            raise self._blocked(own)  # evidence past the core without any publication: fail closed
        if own.closed_by_operator or own.state is OperationState.FAILED:
            raise self._closed_as_failed(run_id, own)
        if own.state is OperationState.COMPLETE_FAILED:
            assert own.verdict is not None
            own.verdict.require_passed(
                self._route.describe(),
                published=True,
                hints=(
                    "this run's target evidence is final; the route is blocked for later runs",
                    f"runbook:  {RUNBOOK}",
                ),
            )
        if own.state is OperationState.COMPLETE:
            self._require_current_generation(run_id, own, latest)
            if own.guard_retained:
                raise self._blocked(own)
            return Replayed(own)
        if own.state in (OperationState.TARGET_PENDING, OperationState.SEALED_CORE):
            self._require_current_generation(run_id, own, latest)
            if own.guard_retained:
                raise self._blocked(own)
            return ObserveAgain(own)
        raise self._blocked(own)

    def _outlived(self, run_id: str, own: OperationRecord) -> DponeError:
        """A retry of an operation whose evidence outlived every partition it covered: later runs (a lookback,
        another definition) replaced them all, so no checkpoint refers to it any more. It blocks nothing and
        can never be measured again; before, it fell to the fail-closed "cannot be used" block (exit 3), which
        no command could clear (``replay resolve`` finds operations through checkpoints)."""
        if own.state is OperationState.FAILED:
            return self._closed_as_failed(run_id, own)
        if own.state is OperationState.COMPLETE_FAILED:
            assert own.verdict is not None
            try:
                own.verdict.require_passed(
                    self._route.describe(),
                    published=True,
                    hints=(
                        "this run's target evidence is final; later runs replaced all its partitions, so it "
                        "blocks nothing: give the next run a new run ID (a new DAG run)",
                        f"runbook:  {RUNBOOK}",
                    ),
                )
            except DponeError as exc:
                return exc
        return self._generation_conflict(run_id, own)

    def _closed_as_failed(self, run_id: str, own: OperationRecord) -> DponeError:
        return DponeError(
            ErrorCode.QUALITY_CHECK_FAILED,
            f"run {run_id} was closed as failed by an operator; it is never reported as a success",
            details={"operation_id": own.operation_id, "run_id": run_id, "state": own.state.value},
            hint_lines=(
                f"inspect:  dpone replay status {self._manifest_ref} --run-id {shlex.quote(run_id)}",
            ),
        )

    def _check_binding(self, run_id: str, chain: CapsuleChain) -> None:
        core = chain.core
        if core.identity != self._identity or core.run_id != run_id or core.route != self._route:
            raise DponeError(
                ErrorCode.CAPSULE_INVALID,
                "the stored capsule of this operation is bound to another manifest identity, run or route",
                details={"operation_id": chain.operation_id, "run_id": run_id},
            )

    def _require_current_generation(
        self, run_id: str, own: OperationRecord, latest: Sequence[PartitionCheckpoint]
    ) -> None:
        """The route's checkpoints still show exactly this operation's batch, committed, and no later
        attempt of another definition of the route, another strategy or another source replaced rows within its
        partitions (``latest``: the latest checkpoints of every route of the target). Seen: a run cleared after a manifest edit's run had replaced its days
        replayed its old verdict, "passed", with the target holding the other definition's rows (or none,
        after that attempt was resolved not-applied)."""
        assert own.chain is not None
        core = own.chain.core
        partitions = own.partitions
        if (
            not partitions
            or any(c.status is not CheckpointStatus.COMMITTED for c in partitions)
            or core.checkpoint_batch_id != checkpoint_batch_id(run_id, [c.partition_id for c in partitions])
            or _replaced_since(partitions, latest)
        ):
            raise self._generation_conflict(run_id, own)

    def _generation_conflict(self, run_id: str, own: OperationRecord) -> DponeError:
        return DponeError(
            ErrorCode.CAPSULE_CONFLICT,
            "this operation's generation is no longer exactly the route's committed state "
            "(partitions were resolved or replaced since); its evidence cannot be replayed",
            details={"operation_id": own.operation_id, "run_id": run_id},
            hint_lines=(
                f"inspect:  dpone replay status {self._manifest_ref} --run-id {shlex.quote(run_id)}",
                *(
                    (
                        "a retry of this run ID can never measure it again: close it (the route's next "
                        "run moves what is due):",
                        f"resolve:  dpone replay resolve {self._manifest_ref} --run-id "
                        f"{shlex.quote(run_id)} --as failed --reason '<why its partitions changed>'",
                    )
                    if own.blocking
                    else (  # it completed and blocks nothing: replay resolve refuses to close it
                        "a retry of this run ID can never measure it again (a later run, a lookback or "
                        "a guard resolution replaced its partitions); it blocks nothing: give the next "
                        "run a new run ID (a new DAG run), which moves what is due",
                    )
                ),
                f"runbook:  {RUNBOOK}",
            ),
        )

    def _blocked(self, own: OperationRecord) -> DponeError:
        try:
            require_clear_capsules(
                self._route, [own], (), self._manifest_ref, selector_on=True, identity=self._identity
            )
        except DponeError as exc:
            return exc
        return DponeError(  # not blocking by the route rules, yet unusable for this run: still fail closed
            ErrorCode.QUALITY_REPLAY_UNRESOLVED,
            f"this run's durable quality evidence cannot be used ({own.reason()})",
            details={"operation": own.as_json()},
            hint_lines=(f"runbook:  {RUNBOOK}",),
        )

    # -- prepare: before extraction ------------------------------------------------------------------

    def prepare(
        self,
        run_id: str,
        policy: QualityPolicy,
        bounds: Sequence[PartitionBounds],
        batch_id: str,
        scopes: Sequence[ProbeScope],
    ) -> TargetReadRequest:
        """The generation's plan; refuse (before any extraction) what could not complete later."""
        plan = target_plan(self._target_table, bounds, policy)
        worst = self._core_record(
            run_id,
            batch_id,
            policy,
            plan,
            tuple(
                ProbeEvidence(
                    scope=scope,
                    metrics=tuple(
                        MetricValue(metric=m, column=c, value=METRIC_VALUE_MAX)
                        for m, c in plan.expected_keys()
                    ),
                )
                for scope in scopes
            ),
            _MAX_STAMP,
        )
        try:
            reserve_capacity(worst)
        except CapsuleCapacityExceeded as exc:
            raise DponeError(
                ErrorCode.CAPSULE_CAPACITY_EXCEEDED,
                f"durable quality evidence of this batch could not be stored: {exc}; nothing was extracted",
                details={"worst_case_bytes": exc.worst_case_bytes, "limit_bytes": exc.limit_bytes},
            ) from exc
        self._ports.reader.prove_spawn_capability()
        return plan

    def _core_record(
        self,
        run_id: str,
        batch_id: str,
        policy: QualityPolicy,
        plan: TargetReadRequest,
        probes: tuple[ProbeEvidence, ...],
        sealed_at: datetime,
    ) -> CapsuleRecord:
        core = SealedCore(
            identity=self._identity,
            run_id=run_id,
            route=self._route,
            checkpoint_batch_id=batch_id,
            load_ids=(batch_id,),
            policy=policy,
            probes=probes,
            target_plan=plan,
            sealed_at=sealed_at,
        )
        return CapsuleRecord(
            operation_id=self.operation_id(run_id), version=1, prev_sha256=GENESIS_SHA256, body=core
        )

    # -- seal: before publication --------------------------------------------------------------------

    def seal(
        self,
        run_id: str,
        batch_id: str,
        policy: QualityPolicy,
        plan: TargetReadRequest,
        probes: tuple[ProbeEvidence, ...],
        stored_core: SealedCore | None,
    ) -> dict[str, str]:
        """Persist the sealed core (or re-use this run's identical unpublished one); returns the reference
        every armed checkpoint of the batch carries."""
        operation_id = self.operation_id(run_id)
        record = self._core_record(run_id, batch_id, policy, plan, probes, self._clock.now())
        if stored_core is not None:
            fresh = record.body.model_dump(mode="json", exclude={"sealed_at"})
            if stored_core.model_dump(mode="json", exclude={"sealed_at"}) != fresh:
                raise DponeError(
                    ErrorCode.CAPSULE_CONFLICT,
                    "this run ID already sealed different quality evidence (the source, batch or policy "
                    "changed since an attempt that never reached the target); start a new run ID",
                    details={"operation_id": operation_id, "run_id": run_id},
                )
        else:
            self.stores().capsules.append(operation_id, 0, record)
        return capsule_ref(operation_id)

    # -- observe: after publication, with the sink closed ---------------------------------------------

    def observe(self, run_id: str) -> ReplayResult:
        operation_id = self.operation_id(run_id)
        stores = self.stores()
        stored = stores.capsules.read(operation_id)
        if not isinstance(stored, CapsuleChain) or stored.terminal is not None:
            raise DponeError(
                ErrorCode.CAPSULE_INVALID,
                "no open v2 capsule to complete for this operation",
                details={"operation_id": operation_id},
            )
        self._check_binding(run_id, stored)
        plan = stored.core.target_plan
        generation_key = plan.generation_key()
        token = "dpone." + self._ports.host.random_hex(24)
        try:
            stores.guards.acquire(operation_id, generation_key, token)
        except DponeError as exc:
            if exc.code is not ErrorCode.READER_GUARD_HELD:
                raise
            record = classify(operation_id, (), stores)
            raise self._blocked(record) from exc
        worker = WorkerLifecycle.NONE_SPAWNED
        try:
            chain = stored
            if chain.pending is None:
                pending = CapsuleRecord(
                    operation_id=operation_id,
                    version=2,
                    prev_sha256=chain.head_sha256,
                    body=TargetPending(
                        core_sha256=chain.records[0].sha256(),
                        request_sha256=plan.sha256(),
                        generation_key=generation_key,
                        recorded_at=self._clock.now(),
                    ),
                )
                stores.capsules.append(operation_id, 1, pending)
                chain = CapsuleChain(records=(*chain.records, pending))
            worker = WorkerLifecycle.MAY_BE_ALIVE  # until the reader says otherwise
            try:
                outcome = self._ports.reader.observe(self._ports.target, plan, self._ports.budget_s)
            except DponeError:
                worker = WorkerLifecycle.NONE_SPAWNED  # refused at admission, before any spawn
                raise
            except ObservationInterrupted as stopped:
                # interrupted mid-observation: the worker is killed and reaped; the guard is released
                # only when that was verified, the capsule stays TARGET_PENDING either way
                self._release_if(stopped.termination_verified, stores, operation_id, generation_key, token)
                worker = WorkerLifecycle.SETTLED
                raise stopped.original from None
            worker = WorkerLifecycle.ended(
                outcome.termination_verified
            )  # COMPLETE releases after its receipt
            observation = outcome.observation
            if outcome.kind is ReaderOutcomeKind.COMPLETE and observation is not None:
                try:
                    observation.check_answers(plan)
                except ObservationInvalid:
                    observation = None
            if observation is None or not outcome.termination_verified:
                # An answer from a worker whose local lifecycle is unknown is not accepted: its output
                # cannot be revoked, so the proof stays TARGET_PENDING and the guard is retained.
                released = self._release_if(worker.releasable, stores, operation_id, generation_key, token)
                worker = WorkerLifecycle.SETTLED
                raise self._unfinished(operation_id, outcome, released=released)
            complete = CapsuleRecord(
                operation_id=operation_id,
                version=3,
                prev_sha256=chain.head_sha256,
                body=TargetComplete(
                    core_sha256=chain.records[0].sha256(),
                    observation=observation,
                    recorded_at=self._clock.now(),
                ),
            )
            stores.capsules.append(operation_id, 2, complete)
            receipt = self._receipt(operation_id, generation_key, token, complete)
            after = stores.guards.release(operation_id, generation_key, token)
            if after.state is not ReaderGuardState.RELEASED or after.owner_token != token:
                raise DponeError(
                    ErrorCode.READER_GUARD_HELD,
                    "the reader guard could not be verified released by this operation",
                    details={"operation_id": operation_id},
                )
            worker = WorkerLifecycle.SETTLED
            verdict = capsule_verdict(receipt)
            assert verdict is not None
            return ReplayResult(operation_id=operation_id, chain=receipt, verdict=verdict)
        except BaseException:
            if worker.releasable:
                self._release_if(True, stores, operation_id, generation_key, token)
            raise

    def _receipt(
        self, operation_id: str, generation_key: str, token: str, complete: CapsuleRecord
    ) -> CapsuleChain:
        """Accept the COMPLETE record only as read back from the store while this operation holds the guard."""
        stores = self.stores()
        fresh = stores.capsules.read(operation_id)
        guard = stores.guards.read(operation_id, generation_key)
        if (
            not isinstance(fresh, CapsuleChain)
            or fresh.version != 3
            or fresh.head_sha256 != complete.sha256()
            or not isinstance(fresh.terminal, TargetComplete)
            or guard is None
            or guard.state is not ReaderGuardState.ACQUIRED
            or guard.owner_token != token
        ):
            raise DponeError(
                ErrorCode.CAPSULE_CONFLICT,
                "the completed capsule or the reader guard changed under this operation; nothing is accepted",
                details={"operation_id": operation_id},
            )
        return fresh

    def _release_if(
        self, allowed: bool, stores: CapsuleStores, operation_id: str, generation_key: str, token: str
    ) -> bool:
        """Best-effort release by the exact owner; False when not allowed or when it did not happen."""
        if not allowed:
            return False
        try:
            guard = stores.guards.release(operation_id, generation_key, token)
        except Exception:
            return False
        return guard.state is ReaderGuardState.RELEASED and guard.owner_token == token

    def _unfinished(self, operation_id: str, outcome: ReaderOutcome, *, released: bool) -> DponeError:
        guard = "released" if released else "retained"
        answered = outcome.kind is ReaderOutcomeKind.COMPLETE
        lines = [
            f"the bounded target reader ended as {outcome.kind.value} ({outcome.reason.value}) after "
            f"{outcome.elapsed_seconds:.1f}s"
            + (
                ", but its worker's termination was not verified, so the answer is not accepted"
                if answered
                else ""
            )
            + "; the capsule stays TARGET_PENDING and blocks the route.",
            (
                "the worker's termination was verified and its output revoked: the reader guard is released; "
                "retrying this run ID observes the generation again."
                if released
                else f"the worker's termination could not be verified (pid {outcome.worker_pid} on "
                f"{self._ports.host.hostname()}): the reader guard is retained until an operator resolves it."
            ),
            f"inspect:  dpone replay status {self._manifest_ref}",
            f"runbook:  {RUNBOOK}",
        ]
        return DponeError(
            ErrorCode.QUALITY_REPLAY_UNRESOLVED,
            f"the target observation of route {self._route.describe()} did not complete",
            details={
                "operation_id": operation_id,
                "outcome": outcome.kind.value,
                "reason": outcome.reason.value,
                "termination_verified": outcome.termination_verified,
                "reader_guard": guard,
                "worker_pid": outcome.worker_pid,
                "host": self._ports.host.hostname(),
            },
            hint_lines=tuple(lines),
        )


def _replaced_since(partitions: Sequence[PartitionCheckpoint], latest: Sequence[PartitionCheckpoint]) -> bool:
    """Whether a checkpoint of ``latest`` other than ``partitions`` replaced (or may have replaced) rows
    within their bounds after they were committed (``route_family.replaced_the_target``)."""
    own = {(c.route, c.partition_id) for c in partitions}
    since = max(checkpoint_moment(c) for c in partitions)
    index = OverlapIndex([p.bounds for p in partitions])  # ``may_overlap`` without asking every pair
    return any(
        (c.route, c.partition_id) not in own
        and checkpoint_moment(c) > since
        and replaced_the_target(c)
        and index.first(c.bounds) is not None
        for c in latest
    )
