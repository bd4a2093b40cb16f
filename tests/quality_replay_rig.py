"""Port doubles for the quality/replay tests (no tests here): a profiling source, a target that keeps
its rows by column, and a scripted bounded reader that measures that target or fails as told.

Faults are injected through the ports, as a real component fails: a reader that times out with or
without verified termination, a writer that alters the target between publication and observation.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore
from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.contracts.target_observation import (
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    ReaderOutcome,
    ReaderOutcomeKind,
    ReaderReason,
    TargetObservation,
    TargetReadRequest,
    UnavailableReason,
)
from airflow_provider_dpone.manifests.identity import semantic_identity
from airflow_provider_dpone.ports.route_naming import RawRouteNaming
from airflow_provider_dpone.ports.source import ColumnProfile
from airflow_provider_dpone.runtime.replay.durable import ReplayPorts
from airflow_provider_dpone.runtime.replay.scan import CapsuleStores
from airflow_provider_dpone.runtime.route_family import load_family
from airflow_provider_dpone.runtime.transfer import TransferEngine, TransferPorts
from tests.doubles import FixedClock, InMemoryCheckpointStore, MemorySource, manifest_dict, within_bounds

NAMES = ("id", "order_date", "amount")
TARGET = EndpointDescriptor(
    name="memory_target",
    kind=EndpointKind.CLICKHOUSE,
    interface=ClickHouseInterface.CHDB,
    path="/nonexistent",
)

Row = tuple[int, dt.date, object]


def in_bounds(row_date: dt.date, bounds: PartitionBounds) -> bool:
    if bounds.kind is BoundsKind.ALL:
        return True
    if bounds.kind is BoundsKind.VALUES:
        return row_date.isoformat() in (bounds.values or ())
    lower = dt.date.fromisoformat(bounds.lower) if bounds.lower else dt.date.min
    upper = dt.date.fromisoformat(bounds.upper) if bounds.upper else dt.date.max
    return lower <= row_date < upper


def summarize(rows: Sequence[Row], columns: Sequence[str]) -> dict[str, Any]:
    index = {name: i for i, name in enumerate(NAMES)}
    nulls = {c: sum(1 for r in rows if r[index[c]] is None) for c in columns}
    distinct = {c: len({r[index[c]] for r in rows if r[index[c]] is not None}) for c in columns}
    return {"rows": len(rows), "null_counts": nulls, "distinct_counts": distinct}


class FakeHost:
    """A fixed host name and counted, predictable tokens (the runtime never reaches socket or secrets)."""

    def __init__(self) -> None:
        self.tokens = 0

    def hostname(self) -> str:
        return "test-host"

    def random_hex(self, nbytes: int) -> str:
        self.tokens += 1
        return f"{self.tokens:0{2 * nbytes}x}"


class ProfiledSource(MemorySource):
    """``MemorySource`` with exact profiles; every access is an event (proof of no source access)."""

    def describe(self) -> TableSchema:
        self.events.append("source.describe")
        return super().describe()

    def plan_partitions(self) -> list[PartitionBounds]:
        self.events.append("source.plan")
        return super().plan_partitions()

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        day = dt.date.fromisoformat(bounds.lower or "")
        selected = [r for r in self.rows if r[1] == day]
        self.events.append(f"source.read:{bounds.label}")
        for start in range(0, len(selected), chunk_rows):
            part = selected[start : start + chunk_rows]
            columns = tuple([r[i] for r in part] for i in range(3))
            yield ColumnChunk(partition_id=partition_id, names=NAMES, columns=columns, row_count=len(part))

    def profile(self, bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> ColumnProfile:
        self.events.append("source.profile")
        rows = [r for r in self.rows if any(in_bounds(r[1], b) for b in bounds)]
        return summarize(rows, columns)  # type: ignore[return-value]


class MemoryTarget:
    """A target table and its staging tables as rows; keeps an event log shared with the others."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.tables: dict[str, list[Row]] = {}
        self.open = False

    def opened(self) -> MemoryTarget:
        self.events.append("sink.open")
        self.open = True
        return self

    def prepare_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        self.tables.setdefault(table, [])

    def _rows(self, chunks: Iterable[ColumnChunk]) -> list[Row]:
        out: list[Row] = []
        for chunk in chunks:
            self.names = tuple(chunk.names)  # one layout for every table of the rig
            out.extend(zip(*chunk.columns, strict=True))  # type: ignore[arg-type]
        return out

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        permit.require_open(table)
        self.events.append("sink.load")
        rows = self._rows(chunks)
        self.tables.setdefault(table, []).extend(rows)
        return len(rows)

    def begin_staging(
        self, table: str, schema: TableSchema, operation_id: str, order_by: tuple[str, ...] = ()
    ) -> str:
        name = f"{table}__stage"
        self.tables[name] = []
        return name

    def stage(self, staging_table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> int:
        rows = self._rows(chunks)
        self.tables[staging_table].extend(rows)
        return len(rows)

    def finalize_staged_load(self, permit: TargetPermit, staging_table: str, table: str) -> int:
        permit.require_open(table)
        self.events.append("sink.finalize_staged_load")
        rows = self.tables.pop(staging_table)
        self.tables.setdefault(table, []).extend(rows)
        return len(rows)

    def abort_staged_load(self, staging_table: str) -> None:
        self.tables.pop(staging_table, None)

    def count_rows(self, table: str, bounds: PartitionBounds | None) -> int:
        rows = self.tables.get(table, [])
        names: tuple[str, ...] = getattr(self, "names", ())
        if bounds is None or bounds.kind is BoundsKind.ALL or bounds.column not in names:
            return len(rows)
        index = names.index(bounds.column)
        return sum(1 for row in rows if within_bounds(row[index], bounds))

    def column_summary(
        self, table: str, bounds: PartitionBounds | None, columns: Sequence[str]
    ) -> dict[str, Any]:
        self.events.append("sink.column_summary")
        return summarize(self.tables.get(table, []), columns)

    def close(self) -> None:
        if self.open:
            self.events.append("sink.close")
        self.open = False


class ScriptedReader:
    """``TargetMetricsReader`` over a ``MemoryTarget``: measures exactly, or answers a scripted outcome.

    ``outcomes`` are consumed one per ``observe``; ``None`` (or an empty script) means "measure".
    ``before_observe`` runs first (e.g. another writer altering the target).
    """

    def __init__(self, target: MemoryTarget, table: str = "analytics.orders") -> None:
        self.target = target
        self.table = table
        self.outcomes: list[ReaderOutcome | None] = []
        self.before_observe: Callable[[], None] | None = None
        self.spawn_error: DponeError | None = None
        self.fail_query = False
        #: ``termination_verified`` of measured answers (False: the worker answered, its exit is unproven)
        self.verified = True
        self.requests: list[TargetReadRequest] = []

    def prove_spawn_capability(self) -> None:
        self.target.events.append("reader.prove_spawn")
        if self.spawn_error is not None:
            raise self.spawn_error

    def observe(
        self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float = 60.0
    ) -> ReaderOutcome:
        assert not self.target.open, "the sink client must be closed before the reader starts"
        self.target.events.append("reader.observe")
        self.requests.append(request)
        if self.before_observe is not None:
            self.before_observe()
        scripted = self.outcomes.pop(0) if self.outcomes else None
        if scripted is not None:
            return scripted
        if self.fail_query:
            if not request.allow_unavailable:
                return outcome(ReaderOutcomeKind.WORKER_FAILED, ReaderReason.QUERY_FAILED, verified=True)
            observation = TargetObservation(
                request_sha256=request.sha256(),
                status=ObservationStatus.UNAVAILABLE,
                unavailable_reason=UnavailableReason.METRIC_NOT_COMPUTABLE,
            )
            return ReaderOutcome(
                kind=ReaderOutcomeKind.COMPLETE,
                reason=ReaderReason.OBSERVED,
                observation=observation,
                termination_verified=True,
                elapsed_seconds=0.1,
            )
        rows = [
            r
            for r in self.target.tables.get(self.table, [])
            if any(in_bounds(r[1], b) for b in request.selector.partitions)
        ]
        summary = summarize(rows, request.columns)
        metrics = []
        for metric, column in request.expected_keys():
            if metric is ObservationMetric.ROW_COUNT:
                value = summary["rows"]
            elif metric is ObservationMetric.NULL_COUNT:
                value = summary["null_counts"][column]
            else:
                value = summary["distinct_counts"][column]
            metrics.append(MetricValue(metric=metric, column=column, value=value))
        observation = TargetObservation(
            request_sha256=request.sha256(), status=ObservationStatus.COMPLETE, metrics=tuple(metrics)
        )
        return ReaderOutcome(
            kind=ReaderOutcomeKind.COMPLETE,
            reason=ReaderReason.OBSERVED,
            observation=observation,
            termination_verified=self.verified,
            elapsed_seconds=0.1,
            worker_pid=4242,
        )


def outcome(kind: ReaderOutcomeKind, reason: ReaderReason, *, verified: bool) -> ReaderOutcome:
    return ReaderOutcome(
        kind=kind, reason=reason, termination_verified=verified, elapsed_seconds=60.0, worker_pid=4242
    )


def quality_manifest(
    *,
    durable: bool = True,
    checks: Sequence[dict[str, object]] = ({"type": "row_count"},),
    **kwargs: Any,
) -> Manifest:
    data = manifest_dict(**kwargs)
    data["sink"]["options"] = {"durable_quality_replay": durable}  # type: ignore[index]
    data["quality"] = {"checks": list(checks)}
    return Manifest.model_validate_json(json.dumps(data))


class Rig:
    """One route's durable state (checkpoints, capsules, guards) shared by successive engines (attempts)."""

    def __init__(self, tmp_path: Path, rows: Sequence[Row]) -> None:
        self.events: list[str] = []
        self.store = InMemoryCheckpointStore()
        url = f"sqlite:///{tmp_path / 'capsules.sqlite'}"
        self.capsules = SqlCapsuleStore(url)
        self.guards = SqlReaderGuardStore(url)
        self.capsules.ensure_schema()
        self.stores = CapsuleStores(capsules=self.capsules, guards=self.guards)
        self.source = ProfiledSource(list(rows), events=self.events)
        self.target = MemoryTarget(self.events)
        self.reader = ScriptedReader(self.target)
        self.clock = FixedClock()

    def engine(
        self, manifest: Manifest, *, store: object | None = None, artifacts: object | None = None
    ) -> TransferEngine:
        ports = TransferPorts(
            store=store or self.store,  # type: ignore[arg-type]
            source=self.source,
            open_sink=self.target.opened,
            clock=self.clock,
            artifacts=artifacts,  # type: ignore[arg-type]
            capsule_stores=lambda: self.stores,
            replay=ReplayPorts(
                stores=lambda: self.stores, reader=self.reader, target=TARGET, host=FakeHost()
            ),
        )
        return TransferEngine(
            manifest, ports, manifest_ref="orders.yaml", identity=semantic_identity(manifest)
        )

    def target_rows(self) -> list[Row]:
        return self.target.tables.get("analytics.orders", [])

    def latest(self, route: RouteIdentity) -> tuple[PartitionCheckpoint, ...]:
        """What ``dpone replay status|resolve`` read: the route's latest checkpoints under every spelling."""
        return load_family(self.store, route, RawRouteNaming()).own

    def close(self) -> None:
        self.capsules.close()
        self.guards.close()


def expect_code(code: ErrorCode, call: Callable[[], object]) -> DponeError:
    try:
        call()
    except DponeError as err:
        assert err.code is code, (err.code, err.safe_message)
        return err
    raise AssertionError(f"expected {code.value}")
