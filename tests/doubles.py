"""Port implementations for tests only: in-memory state, fault injection and an event log.

Nothing here is imported by product code. Faults are injected through the ports, the way a real
store or target fails: after k rows of a batch, on a read, after mutating.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.guard import GUARD_KEY
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, sha256_tag
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.ports.artifacts import ArtifactStore
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.route_lease import LeaseHold
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.transfer import TransferEngine, TransferPorts


class InjectedFault(RuntimeError):
    """The primary failure a test injects; tests assert this exact object survives."""


def phase_of(checkpoint: PartitionCheckpoint) -> str | None:
    guard = checkpoint.diagnostics.get(GUARD_KEY)
    return guard.get("phase") if isinstance(guard, dict) else None  # type: ignore[return-value]


def describe(checkpoint: PartitionCheckpoint) -> str:
    return f"{checkpoint.status.value}/{phase_of(checkpoint) or '-'}"


class InMemoryCheckpointStore:
    """Append-only list; latest = last appended per partition."""

    def __init__(self) -> None:
        self.rows: list[PartitionCheckpoint] = []
        #: (route key, query hash) -> the definition kept (``record_definition``)
        self.definitions: dict[tuple[str, str], ReadDefinition] = {}

    def ensure_schema(self) -> None:
        return None

    def record_definition(self, route: RouteIdentity, definition: ReadDefinition) -> None:
        self.definitions.setdefault((route.key(), definition.query_hash()), definition)

    def read_definitions(
        self, route: RouteIdentity, query_hashes: Sequence[str]
    ) -> dict[str, ReadDefinition]:
        kept = ((h, self.definitions.get((route.key(), h))) for h in query_hashes)
        return {h: d for h, d in kept if d is not None}

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        for checkpoint in checkpoints:
            self.rows.append(checkpoint)

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        latest: dict[str, PartitionCheckpoint] = {}
        for row in self.rows:
            if row.route == route:
                latest[row.partition_id] = row
        return list(latest.values())

    def list_routes(self, target_table: str | None = None) -> list[RouteIdentity]:
        routes = dict.fromkeys(row.route for row in self.rows)
        return [r for r in routes if target_table is None or r.target_table == target_table]

    def read_latest(
        self, route: RouteIdentity, partition_ids: Sequence[str]
    ) -> dict[str, PartitionCheckpoint]:
        wanted = set(partition_ids)
        return {c.partition_id: c for c in self.list_latest(route) if c.partition_id in wanted}

    def history(self, route: RouteIdentity, partition_id: str) -> list[PartitionCheckpoint]:
        return [r for r in self.rows if r.route == route and r.partition_id == partition_id]

    def close(self) -> None:
        return None


@dataclass
class WriteFault:
    """Fail the first ``write_batch`` whose records have ``phase`` after ``after_rows`` rows were written."""

    phase: str
    after_rows: int = 0
    error: BaseException = field(default_factory=lambda: InjectedFault("injected checkpoint write failure"))
    times: int = 1


class FaultyStore:
    """Wraps a real store; injects write/read faults and logs every write into ``events``."""

    def __init__(
        self,
        inner: CheckpointStore,
        events: list[str] | None = None,
        write_faults: Iterable[WriteFault] = (),
        read_latest_error: BaseException | None = None,
    ) -> None:
        self.inner = inner
        self.events = events if events is not None else []
        self.write_faults = list(write_faults)
        self.read_latest_error = read_latest_error

    def ensure_schema(self) -> None:
        self.inner.ensure_schema()

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        phase = phase_of(checkpoints[0]) if checkpoints else None
        fault = next((f for f in self.write_faults if f.phase == phase and f.times > 0), None)
        for index, checkpoint in enumerate(checkpoints):
            if fault is not None and index == fault.after_rows:
                fault.times -= 1
                self.events.append(f"store.fail:{describe(checkpoint)}")
                raise fault.error
            self.inner.write_batch([checkpoint])
            self.events.append(f"store.write:{describe(checkpoint)}")

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        self.events.append("store.list_latest")
        return self.inner.list_latest(route)

    def list_routes(self, target_table: str | None = None) -> list[RouteIdentity]:
        self.events.append("store.list_routes")
        return self.inner.list_routes(target_table)

    def read_latest(
        self, route: RouteIdentity, partition_ids: Sequence[str]
    ) -> dict[str, PartitionCheckpoint]:
        self.events.append("store.read_latest")
        if self.read_latest_error is not None:
            raise self.read_latest_error
        return self.inner.read_latest(route, partition_ids)

    def history(self, route: RouteIdentity, partition_id: str) -> list[PartitionCheckpoint]:
        return self.inner.history(route, partition_id)

    def record_definition(self, route: RouteIdentity, definition: ReadDefinition) -> None:
        self.inner.record_definition(route, definition)

    def read_definitions(
        self, route: RouteIdentity, query_hashes: Sequence[str]
    ) -> dict[str, ReadDefinition]:
        return self.inner.read_definitions(route, query_hashes)

    def close(self) -> None:
        self.inner.close()


class FixedClock:
    """Each ``now()`` is a new, strictly later, injected instant; ``calls`` records them."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.current = start or dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
        self.calls: list[dt.datetime] = []

    def now(self) -> dt.datetime:
        self.current += dt.timedelta(seconds=1)
        self.calls.append(self.current)
        return self.current

    def monotonic(self) -> float:
        """Advances 1 ms per reading, so durations are positive and predictable."""
        self.ticks = getattr(self, "ticks", 0) + 1
        return self.ticks / 1000


