"""A ClickHouse server reached through the HTTP proxy the environment names (``http_proxy``), the only way
to it: every client of a route goes through the proxy, the durable-replay reader worker and the read-only
client (the hook's, the on-call commands') included.

Seen before: the sink honoured ``http_proxy`` and the others went direct. With the proxy the only way in,
every durable-replay run published its rows and then blocked (``worker_failed``, ``connect_failed``), each
retry the same; with a proxy leading to another server than the connection's host, one route's writes and
its quality reads went to two servers. The proxy here maps any host to the real server, and the connection
names a host no resolver knows (``.invalid``): a client that bypasses the proxy cannot reach it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from tests.forward_proxy import ForwardProxy
from tests.integration.route_rig import TARGET_COLUMNS, dpone_from, printed, source_rows

pytestmark = pytest.mark.service

HOST = "dpone-proxied-server.invalid"
ROWS, DAYS = 300, 3
MANIFEST = """\
kind: native_transfer
name: proxied_orders
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {kind: day, column: order_date}
sink:
  type: clickhouse
  connection: proxied_clickhouse
  table: default.proxied_orders
  strategy: incremental_append
  order_by: [order_date, id]
  options:
    durable_quality_replay: true
checkpoints:
  connection: sqlite:///state.sqlite
quality:
  checks:
    - {type: row_count}
    - {type: unique, columns: [id]}
"""


LOGIN = "dpone-proxy:pr0xy@secret"


@pytest.fixture(params=[None, LOGIN], ids=["open-proxy", "proxy-login"])
def proxy(request: pytest.FixtureRequest, clickhouse_http: EndpointDescriptor) -> Iterator[ForwardProxy]:
    """The only way to the server; with a login, one it refuses (407) every request without."""
    forward = ForwardProxy("127.0.0.1", clickhouse_http.port or 8123, login=request.param)
    try:
        yield forward
    finally:
        forward.close()


def proxied(server: EndpointDescriptor) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="proxied_clickhouse",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host=HOST,
        port=server.port,
        user=server.user,
        password=server.secret(),
    )


def test_every_client_of_a_route_reaches_a_server_only_its_proxy_leads_to(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=DAYS)
    (tmp_path / "manifest.yaml").write_text(MANIFEST, encoding="utf-8")
    connection = {
        "conn_type": "clickhouse",
        "host": HOST,
        "port": clickhouse_http.port,
        "login": clickhouse_http.user,
        "password": clickhouse_http.secret() or "",
    }
    login = "" if proxy.login is None else quote(proxy.login, safe=":") + "@"
    environment = {"http_proxy": f"http://{login}127.0.0.1:{proxy.port}", "no_proxy": "", "NO_PROXY": ""}
    for name in ("HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    admin = open_client(clickhouse_http)
    try:
        admin.command("DROP TABLE IF EXISTS default.proxied_orders")
    finally:
        admin.close()

    ran = dpone_from(
        tmp_path,
        "run",
        "manifest.yaml",
        "--json",
        env={**environment, "AIRFLOW_CONN_PROXIED_CLICKHOUSE": json.dumps(connection)},
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["rows_committed"] == ROWS
    # the reader worker observed the generation through the proxy: its target evidence is complete
    assert (report["quality"]["capsule_state"], report["quality"]["verdict"]) == ("complete", "passed")

    reader = open_client(proxied(clickhouse_http), readonly=True)
    try:
        held = reader.query(f"SELECT {TARGET_COLUMNS} FROM default.proxied_orders").result_rows
    finally:
        reader.close()
    assert printed(held) == source_rows(tmp_path)
    assert proxy.requests > 0 and proxy.refused == 0  # a login in the URL is sent as Proxy-Authorization
    assert "secret" not in ran.stdout + ran.stderr
