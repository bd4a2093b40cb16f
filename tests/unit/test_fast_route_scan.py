"""The route scan parses every latest checkpoint with the cyclic collector paused, and changes nothing else.

With 100k history rows the collector's passes over the checkpoints parsed so far took more than half of
planning (benchmarks/run.py: ``route_scan_100k_s``). The pause is observed here the way it works: no
automatic collection starts while the store parses, even with a collection threshold of 10 allocations;
the collector is running again afterwards, also after a failure; and the scan still returns every latest
checkpoint, byte for byte what was written.
"""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.collector import collector_paused as runtime_pause
from tests.doubles import (
    FixedClock,
    InMemoryCheckpointStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)

UTC = dt.timezone.utc
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
PAUSES: list[Callable[[], AbstractContextManager[None]]] = [runtime_pause]


@pytest.fixture
def frequent_collections() -> Iterator[list[str]]:
    """Collections every 10 allocations; yields the phases the collector reported meanwhile."""
    seen: list[str] = []

    def callback(phase: str, _info: dict[str, Any]) -> None:
        seen.append(phase)

    threshold = gc.get_threshold()
    gc.set_threshold(10, 10, 10)
    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)


@pytest.mark.parametrize("pause", PAUSES, ids=["shared"])
def test_the_pause_restores_the_collector_after_success_and_failure(
    pause: Callable[[], AbstractContextManager[None]],
) -> None:
    assert gc.isenabled()
    with pause():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), pause():
        raise RuntimeError("inside")
    assert gc.isenabled()
    gc.disable()
    try:
        with pause():
            pass
        assert not gc.isenabled(), "a caller that had disabled the collector keeps it disabled"
    finally:
        gc.enable()


def _checkpoints(count: int) -> list[PartitionCheckpoint]:
    at = dt.datetime(2026, 11, 1, tzinfo=UTC)
    out = []
    for index in range(count):
        bounds = PartitionBounds(
            kind=BoundsKind.RANGE,
            column="id",
            lower=str(index * 10),
            upper=str(index * 10 + 10),
            value_type="integer",
            label=f"id={index * 10}..{index * 10 + 10}",
        )
        out.append(
            PartitionCheckpoint(
                partition_id=partition_id_for(ROUTE, "sha256:q", "sha256:s", bounds),
                route=ROUTE,
                run_id="run-1",
                status=CheckpointStatus.COMMITTED,
                started_at=at,
                completed_at=at,
                rows=10,
                query_hash="sha256:q",
                schema_hash="sha256:s",
                bounds=bounds,
                diagnostics={"note": [index, {"k": "v"}]},
            )
        )
    return out


def test_list_latest_parses_without_a_collection_and_returns_every_checkpoint_exactly(
    tmp_path: Path, frequent_collections: list[str]
) -> None:
    written = _checkpoints(400)
    with SqlCheckpointStore(f"sqlite:///{tmp_path / 'state.sqlite'}") as store:
        store.ensure_schema()
        with store._engine.begin() as conn:  # one transaction: the seed, not the subject
            from airflow_provider_dpone.adapters.checkpoint_sql.store import _row_of

            conn.execute(
                store._insert_checkpoint,
                [{**_row_of(c), "written_at": dt.datetime.now(UTC)} for c in written],
            )
        frequent_collections.clear()
        latest = store.list_latest(ROUTE)
        collections_during_scan = frequent_collections.count("start")
    assert [c.to_payload() for c in latest] == [c.to_payload() for c in written]
    # unpaused, 400 payloads at a threshold of 10 start hundreds of collections; paused, at most the one
    # the first allocation after resuming starts
    assert collections_during_scan <= 1
    assert gc.isenabled()


class _ObservingStore(InMemoryCheckpointStore):
    """Records whether the collector ran while the engine scanned the route."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on_during_scan: list[bool] = []

    def list_latest(self, route: RouteIdentity) -> list[PartitionCheckpoint]:
        self.collector_on_during_scan.append(gc.isenabled())
        return super().list_latest(route)

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        super().write_batch(checkpoints)


def test_a_run_scans_its_route_with_the_collector_paused_and_resumes_it() -> None:
    store = _ObservingStore()
    report = transfer_engine(
        store=store,
        source=MemorySource(orders_rows(days=2)),
        open_sink=RecordingSink,
        clock=FixedClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
    ).run("run-1")
    assert report.rows_committed == 8
    assert store.collector_on_during_scan and not any(store.collector_on_during_scan)
    assert gc.isenabled()


class _ObservingSource(MemorySource):
    """Records whether the collector ran while the engine had the source plan its partitions."""

    def __init__(self) -> None:
        super().__init__(orders_rows(days=2))
        self.collector_on_during_planning: list[bool] = []

    def plan_partitions(self) -> list[PartitionBounds]:
        self.collector_on_during_planning.append(gc.isenabled())
        return super().plan_partitions()


def test_a_run_plans_its_partitions_with_the_collector_paused_and_resumes_it() -> None:
    """Building tens of thousands of planned partitions with the collector running took several times as
    long as the building itself (its passes walk every partition built so far)."""
    source = _ObservingSource()
    report = transfer_engine(
        store=InMemoryCheckpointStore(),
        source=source,
        open_sink=RecordingSink,
        clock=FixedClock(dt.datetime(2026, 12, 2, 12, 0, tzinfo=UTC)),
    ).run("run-1")
    assert report.rows_committed == 8
    assert source.collector_on_during_planning == [False]
    assert gc.isenabled()