ORDERS_SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="amount", clickhouse_type="Int64", nullable=False),
    )
)


class MemorySource:
    """Rows of ``orders`` partitioned by day; ``query_version`` and ``extra_column`` change the hashes."""

    def __init__(
        self,
        rows: Sequence[tuple[int, dt.date, int]],
        *,
        query_version: str = "v1",
        extra_column: bool = False,
        events: list[str] | None = None,
        fail_read_after_chunks: int | None = None,
    ) -> None:
        self.rows = list(rows)
        self.query_version = query_version
        self.extra_column = extra_column
        self.events = events if events is not None else []
        self.fail_read_after_chunks = fail_read_after_chunks
        self.reads = 0

    def describe(self) -> TableSchema:
        if not self.extra_column:
            return ORDERS_SCHEMA
        return TableSchema(
            columns=(*ORDERS_SCHEMA.columns, ColumnSpec(name="note", clickhouse_type="String"))
        )

    def query_hash(self) -> str:
        return self.read_definition().query_hash()

    def read_definition(self) -> ReadDefinition:
        return ReadDefinition(
            source_type="memory",
            table="dbo.orders",
            query=f"SELECT * FROM dbo.orders -- {self.query_version}",
        )

    def plan_partitions(self) -> list[PartitionBounds]:
        days = sorted({r[1] for r in self.rows})
        return [
            PartitionBounds(
                kind=BoundsKind.RANGE,
                column="order_date",
                lower=d.isoformat(),
                upper=(d + dt.timedelta(days=1)).isoformat(),
                value_type="date",
                label=f"order_date={d.isoformat()}",
            )
            for d in days
        ]

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        self.events.append(f"source.read:{bounds.label}")
        assert bounds.lower is not None
        day = dt.date.fromisoformat(bounds.lower)
        selected = [r for r in self.rows if r[1] == day]
        for start in range(0, len(selected), chunk_rows):
            if self.fail_read_after_chunks is not None and self.reads >= self.fail_read_after_chunks:
                raise InjectedFault("injected source failure mid-stream")
            self.reads += 1
            part = selected[start : start + chunk_rows]
            names: tuple[str, ...] = ("id", "order_date", "amount")
            columns: tuple[list[object], ...] = tuple([r[i] for r in part] for i in range(3))
            if self.extra_column:
                names = (*names, "note")
                columns = (*columns, ["" for _ in part])
            yield ColumnChunk(partition_id=partition_id, names=names, columns=columns, row_count=len(part))

    def count(self, bounds: PartitionBounds) -> int:
        assert bounds.lower is not None
        day = dt.date.fromisoformat(bounds.lower)
        return sum(1 for r in self.rows if r[1] == day)

    def close(self) -> None:
        return None


