"""One bad latest checkpoint among 20,000 committed ones still blocks the route, on both stores.

The fast route scan (issue 16) validates the latest checkpoints row by row in one loop, remembers guard
verdicts per batch and selects the latest rows in SQL; none of that may let one malformed or unresolved
record through. Each case appends one row as the newest of a partition in the middle of the history,
runs the scan a run starts with (``load_family`` + ``require_clear_route``) and expects the stable
blocked error naming exactly that partition; appending the committed row again clears the route, as the
seeded history was clear (checked once, when it is seeded).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.store import _row_of
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, canonical_json
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.runtime.guard.route_guard import require_clear_route
from airflow_provider_dpone.runtime.route_family import load_family

UTC = dt.timezone.utc
ROUTE = RouteIdentity(
    source_table="main.orders", target_table="demo.orders", strategy=Strategy.INCREMENTAL_APPEND
)
PARTITIONS = 20_000
BATCH = "sha256:" + "d" * 64
AT = dt.datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
MIDDLE = PARTITIONS // 2 + 17


class _Naming:
    def canonical(self, route: RouteIdentity) -> RouteIdentity:
        return route

    def legacy_query_hash(self, source_table: str) -> str:
        return "sha256:" + "c" * 64


def _committed(index: int) -> PartitionCheckpoint:
    guard = TargetCommitGuard.for_phase(GuardPhase.CHECKPOINT_COMMITTED, BATCH).to_json()
    return PartitionCheckpoint(
        partition_id=f"part-{index:06d}",
        route=ROUTE,
        run_id="history",
        status=CheckpointStatus.COMMITTED,
        started_at=AT,
        completed_at=AT,
        rows=1000,
        bytes=64_000,
        query_hash="sha256:" + "a" * 64,
        schema_hash="sha256:" + "b" * 64,
        bounds=PartitionBounds(
            kind=BoundsKind.RANGE,
            column="id",
            lower=str(index * 1000),
            upper=str((index + 1) * 1000),
            value_type="integer",
            label=f"id={index * 1000}..{(index + 1) * 1000}",
        ),
        diagnostics={GUARD_KEY: guard},
    )


@pytest.fixture(params=["sqlite", "postgres"], scope="module")
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store holding 20,000 committed partitions of the route (one bulk transaction: the seed)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('scan') / 'checkpoints.sqlite'}"
        admin = None
        name = ""
    else:
        base = sa.engine.make_url(request.getfixturevalue("postgres_url"))
        name = "scan_" + uuid.uuid4().hex[:12]
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        url = base.set(database=name).render_as_string(hide_password=False)
    try:
        with SqlCheckpointStore(url) as store:
            store.ensure_schema()
            with store._engine.begin() as conn:
                conn.execute(
                    store._insert_checkpoint,
                    [{**_row_of(_committed(i)), "written_at": AT} for i in range(PARTITIONS)],
                )
            assert _scan(store) == PARTITIONS  # the seeded history is clear (each case leaves it so)
        yield url
    finally:
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


def _append_raw(store: SqlCheckpointStore, partition_id: str, payload_text: str, status: str) -> None:
    row = {**_row_of(_committed(MIDDLE)), "partition_id": partition_id, "payload_text": payload_text}
    with store._engine.begin() as conn:
        conn.execute(store._insert_checkpoint, {**row, "status": status, "written_at": AT})


def _mutated(change: Callable[[dict[str, Any]], None]) -> str:
    payload = json.loads(_committed(MIDDLE).to_payload())
    change(payload)
    return canonical_json(payload)


def _set_guard(**values: str) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["diagnostics"][GUARD_KEY].update(values)


CASES: dict[str, tuple[str, str, ErrorCode]] = {
    "committed status with an armed phase": (
        _mutated(_set_guard(phase="armed", recovery="manual_reconciliation_required")),
        "COMMITTED",
        ErrorCode.GUARD_INVALID,
    ),
    "unknown guard schema version": (
        _mutated(_set_guard(schema_version="dpone.native_transfer.target_commit_guard.v9")),
        "COMMITTED",
        ErrorCode.GUARD_INVALID,
    ),
    "an unexpected guard key": (
        _mutated(lambda p: p["diagnostics"][GUARD_KEY].update(extra="x")),
        "COMMITTED",
        ErrorCode.GUARD_INVALID,
    ),
    "truncated JSON": (_committed(MIDDLE).to_payload()[:-7], "COMMITTED", ErrorCode.GUARD_INVALID),
    "a timestamp outside UTC": (
        _mutated(lambda p: p.update(started_at="2026-12-01T09:00:00+01:00")),
        "COMMITTED",
        ErrorCode.GUARD_INVALID,
    ),
    "negative rows": (_mutated(lambda p: p.update(rows=-1)), "COMMITTED", ErrorCode.GUARD_INVALID),
    "payload of another partition": (
        _committed(MIDDLE + 1).to_payload(),
        "COMMITTED",
        ErrorCode.GUARD_INVALID,
    ),
    "an armed record (unresolved)": (
        _mutated(
            lambda p: (
                p.update(status="EXPORTED", completed_at=None),
                p["diagnostics"][GUARD_KEY].update(phase="armed", recovery="manual_reconciliation_required"),
            )
        ),
        "EXPORTED",
        ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
    ),
}


def _scan(store: SqlCheckpointStore) -> int:
    family = load_family(store, ROUTE, _Naming())  # type: ignore[arg-type]
    require_clear_route(ROUTE, family.target_wide, "m.yaml")
    return len(family.own)


@pytest.mark.parametrize("case", list(CASES))
def test_one_bad_latest_checkpoint_among_20000_blocks_the_route(seeded: str, case: str) -> None:
    payload_text, status, code = CASES[case]
    partition_id = _committed(MIDDLE).partition_id
    with SqlCheckpointStore(seeded) as store:
        if case == "truncated JSON" and seeded.startswith("postgresql"):
            # PostgreSQL refuses to store it (the generated JSONB column): nothing lands, the route is clear
            with pytest.raises(sa.exc.DataError):
                _append_raw(store, partition_id, payload_text, status)
            assert _scan(store) == PARTITIONS
            return
        _append_raw(store, partition_id, payload_text, status)
        with pytest.raises(DponeError) as caught:
            _scan(store)
        assert caught.value.code is code
        assert [p["partition_id"] for p in caught.value.details["partitions"]] == [partition_id]
        # the operator's repair: the committed record appended again is the latest; the route is clear
        _append_raw(store, partition_id, _committed(MIDDLE).to_payload(), "COMMITTED")
        assert _scan(store) == PARTITIONS


def test_the_scan_reads_exactly_the_latest_row_of_every_partition_in_append_order(seeded: str) -> None:
    with SqlCheckpointStore(seeded) as store:
        latest = store.list_latest(ROUTE)
        with store._engine.connect() as conn:
            newest = conn.execute(
                sa.text(
                    "SELECT c.partition_id, c.payload_text FROM dpone_partition_checkpoints c "
                    "WHERE c.id = (SELECT max(n.id) FROM dpone_partition_checkpoints n "
                    "WHERE n.route_key = c.route_key AND n.partition_id = c.partition_id) ORDER BY c.id"
                )
            ).all()
    assert len(latest) == PARTITIONS
    assert [(c.partition_id, c.to_payload()) for c in latest] == [tuple(row) for row in newest]
