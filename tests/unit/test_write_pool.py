"""Which requests the writing client's pool sends once, on a new connection (``write_pool``): anything but
a read. A statement taken for a read would be re-sent by the driver after a lost answer (rows twice)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from airflow_provider_dpone.adapters.clickhouse.write_pool import (
    WritePoolManager,
    WriteProxyManager,
    is_read,
    statement_head,
    write_pool,
)

URL = "http://127.0.0.1:8123/"


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT count() FROM db.t",
        "  select 1",
        "WITH a AS (SELECT 1) SELECT * FROM a",
        "(SELECT 1) UNION ALL (SELECT 2)",
        "DESCRIBE TABLE db.t",
        "DESC db.t",
        "SHOW CREATE TABLE db.t",
        "EXISTS TABLE db.t\n FORMAT Native",
        "EXPLAIN SELECT 1",
    ],
)
def test_a_read_keeps_the_drivers_resend_in_the_body_or_the_url(statement: str) -> None:
    assert is_read("POST", URL, statement.encode())
    assert is_read("POST", f"{URL}?{urlencode({'query': statement})}", b"")


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO db.t (a, b) FORMAT Native\n\x00\x01",
        "insert into db.t select * from db.staging",
        "ALTER TABLE db.t ATTACH PARTITION ID 'all' FROM db.staging",
        "ALTER TABLE db.t DELETE WHERE d = '2026-12-01'",
        "TRUNCATE TABLE db.t",
        "CREATE TABLE IF NOT EXISTS db.t (a Int64) ENGINE = MergeTree ORDER BY a",
        "DROP TABLE IF EXISTS db.staging",
        "OPTIMIZE TABLE db.t FINAL",
        "",
    ],
)
def test_anything_else_is_a_write_sent_once(statement: str) -> None:
    assert not is_read("POST", URL, statement.encode())
    assert not is_read("POST", f"{URL}?{urlencode({'query': statement})}", b"\x00\x01")


def test_a_streamed_body_whose_statement_cannot_be_read_is_a_write() -> None:
    assert statement_head(URL, iter([b"SELECT 1"])) == ""
    assert not is_read("POST", URL, iter([b"SELECT 1"]))


def test_a_get_is_a_read() -> None:
    assert is_read("GET", f"{URL}ping", None)


def test_the_writing_pool_goes_through_the_proxy_the_environment_names_as_the_driver_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert type(write_pool(secure=False, host="ch.example", port=8123, verify=True)) is WritePoolManager
    monkeypatch.setenv("HTTP_PROXY", "proxy.example:3128")
    through = write_pool(secure=False, host="ch.example", port=8123, verify=True)
    assert isinstance(through, WriteProxyManager) and through.proxy is not None
    assert through.proxy.host == "proxy.example"
    monkeypatch.setenv("NO_PROXY", "example")
    assert type(write_pool(secure=False, host="ch.example", port=8123, verify=True)) is WritePoolManager
