"""A staged load whose part listing was cut to nothing by an HTTP/1.0 proxy still publishes every row once.

Through a proxy that speaks HTTP/1.0 to the 18.16 server (nginx's default) an answer cut right after its
headers arrives as a whole, empty body, which clickhouse-connect reads as no rows. The staged publish's
``system.parts`` listing of its staging table, so cut, attached nothing: the staging table was dropped,
the run reported its rows published (exit 0, checkpoints committed) and the target held none of them
(``replace_partition``: the days deleted, nothing attached; helper-167, ``/tmp/helper-167/attach``). The
listing's rows must now add up to the staging table's count, else the rows are copied (ADR 0094, addendum).
Either the target then holds exactly the source's rows, or the run stops: never exit 0 with rows missing.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.http10_proxy import Http10Proxy
from tests.integration.route_rig import TARGET_COLUMNS, add_a_new_day, dpone_from, printed, source_rows

pytestmark = pytest.mark.service

ROWS, DAYS = 600, 3
#: a replacing run moves the last two committed days again (and the new one)
LOOKBACK = {"replace_partition": ", lookback: 2"}
MANIFEST = """\
kind: native_transfer
name: cut_listing
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date{lookback}}}
sink:
  type: clickhouse
  connection: cut_clickhouse
  table: {table}
  strategy: {strategy}
  load: staged
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
"""


@pytest.fixture
def proxy(clickhouse_http: EndpointDescriptor) -> Iterator[Http10Proxy]:
    nginx_like = Http10Proxy(clickhouse_http.host or "127.0.0.1", clickhouse_http.port or 8123)
    try:
        yield nginx_like
    finally:
        nginx_like.close()


@pytest.fixture
def database(clickhouse_http: EndpointDescriptor) -> Iterator[str]:
    name = f"dpone_cut_{uuid.uuid4().hex[:10]}"
    yield name
    admin = open_client(clickhouse_http)
    try:
        admin.command(f"DROP DATABASE IF EXISTS {name}")
    finally:
        admin.close()


def _held(server: EndpointDescriptor, table: str) -> list[tuple[object, ...]]:
    reader = open_client(server, readonly=True)
    try:
        return printed(reader.query(f"SELECT {TARGET_COLUMNS} FROM {table}").result_rows)
    finally:
        reader.close()


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_a_cut_answer_to_the_staged_part_listing_never_ends_exit_0_with_rows_missing(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    proxy: Http10Proxy,
    database: str,
    strategy: str,
) -> None:
    table = f"{database}.orders"
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=DAYS)
    (tmp_path / "manifest.yaml").write_text(
        MANIFEST.format(table=table, strategy=strategy, lookback=LOOKBACK.get(strategy, "")), encoding="utf-8"
    )
    connection = {
        "conn_type": "clickhouse",
        "host": "127.0.0.1",
        "port": proxy.port,
        "login": clickhouse_http.user,
        "password": clickhouse_http.secret() or "",
    }
    env = {"AIRFLOW_CONN_CUT_CLICKHOUSE": json.dumps(connection)}
    if strategy == "replace_partition":  # a clean run first; then the last day changes and a day arrives
        first = dpone_from(tmp_path, "run", "manifest.yaml", env=env)
        assert first.returncode == 0, first.stderr
        with sqlite3.connect(tmp_path / "source.sqlite") as db:
            db.execute(
                "UPDATE orders SET amount = amount + 1 WHERE order_date = (SELECT max(order_date) FROM orders)"
            )
        add_a_new_day(tmp_path)

    proxy.cut("FROM system.parts", "partition_id")
    ran = dpone_from(tmp_path, "run", "manifest.yaml", env=env)

    assert len(proxy.cut_statements) == 1, ran.stderr
    held = _held(clickhouse_http, table)
    # the invariant: never exit 0 with the target other than the source (rows missing, or held twice)
    assert ran.returncode != 0 or held == source_rows(tmp_path), f"exit 0 with {len(held)} rows in the target"
    # and what the publish does now: the listing does not add up, so it copies the staged rows
    assert ran.returncode == 0, ran.stderr
