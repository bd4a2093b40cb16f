"""Targets declared by hand before the first run: create one, run a route into it, read it back.

For the tests of which hand-made column types a route loads exactly (``LowCardinality``, wider integers and
decimals, columns without ``Nullable``): every test compares the target's rows with the source's and checks
the table kept its owner's types; a refusal leaves the table empty and the route without a checkpoint. On the 18.16 server a ``LowCardinality`` column is created only with
``allow_experimental_low_cardinality_type``; current engines ignore the setting.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.manifests.loader import load_manifest

SERVER_CREATE_SETTINGS = {"allow_experimental_low_cardinality_type": 1}
CHDB_CONNECTION = "chdb:///ch"
#: every (export, load) path, as the suites parametrize them
PATHS = [
    ("lazy_plan", "direct"),
    ("lazy_plan", "staged"),
    ("file_artifact", "direct"),
    ("file_artifact", "staged"),
]


def chdb_at(base: Path) -> EndpointDescriptor:
    """The embedded target that ``CHDB_CONNECTION`` names for a manifest in ``base``."""
    return EndpointDescriptor(
        name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(base / "ch")
    )


def server_connection(endpoint: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch, name: str) -> str:
    """An ``AIRFLOW_CONN_<NAME>`` for the test server (credentials stay out of the manifest)."""
    password = endpoint.password.get_secret_value() if endpoint.password else ""
    credentials = endpoint.user + (f":{password}" if password else "")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{name.upper()}", f"clickhouse://{credentials}@{endpoint.host}:{endpoint.port}/default"
    )
    return name


def target_for(
    target: str, base: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, table: str
) -> tuple[EndpointDescriptor, str, str]:
    """(endpoint, manifest connection, table) of a fresh target: ``chdb`` in ``base`` (``demo.<table>``), or
    ``server``, the 18.16 test server (a database of its own)."""
    if target == "chdb":
        return chdb_at(base), CHDB_CONNECTION, f"demo.{table}"
    endpoint: EndpointDescriptor = request.getfixturevalue("clickhouse_http")
    connection = server_connection(endpoint, monkeypatch, "hand_made_target")
    return endpoint, connection, f"hm_{uuid.uuid4().hex[:8]}.{table}"


@pytest.fixture
def tds_orders_source(tds_emulator: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> str:
    """The manifest's source lines for the TDS emulator's ``dbo.orders`` (credentials in the environment)."""
    password = tds_emulator.password.get_secret_value() if tds_emulator.password else ""
    monkeypatch.setenv(
        "AIRFLOW_CONN_TDS_SOURCE",
        f"mssql://{tds_emulator.user}:{password}@{tds_emulator.host}:{tds_emulator.port}/{tds_emulator.database}",
    )
    return "  type: mssql\n  connection: tds_source\n  table: dbo.orders"


def served(tds_orders: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The emulator's rows as (id, day, customer, amount), sorted."""
    return sorted((r["id"], r["order_date"].isoformat(), r["customer"], r["amount"]) for r in tds_orders)


def tds_rows_in(endpoint: EndpointDescriptor, table: str) -> list[tuple[Any, ...]]:
    """A target's ``dbo.orders`` rows in the form of :func:`served` (amount as an exact ``Decimal``)."""
    rows = query_rows(
        endpoint, f"SELECT id, toString(toDate(order_date)), customer, toString(amount) FROM {table}"
    )
    return sorted((r[0], r[1], r[2], Decimal(r[3])) for r in rows)


def create_target(endpoint: EndpointDescriptor, table: str, columns: str, order_by: str) -> None:
    client = open_client(endpoint)
    try:
        client.command(f"CREATE DATABASE IF NOT EXISTS {table.split('.')[0]}")
        client.command(
            f"CREATE TABLE {table} ({columns}) ENGINE = MergeTree ORDER BY {order_by}",
            settings=SERVER_CREATE_SETTINGS if endpoint.interface is ClickHouseInterface.HTTP else None,
        )
    finally:
        client.close()


def query_rows(endpoint: EndpointDescriptor, sql: str) -> list[tuple[Any, ...]]:
    client = open_client(endpoint)
    try:
        return [tuple(row) for row in client.query(sql).result_rows]
    finally:
        client.close()


def column_types(endpoint: EndpointDescriptor, table: str) -> dict[str, str]:
    """The table's columns as ClickHouse declares them (names inline: 18.16 has no query parameters)."""
    database, name = table.split(".")
    rows = query_rows(
        endpoint, f"SELECT name, type FROM system.columns WHERE database = '{database}' AND table = '{name}'"
    )
    return {str(row[0]): str(row[1]) for row in rows}


def write_manifest(
    base: Path,
    *,
    source: str,
    partitioning: str,
    connection: str,
    table: str,
    export: str = "lazy_plan",
    load: str = "direct",
    strategy: str = "incremental_append",
) -> Path:
    """``source``: the manifest's ``source:`` lines after ``type`` (connection and table)."""
    manifest = base / "manifest.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: hand_made_target
source:
{source}
  partitioning: {partitioning}
  export: {export}
  chunk_rows: 50
sink:
  type: clickhouse
  connection: {connection}
  table: {table}
  strategy: {strategy}
  load: {load}
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return manifest


def run(manifest: Path, run_id: str) -> RunReport:
    with open_runtime(load_manifest(manifest)) as runtime:
        return runtime.run(run_id)


def checkpoints(manifest: Path) -> list[Any]:
    with open_runtime(load_manifest(manifest)) as runtime:
        return list(runtime.checkpoints())


def refused_before_arming(manifest: Path, endpoint: EndpointDescriptor, table: str) -> DponeError:
    """Run ``manifest`` and return its ``target_table_incompatible``: nothing in the table, no checkpoint
    (the route is not blocked)."""
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")
    assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert query_rows(endpoint, f"SELECT count() FROM {table}") == [(0,)]
    assert checkpoints(manifest) == []
    return stopped.value
