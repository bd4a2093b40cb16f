"""A statement a timed-out (or killed) run left running on the server stops ``guard resolve`` until it ends.

Seen on the 18.16 server: a staged publish (``INSERT ... SELECT`` into a target defined by hand) outlived
its client (``send_receive_timeout``, or a SIGKILLed worker); ``guard inspect`` counted none of its rows
yet, ``guard resolve --as not-applied`` was accepted, the next run loaded every partition, and then the
orphaned statement landed its rows too: every row twice, every command exit 0. dpone's statements now carry
a ``query_id`` naming the target, and ``resolve`` refuses (``route_busy``, exit 4) while one still runs.
Here the publish is made slow by ``MATERIALIZED sleepEachRow`` columns and the client's timeout short.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor

pytestmark = pytest.mark.service

ROWS = 2_000
SLEEPY_COLUMNS = 6  # each sleeps 1.4 ms per row (a block may sleep 3 s): the publish outlives the client


@pytest.fixture
def server(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    address = f"default@{clickhouse_http.host}:{clickhouse_http.port}/default"
    monkeypatch.setenv("AIRFLOW_CONN_INFLIGHT_PATIENT", f"clickhouse://{address}")
    monkeypatch.setenv("AIRFLOW_CONN_INFLIGHT_HASTY", f"clickhouse://{address}?send_receive_timeout=2")
    database = "inflight_" + uuid.uuid4().hex[:8]
    client = open_client(clickhouse_http)
    try:
        client.command(f"CREATE DATABASE {database}")
        yield client, f"{database}.orders"
    finally:
        client.command(f"KILL QUERY WHERE query LIKE '%{database}%' SYNC")
        client.command(f"DROP DATABASE IF EXISTS {database}")
        client.close()


def manifest(folder: Path, table: str, connection: str, state: str) -> Path:
    path = folder / f"{connection}-{state}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: inflight
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: {connection}
  table: {table}
  strategy: incremental_append
  load: staged
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///{state}.sqlite
""",
        encoding="utf-8",
    )
    return path


def dpone(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def target_rows(client: Any, table: str) -> list[tuple[Any, ...]]:
    rows = client.query(
        f"SELECT id, toString(order_date), customer, toString(amount), toString(updated_at) FROM {table}"
    ).result_rows
    return sorted((r[0], r[1], r[2], Decimal(r[3]), r[4]) for r in rows)


def source_rows(folder: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "source.sqlite") as db:
        rows = db.execute("SELECT id, order_date, customer, amount, updated_at FROM orders").fetchall()
    return sorted((r[0], r[1], r[2], Decimal(str(r[3])).quantize(Decimal("0.01")), r[4]) for r in rows)


def test_resolve_waits_for_a_publish_the_server_still_runs_and_nothing_lands_twice(
    tmp_path: Path, server: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, table = server
    monkeypatch.chdir(tmp_path)
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=3)
    # the target as dpone defines it (a first run through a scratch store), emptied, then slowed down
    assert dpone("run", str(manifest(tmp_path, table, "inflight_patient", "scratch"))).exit_code == 0
    client.command(f"TRUNCATE TABLE {table}")
    for i in range(SLEEPY_COLUMNS):
        client.command(f"ALTER TABLE {table} ADD COLUMN slow{i} UInt8 MATERIALIZED sleepEachRow(0.0014)")
    hasty = manifest(tmp_path, table, "inflight_hasty", "state")

    failed = dpone("run", str(hasty))  # the client gives up; the server goes on copying

    assert failed.exit_code != 0, failed.output
    assert "the route is now blocked" in failed.output and "guard inspect" in failed.output
    refused = dpone(
        "guard", "resolve", str(hasty), "--all-blocked", "--as", "not-applied", "--reason", "0 rows"
    )
    assert refused.exit_code == 4, refused.output  # red before: accepted, and every row landed twice
    assert "route_busy" in refused.output and "KILL QUERY" in refused.output
    forced = dpone(
        "guard", "resolve", str(hasty), "--all-blocked", "--as", "not-applied", "--reason", "0", "--force"
    )
    assert forced.exit_code == 4, forced.output  # --force does not pass it (it did: every row twice)
    inspected = dpone("guard", "inspect", "--json", str(hasty))
    assert json.loads(inspected.stdout)["in_flight"]["statements_running"] == 1
    deadline = time.monotonic() + 60
    while int(
        client.query("SELECT count() FROM system.processes WHERE query_id LIKE 'dpone-%'").result_rows[0][0]
    ):
        assert time.monotonic() < deadline, "the orphaned publish never ended"
        time.sleep(0.5)

    # someone else's mutation of the table (failing for ever) is not this route's to wait for
    client.command(f"ALTER TABLE {table} DELETE WHERE throwIf(id = 1) = 1")
    assert int(client.query("SELECT count() FROM system.mutations WHERE is_done = 0").result_rows[0][0])
    # counts are final now: the publish landed every row, so the partitions are resolved as committed
    again = dpone(
        "guard", "resolve", str(hasty), "--all-blocked", "--as", "not-applied", "--reason", "0 rows"
    )
    assert again.exit_code != 0  # the target holds the attempt's rows: not-applied would duplicate them
    committed = dpone(
        "guard", "resolve", str(hasty), "--all-blocked", "--as", "committed", "--reason", "landed"
    )
    assert committed.exit_code == 0, committed.output
    assert dpone("run", str(manifest(tmp_path, table, "inflight_patient", "state"))).exit_code == 0
    assert target_rows(client, table) == source_rows(tmp_path)  # each row once, every value
