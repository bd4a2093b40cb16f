"""``secure`` / ``verify`` against a real TLS server: ClickHouse 18.16 with an ``https_port`` and a
self-signed certificate made here with openssl (this module starts its own server).

* ``secure: true`` + ``verify: true`` (the default) against the self-signed certificate: the sink's
  client, the hook and the reader worker's HTTP client all refuse; the sink and the hook with
  ``connection_invalid`` (a retry meets the same certificate), the message naming the connection, never
  the certificate, its subject or a path.
* ``secure: true`` + ``verify: false``: a real ``dpone run`` lands the source rows value by value over
  HTTPS, the hook reads them, and the reader worker's client counts them.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.target_reader.http_client import ReadOnlyHttpClient
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import NON_RETRYABLE_CODES, DponeError, ErrorCode
from tests.builders import day
from tests.conftest import local_services

pytestmark = pytest.mark.service

ROWS = 120
TARGET = "default.tls_orders"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A clickhouse-server 18.16 of this module's own with HTTP and HTTPS ports (self-signed cert)."""
    if (
        os.environ.get("DPONE_TEST_AUTOSTART") == "0"
        and os.environ.get("DPONE_TEST_PRIVATE_CLICKHOUSE") != "1"
    ):
        pytest.skip("DPONE_TEST_AUTOSTART=0 forbids a private ClickHouse (DPONE_TEST_PRIVATE_CLICKHOUSE=1)")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    work = tmp_path_factory.mktemp("tls-clickhouse")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(work / "server.key"), "-out", str(work / "server.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    (work / "data").mkdir()
    (work / "users.xml").write_text(local_services._CH_USERS)
    http_port, https_port, tcp_port = local_services.free_port(), local_services.free_port(), 0
    while tcp_port in (0, http_port, https_port):
        tcp_port = local_services.free_port()
    config = local_services._CH_CONFIG.format(
        host=local_services.LOOPBACK, http_port=http_port, tcp_port=tcp_port, data=work / "data"
    ).replace(
        "</yandex>",
        f"""    <https_port>{https_port}</https_port>
    <openSSL><server>
        <certificateFile>{work / "server.crt"}</certificateFile>
        <privateKeyFile>{work / "server.key"}</privateKeyFile>
        <verificationMode>none</verificationMode>
        <loadDefaultCAFile>false</loadDefaultCAFile>
        <cacheSessions>true</cacheSessions>
        <disableProtocols>sslv2,sslv3</disableProtocols>
        <preferServerCiphers>true</preferServerCiphers>
    </server></openSSL>
</yandex>""",
    )
    (work / "config.xml").write_text(config)
    log = (work / "clickhouse.log").open("wb")
    proc = subprocess.Popen(
        [*local_services.clickhouse_command(), f"--config-file={work / 'config.xml'}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{https_port}/ping", timeout=1, context=unverified
            ):
                break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (work / "clickhouse.log").read_text()
            time.sleep(0.2)
    try:
        yield {"https_port": https_port, "http_port": http_port, "dir": work}
    finally:
        local_services.terminate(proc.pid)
        log.close()


def _endpoint(server: dict[str, Any], *, verify: bool) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="tls_target",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host="127.0.0.1",
        port=server["https_port"],
        user="default",
        database="default",
        secure=True,
        verify=verify,
    )


def _assert_safe(error: DponeError, server: dict[str, Any]) -> None:
    text = error.render() + json.dumps(error.to_json(), default=str)
    for leak in (
        "CERTIFICATE",
        "certificate verify",
        "self-signed",
        "self signed",
        "CN=",
        str(server["dir"]),
    ):
        assert leak not in text, leak


def test_verify_true_against_a_self_signed_certificate_is_connection_invalid(
    tls_server: dict[str, Any],
) -> None:
    with pytest.raises(DponeError) as caught:
        open_client(_endpoint(tls_server, verify=True))
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    assert caught.value.code in NON_RETRYABLE_CODES
    assert caught.value.details["connection"] == "tls_target"
    _assert_safe(caught.value, tls_server)


def test_verify_true_refuses_in_the_readonly_client_and_the_reader_worker_too(
    tls_server: dict[str, Any],
) -> None:
    with pytest.raises(DponeError) as caught:
        open_client(_endpoint(tls_server, verify=True), readonly=True)  # the hook's client
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    _assert_safe(caught.value, tls_server)
    worker = ReadOnlyHttpClient(_endpoint(tls_server, verify=True), time.monotonic() + 20)
    with pytest.raises(Exception) as refused:
        worker.query("SELECT 1")
    assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)
    assert "CERTIFICATE" not in str(refused.value) and str(tls_server["dir"]) not in str(refused.value)


