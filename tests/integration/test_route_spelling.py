"""Route identity survives a respelled table, an upgrade from raw keys, and another route to the same target.

Black-box where it matters: ``dpone run`` on a SQLite source into chDB, checkpoints in SQLite or
PostgreSQL. Every target is compared with the source value by value, not only by count.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.tables import CHECKPOINT_TABLE
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.sources.partition_planning import legacy_read_definition_hash
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.manifests.loader import load_manifest

ROWS = 1_200
TARGET = "demo.orders"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The checkpoint store's URL; manifests reach it as connection ``spelling_state``."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
        monkeypatch.setenv("AIRFLOW_CONN_SPELLING_STATE", url)
        return url
    base: str = request.getfixturevalue("postgres_url")
    schema_db = f"dpone_spelling_{abs(hash(str(tmp_path))) % 10**9}"
    engine = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{schema_db}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{schema_db}"'))
    engine.dispose()
    url = sa.engine.make_url(base).set(database=schema_db)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPELLING_STATE", url.set(drivername="postgresql").render_as_string(False)
    )
    return url.render_as_string(hide_password=False)


def write_manifest(
    base: Path,
    table: str,
    store_url: str,
    *,
    name: str = "spelling",
    target: str = TARGET,
    strategy: str = "incremental_append",
) -> Path:
    path = base / f"{name}-{abs(hash(table)) % 10**6}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: {name}
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: '{table}'
  partitioning: {{kind: day, column: order_date}}
  chunk_rows: 500
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {target}
  strategy: {strategy}
  order_by: [order_date, id]
checkpoints:
  connection: spelling_state
""",
        encoding="utf-8",
    )
    return path


def dpone(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def source_rows(base: Path, table: str = "orders") -> list[tuple[Any, ...]]:
    """The source rows in a form both sides print alike (the amount as an exact 2-place decimal)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute(f"SELECT id, order_date, customer, amount, updated_at FROM {table}").fetchall()
    return sorted((r[0], r[1], r[2], _cents(str(r[3])), r[4]) for r in rows)


def target_rows(base: Path, target: str = TARGET) -> list[tuple[Any, ...]]:
    endpoint = EndpointDescriptor(
        name="t",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.CHDB,
        path=str(base / "clickhouse"),
    )
    client = open_client(endpoint)
    try:
        rows = client.query(
            f"SELECT id, toString(order_date), customer, toString(amount), toString(updated_at) FROM {target}"
        ).result_rows
    finally:
        client.close()
    return sorted((r[0], r[1], r[2], _cents(r[3]), r[4]) for r in rows)


def _cents(text: str) -> Decimal:
    return Decimal(text).quantize(Decimal("0.01"))


@pytest.fixture
def base(tmp_path: Path) -> Path:
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=4)
    return tmp_path


def latest_of(store_url: str, route: RouteIdentity) -> list[PartitionCheckpoint]:
    with SqlCheckpointStore(store_url) as store:
        return store.list_latest(route)


def append_armed(store_url: str, committed: list[PartitionCheckpoint], how_many: int = 1) -> None:
    """What a crash inside the target call leaves: the partition's latest row is EXPORTED/armed."""
    batch = "sha256:" + "ab" * 32
    armed = TargetCommitGuard.for_phase(GuardPhase.ARMED, batch).to_json()
    rows = [
        c.model_copy(
            update={
                "status": CheckpointStatus.EXPORTED,
                "completed_at": None,
                "diagnostics": {GUARD_KEY: armed},
            }
        )
        for c in committed[:how_many]
    ]
    with SqlCheckpointStore(store_url) as store:
        store.write_batch(rows)


def rewrite_as_legacy(store_url: str, manifest: Path, raw_table: str) -> list[str]:
    """Turn the route's rows into what a release before canonical naming stored: the raw spelling in the
    route key and payload, raw-table query hash and partition IDs. Returns the payloads as stored."""
    loaded = load_manifest(manifest)
    canonical = loaded.route
    raw = canonical.model_copy(update={"source_table": raw_table})
    old_hash = legacy_read_definition_hash(loaded.manifest.source, raw_table)
    with SqlCheckpointStore(store_url) as store:
        history = [
            c
            for pid in {c.partition_id for c in store.list_latest(canonical)}
            for c in store.history(canonical, pid)
        ]
    history.sort(key=lambda c: c.started_at)
    legacy = [
        c.model_copy(
            update={
                "route": raw,
                "query_hash": old_hash,
                "partition_id": partition_id_for(raw, old_hash, c.schema_hash, c.bounds),
            }
        )
        for c in history
    ]
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {CHECKPOINT_TABLE}"))
    engine.dispose()
    with SqlCheckpointStore(store_url) as store:
        store.write_batch(legacy)
    return stored_payloads(store_url)


def stored_payloads(store_url: str) -> list[str]:
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        payloads = [
            r[0] for r in conn.execute(sa.text(f"SELECT payload_text FROM {CHECKPOINT_TABLE} ORDER BY id"))
        ]
    engine.dispose()
    return payloads


RESPELLINGS = ["ORDERS", "main.orders", '"orders"', "[Main].[Orders]"]


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_a_respelled_table_is_blocked_by_the_armed_guard_of_its_route(
    base: Path, store_url: str, spelling: str
) -> None:
    first = write_manifest(base, "orders", store_url)
    assert dpone("run", str(first)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(first).route))
    before = target_rows(base)

    result = dpone("run", str(write_manifest(base, spelling, store_url)))

    assert result.exit_code == 3, result.output
    assert "native_transfer_manual_reconciliation_required" in result.output
    assert target_rows(base) == before == source_rows(base)


