"""A date the target cannot hold that reaches the source after the pre-arm audit is never stored changed.

The value audit refuses, before arming, a ``Date`` past 2106-02-07 on the ClickHouse 18.16 server (it
stores the value as sent and reads it as 1970-01-01). A row written by another process between the audit
and the read met no such check: its insert went through, the partition was committed, and the target held
1970-01-01, exit 0, ``checkpoints --verify`` clean. Each insert block is now checked against the target's
range: the run fails loudly (the block is not written) and the route's guard asks on-call. Real SQLite
source, the audit run for real, the other writer's row inserted right after it; the 18.16 server.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest

pytestmark = pytest.mark.service


@pytest.fixture
def database(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(
        "AIRFLOW_CONN_AFTER_AUDIT_CH",
        f"clickhouse://default@{clickhouse_http.host}:{clickhouse_http.port}/default",
    )
    name = "after_audit_" + uuid.uuid4().hex[:8]
    yield name
    client = open_client(clickhouse_http)
    try:
        client.command(f"DROP DATABASE IF EXISTS {name}")
    finally:
        client.close()


@pytest.mark.parametrize(("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged")])
def test_a_date_past_the_servers_range_written_after_the_audit_is_refused_not_stored_as_1970(
    tmp_path: Path,
    database: str,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
) -> None:
    source = tmp_path / "source.sqlite"
    with sqlite3.connect(source) as db:
        db.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, day DATE NOT NULL, shipped DATE NOT NULL)")
        db.executemany(
            "INSERT INTO ev VALUES (?, ?, ?)",
            [(i, "2026-01-0" + str(1 + i % 3), "2026-02-01") for i in range(30)],
        )
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: after_audit
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: ev
  partitioning: {{kind: day, column: day}}
  export: {export}
sink: {{type: clickhouse, connection: after_audit_ch, table: {database}.ev, strategy: incremental_append, load: {load}, order_by: [id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    audited = SqliteSource.audit_values

    def audit_then_another_writer(self: SqliteSource, *args: Any, **kwargs: Any) -> None:
        audited(self, *args, **kwargs)
        with sqlite3.connect(source) as db:  # another process's row, after the audit passed
            db.execute("INSERT INTO ev VALUES (99, '2026-01-02', '2120-01-01')")

    monkeypatch.setattr(SqliteSource, "audit_values", audit_then_another_writer)
    monkeypatch.setenv(
        "DPONE_SQLITE_ARROW_READ", "0"
    )  # the audit reads apart from the load (no proving read)
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as failed:
        runtime.run("r1")
    assert failed.value.code is ErrorCode.TARGET_LOAD_FAILED
    assert failed.value.details["reason"] == "outside_target_range"
    assert failed.value.details["column"] == "shipped"
    client = open_client(clickhouse_http)
    try:
        exists = client.query(f"EXISTS TABLE {database}.ev").result_rows[0][0]
        stored = (
            client.query(f"SELECT count() FROM {database}.ev WHERE shipped < '2000-01-01'").result_rows
            if exists
            else [(0,)]
        )
    finally:
        client.close()
    assert stored == [(0,)]  # never stored as 1970-01-01