def test_verify_false_lands_a_transfer_over_https_and_every_client_reads_it(
    tls_server: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=3)
    (tmp_path / "tls.yaml").write_text(
        f"""
kind: native_transfer
name: tls_orders
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: tls_target
  table: {TARGET}
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    conn = {
        "conn_type": "clickhouse",
        "host": "127.0.0.1",
        "port": tls_server["https_port"],
        "login": "default",
        "schema": "default",
        "extra": {"secure": True, "verify": False},
    }
    monkeypatch.setenv("AIRFLOW_CONN_TLS_TARGET", json.dumps(conn))
    run = CliRunner().invoke(cli, ["run", "--json", str(tmp_path / "tls.yaml")], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["rows_committed"] == ROWS

    import sqlite3

    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        source = sorted(
            (r[0], r[1], r[2], f"{r[3]:.2f}")
            for r in db.execute("SELECT id, order_date, customer, amount FROM orders")
        )
    client = open_client(_endpoint(tls_server, verify=False), readonly=True)
    try:
        landed = client.query(f"SELECT id, toString(order_date), customer, toString(amount) FROM {TARGET}")
        target = sorted((r[0], r[1], r[2], f"{float(r[3]):.2f}") for r in landed.result_rows)
    finally:
        client.close()
    assert target == source
    worker = ReadOnlyHttpClient(_endpoint(tls_server, verify=False), time.monotonic() + 20)
    counted = worker.query(f"SELECT count(), sum(id) FROM {TARGET}").result_rows
    assert [tuple(int(v) for v in row) for row in counted] == [(ROWS, sum(r[0] for r in source))]


def test_the_clickhouse_hook_honours_verify_against_the_tls_server(
    tls_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("airflow")
    from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook

    def conn(verify: bool) -> str:
        return json.dumps(
            {
                "conn_type": "dpone_clickhouse",
                "host": "127.0.0.1",
                "port": tls_server["https_port"],
                "login": "default",
                "schema": "default",
                "extra": {"interface": "http", "secure": True, "verify": verify},
            }
        )

    monkeypatch.setenv("AIRFLOW_CONN_TLS_HOOK", conn(False))
    assert DponeClickHouseHook(clickhouse_conn_id="tls_hook").get_first("SELECT 40 + 2") == (42,)
    monkeypatch.setenv("AIRFLOW_CONN_TLS_HOOK", conn(True))
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook(clickhouse_conn_id="tls_hook").get_first("SELECT 1")
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    _assert_safe(caught.value, tls_server)


def test_the_supervised_reader_observes_a_verify_false_server(tls_server: dict[str, Any]) -> None:
    """Through the worker process (the frame it is handed), not only its client: the frame dropped
    ``verify``, so every durable-replay observation of a self-signed server ended ``connect_failed`` and
    its capsule stayed pending."""
    from airflow_provider_dpone.contracts.target_observation import ObservationMetric, ReaderOutcomeKind

    outcome = _observe_two_rows(_endpoint(tls_server, verify=False))
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert outcome.observation.value_of(ObservationMetric.ROW_COUNT) == 2


def _observe_two_rows(endpoint: EndpointDescriptor) -> Any:
    """The supervised reader's outcome of counting ``default.tls_observed`` (two rows on one day)."""
    from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
    from airflow_provider_dpone.contracts.target_observation import (
        GenerationSelector,
        ObservationMetric,
        TargetReadRequest,
    )

    admin = open_client(_endpoint_at(endpoint, "127.0.0.1"))
    try:
        admin.command(
            "CREATE TABLE IF NOT EXISTS default.tls_observed (order_date Date, x UInt8) ENGINE = MergeTree() ORDER BY order_date"
        )
        admin.command("TRUNCATE TABLE default.tls_observed")
        admin.command("INSERT INTO default.tls_observed VALUES ('2026-01-01', 1), ('2026-01-01', 2)")
    finally:
        admin.close()
    request = TargetReadRequest(
        target_table="default.tls_observed",
        selector=GenerationSelector(partitions=(day("2026-01-01", "2026-01-02"),)),
        metrics=(ObservationMetric.ROW_COUNT,),
    )
    return SupervisedTargetReader().observe(endpoint, request, 30.0)


def _endpoint_at(endpoint: EndpointDescriptor, host: str) -> EndpointDescriptor:
    return endpoint.model_copy(update={"host": host, "verify": False})


def test_the_reader_worker_trusts_a_ca_the_environment_names(
    tls_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SSL_CERT_FILE`` reaches the worker: an internal CA trusted that way was dropped from its
    environment, so every observation of a ``verify: true`` server failed after the load had published."""
    from airflow_provider_dpone.contracts.target_observation import ObservationMetric, ReaderOutcomeKind

    monkeypatch.setenv("SSL_CERT_FILE", str(tls_server["dir"] / "server.crt"))
    outcome = _observe_two_rows(_endpoint(tls_server, verify=True))
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert outcome.observation.value_of(ObservationMetric.ROW_COUNT) == 2


def test_the_reader_worker_reaches_a_tls_server_through_the_proxys_tunnel(
    tls_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``https_proxy`` the only way to the server (its host resolves nowhere): the worker opens a ``CONNECT``
    tunnel through it, as the sink's client does."""
    from airflow_provider_dpone.contracts.target_observation import ObservationMetric, ReaderOutcomeKind
    from tests.forward_proxy import ForwardProxy

    proxy = ForwardProxy("127.0.0.1", tls_server["https_port"])
    try:
        for name in ("http_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{proxy.port}")
        endpoint = _endpoint_at(_endpoint(tls_server, verify=False), "dpone-tls-server.invalid")
        outcome = _observe_two_rows(endpoint)
    finally:
        proxy.close()
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert outcome.observation.value_of(ObservationMetric.ROW_COUNT) == 2
    assert proxy.tunnels > 0
