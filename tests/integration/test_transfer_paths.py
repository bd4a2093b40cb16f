"""The engine end to end on real parts: SQLite source, chDB or a ClickHouse 18.16 server, SQLite store.

Every execution path (lazy_plan or file_artifact export, direct or staged load) for every strategy on chDB,
and the direct and staged paths against the server over HTTP. Each test asserts the target holds
exactly the source's rows, and what a second run does.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest

ROWS = 3_000
PATHS = [
    ("lazy_plan", "direct"),
    ("lazy_plan", "staged"),
    ("file_artifact", "direct"),
    ("file_artifact", "staged"),
]
STRATEGIES = ["incremental_append", "full_refresh", "replace_partition"]


def chdb_endpoint(path: Path) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(path)
    )


def write_manifest(
    base: Path, *, sink_connection: str, table: str, export: str, load: str, strategy: str
) -> Path:
    manifest = base / "manifest.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: paths
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
  export: {export}
  chunk_rows: 700
sink:
  type: clickhouse
  connection: {sink_connection}
  table: {table}
  strategy: {strategy}
  load: {load}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return manifest


def run(manifest: Path, run_id: str, *, allow_nonempty_target: bool = False):  # type: ignore[no-untyped-def]
    with open_runtime(load_manifest(manifest)) as runtime:
        return runtime.run(run_id, allow_nonempty_target=allow_nonempty_target)


def counts(endpoint: EndpointDescriptor, table: str) -> tuple[int, int]:
    client = open_client(endpoint)
    try:
        row = client.query(f"SELECT count(), uniqExact(id) FROM {table}").result_rows[0]
        return int(row[0]), int(row[1])
    finally:
        client.close()


def seed_target_junk(endpoint: EndpointDescriptor, table: str, day: str) -> None:
    """Rows in one partition's bounds that a replace must remove (ids far outside the source's)."""
    client = open_client(endpoint)
    try:
        client.command(
            f"INSERT INTO {table} (id, order_date, customer, amount, updated_at) "
            f"VALUES (900000001, toDate('{day}'), 'junk', 1.00, now()), (900000002, toDate('{day}'), 'junk', 2.00, now())"
        )
    finally:
        client.close()


def first_day(source: Path) -> str:
    with sqlite3.connect(source) as conn:
        return str(conn.execute("SELECT min(order_date) FROM orders").fetchone()[0])


def exercise(
    base: Path,
    endpoint: EndpointDescriptor,
    sink_connection: str,
    table: str,
    export: str,
    load: str,
    strategy: str,
) -> None:
    create_demo_source(base / "source.sqlite", ROWS, days=6)
    manifest = write_manifest(
        base, sink_connection=sink_connection, table=table, export=export, load=load, strategy=strategy
    )
    first = run(manifest, "run-1")
    assert first.partitions_committed == 6 and first.rows_committed == ROWS
    assert counts(endpoint, table) == (ROWS, ROWS)
    if export == "file_artifact":
        assert all(p.digest and p.digest.startswith("sha256:") for p in first.partitions)

    if strategy == "replace_partition":
        seed_target_junk(endpoint, table, first_day(base / "source.sqlite"))
        with open_runtime(load_manifest(manifest)) as runtime:
            pid = next(c.partition_id for c in runtime.checkpoints())
            latest = runtime.checkpoints()[0]
            # make the first partition due again, as an operator would after a source correction
            from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus

            runtime.store().write_batch(
                [latest.model_copy(update={"status": CheckpointStatus.FAILED, "diagnostics": {}})]
            )
        second = run(manifest, "run-2")
        assert second.partitions_committed == 1 and pid in {p.partition_id for p in second.partitions}
        assert counts(endpoint, table) == (ROWS, ROWS)  # junk replaced, nothing doubled
        return

    second = run(manifest, "run-2")
    if strategy == "full_refresh":
        assert second.partitions_committed == 6  # a new run refreshes everything
    else:
        assert second.partitions_committed == 0 and second.partitions_skipped == 6
    assert counts(endpoint, table) == (ROWS, ROWS)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("export", "load"), PATHS)
def test_every_path_and_strategy_lands_exactly_the_source_rows_on_chdb(
    tmp_path: Path, chdb_dir: Path, export: str, load: str, strategy: str
) -> None:
    endpoint = chdb_endpoint(tmp_path / "clickhouse")
    exercise(tmp_path, endpoint, "chdb:///clickhouse", "demo.orders", export, load, strategy)


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
@pytest.mark.parametrize("load", ["direct", "staged"])
def test_direct_and_staged_paths_land_exactly_the_source_rows_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    load: str,
    strategy: str,
) -> None:
    database = "paths_" + uuid.uuid4().hex[:8]
    monkeypatch.setenv(
        "AIRFLOW_CONN_HTTP_CLICKHOUSE",
        f"clickhouse://default@{clickhouse_http.host}:{clickhouse_http.port}/default",
    )
    exercise(tmp_path, clickhouse_http, "http_clickhouse", f"{database}.orders", "lazy_plan", load, strategy)


def test_missing_source_table_is_a_clear_error_and_writes_nothing(tmp_path: Path, chdb_dir: Path) -> None:
    sqlite3.connect(tmp_path / "source.sqlite").close()
    manifest = write_manifest(
        tmp_path,
        sink_connection="chdb:///clickhouse",
        table="demo.orders",
        export="lazy_plan",
        load="direct",
        strategy="incremental_append",
    )
    with pytest.raises(DponeError) as failed:
        run(manifest, "r")
    assert failed.value.code is ErrorCode.SOURCE_TABLE_MISSING
    assert not (tmp_path / "clickhouse").exists()


def test_unreachable_server_is_a_clear_error_before_any_checkpoint_is_armed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_DOWN", f"clickhouse://default:s3cret@127.0.0.1:{port}/default")
    create_demo_source(tmp_path / "source.sqlite", 100, days=2)
    manifest = write_manifest(
        tmp_path,
        sink_connection="down",
        table="demo.orders",
        export="lazy_plan",
        load="direct",
        strategy="incremental_append",
    )
    with pytest.raises(DponeError) as failed:
        run(manifest, "r")
    assert failed.value.code is ErrorCode.TARGET_UNREACHABLE
    assert "s3cret" not in failed.value.render()
    with open_runtime(load_manifest(manifest)) as runtime:
        assert all(c.diagnostics.get("target_commit_guard") is None for c in runtime.checkpoints())


def test_incompatible_existing_target_is_refused_and_left_untouched(tmp_path: Path, chdb_dir: Path) -> None:
    endpoint = chdb_endpoint(tmp_path / "clickhouse")
    client = open_client(endpoint)
    try:
        client.command("CREATE DATABASE IF NOT EXISTS demo")
        client.command(
            "CREATE TABLE demo.orders (id String, order_date Date) ENGINE = MergeTree ORDER BY order_date"
        )
        client.command("INSERT INTO demo.orders VALUES ('keep', '2026-01-01')")
    finally:
        client.close()
    create_demo_source(tmp_path / "source.sqlite", 100, days=2)
    manifest = write_manifest(
        tmp_path,
        sink_connection="chdb:///clickhouse",
        table="demo.orders",
        export="lazy_plan",
        load="direct",
        strategy="incremental_append",
    )
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r")
    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY  # a route with no checkpoint, a table with a row
    with pytest.raises(DponeError) as failed:
        run(manifest, "r", allow_nonempty_target=True)
    assert failed.value.code is ErrorCode.TARGET_INCOMPATIBLE
    client = open_client(endpoint)
    try:
        assert client.query("SELECT count() FROM demo.orders").result_rows[0][0] == 1
    finally:
        client.close()
