"""A database of its own on the shared ClickHouse 18.16 server, for tests that run manifests against it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor


@contextmanager
def server_database(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch, connection: str, prefix: str
) -> Iterator[tuple[Client, str]]:
    """A client of the server and a fresh database name (``prefix`` + 8 hex), the server reachable by
    manifests as connection ``connection``; the database is dropped afterwards."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{connection.upper()}",
        f"clickhouse://default@{clickhouse_http.host}:{clickhouse_http.port}/default",
    )
    database = prefix + uuid.uuid4().hex[:8]
    client = open_client(clickhouse_http)
    try:
        yield client, database
    finally:
        client.command(f"DROP DATABASE IF EXISTS {database}")
        client.close()