class RecordingSink:
    """In-memory target with the staged API. ``fail_after_mutation`` raises after rows landed."""

    def __init__(
        self,
        events: list[str] | None = None,
        *,
        fail_after_mutation: bool = False,
        fail_before_mutation: bool = False,
    ) -> None:
        self.events = events if events is not None else []
        self.tables: dict[str, list[tuple[object, ...]]] = {}
        #: each table's column names, as its rows were written (``count_rows`` within bounds reads them)
        self.names: dict[str, tuple[str, ...]] = {}
        self.fail_after_mutation = fail_after_mutation
        self.fail_before_mutation = fail_before_mutation
        self.mutations = 0

    def prepare_target(self, table: str, schema: TableSchema, order_by: tuple[str, ...]) -> None:
        self.events.append("sink.prepare_target")
        self.tables.setdefault(table, [])

    def _rows(self, chunks: Iterable[ColumnChunk], table: str | None = None) -> list[tuple[object, ...]]:
        out: list[tuple[object, ...]] = []
        for chunk in chunks:
            if table is not None:
                self.names[table] = tuple(chunk.names)
            out.extend(zip(*chunk.columns, strict=True))
        return out

    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        permit.require_open(table)
        self.events.append("sink.load")
        if self.fail_before_mutation:
            raise InjectedFault("injected target failure before mutation")
        rows = self._rows(chunks, table)
        self.tables.setdefault(table, []).extend(rows)
        self.mutations += 1
        if self.fail_after_mutation:
            raise InjectedFault("injected target failure after mutation")
        return len(rows)

    def begin_staging(
        self, table: str, schema: TableSchema, operation_id: str, order_by: tuple[str, ...] = ()
    ) -> str:
        self.events.append("sink.begin_staging")
        name = f"{table}__stage"
        self.tables[name] = []
        return name

    def stage(self, staging_table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]) -> int:
        self.events.append("sink.stage")
        rows = self._rows(chunks, staging_table)
        self.tables[staging_table].extend(rows)
        return len(rows)

    def finalize_staged_load(self, permit: TargetPermit, staging_table: str, table: str) -> int:
        permit.require_open(table)
        self.events.append("sink.finalize_staged_load")
        if self.fail_before_mutation:
            raise InjectedFault("injected target failure before mutation")
        rows = self.tables.pop(staging_table)
        if staging_table in self.names:
            self.names[table] = self.names.pop(staging_table)
        self.tables.setdefault(table, []).extend(rows)
        self.mutations += 1
        if self.fail_after_mutation:
            raise InjectedFault("injected target failure after mutation")
        return len(rows)

    def abort_staged_load(self, staging_table: str) -> None:
        self.events.append("sink.abort_staged_load")
        self.tables.pop(staging_table, None)

    def count_rows(self, table: str, bounds: PartitionBounds | None) -> int:
        rows = self.tables.get(table, [])
        if bounds is None or bounds.kind is BoundsKind.ALL or bounds.column is None:
            return len(rows)
        names = self.names.get(table, ())
        if bounds.column not in names:
            return len(rows)  # unknown layout: every row may be within (errs toward "holds rows")
        index = names.index(bounds.column)
        return sum(1 for row in rows if within_bounds(row[index], bounds))

    def close(self) -> None:
        return None

    def target_calls(self) -> int:
        return sum(1 for e in self.events if e in ("sink.load", "sink.finalize_staged_load"))


def orders_rows(days: int = 3, per_day: int = 4) -> list[tuple[int, dt.date, int]]:
    start = dt.date(2026, 11, 28)
    rows = []
    next_id = 1
    for d in range(days):
        for _ in range(per_day):
            rows.append((next_id, start + dt.timedelta(days=d), next_id * 10))
            next_id += 1
    return rows


def manifest_dict(
    *,
    export: str = "lazy_plan",
    load: str = "direct",
    strategy: str = "incremental_append",
    chunk_rows: int = 2,
) -> dict[str, object]:
    return {
        "kind": "native_transfer",
        "name": "orders",
        "source": {
            "type": "mssql",
            "connection": "orders_mssql",
            "table": "dbo.orders",
            "partitioning": {"kind": "day", "column": "order_date"},
            "export": export,
            "chunk_rows": chunk_rows,
        },
        "sink": {
            "type": "clickhouse",
            "connection": "analytics_clickhouse",
            "table": "analytics.orders",
            "strategy": strategy,
            "load": load,
        },
        "checkpoints": {"connection": "dpone_state"},
    }


