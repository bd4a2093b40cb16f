"""A limit with ``*_overflow_mode = break`` must never cut a statement short without an error.

ClickHouse ends a read early, *silently*, when a limit such as ``max_rows_to_read`` is reached under
``read_overflow_mode = 'break'`` (a settings profile or the connection's ``session_settings`` may say
so). A staged publish into a hand-made target (rows copied with ``INSERT ... SELECT``) then copied part of
the staging table and the run committed every partition, exit 0. dpone's clients set every overflow mode the
engine knows to ``throw``: the limit fails the statement instead, and the guard blocks the route.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.builders import chdb_endpoint
from tests.integration.route_rig import chdb_command, chdb_query, dpone

pytestmark = pytest.mark.service

BREAKING = {"max_rows_to_read": 10_000, "read_overflow_mode": "break"}
#: enough rows that the copy reads many blocks past the limit (a read stops at a block's end)
ROWS = 100_000


def test_every_overflow_mode_is_throw_on_a_writing_client_whatever_the_connection_says(base: Path) -> None:
    endpoint = chdb_endpoint(base / "clickhouse").model_copy(update={"session_settings": BREAKING})
    client = open_client(endpoint)
    try:
        modes = [n for n in client.server_settings if n.endswith(("_overflow_mode", "_overflow_mode_leaf"))]
        assert "read_overflow_mode" in modes and "result_overflow_mode" in modes
        assert {client.get_client_setting(n) for n in modes} == {"throw"}
    finally:
        client.close()


def test_a_staged_copy_cut_short_by_a_breaking_limit_fails_instead_of_committing_part_of_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path
    create_demo_source(base / "source.sqlite", ROWS, days=4)
    chdb_command(base, "CREATE DATABASE IF NOT EXISTS demo")
    chdb_command(  # defined otherwise than the staging table (monthly parts): the publish copies rows
        base,
        "CREATE TABLE demo.orders (id Int64, order_date Date, customer String, amount Decimal(12, 2), "
        "updated_at DateTime) ENGINE = MergeTree PARTITION BY toYYYYMM(order_date) ORDER BY (order_date, id)",
    )
    extra = {"interface": "chdb", "path": str(base / "clickhouse"), "session_settings": BREAKING}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LIMITED_CH", json.dumps({"conn_type": "dpone_clickhouse", "extra": extra})
    )
    monkeypatch.setenv("AIRFLOW_CONN_LIMITED_STATE", f"sqlite:///{base / 'state.sqlite'}")
    manifest = base / "limited.yaml"
    manifest.write_text(
        """
kind: native_transfer
name: limited
source: {type: sqlite, connection: sqlite:///source.sqlite, table: orders, partitioning: {kind: day, column: order_date}}
sink: {type: clickhouse, connection: limited_ch, table: demo.orders, strategy: incremental_append, load: staged}
checkpoints: {connection: limited_state}
""",
        encoding="utf-8",
    )

    result = dpone("run", str(manifest), "--run-id", "limited")

    held = chdb_query(base, "SELECT count() FROM demo.orders")[0][0]
    assert result.exit_code != 0, f"exit 0 with {held} of {ROWS} rows in the target"
    assert "target_load_failed" in result.output and "publish" in result.output
    blocked = dpone("run", str(manifest), "--run-id", "retry")
    assert blocked.exit_code == 3  # the guard holds the route until an operator looks: no silent loss
