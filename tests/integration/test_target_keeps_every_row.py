"""The target keeps every row dpone inserts: no deduplication by content, no engine that drops rows.

ClickHouse discards an inserted block whose content hash matches a recent block of the table
(``Replicated*MergeTree`` by default; ``MergeTree`` with ``non_replicated_deduplication_window``). Found
trying it as a user would: ``replace_partition`` with a ``lookback`` deletes the last days and inserts
them again; unchanged days are the very blocks of the previous run, the engine dropped them and the run
reported them loaded (exit 0, the days gone). Every insert request dpone sends now carries a
deduplication token of its own (engines without tokens: deduplication off) and turns asynchronous inserts
off (``adapters/clickhouse/insert_settings.py``, ADR 0077); a server that will not let the user set those
stops the run before arming.

A target created by hand with an engine that merges rows away (Replacing, Summing, Collapsing), or keeps
nothing durable (Memory, Null, Log), is refused before arming (``target_engine.py``).

The runs compare every target value with the source, on chDB (its engine has the non-replicated window,
tokens and the current ``deduplicate_insert*`` settings); the settings sent to the ClickHouse 18.16 server
(no tokens) are checked there too.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.models import SettingDef

from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_table
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.insert_settings import plain_insert_settings
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.builders import chdb_endpoint, permit_for
from tests.integration.chdb_sink_rig import SCHEMA, chunk, expected, target_rows

COLUMNS = "id, order_date, customer, amount, updated_at"
DEDUPLICATING = "ALTER TABLE demo.orders MODIFY SETTING non_replicated_deduplication_window = 1000"


def deduplicating_connection(root: Path) -> dict[str, Any]:
    """A chDB connection whose profile asks the engine to deduplicate every insert."""
    return {
        "conn_type": "clickhouse",
        "extra": {
            "interface": "chdb",
            "path": str(root / "clickhouse"),
            "session_settings": {
                "insert_deduplicate": 1,
                "deduplicate_insert": "enable",
                "deduplicate_insert_select": "enable_even_for_bad_queries",
            },
        },
    }


def write_manifest(
    root: Path, *, load: str, export: str = "lazy_plan", connection: str = "chdb:///clickhouse"
) -> Path:
    text = (
        DEMO_MANIFEST.replace("connection: chdb:///clickhouse", f"connection: {connection}")
        .replace("strategy: incremental_append", "strategy: replace_partition")
        .replace("    column: order_date\n", "    column: order_date\n    lookback: 2\n")
        .replace("load: direct", f"load: {load}")
        .replace("export: lazy_plan", f"export: {export}")
    )
    assert "lookback: 2" in text and f"load: {load}" in text and "replace_partition" in text
    path = root / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def target_values(root: Path, *commands: str) -> list[tuple[Any, ...]]:
    """Run ``commands``, then every row of the target, as text (closes its client: one chDB per process)."""
    client = open_client(chdb_endpoint(root / "clickhouse"))
    try:
        for command in commands:
            client.command(command)
        result = client.query(
            "SELECT id, toString(order_date), customer, amount, toString(updated_at) "
            "FROM demo.orders ORDER BY id"
        )
        return [tuple(r) for r in result.result_rows]
    finally:
        client.close()


def source_values(root: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(root / "source.sqlite") as db:
        rows = db.execute(f"SELECT {COLUMNS} FROM orders ORDER BY id").fetchall()
    return [(i, d, c, Decimal(f"{a:.2f}"), u) for i, d, c, a, u in rows]


def run(manifest: Path, run_id: str) -> Any:
    with open_runtime(load_manifest(manifest)) as runtime:
        return runtime.run(run_id)


@pytest.mark.parametrize(
    ("load", "export"), [("direct", "lazy_plan"), ("staged", "lazy_plan"), ("direct", "file_artifact")]
)
def test_a_lookback_rerun_into_a_deduplicating_target_keeps_the_unchanged_days(
    tmp_path: Path, load: str, export: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red without the settings: the second lookback run's unchanged days were dropped (2 days short).

    The connection's profile asks for deduplication of every insert, ``INSERT ... SELECT`` included (the
    staged path's copy into a target defined unlike its staging table): dpone's own settings win."""
    create_demo_source(tmp_path / "source.sqlite", 2_000, days=5)
    monkeypatch.setenv("AIRFLOW_CONN_DEDUPLICATING", json.dumps(deduplicating_connection(tmp_path)))
    manifest = write_manifest(tmp_path, load=load, export=export, connection="deduplicating")
    assert run(manifest, "run-1").rows_committed == 2_000
    expected_rows = source_values(tmp_path)
    assert target_values(tmp_path, DEDUPLICATING) == expected_rows  # from now on the target deduplicates
    for attempt in ("run-2", "run-3", "run-4"):
        report = run(manifest, attempt)
        assert report.rows_committed == 800  # the two most recent days, reloaded every run
        assert target_values(tmp_path) == expected_rows, attempt


