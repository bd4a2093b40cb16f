"""Connection extras reach the real drivers: pymssql (TDS emulator), chDB and the ClickHouse 18.16 server.

The endpoints are built from ``AIRFLOW_CONN_*`` values, as a transfer builds them, so each test covers
the parser, the descriptor and the one connect path of its vendor.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import CHDB_MEMORY_SETTINGS, close_client, open_client
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.connections.resolve import resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType


def _mssql(
    tds: EndpointDescriptor, tmp_path: Path, port: int | None = None, **extra: Any
) -> EndpointDescriptor:
    value = {
        "conn_type": "dpone_mssql",
        "host": tds.host,
        "port": port or tds.port,
        "login": tds.user,
        "password": tds.secret(),
        "schema": tds.database,
        "extra": extra,
    }
    env = {"AIRFLOW_CONN_ORDERS": json.dumps(value)}
    return resolve_endpoint("orders", role="source", manifest_dir=tmp_path, env=env)


def _spec() -> SourceSpec:
    return SourceSpec(type=SourceType.MSSQL, connection="orders", table="dbo.orders")


def _describe(endpoint: EndpointDescriptor) -> None:
    source = MssqlSource(endpoint, _spec())
    try:
        source.describe()
    finally:
        source.close()


def test_tds_version_reaches_pymssql(tds_emulator: EndpointDescriptor, tmp_path: Path) -> None:
    _describe(_mssql(tds_emulator, tmp_path, tds_version="7.4"))
    # the emulator speaks TDS 7.2 and newer: an older version asked for in the extra fails the login
    with pytest.raises(DponeError) as caught:
        _describe(_mssql(tds_emulator, tmp_path, tds_version="7.1"))
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE


@pytest.fixture
def black_hole_port() -> Iterator[int]:
    """A port that accepts the TCP connection and never answers the login."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def test_login_timeout_bounds_a_connect_to_a_silent_server(
    tds_emulator: EndpointDescriptor, black_hole_port: int, tmp_path: Path
) -> None:
    endpoint = _mssql(tds_emulator, tmp_path, port=black_hole_port, login_timeout=2)
    started = time.monotonic()
    with pytest.raises(DponeError) as caught:
        _describe(endpoint)
    elapsed = time.monotonic() - started
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE
    assert 1.5 <= elapsed < 10  # the default login timeout is 30 s


def _chdb(path: Path, settings: dict[str, Any]) -> EndpointDescriptor:
    value = {
        "conn_type": "dpone_clickhouse",
        "extra": {"interface": "chdb", "path": str(path), "session_settings": settings},
    }
    return resolve_endpoint("ch", role="sink", manifest_dir=path, env={"AIRFLOW_CONN_CH": json.dumps(value)})


def test_chdb_session_settings_are_applied(chdb_dir: Path) -> None:
    client = open_client(_chdb(chdb_dir, {"max_threads": 3, "max_block_size": 4321}))
    try:
        rows = client.query("SELECT getSetting('max_threads'), getSetting('max_block_size')").result_rows
    finally:
        close_client(client)
    assert [tuple(int(v) for v in row) for row in rows] == [(3, 4321)]


def test_chdb_refuses_a_setting_name_it_does_not_know(chdb_dir: Path) -> None:
    with pytest.raises(DponeError) as caught:
        open_client(_chdb(chdb_dir, {"no_such_setting_dpone": 1}))
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    assert "session_settings" in caught.value.render()


def _server(clickhouse_http: EndpointDescriptor, tmp_path: Path, **extra: Any) -> EndpointDescriptor:
    value = {
        "conn_type": "clickhouse",
        "host": clickhouse_http.host,
        "port": clickhouse_http.port,
        "login": clickhouse_http.user,
        "password": clickhouse_http.secret(),
        "extra": extra,
    }
    return resolve_endpoint(
        "ch", role="sink", manifest_dir=tmp_path, env={"AIRFLOW_CONN_CH": json.dumps(value)}
    )


def test_server_session_settings_are_applied(clickhouse_http: EndpointDescriptor, tmp_path: Path) -> None:
    client = open_client(_server(clickhouse_http, tmp_path, session_settings={"max_threads": 3}))
    try:
        # 18.16 has no getSetting(); system.settings shows the session's value
        rows = client.query("SELECT value FROM system.settings WHERE name = 'max_threads'").result_rows
    finally:
        close_client(client)
    assert rows == [("3",)]


def test_server_refuses_a_setting_name_it_does_not_know(
    clickhouse_http: EndpointDescriptor, tmp_path: Path
) -> None:
    with pytest.raises(DponeError) as caught:
        open_client(_server(clickhouse_http, tmp_path, session_settings={"no_such_setting_dpone": 1}))
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


def test_the_read_only_chdb_client_keeps_readonly_over_the_session_settings(chdb_dir: Path) -> None:
    writer = open_client(_chdb(chdb_dir, {}))
    try:
        writer.command("CREATE DATABASE IF NOT EXISTS observed")
    finally:
        close_client(writer)
    endpoint = _chdb(chdb_dir, {"max_threads": 3, "readonly": 0}).model_copy(update={"database": "observed"})
    reader = open_client(endpoint, readonly=True)
    try:
        assert reader.query("SELECT getSetting('max_threads'), getSetting('readonly')").result_rows == [
            (3, 1)
        ]
        with pytest.raises(Exception):  # noqa: B017 - the driver's error class for a refused write
            reader.command("CREATE TABLE observed.t (a Int8) ENGINE = Memory")
    finally:
        close_client(reader)


def test_chdb_clients_bound_the_engines_insert_blocks_unless_the_connection_says_otherwise(
    chdb_dir: Path,
) -> None:
    """Issue 16 (flat memory): the staged publish squashes insert blocks of up to 1M rows by default, sorted
    in memory (+335 MB at 5M rows); every embedded client bounds them, the connection's settings still win."""
    names = sorted(CHDB_MEMORY_SETTINGS)
    query = "SELECT " + ", ".join(f"getSetting('{name}')" for name in names)
    seen = []
    for endpoint, readonly in ((_chdb(chdb_dir, {}), False), (_chdb(chdb_dir, {}), True)):
        client = open_client(endpoint, readonly=readonly)
        try:
            seen.append(tuple(int(v) for v in client.query(query).result_rows[0]))
        finally:
            close_client(client)
    assert seen == [tuple(CHDB_MEMORY_SETTINGS[name] for name in names)] * 2
    assert CHDB_MEMORY_SETTINGS["max_insert_block_size"] <= 65_536
    client = open_client(_chdb(chdb_dir, {"max_insert_block_size": 1_048_576}))
    try:
        rows = client.query("SELECT getSetting('max_insert_block_size')").result_rows
    finally:
        close_client(client)
    assert int(rows[0][0]) == 1_048_576
