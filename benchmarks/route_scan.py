"""Route scan: planning a run with nothing to move, over a route with a long checkpoint history.

The store is seeded with ``history_rows`` checkpoints of one route, exactly what the runtime writes:
``TargetCommitLifecycle.arm()`` and ``promote()`` for ``history_rows / 2`` partitions (an armed and a
committed row each). The rows are recorded and bulk-inserted in one transaction (outside the clock; a
real history takes one transaction per row). Then the timed part is what a run does before it knows there
is nothing to move: the route-wide guard scan (``load_family``: every route of the target, the latest
checkpoint of every partition, parsed), ``require_clear_route``, the planned partitions built from the
source's bounds (their IDs computed, as ``TransferEngine._plan_from`` does), matching them to their
checkpoints and ``plan_resume`` — every partition is committed, so every decision is a skip. Only the
source's own planning (the bounds) is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clock import Clock
from guard_overhead import _partitions


class _Recorder:
    """Collects what the lifecycle writes; the seed inserts it in bulk afterwards."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    def write_batch(self, checkpoints: Sequence[Any]) -> None:
        self.rows.extend(checkpoints)


def _seed(store: Any, route: Any, active: list[Any]) -> None:
    from airflow_provider_dpone.adapters.checkpoint_sql.store import _row_of
    from airflow_provider_dpone.adapters.local_host import SystemClock
    from airflow_provider_dpone.runtime.guard.commit_lifecycle import TargetCommitLifecycle

    recorder = _Recorder()
    lifecycle = TargetCommitLifecycle(
        store=recorder,  # type: ignore[arg-type]
        clock=SystemClock(),
        route=route,
        run_id="history",
        partitions=active,
    )
    lifecycle.invoke_target(lifecycle.arm(), lambda _permit: len(active))
    lifecycle.promote({p.planned.partition_id: 1000 for p in active})
    now = store._now()
    with store._engine.begin() as conn:
        conn.execute(store._insert_checkpoint, [{**_row_of(c), "written_at": now} for c in recorder.rows])


class _Naming:
    def canonical(self, route: Any) -> Any:
        return route

    def legacy_query_hash(self, source_table: str) -> str:
        return "sha256:" + "c" * 64


def run_route_scan(spec: dict[str, Any]) -> dict[str, Any]:
    import contextlib
    import uuid

    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
    from airflow_provider_dpone.contracts.partition import PlannedPartition, partition_id_for
    from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
    from airflow_provider_dpone.runtime.guard.route_guard import require_clear_route
    from airflow_provider_dpone.runtime.resume_planner import Action, plan_resume
    from airflow_provider_dpone.runtime.route_family import latest_by_partition, load_family

    history_rows = int(spec["history_rows"])
    suffix = uuid.uuid4().hex[:8]
    # a target of its own: a kept store (--keep) holds earlier runs' histories, and the scan reads every
    # route of the target, so a shared target would make each run scan all earlier ones too
    route = RouteIdentity(
        source_table=f"bench.scan_{suffix}",
        target_table=f"bench.scan_target_{suffix}",
        strategy=Strategy.INCREMENTAL_APPEND,
    )
    active = _partitions(history_rows // 2, route)
    planned = [p.planned for p in active]
    bounds = [p.bounds for p in planned]
    query_hash, schema_hash = planned[0].query_hash, planned[0].schema_hash
    store = SqlCheckpointStore(spec["store_url"])
    store.ensure_schema()
    try:
        _seed(store, route, active)
        naming = _Naming()
        repeats: list[float] = []
        cpu: list[float] = []
        try:
            from airflow_provider_dpone.runtime.collector import collector_paused as paused
        except ImportError:  # a --dpone-src tree from before the collector pause
            paused = contextlib.nullcontext
        for _ in range(int(spec.get("repeats", 3))):
            clock = Clock()
            # what TransferEngine._scan_route and _plan_from do (the source's own planning aside)
            with paused():
                family = load_family(store, route, naming)  # type: ignore[arg-type]
                require_clear_route(route, family.target_wide, "bench.yaml")
            with paused():  # TransferEngine._plan_from pauses from the source's planning on
                now_planned = [
                    PlannedPartition(
                        partition_id=partition_id_for(route, query_hash, schema_hash, b),
                        bounds=b,
                        query_hash=query_hash,
                        schema_hash=schema_hash,
                    )
                    for b in bounds
                ]
                matched = latest_by_partition(family, now_planned, naming)  # type: ignore[arg-type]
                decisions = plan_resume(now_planned, matched, route.strategy, "next-run")
            repeats.append(clock.seconds())
            cpu.append(clock.cpu_seconds())
            assert len(family.own) == len(planned), "the scan read every latest checkpoint"
            assert now_planned == planned, "the IDs computed are the ones the history was written with"
            assert all(d.action is Action.SKIP for d in decisions), "nothing to move"
    finally:
        store.close()
    return {
        "rows": 0,
        "seconds": 0.0,
        "cpu_seconds": 0.0,
        "route_scan": {
            "history_rows": history_rows,
            "latest_rows": len(planned),
            "seconds": repeats[0],  # a run scans once, in a fresh process: the cold figure
            "repeats": repeats,
            "cpu_seconds": cpu[0],
        },
    }
