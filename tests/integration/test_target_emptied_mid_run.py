"""A target table dropped or truncated while a run reads the source stops the run before arming.

The check at the start of a run (``target_lost_committed_rows``) had passed; the table was dropped during
a long ``file_artifact`` export (or a staging insert), the target's preparation created it anew, and the
run loaded its own partitions into it: exit 0, the route's history gone, and the next run took the shrunk
table for retention. Seen on the 18.16 server. Now the table is counted again right before arming.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import add_a_new_day
from tests.integration.server_rig import server_database

pytestmark = pytest.mark.service


@pytest.fixture
def server(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    with server_database(clickhouse_http, monkeypatch, "emptied_server", "emptied_") as (client, database):
        client.command(f"CREATE DATABASE {database}")
        yield client, f"{database}.orders"


class EmptyTheTableWhenReading:
    """A progress listener that drops or truncates the target once the run has begun reading the source."""

    def __init__(self, client: Any, table: str, how: str) -> None:
        self._client, self._table, self._how = client, table, how

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        return None

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        return None

    def stage(self, name: str) -> None:
        if name in ("extract", "stage"):
            self._client.command(f"{self._how} TABLE {self._table}")


@pytest.mark.parametrize("how", ["DROP", "TRUNCATE"])
@pytest.mark.parametrize(("export", "load"), [("file_artifact", "direct"), ("lazy_plan", "staged")])
def test_a_table_emptied_while_the_run_reads_stops_it_before_arming(
    tmp_path: Path, server: tuple[Any, str], how: str, export: str, load: str
) -> None:
    client, table = server
    create_demo_source(tmp_path / "source.sqlite", 1_200, days=4)
    manifest = tmp_path / "orders.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: emptied
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
  export: {export}
sink:
  type: clickhouse
  connection: emptied_server
  table: {table}
  strategy: incremental_append
  load: {load}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.run("r1").rows_committed == 1_200
    add_a_new_day(tmp_path)

    with (
        open_runtime(
            load_manifest(manifest), progress=EmptyTheTableWhenReading(client, table, how)
        ) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r2")

    assert stopped.value.code is ErrorCode.TARGET_LOST_COMMITTED_ROWS  # red before: exit 0
    assert stopped.value.details["problem"] == "emptied_during_run"
    exists = client.query(f"EXISTS TABLE {table}").result_rows[0][0]
    assert not int(exists) or int(client.query(f"SELECT count() FROM {table}").result_rows[0][0]) == 0
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.inspect(with_source=False) == []  # stopped before arming: nothing to resolve
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        assert db.execute("SELECT count(*) FROM orders").fetchone()[0] == 1_500
