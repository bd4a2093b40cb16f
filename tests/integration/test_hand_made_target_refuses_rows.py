"""A target made by hand that refuses some rows (a CHECK constraint, a column expression failing on a value)
stops a staged run before arming, its days untouched.

The staging table is defined as dpone defines the target, so it took every row; the target's own
constraint refused the publish, after a ``replace_partition`` run's delete had emptied its days: the run
failed after arming, the route blocked with the days missing (``target_load_failed``, the cause only in a
server code). The staged rows are now inserted into a ``Null``-engine copy of the target first, which
evaluates its constraints and expressions and keeps nothing: ``target_table_incompatible``, nothing armed,
the target as it was. Real SQLite source; chDB and the 18.16 server; every target value compared.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.route_rig import chdb_command, chdb_query, checkpoint_rows, dpone

pytestmark = pytest.mark.service

Query = Callable[[str], list[tuple[Any, ...]]]
DDL = {
    "check": "CONSTRAINT positive CHECK amount > 0",
    "materialized": "code UInt32 MATERIALIZED toUInt32(substring(customer, 2))",
}


def make_source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "CREATE TABLE ev (id INTEGER PRIMARY KEY, day DATE NOT NULL, customer TEXT NOT NULL, amount INTEGER NOT NULL)"
        )
        db.executemany(
            "INSERT INTO ev VALUES (?, ?, ?, ?)",
            [(i, f"2026-01-0{1 + i % 3}", f"c{i}", 10 + i) for i in range(1, 31)],
        )


def manifest(base: Path, sink: str, table: str) -> Path:
    path = base / "ev.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: hand_made
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: ev
  partitioning: {{kind: day, column: day, lookback: 2}}
sink: {{type: clickhouse, connection: {sink}, table: {table}, strategy: replace_partition, load: staged, order_by: [id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    return path


def source_rows(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return sorted(db.execute("SELECT id, day, customer, amount FROM ev").fetchall())


def exercise(base: Path, path: Path, read: Query, table: str, bad: str) -> None:
    assert dpone("run", str(path), "--run-id", "r0").exit_code == 0
    loaded = source_rows(base)
    assert sorted(read(f"SELECT id, toString(day), customer, toInt64(amount) FROM {table}")) == loaded
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(bad)
    stopped = dpone("run", str(path), "--run-id", "r1", "--json")
    assert stopped.exit_code == 1, stopped.output  # target_table_incompatible
    assert '"reason": "target_refuses_rows"' in stopped.stdout
    assert sorted(read(f"SELECT id, toString(day), customer, toInt64(amount) FROM {table}")) == loaded
    assert all('"armed"' not in row for row in checkpoint_rows(base)[-3:])  # nothing armed: not blocked
    with sqlite3.connect(base / "source.sqlite") as db:  # corrected at the source: the next run lands it
        db.execute("UPDATE ev SET amount = 99, customer = 'c99' WHERE id = 29")
    assert dpone("run", str(path), "--run-id", "r2").exit_code == 0
    assert sorted(read(f"SELECT id, toString(day), customer, toInt64(amount) FROM {table}")) == source_rows(
        base
    )


BAD = {
    "check": "UPDATE ev SET amount = -1 WHERE id = 29",
    "materialized": "UPDATE ev SET customer = 'walk-in' WHERE id = 29",
}


@pytest.mark.parametrize("refusing", list(DDL))
def test_chdb_target_refusing_rows_stops_before_arming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusing: str
) -> None:
    monkeypatch.chdir(tmp_path)
    make_source(tmp_path)
    chdb_command(tmp_path, "CREATE DATABASE IF NOT EXISTS hand")
    chdb_command(
        tmp_path,
        f"CREATE TABLE hand.ev (id Int64, day Date, customer String, amount Int64, {DDL[refusing]}) "
        "ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id",
    )
    path = manifest(tmp_path, "chdb:///clickhouse", "hand.ev")
    exercise(tmp_path, path, lambda sql: chdb_query(tmp_path, sql), "hand.ev", BAD[refusing])


@pytest.fixture
def server(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Query, str]]:
    monkeypatch.setenv(
        "AIRFLOW_CONN_HAND_CH", f"clickhouse://default@{clickhouse_http.host}:{clickhouse_http.port}/default"
    )
    database = "hand_" + uuid.uuid4().hex[:8]
    client = open_client(clickhouse_http)
    client.command(f"CREATE DATABASE {database}")
    try:
        yield (lambda sql: [tuple(r) for r in client.query(sql).result_rows]), database
    finally:
        client.command(f"DROP DATABASE IF EXISTS {database}")
        client.close()


def test_the_18_16_server_target_whose_expression_fails_stops_before_arming(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: tuple[Query, str],
    clickhouse_http: EndpointDescriptor,
) -> None:
    read, database = server
    monkeypatch.chdir(tmp_path)
    make_source(tmp_path)
    client = open_client(clickhouse_http)
    try:
        client.command(
            f"CREATE TABLE {database}.ev (id Int64, day Date, customer String, amount Int64, {DDL['materialized']}) "
            "ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
        )
    finally:
        client.close()
    path = manifest(tmp_path, "hand_ch", f"{database}.ev")
    exercise(tmp_path, path, read, f"{database}.ev", BAD["materialized"])
