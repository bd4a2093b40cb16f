"""Which requests the writing client's pool sends once, on a new connection (``write_pool``): anything but
a read. A statement taken for a read would be re-sent by the driver after a lost answer (rows twice)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlencode

import pytest
from urllib3 import HTTPConnectionPool
from urllib3.exceptions import SSLError
from urllib3.util.retry import Retry

from airflow_provider_dpone.adapters.clickhouse.write_pool import (
    AnswerLost,
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


class _RedirectsEveryPost(BaseHTTPRequestHandler):
    """Answers every POST with a 307 to the same URL (what a proxy answering after forwarding could do)."""

    posts = 0

    def do_POST(self) -> None:
        type(self).posts += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(307)
        self.send_header("Location", self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_write_answered_with_a_redirect_is_not_sent_again() -> None:
    """Red before: urllib3 followed the 307 with the same body (the driver's ``retries=1`` allows one)."""
    server = HTTPServer(("127.0.0.1", 0), _RedirectsEveryPost)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pool = WritePoolManager()
    try:
        url = f"http://127.0.0.1:{server.server_port}/?query=INSERT+INTO+t+FORMAT+Native"
        answer = pool.request("POST", url, body=b"\x00\x01", retries=Retry(total=1))
        assert answer.status == 307
        assert _RedirectsEveryPost.posts == 1
    finally:
        pool.release()
        server.shutdown()


def test_a_write_whose_answer_fails_on_a_tls_error_is_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red before: urllib3's default retry counts a TLS error reading the answer as "other", which it
    retries for any method, POST included (seen over HTTPS: rows twice, exit 0). A connection that could
    not be opened is still retried: nothing was sent."""
    sent: list[str] = []

    def tls_error_after_sending(
        self: HTTPConnectionPool, conn: object, method: str, url: str, **kw: object
    ) -> None:
        sent.append(method)
        raise SSLError("the answer could not be read")

    monkeypatch.setattr(HTTPConnectionPool, "_make_request", tls_error_after_sending)
    pool = WritePoolManager()
    try:
        with pytest.raises(AnswerLost):
            pool.request(
                "POST", "http://127.0.0.1:9/", body=b"INSERT INTO t VALUES (1)", retries=Retry(total=1)
            )
        assert sent == ["POST"]
        with pytest.raises(Exception) as read:  # a read keeps urllib3's and the driver's re-send
            pool.request("POST", "http://127.0.0.1:9/", body=b"SELECT 1", retries=Retry(total=1))
        assert not isinstance(read.value, AnswerLost)
        assert sent == ["POST", "POST", "POST"]
    finally:
        pool.release()