def test_identical_chunks_of_one_load_all_arrive_in_a_deduplicating_target(
    chdb_sink: ClickHouseSink,
) -> None:
    """Two byte-identical chunks (rows that repeat, as an event table's may) are two blocks, not one."""
    chdb_sink.prepare_target("demo.orders", SCHEMA, ("order_date", "id"))
    chdb_sink._client().command(DEDUPLICATING)
    same = chunk(range(1, 60_001), date(2026, 11, 30))  # a full insert block each: never merged
    permit = permit_for("demo.orders", Strategy.INCREMENTAL_APPEND)
    assert chdb_sink.load(permit, "demo.orders", SCHEMA, [same, same]) == 120_000
    assert target_rows(chdb_sink, "demo.orders") == expected([same, same])


def test_each_insert_request_carries_a_token_of_its_own_where_the_engine_has_tokens(
    chdb_sink: ClickHouseSink,
    clickhouse_http: EndpointDescriptor,
) -> None:
    """chDB (a current engine): a fresh ``insert_deduplication_token`` per request, ``async_insert = 0`` and
    no limit of partitions per block; 18.16 (no tokens, no asynchronous inserts, no such limit):
    ``insert_deduplicate = 0`` alone."""
    client = chdb_sink._client()
    first, second = plain_insert_settings(client), plain_insert_settings(client)
    assert set(first) == {"insert_deduplication_token", "async_insert", "max_partitions_per_insert_block"}
    assert first["async_insert"] == 0 and first["max_partitions_per_insert_block"] == 0
    assert first["insert_deduplication_token"].startswith("dpone-")
    assert first["insert_deduplication_token"] != second["insert_deduplication_token"]
    server = ClickHouseSink(clickhouse_http)
    try:
        assert plain_insert_settings(server._client()) == {"insert_deduplicate": 0}
    finally:
        server.close()


def test_a_request_sent_twice_is_absorbed_and_a_new_request_of_the_same_rows_is_not(
    chdb_sink: ClickHouseSink,
) -> None:
    """What the token is for: the driver re-sends a request whose connection the server closed (the
    same settings, so the same token); the engine keeps one copy. A later insert of the same rows (a new
    request, a new token) is kept."""
    chdb_sink.prepare_target("demo.orders", SCHEMA, ("order_date", "id"))
    client = chdb_sink._client()
    client.command(DEDUPLICATING)
    rows = chunk(range(1, 101), date(2026, 11, 30))
    table = arrow_table(rows.names, [c.full_type() for c in SCHEMA.columns], rows.columns)
    assert table is not None
    request = plain_insert_settings(client)
    client.insert_arrow("demo.orders", table, settings=request)
    client.insert_arrow("demo.orders", table, settings=request)  # the driver's re-send
    assert target_rows(chdb_sink, "demo.orders") == expected([rows])
    client.insert_arrow("demo.orders", table, settings=plain_insert_settings(client))  # a new request
    assert target_rows(chdb_sink, "demo.orders") == expected([rows, rows])