def transfer_engine(
    *,
    store: CheckpointStore | None = None,
    source: Source | MemorySource | None = None,
    sink: Sink | None = None,
    open_sink: Callable[[], Sink] | None = None,
    clock: Clock | None = None,
    artifacts: ArtifactStore | None = None,
    manifest: dict[str, object] | None = None,
    manifest_ref: str = "m.yaml",
    lease: LeaseHold | None = None,
    allow_nonempty_target: bool = False,
    **manifest_kwargs: Any,
) -> TransferEngine:
    """The one way unit tests build a ``TransferEngine`` over these doubles, so a change to the engine's
    constructor or its ports is made here, not in every test module.

    Defaults: a fresh ``InMemoryCheckpointStore``, ``MemorySource(orders_rows())``, ``FixedClock()``, no
    artifact store, and ``manifest_dict(**manifest_kwargs)`` unless a ready ``manifest`` dict is given.
    Pass exactly one of ``sink`` (the one sink every open returns) or ``open_sink`` (a factory).
    """
    if (sink is None) == (open_sink is None):
        raise TypeError("transfer_engine: pass exactly one of sink= or open_sink=")
    if manifest is not None and manifest_kwargs:
        raise TypeError("transfer_engine: pass a ready manifest= or manifest_dict keywords, not both")
    data = manifest if manifest is not None else manifest_dict(**manifest_kwargs)
    ports = TransferPorts(
        store=store if store is not None else InMemoryCheckpointStore(),
        # MemorySource leaves out ``count_partitions`` (no engine run calls it), hence the cast
        source=cast(Source, source if source is not None else MemorySource(orders_rows())),
        open_sink=open_sink if open_sink is not None else _returning(sink),
        clock=clock if clock is not None else FixedClock(),
        artifacts=artifacts,
        lease=lease,
    )
    return TransferEngine(
        Manifest.model_validate_json(json.dumps(data)),
        ports,
        manifest_ref=manifest_ref,
        allow_nonempty_target=allow_nonempty_target,
    )


def _returning(sink: Sink | None) -> Callable[[], Sink]:
    assert sink is not None
    return lambda: sink


Factory = Callable[[], object]


class CountingSink:
    """A target that only counts: it holds ``held`` rows within each bounds (none elsewhere)."""

    def __init__(self, held: dict[PartitionBounds, int]) -> None:
        self.held = held

    def count_rows(self, table: str, bounds: PartitionBounds | None) -> int:
        return self.held.get(bounds, 0) if bounds is not None else sum(self.held.values())

    def close(self) -> None:
        return None


class MemoryArtifactStore:
    """Artifact files kept in memory; the digest is over the canonical rows."""

    def __init__(self) -> None:
        self.files: dict[str, list[ColumnChunk]] = {}
        self.removed: list[str] = []

    def write(self, partition_id: str, schema: TableSchema, chunks: Iterable[ColumnChunk]):  # type: ignore[no-untyped-def]
        from airflow_provider_dpone.contracts.artifact import ArtifactRef

        stored = list(chunks)
        self.files[partition_id] = stored
        rows = sum(c.row_count for c in stored)
        digest = sha256_tag(repr([c.columns for c in stored]))
        return ArtifactRef(
            partition_id=partition_id,
            path=f"mem://{partition_id}",
            artifact_sha256=digest,
            rows=rows,
            bytes=rows * 24,
        )

    def verify(self, ref) -> None:  # type: ignore[no-untyped-def]
        assert ref.partition_id in self.files

    def read(self, ref, chunk_rows: int) -> Iterator[ColumnChunk]:  # type: ignore[no-untyped-def]
        yield from self.files[ref.partition_id]

    def remove(self, ref) -> None:  # type: ignore[no-untyped-def]
        self.removed.append(ref.partition_id)
        self.files.pop(ref.partition_id, None)


def within_bounds(value: object, bounds: PartitionBounds) -> bool:
    """``value`` inside ``bounds`` (ISO text compares in order; integers as integers)."""
    if value is None:
        return False
    if bounds.value_type == "integer":
        key: object = int(str(value))
        lower = None if bounds.lower is None else int(bounds.lower)
        upper = None if bounds.upper is None else int(bounds.upper)
    else:
        key, lower, upper = str(value), bounds.lower, bounds.upper
    if bounds.kind is BoundsKind.VALUES:
        return str(value) in (bounds.values or ())
    return (lower is None or lower <= key) and (upper is None or key < upper)  # type: ignore[operator]
