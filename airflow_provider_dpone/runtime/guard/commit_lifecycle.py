"""The target commit guard lifecycle (seed 000, algorithm steps 4-15).

One instance guards one target mutation of one checkpoint batch:

    arm()            one batch ID, one UTC timestamp, EXPORTED/armed for every active partition;
                     a permit is issued only if the whole batch was written
    invoke_target()  opens the permit, records "target started" / "target succeeded" in process state;
                     on failure best-effort FAILED/target_outcome_unknown, then the original re-raised
    promote()        COMMITTED/checkpoint_committed with one timestamp (started_at == completed_at);
                     partial failure -> exact reconciliation, best-effort FAILED/checkpoint_incomplete,
                     the original checkpoint exception re-raised unchanged

Secondary writes are best effort: they never replace or chain onto the primary exception. When a
secondary write fails, whatever is durable (armed, or nothing newer) keeps blocking later attempts.
This is a bounded fail-closed mitigation, not a journal, a target fence or an exactly-once protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TypeVar

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import PlannedPartition
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id

T = TypeVar("T")


class TargetState(str, Enum):
    """What this process knows about the target mutation (in memory only)."""

    NOT_ARMED = "not_armed"
    ARMED = "armed"
    TARGET_STARTED = "target_started"
    TARGET_SUCCEEDED = "target_succeeded"
    COMMITTED = "committed"


class LifecycleError(RuntimeError):
    """Programming error: a lifecycle step called out of order. Never caught by the lifecycle itself."""


@dataclass
class ActivePartition:
    """A partition in the batch, with the evidence gathered before the target call."""

    planned: PlannedPartition
    rows: int | None = None
    bytes: int | None = None
    evidence: dict[str, object] = field(default_factory=dict)


class TargetCommitLifecycle:
    def __init__(
        self,
        *,
        store: CheckpointStore,
        clock: Clock,
        route: RouteIdentity,
        run_id: str,
        partitions: Sequence[ActivePartition],
    ) -> None:
        if not partitions:
            raise LifecycleError("a checkpoint batch needs at least one active partition")
        self._store = store
        self._clock = clock
        self._route = route
        self._run_id = run_id
        self._partitions = list(partitions)
        self.batch_id = checkpoint_batch_id(run_id, [p.planned.partition_id for p in partitions])
        self.state = TargetState.NOT_ARMED
        self._permit: TargetPermit | None = None
        self._armed_at: datetime | None = None
        self.committed: list[PartitionCheckpoint] = []

    # -- records -----------------------------------------------------------------------------------

    def _record(
        self,
        active: ActivePartition,
        status: CheckpointStatus,
        phase: GuardPhase,
        *,
        started_at: datetime,
        completed_at: datetime | None,
        rows: int | None = None,
    ) -> PartitionCheckpoint:
        planned = active.planned
        diagnostics: dict[str, object] = {**active.evidence}
        diagnostics[GUARD_KEY] = TargetCommitGuard.for_phase(phase, self.batch_id).to_json()
        return PartitionCheckpoint.model_validate(
            {
                "partition_id": planned.partition_id,
                "route": self._route,
                "run_id": self._run_id,
                "status": status,
                "started_at": started_at,
                "completed_at": completed_at,
                "rows": rows if rows is not None else active.rows,
                "bytes": active.bytes,
                "query_hash": planned.query_hash,
                "schema_hash": planned.schema_hash,
                "bounds": planned.bounds,
                "diagnostics": diagnostics,
            }
        )

    def _best_effort(
        self, status: CheckpointStatus, phase: GuardPhase, only: Sequence[str] | None = None
    ) -> bool:
        """Write a secondary marker for the batch; swallow its failure (the caller re-raises the primary)."""
        at = self._clock.now()
        targets = [p for p in self._partitions if only is None or p.planned.partition_id in only]
        try:
            self._store.write_batch(
                [
                    self._record(p, status, phase, started_at=self._armed_at or at, completed_at=at)
                    for p in targets
                ]
            )
        except BaseException:
            return False
        return True

    # -- steps -------------------------------------------------------------------------------------

    def mark_failed_before_target(self) -> bool:
        """Best effort after a failure that happened before the target was invoked (retry stays allowed)."""
        if self.state not in (TargetState.NOT_ARMED, TargetState.ARMED):
            raise LifecycleError("failed_before_target is only true before the target was invoked")
        return self._best_effort(CheckpointStatus.FAILED, GuardPhase.FAILED_BEFORE_TARGET)

    def arm(self) -> TargetPermit:
        """Persist EXPORTED/armed for every active partition; issue the permit only if all were written."""
        if self.state is not TargetState.NOT_ARMED:
            raise LifecycleError("a batch is armed once")
        self._armed_at = self._clock.now()
        armed = [
            self._record(
                p, CheckpointStatus.EXPORTED, GuardPhase.ARMED, started_at=self._armed_at, completed_at=None
            )
            for p in self._partitions
        ]
        try:
            self._store.write_batch(armed)
        except BaseException:
            # The target was never invoked, so "failed before target" is the truth for every partition.
            # If this secondary write fails too, any armed record that survived keeps the route blocked.
            self.mark_failed_before_target()
            raise
        self.state = TargetState.ARMED
        self._permit = TargetPermit(
            route=self._route,
            checkpoint_batch_id=self.batch_id,
            partitions=tuple((p.planned.partition_id, p.planned.bounds) for p in self._partitions),
        )
        return self._permit

    def invoke_target(self, permit: TargetPermit, call: Callable[[TargetPermit], T]) -> T:
        """Run the one target mutation inside the permit's window."""
        if self.state is not TargetState.ARMED or permit is not self._permit:
            raise LifecycleError("the target may be invoked once, with this batch's permit, after arming")
        self.state = TargetState.TARGET_STARTED
        permit._open_window()
        try:
            result = call(permit)
        except BaseException:
            permit._close_window()
            self._best_effort(CheckpointStatus.FAILED, GuardPhase.TARGET_OUTCOME_UNKNOWN)
            raise
        permit._close_window()
        self.state = TargetState.TARGET_SUCCEEDED
        return result

    def promote(self, rows_by_partition: Mapping[str, int] | None = None) -> list[PartitionCheckpoint]:
        """Persist COMMITTED/checkpoint_committed candidates sharing one timestamp."""
        if self.state is not TargetState.TARGET_SUCCEEDED:
            raise LifecycleError("promotion needs a target call that returned success")
        at = self._clock.now()
        rows = rows_by_partition or {}
        candidates = [
            self._record(
                p,
                CheckpointStatus.COMMITTED,
                GuardPhase.CHECKPOINT_COMMITTED,
                started_at=at,
                completed_at=at,
                rows=rows.get(p.planned.partition_id),
            )
            for p in self._partitions
        ]
        try:
            self._store.write_batch(candidates)
        except BaseException:
            self._reconcile_partial_commit(candidates)
            raise
        self.state = TargetState.COMMITTED
        self.committed = candidates
        return candidates

    def _reconcile_partial_commit(self, candidates: Sequence[PartitionCheckpoint]) -> None:
        """Exact reconciliation of the current candidates; best effort, never raises.

        A candidate whose exact bytes are durable is left alone (never downgraded). The others get
        FAILED/checkpoint_incomplete. If the read or the marker write fails, the durable armed
        records stay in place and keep blocking.
        """
        try:
            durable = self._store.read_latest(self._route, [c.partition_id for c in candidates])
        except BaseException:
            return
        unresolved = [
            c.partition_id
            for c in candidates
            if (found := durable.get(c.partition_id)) is None or found.to_payload() != c.to_payload()
        ]
        if unresolved:
            self._best_effort(CheckpointStatus.FAILED, GuardPhase.CHECKPOINT_INCOMPLETE, only=unresolved)