def test_a_user_who_may_not_set_the_insert_settings_is_refused_before_arming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile that forces asynchronous inserts (a constraint: the driver reads it as a read-only
    setting) stops the run before any checkpoint is armed: the route stays clear and runs once the
    profile allows the setting. Red without the probe: the first insert fails inside the guarded call."""
    import airflow_provider_dpone.adapters.clickhouse.sink as sink_module

    create_demo_source(tmp_path / "source.sqlite", 1_000, days=2)
    manifest = write_manifest(tmp_path, load="direct")
    real_open = sink_module.open_client  # type: ignore[attr-defined]

    def constrained(endpoint: EndpointDescriptor) -> Any:
        client = real_open(endpoint)
        client.server_settings = {
            **client.server_settings,
            "async_insert": SettingDef(name="async_insert", value="1", readonly=1),
        }
        return client

    monkeypatch.setattr(sink_module, "open_client", constrained)
    with pytest.raises(DponeError) as refused:
        run(manifest, "run-1")
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert "async_insert" in str(refused.value)
    with sqlite3.connect(tmp_path / "state.sqlite") as db:
        payloads = [p for (p,) in db.execute("SELECT payload_text FROM dpone_partition_checkpoints")]
    assert not any('"phase":"armed"' in p or '"target_outcome_unknown"' in p for p in payloads)
    monkeypatch.setattr(sink_module, "open_client", real_open)
    assert run(manifest, "run-2").rows_committed == 1_000
    assert target_values(tmp_path) == source_values(tmp_path)


ENGINES_THAT_DO_NOT_KEEP_ROWS = {
    "ReplacingMergeTree": "ReplacingMergeTree ORDER BY (order_date)",
    "SummingMergeTree": "SummingMergeTree ORDER BY (order_date)",
    "CollapsingMergeTree": "CollapsingMergeTree(sign) ORDER BY (order_date)",
    "Memory": "Memory",
    "Null": "Null",
    "TinyLog": "TinyLog",
}


@pytest.mark.parametrize("engine", sorted(ENGINES_THAT_DO_NOT_KEEP_ROWS))
def test_a_target_whose_engine_does_not_keep_the_inserted_rows_is_refused_before_arming(
    tmp_path: Path, engine: str
) -> None:
    """A hand-made target that would merge rows away, sum them or keep nothing durable: refused before
    any checkpoint is armed, naming the engine; a plain MergeTree of the same columns is accepted."""
    create_demo_source(tmp_path / "source.sqlite", 1_000, days=2)
    manifest = write_manifest(tmp_path, load="direct")
    sign = ", sign Int8 DEFAULT 1" if engine == "CollapsingMergeTree" else ""
    columns = (
        "id Int64, order_date Date, customer Nullable(String), amount Decimal(12, 2), updated_at DateTime"
        + sign
    )
    target_values(
        tmp_path,
        "CREATE DATABASE IF NOT EXISTS demo",
        f"CREATE TABLE demo.orders ({columns}) ENGINE = {ENGINES_THAT_DO_NOT_KEEP_ROWS[engine]}",
    )
    with pytest.raises(DponeError) as refused:
        run(manifest, "run-1")
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert refused.value.details["engine"] == engine
    with sqlite3.connect(tmp_path / "state.sqlite") as db:
        payloads = [p for (p,) in db.execute("SELECT payload_text FROM dpone_partition_checkpoints")]
    assert not any('"phase":"armed"' in p for p in payloads)
    assert target_values(tmp_path) == []
    target_values(
        tmp_path,
        "DROP TABLE demo.orders",
        f"CREATE TABLE demo.orders ({columns}) ENGINE = MergeTree PARTITION BY toYYYYMM(order_date) ORDER BY id",
    )
    assert run(manifest, "run-2").rows_committed == 1_000
    assert target_values(tmp_path) == source_values(tmp_path)
