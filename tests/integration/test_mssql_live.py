"""Live SQL Server, only when ``DPONE_TEST_MSSQL_URL`` is set (``mssql://user:password@host:1433/db``).

No SQL Server can run on the project's CI machines, so this module is skipped there by design (the
TDS-emulator tests cover the pymssql wire path). Point it at a disposable database: it creates and drops
one table. Passing it is evidence for that server, not a certification.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.connections import resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.manifests.loader import load_manifest

LIVE_URL = os.environ.get("DPONE_TEST_MSSQL_URL")
pytestmark = pytest.mark.skipif(
    not LIVE_URL, reason="DPONE_TEST_MSSQL_URL is not set (no live SQL Server here)"
)

TYPES_DDL = """
CREATE TABLE dbo.{table} (
  id int NOT NULL PRIMARY KEY, tiny tinyint NULL, small smallint NULL, big bigint NULL, flag bit NULL,
  price decimal(12,2) NULL, cash money NULL, ratio float NULL, r real NULL, code char(3) NULL,
  name nvarchar(50) NULL, note varchar(max) NULL, d date NOT NULL, dt datetime NULL, dt2 datetime2 NULL,
  sdt smalldatetime NULL, dto datetimeoffset NULL, t time NULL, guid uniqueidentifier NULL, blob varbinary(16) NULL
)"""


def _connect(endpoint: EndpointDescriptor) -> Any:
    """A pymssql connection of the test's own, for the table it creates and drops."""
    import pymssql

    return pymssql.connect(
        server=endpoint.host,
        port=endpoint.port or 1433,
        user=endpoint.user,
        password=endpoint.secret(),
        database=endpoint.database,
        autocommit=True,
    )


def test_live_sql_server_route_lands_every_row_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LIVE_MSSQL", LIVE_URL or "")
    endpoint = resolve_endpoint("live_mssql", role="source", manifest_dir=tmp_path)
    table = "dpone_live_" + uuid.uuid4().hex[:8]
    conn = _connect(endpoint)
    try:
        cursor = conn.cursor()
        cursor.execute(TYPES_DDL.format(table=table))
        cursor.execute(
            f"INSERT INTO dbo.{table} (id, tiny, small, big, flag, price, cash, ratio, r, code, name, note, d, dt, dt2,"
            " sdt, dto, t, guid, blob) SELECT TOP 500 ROW_NUMBER() OVER (ORDER BY (SELECT 1)), 1, 2, 3, 1, 10.25, 5.5,"
            " 0.5, 0.25, 'abc', N'名前', 'x', DATEADD(day, ROW_NUMBER() OVER (ORDER BY (SELECT 1)) % 5, '2026-01-01'),"
            # whole seconds: a fraction of a second is refused before arming (DateTime holds none)
            " '2026-01-01 10:00:00', CAST(SYSDATETIME() AS datetime2(0)), '2026-01-01 10:00:00',"
            " CAST(SYSDATETIMEOFFSET() AS datetimeoffset(0)), '12:00:00.123456', NEWID(), 0x0102"
            " FROM sys.all_objects"
        )
        (tmp_path / "manifest.yaml").write_text(
            f"""
kind: native_transfer
name: live
source: {{type: mssql, connection: live_mssql, table: dbo.{table}, partitioning: {{kind: day, column: d}}}}
sink: {{type: clickhouse, connection: chdb:///clickhouse, table: live.{table}, strategy: incremental_append}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
            encoding="utf-8",
        )
        with open_runtime(load_manifest(tmp_path / "manifest.yaml")) as runtime:
            report = runtime.run("live-1")
        assert report.rows_committed == 500
        target = EndpointDescriptor(
            name="t",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=str(tmp_path / "clickhouse"),
        )
        client = open_client(target)
        try:
            assert client.query(f"SELECT count(), uniqExact(id) FROM live.{table}").result_rows[0] == (
                500,
                500,
            )
            times = client.query(f"SELECT DISTINCT t FROM live.{table}").result_rows
            assert times == [("12:00:00.123456",)]
        finally:
            client.close()
    finally:
        conn.cursor().execute(f"DROP TABLE IF EXISTS dbo.{table}")
        conn.close()


def test_live_sql_server_time_with_a_seventh_digit_stops_before_arming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pymssql reads ``time(7)`` as microseconds (``test_mssql_time_digits.py``): the audit refuses the
    seventh digit before arming, and ``CAST(t AS varchar(16))`` in ``source.query`` moves every digit."""
    from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

    monkeypatch.setenv("AIRFLOW_CONN_LIVE_MSSQL", LIVE_URL or "")
    endpoint = resolve_endpoint("live_mssql", role="source", manifest_dir=tmp_path)
    table = "dpone_live_" + uuid.uuid4().hex[:8]
    conn = _connect(endpoint)
    try:
        cursor = conn.cursor()
        cursor.execute(
            f"CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY, d date NOT NULL, t time NULL)"
        )
        cursor.execute(
            f"INSERT INTO dbo.{table} VALUES (1, '2026-01-01', '10:00:00.1234567'), (2, '2026-01-01', NULL)"
        )

        def manifest(name: str, query: str | None) -> Path:
            source = f"table: dbo.{table}" + (f", query: {query!r}" if query else "")
            path = tmp_path / f"{name}.yaml"
            path.write_text(
                f"""
kind: native_transfer
name: {name}
source: {{type: mssql, connection: live_mssql, {source}, partitioning: {{kind: day, column: d}}}}
sink: {{type: clickhouse, connection: chdb:///clickhouse, table: live.{name}_{table}, strategy: incremental_append}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
                encoding="utf-8",
            )
            return path

        with (
            pytest.raises(DponeError) as caught,
            open_runtime(load_manifest(manifest("plain", None))) as runtime,
        ):
            runtime.run("live-time-1")
        assert caught.value.code is ErrorCode.MANIFEST_INVALID
        assert caught.value.details["reason"] == "sub_microsecond_digits"
        text = f"SELECT id, d, CAST(t AS varchar(16)) AS t FROM dbo.{table}"
        with open_runtime(load_manifest(manifest("text", text))) as runtime:
            assert runtime.run("live-time-2").rows_committed == 2
        client = open_client(
            EndpointDescriptor(
                name="t",
                kind=EndpointKind.CLICKHOUSE,
                interface=ClickHouseInterface.CHDB,
                path=str(tmp_path / "clickhouse"),
            )
        )
        try:
            rows = client.query(f"SELECT id, t FROM live.text_{table} ORDER BY id").result_rows
            assert rows == [(1, "10:00:00.1234567"), (2, None)]
        finally:
            client.close()
    finally:
        conn.cursor().execute(f"DROP TABLE IF EXISTS dbo.{table}")
        conn.close()
