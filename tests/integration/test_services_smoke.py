"""The services the suite relies on are real: each one answers a round trip through the client we ship with."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor

pytestmark = pytest.mark.service


def test_chdb_round_trip_through_clickhouse_connect(chdb_dir: Path) -> None:
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_dir))
    try:
        client.command("CREATE DATABASE IF NOT EXISTS smoke")
        client.command(
            "CREATE TABLE smoke.t (id UInt32, name String, at DateTime64(3, 'UTC')) ENGINE = MergeTree ORDER BY id"
        )
        at = datetime.datetime(2026, 12, 1, 8, 30, 0, 123000, tzinfo=datetime.timezone.utc)
        client.insert("smoke.t", [[1, "ünï", at], [2, "b", at]], column_names=["id", "name", "at"])
        rows = client.query("SELECT id, name, at FROM smoke.t ORDER BY id").result_rows
        assert [(r[0], r[1]) for r in rows] == [(1, "ünï"), (2, "b")]
        assert rows[0][2].replace(tzinfo=datetime.timezone.utc) == at
        assert int(str(client.server_version).split(".")[0]) >= 24  # the modern engine, not 18.16
    finally:
        client.close()
    assert any(chdb_dir.iterdir()), "chDB wrote nothing to its path: it was not on disk"


def test_clickhouse_18_16_server_http_round_trip(clickhouse_http: EndpointDescriptor) -> None:
    import clickhouse_connect

    client = clickhouse_connect.get_client(
        host=clickhouse_http.host,
        port=clickhouse_http.port,
        username=clickhouse_http.user or "default",
        password=clickhouse_http.secret() or "",
        compress=False,
    )
    table = f"smoke_{uuid.uuid4().hex[:12]}"
    try:
        assert str(client.server_version).startswith("18.16")
        client.command(
            f"CREATE TABLE default.{table} (id UInt32, day Date, name String, amount Float64) "
            "ENGINE = MergeTree ORDER BY id"
        )
        data = [[1, datetime.date(2026, 11, 30), "Zoë", 12.5], [2, datetime.date(2026, 12, 1), "東京", 0.25]]
        client.insert(
            f"default.{table}",
            data,
            column_names=["id", "day", "name", "amount"],
            column_type_names=["UInt32", "Date", "String", "Float64"],
        )
        rows = client.query(
            f"SELECT id, day, name, amount FROM default.{table} WHERE id >= %(lo)s ORDER BY id",
            parameters={"lo": 1},
        ).result_rows
        assert [list(r) for r in rows] == data
    finally:
        try:
            client.command(f"DROP TABLE IF EXISTS default.{table}")
        finally:
            client.close()


def test_postgres_round_trip_through_sqlalchemy(postgres_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url)
    schema = f"smoke_{uuid.uuid4().hex[:12]}"
    try:
        with engine.begin() as conn:
            version = conn.execute(sa.text("SHOW server_version")).scalar_one()
            assert str(version).startswith("15.")
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
            conn.execute(sa.text(f"CREATE TABLE {schema}.t (id int PRIMARY KEY, payload jsonb NOT NULL)"))
            conn.execute(
                sa.text(f"INSERT INTO {schema}.t VALUES (:id, CAST(:p AS jsonb))"),
                [{"id": 1, "p": '{"status": "armed"}'}, {"id": 2, "p": '{"status": "committed"}'}],
            )
        with engine.connect() as conn:
            got = conn.execute(sa.text(f"SELECT id, payload->>'status' FROM {schema}.t ORDER BY id")).all()
        assert [tuple(r) for r in got] == [(1, "armed"), (2, "committed")]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()


def _connect_tds(endpoint: EndpointDescriptor, password: str | None = None) -> Any:
    import pymssql

    assert endpoint.host and endpoint.port and endpoint.user and endpoint.database
    return pymssql.connect(
        server=endpoint.host,
        port=str(endpoint.port),
        user=endpoint.user,
        password=password if password is not None else (endpoint.secret() or ""),
        database=endpoint.database,
        login_timeout=10,
        timeout=30,
    )


def test_pymssql_logs_in_to_tds_emulator_and_reads_orders(
    tds_emulator: EndpointDescriptor, tds_orders: list[dict[str, Any]]
) -> None:
    conn = _connect_tds(tds_emulator)
    try:
        cur = conn.cursor()
        cur.execute("SELECT id, order_date, customer, amount, updated_at FROM dbo.orders ORDER BY id")
        rows = cur.fetchall()
        cur.execute("SELECT COUNT(*) FROM dbo.orders WHERE order_date >= %s", (tds_orders[-1]["order_date"],))
        (on_or_after_last_day,) = cur.fetchone()
        cur.execute("SELECT DB_NAME()")
        (db_name,) = cur.fetchone()
    finally:
        conn.close()

    assert len(rows) == len(tds_orders) >= 40
    assert db_name == tds_emulator.database
    for got, want in zip(rows, tds_orders, strict=True):
        assert got[0] == want["id"]
        assert got[1] == datetime.datetime.combine(want["order_date"], datetime.time())  # DATE -> datetime
        assert got[2] == want["customer"]
        assert got[3] == pytest.approx(float(want["amount"]))  # DECIMAL -> float in the emulator
        assert got[4] == want["updated_at"]
    assert any(r[2] is None for r in rows), "expected a NULL customer"
    assert any(r[2] is not None and not r[2].isascii() for r in rows), "expected a non-ASCII customer"
    assert len({r[1] for r in rows}) >= 3, "orders should span several days"
    last_day = tds_orders[-1]["order_date"]
    assert on_or_after_last_day == sum(1 for r in tds_orders if r["order_date"] >= last_day)


def test_tds_emulator_refuses_a_wrong_password(tds_emulator: EndpointDescriptor) -> None:
    import pymssql

    with pytest.raises(pymssql.OperationalError):
        _connect_tds(tds_emulator, password="not-the-password")


def test_private_clickhouse_server_can_be_killed_for_fault_tests(private_clickhouse: Any) -> None:
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import OperationalError

    endpoint = private_clickhouse.endpoint
    client = clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, compress=False)
    try:
        assert client.command("SELECT 1") == 1
        private_clickhouse.kill()
        with pytest.raises(OperationalError):
            client.command("SELECT 1")
    finally:
        client.close()