@pytest.mark.parametrize("spelling", RESPELLINGS)
def test_a_respelled_table_skips_every_committed_partition(base: Path, store_url: str, spelling: str) -> None:
    assert dpone("run", str(write_manifest(base, "orders", store_url))).exit_code == 0

    result = dpone("run", "--json", str(write_manifest(base, spelling, store_url)))

    assert result.exit_code == 0, result.output
    assert '"partitions_committed": 0' in result.output
    assert target_rows(base) == source_rows(base)


@pytest.mark.parametrize("raw", ["orders", "ORDERS"])
def test_committed_checkpoints_in_the_old_raw_key_form_are_still_skipped_and_round_trip_unchanged(
    base: Path, store_url: str, raw: str
) -> None:
    manifest = write_manifest(base, raw, store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    payloads = rewrite_as_legacy(store_url, manifest, raw)

    for spelling in (raw, "main.orders"):
        result = dpone("run", "--json", str(write_manifest(base, spelling, store_url)))
        assert result.exit_code == 0, result.output
        assert '"partitions_committed": 0' in result.output

    assert target_rows(base) == source_rows(base)
    assert stored_payloads(store_url) == payloads  # nothing new written, nothing migrated


def test_an_armed_guard_in_the_old_raw_key_form_still_blocks(base: Path, store_url: str) -> None:
    manifest = write_manifest(base, "ORDERS", store_url)
    assert dpone("run", str(manifest)).exit_code == 0
    rewrite_as_legacy(store_url, manifest, "ORDERS")
    raw_route = load_manifest(manifest).route.model_copy(update={"source_table": "ORDERS"})
    append_armed(store_url, latest_of(store_url, raw_route), how_many=2)
    before = target_rows(base)

    for spelling in ("ORDERS", "orders"):
        result = dpone("run", str(write_manifest(base, spelling, store_url)))
        assert result.exit_code == 3, result.output

    listing = dpone("checkpoints", str(manifest))
    assert listing.exit_code == 0 and "2 blocked" in listing.output
    assert target_rows(base) == before


def test_an_unresolved_guard_of_another_route_to_the_same_target_blocks(base: Path, store_url: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE orders_archive AS SELECT * FROM orders WHERE 0")
    other = write_manifest(base, "orders_archive", store_url, name="archive", strategy="replace_partition")
    mine = write_manifest(base, "orders", store_url)
    assert dpone("run", str(mine)).exit_code == 0
    # forge an armed guard on the other route, as if its last attempt died inside the target call
    mine_latest = latest_of(store_url, load_manifest(mine).route)
    other_route = load_manifest(other).route
    append_armed(store_url, [c.model_copy(update={"route": other_route}) for c in mine_latest])
    before = target_rows(base)

    result = dpone("run", str(mine))

    assert result.exit_code == 3, result.output
    assert target_rows(base) == before
    listing = dpone("checkpoints", str(mine))
    assert "stored under route main.orders_archive" in listing.output


def test_a_guard_on_a_route_to_another_target_does_not_block(base: Path, store_url: str) -> None:
    elsewhere = write_manifest(base, "orders", store_url, name="elsewhere", target="demo.orders_copy")
    assert dpone("run", str(elsewhere)).exit_code == 0
    append_armed(store_url, latest_of(store_url, load_manifest(elsewhere).route))

    result = dpone("run", str(write_manifest(base, "orders", store_url)))

    assert result.exit_code == 0, result.output
    assert target_rows(base) == source_rows(base)
