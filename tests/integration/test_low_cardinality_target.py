"""A target table declared by hand with ``LowCardinality(String)`` columns takes the source's strings exactly.

``LowCardinality`` is a dictionary encoding of the same values, common in hand-made ClickHouse tables. The
route writes ``String`` values into it on every path, keeps the table as its owner declared it, keeps a
NULL apart from an empty string, and a second run moves nothing. A source column that holds NULLs is
still refused for a ``LowCardinality(String)`` column (the NULL would become ``''``), and no other inner
type is accepted. Every target value is compared with the source's, row by row, on chDB and on the 18.16
server.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest

DAYS = 4
PATHS = [
    ("lazy_plan", "direct"),
    ("lazy_plan", "staged"),
    ("file_artifact", "direct"),
    ("file_artifact", "staged"),
]
#: as the owner of the table declared it; the route writes String values into both encoded columns
TARGET_COLUMNS = (
    "id Int64, order_date Date, customer LowCardinality(String), note LowCardinality(Nullable(String))"
)
#: 18.16 creates LowCardinality columns only with this setting (current engines ignore it)
CREATE_SETTINGS = {"allow_experimental_low_cardinality_type": 1}
NOTES = [None, "", "late", "Müller & Söhne", "x" * 300, "  padded  ", "日本語"]


def make_source(path: Path) -> list[tuple[int, str, str, str | None]]:
    """``orders`` with a non-null text column and a nullable one (NULL, empty, long, non-ASCII)."""
    rows = []
    first = date(2026, 11, 1)
    for i in range(1, 241):
        day = (first + timedelta(days=i % DAYS)).isoformat()
        rows.append((i, day, f"customer-{i % 7}", NOTES[i % len(NOTES)]))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL, "
            "note TEXT)"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
    return rows


def write_manifest(base: Path, connection: str, table: str, export: str, load: str, strategy: str) -> Path:
    manifest = base / "manifest.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: low_cardinality
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
  export: {export}
  chunk_rows: 50
sink:
  type: clickhouse
  connection: {connection}
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


def create_target(endpoint: EndpointDescriptor, table: str, columns: str = TARGET_COLUMNS) -> None:
    client = open_client(endpoint)
    try:
        client.command(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
        client.command(
            f"CREATE TABLE {table} ({columns}) ENGINE = MergeTree ORDER BY (order_date, id)",
            settings=CREATE_SETTINGS if endpoint.interface is ClickHouseInterface.HTTP else None,
        )
    finally:
        client.close()


def target_rows(endpoint: EndpointDescriptor, table: str) -> list[tuple[Any, ...]]:
    client = open_client(endpoint)
    try:
        result = client.query(f"SELECT id, toString(order_date), customer, note FROM {table} ORDER BY id")
        return [tuple(row) for row in result.result_rows]
    finally:
        client.close()


def column_types(endpoint: EndpointDescriptor, table: str) -> dict[str, str]:
    database, name = table.split(".")
    client = open_client(endpoint)
    try:
        # names of the test's own making, inline: 18.16 has no query parameters
        result = client.query(
            f"SELECT name, type FROM system.columns WHERE database = '{database}' AND table = '{name}'"
        )
        return {row[0]: row[1] for row in result.result_rows}
    finally:
        client.close()


def run(manifest: Path, run_id: str):  # type: ignore[no-untyped-def]
    with open_runtime(load_manifest(manifest)) as runtime:
        return runtime.run(run_id)


def moves_exactly(
    base: Path,
    endpoint: EndpointDescriptor,
    connection: str,
    table: str,
    export: str,
    load: str,
    strategy: str,
) -> None:
    source = make_source(base / "source.sqlite")
    create_target(endpoint, table)
    declared = column_types(endpoint, table)
    manifest = write_manifest(base, connection, table, export, load, strategy)

    first = run(manifest, "r1")
    assert first.rows_committed == len(source)
    assert target_rows(endpoint, table) == source  # value for value, NULL apart from ''
    assert column_types(endpoint, table) == declared  # the owner's table, not one dpone made

    second = run(manifest, "r2" if strategy != "full_refresh" else "r1")
    assert second.rows_committed == 0
    assert target_rows(endpoint, table) == source


@pytest.fixture
def chdb_endpoint(tmp_path: Path) -> Iterator[EndpointDescriptor]:
    yield EndpointDescriptor(
        name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(tmp_path / "ch")
    )


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_every_path_moves_strings_into_low_cardinality_columns_exactly_on_chdb(
    tmp_path: Path, chdb_endpoint: EndpointDescriptor, export: str, load: str
) -> None:
    moves_exactly(tmp_path, chdb_endpoint, "chdb:///ch", "demo.orders", export, load, "incremental_append")


@pytest.mark.parametrize("strategy", ["full_refresh", "replace_partition"])
@pytest.mark.parametrize("load", ["direct", "staged"])
def test_replacing_strategies_keep_the_low_cardinality_table_and_its_values_on_chdb(
    tmp_path: Path, chdb_endpoint: EndpointDescriptor, load: str, strategy: str
) -> None:
    moves_exactly(tmp_path, chdb_endpoint, "chdb:///ch", "demo.orders", "lazy_plan", load, strategy)


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]
)
def test_low_cardinality_columns_take_the_source_strings_exactly_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
    strategy: str,
) -> None:
    password = clickhouse_http.password.get_secret_value() if clickhouse_http.password else ""
    credentials = clickhouse_http.user + (f":{password}" if password else "")
    monkeypatch.setenv(
        "AIRFLOW_CONN_LC_CLICKHOUSE",
        f"clickhouse://{credentials}@{clickhouse_http.host}:{clickhouse_http.port}/default",
    )
    table = f"lc_{uuid.uuid4().hex[:8]}.orders"
    moves_exactly(tmp_path, clickhouse_http, "lc_clickhouse", table, export, load, strategy)


@pytest.mark.parametrize(
    ("columns", "refused"),
    [
        # the nullable source column into a non-nullable encoded one: its NULLs would read ''
        ("id Int64, order_date Date, customer LowCardinality(String), note LowCardinality(String)", "note"),
        # an inner type other than String is not accepted
        (
            "id LowCardinality(Int64), order_date Date, customer String, note Nullable(String)",
            "id",
        ),
    ],
)
def test_low_cardinality_columns_that_cannot_hold_the_values_exactly_are_refused_before_writing(
    tmp_path: Path, chdb_endpoint: EndpointDescriptor, columns: str, refused: str
) -> None:
    make_source(tmp_path / "source.sqlite")
    client = open_client(chdb_endpoint)
    try:
        client.command("CREATE DATABASE IF NOT EXISTS demo")
        client.command(
            f"CREATE TABLE demo.orders ({columns}) ENGINE = MergeTree ORDER BY (order_date, id)",
            settings={"allow_suspicious_low_cardinality_types": 1},
        )
    finally:
        client.close()
    manifest = write_manifest(
        tmp_path, "chdb:///ch", "demo.orders", "lazy_plan", "direct", "incremental_append"
    )
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")
    assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert [p["column"] for p in stopped.value.details["problems"]] == [refused]
    assert target_rows(chdb_endpoint, "demo.orders") == []
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.checkpoints() == []  # refused before arming: nothing blocks the route
