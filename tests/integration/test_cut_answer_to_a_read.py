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


def _through(proxy: Http10Proxy, server: EndpointDescriptor) -> dict[str, str]:
    """The environment of a run whose ClickHouse connection goes through ``proxy``."""
    connection = {
        "conn_type": "clickhouse",
        "host": "127.0.0.1",
        "port": proxy.port,
        "login": server.user,
        "password": server.secret() or "",
    }
    return {"AIRFLOW_CONN_CUT_CLICKHOUSE": json.dumps(connection)}


def _direct_load(tmp_path: Path, table: str) -> None:
    create_demo_source(tmp_path / "source.sqlite", ROWS // 10, days=2)
    manifest = MANIFEST.format(table=table, strategy="incremental_append", lookback="")
    (tmp_path / "manifest.yaml").write_text(manifest.replace("  load: staged\n", ""), encoding="utf-8")


def test_a_settings_list_cut_at_connect_stops_the_run_retryably_saying_the_answer_was_incomplete(
    tmp_path: Path, clickhouse_http: EndpointDescriptor, proxy: Http10Proxy, database: str
) -> None:
    """Before: clickhouse-connect's start-up ``system.settings`` read, so cut, opened a client that knew no
    setting, and the run stopped on a non-retryable ``target_table_incompatible`` ("reports neither
    insert_deduplication_token nor insert_deduplicate"; helper-174, ``/tmp/helper-174/connect``)."""
    _direct_load(tmp_path, f"{database}.orders")
    env = _through(proxy, clickhouse_http)
    proxy.cut("FROM system.settings LIMIT 10000")
    cut = dpone_from(tmp_path, "run", "manifest.yaml", env=env)

    assert len(proxy.cut_statements) == 1
    assert cut.returncode == 1, cut.stderr  # target_unreachable: retryable
    assert "target_unreachable" in cut.stderr and "arrived incomplete" in cut.stderr, cut.stderr
    again = dpone_from(tmp_path, "run", "manifest.yaml", env=env)  # what an Airflow retry does
    assert again.returncode == 0, again.stderr
    assert _held(clickhouse_http, f"{database}.orders") == source_rows(tmp_path)


class _SecondPinCut(Http10Proxy):
    """Cuts the answer to a direct load's second pin read: the one after its last insert."""

    pins = 0

    def _cuts(self, statement: str) -> bool:
        if "metadata_modification_time" not in statement:
            return False
        self.pins += 1
        if self.pins == 2:
            self.cut_statements.append(statement[:200])
        return self.pins == 2


def test_a_cut_answer_to_the_after_load_pin_blocks_without_saying_the_table_was_dropped(
    tmp_path: Path, clickhouse_http: EndpointDescriptor, database: str
) -> None:
    """Before: read as "no such table": ``native_transfer_target_changed_during_load``, "it no longer exists
    (dropped or renamed away)", with every row in the table (helper-174, ``/tmp/helper-174/afterpin``)."""
    _direct_load(tmp_path, f"{database}.orders")
    proxy = _SecondPinCut(clickhouse_http.host or "127.0.0.1", clickhouse_http.port or 8123)
    try:
        ran = dpone_from(tmp_path, "run", "manifest.yaml", env=_through(proxy, clickhouse_http))
    finally:
        proxy.close()

    assert len(proxy.cut_statements) == 1, ran.stderr
    assert ran.returncode != 0  # fail closed: the partitions wait for on-call, as for any lost answer there
    assert "could not read the target table after the load" in ran.stderr, ran.stderr
    assert "target_outcome_unknown" in ran.stderr
    assert "dropped" not in ran.stderr and "no longer exists" not in ran.stderr
    assert _held(clickhouse_http, f"{database}.orders") == source_rows(tmp_path)
