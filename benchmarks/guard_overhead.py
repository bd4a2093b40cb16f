"""Guard overhead: arm + committed promotion of one checkpoint batch of N partitions on a real store.

Uses the runtime's own ``TargetCommitLifecycle`` over ``SqlCheckpointStore`` (SQLite file with WAL and
``synchronous=FULL``, or PostgreSQL), exactly as a run does: one armed checkpoint per partition written
before the target call, one committed checkpoint per partition after it, each row its own transaction
(the seed forbids an atomic batch). The target call itself is a no-op, so the time is the guard's alone.
The route-wide scan that starts every run (``list_latest``) is timed separately.
"""

from __future__ import annotations

import uuid
from typing import Any

from clock import Clock


def _partitions(count: int, route: Any) -> list[Any]:
    from airflow_provider_dpone.contracts.partition import (
        BoundsKind,
        PartitionBounds,
        PlannedPartition,
        partition_id_for,
    )
    from airflow_provider_dpone.runtime.guard.commit_lifecycle import ActivePartition

    query_hash = "sha256:" + "a" * 64
    schema_hash = "sha256:" + "b" * 64
    active = []
    for index in range(count):
        bounds = PartitionBounds(
            kind=BoundsKind.RANGE,
            column="id",
            lower=str(index * 1000),
            upper=str((index + 1) * 1000),
            value_type="integer",
            label=f"id={index * 1000}..{(index + 1) * 1000}",
        )
        planned = PlannedPartition(
            partition_id=partition_id_for(route, query_hash, schema_hash, bounds),
            bounds=bounds,
            query_hash=query_hash,
            schema_hash=schema_hash,
        )
        active.append(ActivePartition(planned, rows=1000, bytes=64_000))
    return active


def run_guard(spec: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
    from airflow_provider_dpone.adapters.local_host import SystemClock
    from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
    from airflow_provider_dpone.runtime.guard.commit_lifecycle import TargetCommitLifecycle

    store = SqlCheckpointStore(spec["store_url"])
    store.ensure_schema()
    results: dict[str, Any] = {}
    try:
        # A run has already written through this store (scan, PLANNED records) when it arms: warm the
        # connection pool and SQLAlchemy's statement cache the same way, outside the timed region.
        warm_route = RouteIdentity(
            source_table=f"bench.guard_warmup_{uuid.uuid4().hex[:8]}",
            target_table="bench.guard_target",
            strategy=Strategy.INCREMENTAL_APPEND,
        )
        warm = TargetCommitLifecycle(
            store=store,
            clock=SystemClock(),
            route=warm_route,
            run_id="warmup",
            partitions=_partitions(2, warm_route),
        )
        warm.invoke_target(warm.arm(), lambda _permit: 0)
        warm.promote()
        for count in spec["partitions"]:
            route = RouteIdentity(
                source_table=f"bench.guard_{count}_{uuid.uuid4().hex[:8]}",
                target_table="bench.guard_target",
                strategy=Strategy.INCREMENTAL_APPEND,
            )
            active = _partitions(count, route)
            clock = Clock()
            store.list_latest(route)  # the route guard scan every run starts with
            scan_s = clock.seconds()
            lifecycle = TargetCommitLifecycle(
                store=store, clock=SystemClock(), route=route, run_id="bench", partitions=active
            )
            clock.restart()
            permit = lifecycle.arm()
            arm_s, arm_cpu = clock.seconds(), clock.cpu_seconds()
            lifecycle.invoke_target(permit, lambda _permit, moved=count: moved)
            clock.restart()
            lifecycle.promote({p.planned.partition_id: 1000 for p in active})
            promote_s, promote_cpu = clock.seconds(), clock.cpu_seconds()
            clock.restart()
            latest = store.list_latest(route)  # the next run's scan, now over 2N rows of history
            rescan_s = clock.seconds()
            assert len(latest) == count
            results[str(count)] = {
                "arm_s": arm_s,
                "promote_s": promote_s,
                "cpu_s": arm_cpu + promote_cpu,
                "ms_per_partition": (arm_s + promote_s) * 1000 / count,
                "scan_empty_s": scan_s,
                "scan_after_s": rescan_s,
            }
    finally:
        store.close()
    return {"rows": 0, "seconds": 0.0, "cpu_seconds": 0.0, "guard": results}
