"""Live SQL Server, only when ``DPONE_TEST_MSSQL_URL`` is set (``mssql://user:password@host:1433/db``).

No SQL Server can run on the project's CI machines, so this module is skipped there by design (the
TDS-emulator tests cover the pymssql wire path). Point it at a disposable database: it creates and drops
one table. Passing it is evidence for that server, not a certification.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

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


def test_live_sql_server_route_lands_every_row_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pymssql

    monkeypatch.setenv("AIRFLOW_CONN_LIVE_MSSQL", LIVE_URL or "")
    endpoint = resolve_endpoint("live_mssql", role="source", manifest_dir=tmp_path)
    table = "dpone_live_" + uuid.uuid4().hex[:8]
    conn = pymssql.connect(
        server=endpoint.host,
        port=endpoint.port or 1433,
        user=endpoint.user,
        password=endpoint.secret(),
        database=endpoint.database,
        autocommit=True,
    )
    try:
        cursor = conn.cursor()
        cursor.execute(TYPES_DDL.format(table=table))
        cursor.execute(
            f"INSERT INTO dbo.{table} (id, tiny, small, big, flag, price, cash, ratio, r, code, name, note, d, dt, dt2,"
            " sdt, dto, t, guid, blob) SELECT TOP 500 ROW_NUMBER() OVER (ORDER BY (SELECT 1)), 1, 2, 3, 1, 10.25, 5.5,"
            " 0.5, 0.25, 'abc', N'名前', 'x', DATEADD(day, ROW_NUMBER() OVER (ORDER BY (SELECT 1)) % 5, '2026-01-01'),"
            " GETDATE(), SYSDATETIME(), GETDATE(), SYSDATETIMEOFFSET(), '12:00:00', NEWID(), 0x0102"
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
        finally:
            client.close()
    finally:
        conn.cursor().execute(f"DROP TABLE IF EXISTS dbo.{table}")
        conn.close()
