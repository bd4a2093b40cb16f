"""One run of a route, in the order of ARCHITECTURE.md section 3.

    route guard scan -> plan + resume decisions -> pre-target work (extract / stage) -> arm
    -> target mutation -> committed promotion -> evidence -> source state

The four execution paths combine how rows leave the source (``file_artifact``: local files first;
``lazy_plan``: streamed inside the target call) with how they enter the target (``direct``: ``load()``;
``staged``: staging table first, then ``finalize_staged_load()``). All four go through the same lifecycle.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from airflow_provider_dpone.contracts.artifact import ArtifactRef
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import ExportPath, LoadPath, Manifest
from airflow_provider_dpone.contracts.partition import PlannedPartition, partition_id_for
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.report import PartitionOutcome, RunReport
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.ports.artifacts import ArtifactStore
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore, SourceStateStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.sink import Sink, StagedSink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.chunk_stream import StreamTally
from airflow_provider_dpone.runtime.commit_lifecycle import ActivePartition, TargetCommitLifecycle
from airflow_provider_dpone.runtime.progress import ProgressListener, SilentProgress
from airflow_provider_dpone.runtime.resume_planner import Action, ResumeDecision, plan_resume
from airflow_provider_dpone.runtime.route_guard import require_clear_route


@dataclass
class TransferPorts:
    """Everything a run needs, already composed. The sink is opened lazily, after the guard scan."""

    store: CheckpointStore
    source: Source
    open_sink: Callable[[], Sink]
    clock: Clock
    artifacts: ArtifactStore | None = None
    source_state: SourceStateStore | None = None


class TransferEngine:
    def __init__(
        self,
        manifest: Manifest,
        ports: TransferPorts,
        *,
        manifest_ref: str,
        progress: ProgressListener | None = None,
    ) -> None:
        self._manifest = manifest
        self._ports = ports
        self._manifest_ref = manifest_ref
        self._progress: ProgressListener = progress or SilentProgress()
        self._route = manifest.route()

    # -- planning ----------------------------------------------------------------------------------

    def plan(self, run_id: str) -> tuple[TableSchema, list[ResumeDecision]]:
        """Route guard scan first (nothing else may run on a blocked route), then resume decisions."""
        latest = self._ports.store.list_latest(self._route)
        require_clear_route(self._route, latest, self._manifest_ref)
        source = self._ports.source
        schema = source.describe()
        query_hash = source.query_hash()
        schema_hash = schema.schema_hash()
        planned = [
            PlannedPartition(
                partition_id=partition_id_for(self._route, query_hash, schema_hash, bounds),
                bounds=bounds,
                query_hash=query_hash,
                schema_hash=schema_hash,
            )
            for bounds in source.plan_partitions()
        ]
        by_id = {c.partition_id: c for c in latest}
        return schema, plan_resume(planned, by_id, self._route.strategy, run_id)

    # -- one run -----------------------------------------------------------------------------------

    def run(self, run_id: str) -> RunReport:
        started = time.monotonic()
        schema, decisions = self.plan(run_id)
        active = [ActivePartition(d.partition) for d in decisions if d.action is Action.RUN]
        self._progress.plan_ready(len(active), len(decisions) - len(active))
        if not active:
            return self._report(run_id, decisions, None, {}, started)

        sink = self._ports.open_sink()
        try:
            sink.prepare_target(self._manifest.sink.table, schema, self._order_by(schema))
            self._write_progress(run_id, active, CheckpointStatus.PLANNED)
            lifecycle = TargetCommitLifecycle(
                store=self._ports.store,
                clock=self._ports.clock,
                route=self._route,
                run_id=run_id,
                partitions=active,
            )
            tally = StreamTally(cursor=self._cursor())
            self._execute_path(sink, schema, active, lifecycle, tally, run_id)
        finally:
            sink.close()

        self._advance_source_state(run_id, lifecycle, tally)
        return self._report(
            run_id, decisions, lifecycle.batch_id, {c.partition_id: c for c in lifecycle.committed}, started
        )

    def _execute_path(
        self,
        sink: Sink,
        schema: TableSchema,
        active: list[ActivePartition],
        lifecycle: TargetCommitLifecycle,
        tally: StreamTally,
        run_id: str,
    ) -> None:
        export = self._manifest.source.export
        load = self._manifest.sink.load
        table = self._manifest.sink.table
        artifacts: list[ArtifactRef] = []
        staging: str | None = None
        staged_sink = self._staged(sink) if load is LoadPath.STAGED else None
        try:
            # ---- pre-target work: nothing here may mutate the target table ----
            try:
                if export is ExportPath.FILE_ARTIFACT:
                    self._progress.stage("extract")
                    artifacts = self._export_artifacts(schema, active)
                if staged_sink is not None:
                    self._progress.stage("stage")
                    staging = staged_sink.begin_staging(table, schema, lifecycle.batch_id)
                    staged_rows = staged_sink.stage(staging, schema, self._chunks(active, artifacts, tally))
                    for part in active:
                        part.rows = tally.partitions[part.planned.partition_id].rows
                    if staged_rows != sum(p.rows or 0 for p in active):
                        raise DponeError(
                            ErrorCode.QUALITY_CHECK_FAILED,
                            "staged row count disagrees with the rows read from the source",
                            details={"route": self._route.describe()},
                        )
                    self._write_progress(run_id, active, CheckpointStatus.LOADED)

                if artifacts:
                    store = self._require_artifacts()
                    for ref in artifacts:
                        store.verify(ref)  # every file is intact before any of them reaches the target
            except BaseException:
                lifecycle.mark_failed_before_target()
                raise

            # ---- arm, then the one guarded target mutation ----
            self._progress.stage("arm")
            permit = lifecycle.arm()
            self._progress.stage("target")
            if staged_sink is not None and staging is not None:
                staging_table = staging
                lifecycle.invoke_target(
                    permit, lambda p: staged_sink.finalize_staged_load(p, staging_table, table)
                )
                staging = None  # published and dropped by the sink
            else:
                lifecycle.invoke_target(
                    permit, lambda p: self._direct_load(sink, p, schema, active, artifacts, tally)
                )

            # ---- committed promotion: the same rows the pre-target work or the stream counted ----
            self._progress.stage("commit")
            lifecycle.promote(tally.rows())
        finally:
            if staging is not None and staged_sink is not None:
                staged_sink.abort_staged_load(staging)
            if self._ports.artifacts is not None:
                for ref in artifacts:
                    self._ports.artifacts.remove(ref)

    def _direct_load(
        self,
        sink: Sink,
        permit: TargetPermit,
        schema: TableSchema,
        active: list[ActivePartition],
        artifacts: list[ArtifactRef],
        tally: StreamTally,
    ) -> int:
        return sink.load(permit, self._manifest.sink.table, schema, self._chunks(active, artifacts, tally))

    def _chunks(
        self, active: Sequence[ActivePartition], artifacts: Sequence[ArtifactRef], tally: StreamTally
    ) -> Iterator[ColumnChunk]:
        """Every active partition's rows, from artifacts when exported, else straight from the source."""
        chunk_rows = self._manifest.source.chunk_rows
        if artifacts:
            store = self._require_artifacts()
            by_id = {ref.partition_id: ref for ref in artifacts}
            streams = (
                tally.counted(
                    p.planned.partition_id,
                    p.planned.bounds.label,
                    store.read(by_id[p.planned.partition_id], chunk_rows),
                    self._progress,
                )
                for p in active
            )
        else:
            source = self._ports.source
            streams = (
                tally.counted(
                    p.planned.partition_id,
                    p.planned.bounds.label,
                    source.read(p.planned.partition_id, p.planned.bounds, chunk_rows),
                    self._progress,
                )
                for p in active
            )
        return itertools.chain.from_iterable(streams)

    def _export_artifacts(self, schema: TableSchema, active: list[ActivePartition]) -> list[ArtifactRef]:
        store = self._require_artifacts()
        refs: list[ArtifactRef] = []
        chunk_rows = self._manifest.source.chunk_rows
        for part in active:
            planned = part.planned
            ref = store.write(
                planned.partition_id,
                schema,
                self._ports.source.read(planned.partition_id, planned.bounds, chunk_rows),
            )
            refs.append(ref)
            part.rows = ref.rows
            part.bytes = ref.bytes
            part.evidence["artifact_sha256"] = ref.artifact_sha256
        return refs

    # -- helpers -----------------------------------------------------------------------------------

    def _require_artifacts(self) -> ArtifactStore:
        if self._ports.artifacts is None:
            raise DponeError(ErrorCode.USAGE, "the file_artifact export path needs an artifact directory")
        return self._ports.artifacts

    def _staged(self, sink: Sink) -> StagedSink:
        if not all(hasattr(sink, name) for name in ("begin_staging", "stage", "finalize_staged_load")):
            raise DponeError(ErrorCode.USAGE, "this sink does not support the staged load path")
        return sink  # type: ignore[return-value]

    def _order_by(self, schema: TableSchema) -> tuple[str, ...]:
        if self._manifest.sink.order_by:
            return self._manifest.sink.order_by
        column = self._manifest.source.partitioning.column
        return (column,) if column and column in schema.names else ()

    def _cursor(self) -> str | None:
        incremental = self._manifest.source.incremental
        return incremental.cursor if incremental else None

    def _write_progress(
        self, run_id: str, active: Sequence[ActivePartition], status: CheckpointStatus
    ) -> None:
        """Unguarded progress records (PLANNED, LOADED): the target has not been touched yet."""
        at = self._ports.clock.now()
        self._ports.store.write_batch(
            [
                PartitionCheckpoint.model_validate(
                    {
                        "partition_id": p.planned.partition_id,
                        "route": self._route,
                        "run_id": run_id,
                        "status": status,
                        "started_at": at,
                        "completed_at": None,
                        "rows": p.rows,
                        "bytes": p.bytes,
                        "query_hash": p.planned.query_hash,
                        "schema_hash": p.planned.schema_hash,
                        "bounds": p.planned.bounds,
                        "diagnostics": {},
                    }
                )
                for p in active
            ]
        )

    def _advance_source_state(
        self, run_id: str, lifecycle: TargetCommitLifecycle, tally: StreamTally
    ) -> None:
        """Source state moves only after the complete commit (seed 000 ordering)."""
        if self._ports.source_state is None or tally.cursor is None:
            return
        high = tally.cursor_high_water()
        previous = self._ports.source_state.read_state(self._route) or {}
        value = high.isoformat() if isinstance(high, (date, datetime)) else high
        if value is None:
            value = previous.get("high_water")
        self._ports.source_state.advance_state(
            self._route,
            {
                "cursor": tally.cursor,
                "high_water": value if isinstance(value, (str, int, float)) else str(value),
                "run_id": run_id,
                "checkpoint_batch_id": lifecycle.batch_id,
            },
        )

    def _report(
        self,
        run_id: str,
        decisions: Sequence[ResumeDecision],
        batch_id: str | None,
        committed: dict[str, PartitionCheckpoint],
        started: float,
    ) -> RunReport:
        outcomes = []
        for d in decisions:
            cp = committed.get(d.partition.partition_id)
            evidence = cp.diagnostics.get("artifact_sha256") if cp else None
            outcomes.append(
                PartitionOutcome(
                    partition_id=d.partition.partition_id,
                    label=d.partition.bounds.label,
                    decision=d.action.value,
                    reason=d.reason.value,
                    status=cp.status.value if cp else ("COMMITTED" if d.action is Action.SKIP else "UNKNOWN"),
                    rows=(cp.rows or 0) if cp else 0,
                    bytes=(cp.bytes or 0) if cp else 0,
                    digest=evidence if isinstance(evidence, str) else None,
                )
            )
        return RunReport(
            manifest_name=self._manifest.name,
            route=self._route.describe(),
            run_id=run_id,
            export=self._manifest.source.export.value,
            load=self._manifest.sink.load.value,
            checkpoint_batch_id=batch_id,
            partitions=tuple(outcomes),
            rows_committed=sum(o.rows for o in outcomes if o.decision == "run"),
            partitions_committed=len(committed),
            partitions_skipped=sum(1 for d in decisions if d.action is Action.SKIP),
            seconds=round(time.monotonic() - started, 3),
        )
