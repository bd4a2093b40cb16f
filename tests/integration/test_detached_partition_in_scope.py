"""A partition detached from the target where a run writes stops the run before it arms (ADR 0093).

Seen (helper-target's hunt, on chDB and the 18.16 server): a DBA ran ``ALTER TABLE ... DETACH PARTITION`` on
a day a ``replace_partition`` route had committed; its next run (a lookback over that day) found the day
empty, loaded it again and exited 0; once the DBA attached the day back, it held every row twice, and every
later run exited 0. Now the run stops (``native_transfer_target_not_empty``, exit 3, nothing written):
from ``system.detached_parts`` on chDB; on 18.16, which has no such table, from the committed day found
empty. Attached back, the next run replaces the day and the target equals the source, value by value. A day
detached outside what the run writes does not stop it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.schema import TableSchema
from tests.builders import chdb_endpoint
from tests.integration.route_rig import TARGET_COLUMNS, dpone, printed, source_rows
from tests.integration.server_rig import server_database

pytestmark = pytest.mark.service

ROWS = 1_200
UNLISTED = "emptied_where_detached_parts_are_unlisted"


class Target:
    """The route's target, chDB in the test's folder or a database of its own on the 18.16 server."""

    def __init__(self, base: Path, endpoint: EndpointDescriptor, connection: str, table: str) -> None:
        self.base, self.endpoint, self.connection, self.table = base, endpoint, connection, table
        self.server = connection != "chdb:///clickhouse"
        #: the demo source's days, as it was made
        self.days = sorted({row[1] for row in source_rows(base)})

    def command(self, *statements: str) -> None:
        client = open_client(self.endpoint)
        try:
            for statement in statements:
                client.command(statement)
        finally:
            client.close()

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        client = open_client(self.endpoint)
        try:
            return [tuple(row) for row in client.query(sql).result_rows]
        finally:
            client.close()

    def rows(self) -> list[tuple[Any, ...]]:
        return printed(self.query(f"SELECT {TARGET_COLUMNS} FROM {self.table}"))

    def create(self, partition_by: str = "order_date") -> None:
        self.command(
            f"CREATE DATABASE IF NOT EXISTS {self.table.split('.')[0]}",
            f"CREATE TABLE {self.table} (id Int64, order_date Date, customer String, amount Decimal(12, 2), "
            f"updated_at DateTime) ENGINE = MergeTree PARTITION BY {partition_by} ORDER BY (order_date, id)",
        )

    def manifest(self, strategy: str = "replace_partition", load: str = "direct", lookback: int = 1) -> Path:
        partitioning: dict[str, Any] = {"kind": "day", "column": "order_date"}
        if strategy == "replace_partition":
            partitioning["lookback"] = lookback
        route = {
            "kind": "native_transfer",
            "name": "detached",
            "source": {
                "type": "sqlite",
                "connection": "sqlite:///source.sqlite",
                "table": "orders",
                "partitioning": partitioning,
            },
            "sink": {
                "type": "clickhouse",
                "connection": self.connection,
                "table": self.table,
                "strategy": strategy,
                "load": load,
                "order_by": ["order_date", "id"],
            },
            "checkpoints": {"connection": "sqlite:///state.sqlite"},
        }
        path = self.base / f"{strategy}-{load}.yaml"
        path.write_text(yaml.safe_dump(route, sort_keys=False), encoding="utf-8")
        return path

    def loaded(self, partition_by: str = "order_date", **route: Any) -> Path:
        """The table created and the route's first run committed; returns its manifest (``route``: its
        strategy, load and lookback)."""
        self.create(partition_by)
        manifest = self.manifest(**route)
        assert dpone("run", str(manifest)).exit_code == 0
        return manifest

    def detach(self, day: str) -> None:
        """What the DBA ran: ``day`` leaves the table for its ``detached`` folder."""
        self.command(f"ALTER TABLE {self.table} DETACH PARTITION '{day}'")

    def attach(self, day: str) -> None:
        self.command(f"ALTER TABLE {self.table} ATTACH PARTITION '{day}'")

    def attached_back_and_run_again(self, manifest: Path, day: str) -> None:
        """``day`` attached back, the next run replaces it: the target equals the source, value by value."""
        self.attach(day)
        assert dpone("run", str(manifest)).exit_code == 0
        assert self.rows() == source_rows(self.base)


def make_target(kind: str, base: Path, request: pytest.FixtureRequest, stack: ExitStack) -> Target:
    """A demo source in ``base`` and a fresh target: chDB there, or a database of its own on the server."""
    create_demo_source(base / "source.sqlite", ROWS, days=4)
    if kind == "chdb":
        return Target(base, chdb_endpoint(base / "clickhouse"), "chdb:///clickhouse", "demo.orders")
    endpoint: EndpointDescriptor = request.getfixturevalue("clickhouse_http")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    _, database = stack.enter_context(server_database(endpoint, monkeypatch, "detached_server", "detached_"))
    return Target(base, endpoint, "detached_server", f"{database}.orders")


@pytest.fixture(params=["chdb", "server"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with ExitStack() as stack:
        yield make_target(request.param, tmp_path, request, stack)


@pytest.fixture
def chdb_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with ExitStack() as stack:
        yield make_target("chdb", tmp_path, request, stack)


@pytest.fixture
def server_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    with ExitStack() as stack:
        yield make_target("server", tmp_path, request, stack)


def hold_back(base: Path, day: str) -> None:
    """The source's rows of ``day`` arrive later (``release``)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE later AS SELECT * FROM orders WHERE order_date = ?", (day,))
        db.execute("DELETE FROM orders WHERE order_date = ?", (day,))


def release(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("INSERT INTO orders SELECT * FROM later")
        db.execute("DROP TABLE later")


def stopped(result: Any) -> dict[str, Any]:
    assert result.exit_code == 3, result.output
    error: dict[str, Any] = json.loads(result.stdout)
    assert error["error"] == "native_transfer_target_not_empty", error
    details: dict[str, Any] = error["details"]
    return details


def nothing_blocked(manifest: Path) -> None:
    inspected = dpone("guard", "inspect", str(manifest))
    assert inspected.exit_code == 0 and "no blocked partitions" in inspected.output, inspected.output


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_detached_day_in_the_lookback_stops_the_run_and_attached_back_is_replaced_exactly(
    target: Target, load: str
) -> None:
    days = target.days
    hold_back(target.base, days[-1])
    manifest = target.loaded(load=load)
    target.detach(days[-2])
    release(target.base)

    details = stopped(dpone("run", str(manifest), "--json"))  # red before: exit 0, the day loaded again

    assert details["partitions"] == [f"order_date={days[-2]}"]
    if target.server:  # 18.16 lists no detached part: the committed day found empty stands in for it
        assert details["problem"] == UNLISTED and details["committed_rows"] == [300]
    else:
        assert details["problem"] == "detached_parts_in_scope"
        assert details["detached_partitions"] == [days[-2].replace("-", "")]
        assert details["reasons"] == ["detached"] and details["unmapped_parts"] == 0
    # nothing was written: the days before it, exactly; the new day not loaded; nothing to resolve
    assert target.rows() == [r for r in source_rows(target.base) if r[1] < days[-2]]
    nothing_blocked(manifest)

    target.attached_back_and_run_again(manifest, days[-2])  # red before: the day's 300 rows twice


def test_a_day_detached_outside_what_the_run_writes_does_not_stop_it(target: Target) -> None:
    manifest = target.loaded()
    target.detach(target.days[0])

    result = dpone("run", str(manifest), "--json")  # replaces the newest day only

    assert result.exit_code == 0, result.output
    target.attach(target.days[0])
    assert target.rows() == source_rows(target.base)


def test_a_full_refresh_stops_in_front_of_any_detached_day(target: Target) -> None:
    manifest = target.loaded(strategy="full_refresh")
    target.detach(target.days[0])

    details = stopped(dpone("run", str(manifest), "--json"))  # red before: exit 0, the day loaded again

    assert details["problem"] == (UNLISTED if target.server else "detached_parts_in_scope")
    if not target.server:
        assert details["detached_partitions"] == [target.days[0].replace("-", "")]
    target.attached_back_and_run_again(manifest, target.days[0])


def test_a_detached_part_of_a_key_that_does_not_map_onto_the_days_stops_every_run_that_writes(
    chdb_target: Target,
) -> None:
    manifest = chdb_target.loaded(partition_by="customer")  # a text key: its partition IDs are digests
    customer = chdb_target.query(f"SELECT any(customer) FROM {chdb_target.table}")[0][0]
    chdb_target.detach(customer)

    details = stopped(dpone("run", str(manifest), "--json"))

    assert details["problem"] == "detached_parts_in_scope"
    # one part per insert that held the customer: each may hold rows of any day
    assert details["unmapped_parts"] == details["detached_parts"] >= 1 and details["partitions"] == []
    assert len(details["detached_partitions"]) == 1


def test_a_part_clickhouse_detached_itself_stops_the_run_naming_why(chdb_target: Target) -> None:
    manifest = chdb_target.loaded()
    chdb_target.detach(chdb_target.days[-1])
    (path,) = chdb_target.query("SELECT path FROM system.detached_parts")[0]
    folder = Path(str(path).rstrip("/"))
    os.rename(folder, folder.with_name("ignored_" + folder.name))  # what a restart does to a covered part

    details = stopped(dpone("run", str(manifest), "--json"))

    assert details["reasons"] == ["ignored"] and details["partitions"] == [
        f"order_date={chdb_target.days[-1]}"
    ]


def test_on_18_16_rows_deleted_on_purpose_go_on_with_allow_nonempty_target_and_a_notice(
    server_target: Target,
) -> None:
    target = server_target
    manifest = target.loaded()
    target.command(f"ALTER TABLE {target.table} DROP PARTITION '{target.days[-1]}'")
    assert stopped(dpone("run", str(manifest), "--json"))["problem"] == UNLISTED

    result = dpone("run", str(manifest), "--json", "--allow-nonempty-target")

    assert result.exit_code == 0, result.output
    notices = json.loads(result.stdout)["notices"]
    assert any("cannot list detached parts" in n and "allow_nonempty_target" in n for n in notices)
    assert target.rows() == source_rows(target.base)


def test_a_day_detached_while_a_staged_run_reads_the_source_stops_it_before_arming(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first look is before the source is read; a staging insert takes minutes on a real table. Red
    before: a DBA's DETACH meanwhile went unseen, exit 0, and the day held its rows twice once attached."""
    days = target.days
    manifest = target.loaded(load="staged", lookback=2)
    stage = ClickHouseSink.stage

    def stage_while_a_dba_detaches(
        sink: ClickHouseSink, staging: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        rows = stage(sink, staging, schema, chunks)
        # the DBA's statement, on the run's own client (chDB admits one client of a directory at a time)
        sink._client().command(f"ALTER TABLE {target.table} DETACH PARTITION '{days[-2]}'")
        return rows

    monkeypatch.setattr(ClickHouseSink, "stage", stage_while_a_dba_detaches)
    details = stopped(dpone("run", str(manifest), "--json"))
    monkeypatch.setattr(ClickHouseSink, "stage", stage)

    assert details["partitions"] == [f"order_date={days[-2]}"]
    assert details["problem"] == (UNLISTED if target.server else "detached_parts_in_scope")
    assert target.rows() == [r for r in source_rows(target.base) if r[1] != days[-2]]  # nothing published
    nothing_blocked(manifest)
    target.attached_back_and_run_again(manifest, days[-2])


def test_on_18_16_a_detached_day_whose_latest_attempt_failed_before_the_target_stops_the_run(
    server_target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ordinary failure (the source read broke while staging) leaves a record over the day's commit.
    Red before: the fallback took the day for uncommitted, reloaded it after a DETACH, exit 0, twice."""
    target = server_target
    manifest = target.loaded(load="staged", lookback=2)

    def source_drops(*_: object) -> int:
        raise ConnectionResetError("the source connection dropped")

    stage = ClickHouseSink.stage
    monkeypatch.setattr(ClickHouseSink, "stage", source_drops)
    assert dpone("run", str(manifest)).exit_code != 0
    monkeypatch.setattr(ClickHouseSink, "stage", stage)
    target.detach(target.days[-2])

    details = stopped(dpone("run", str(manifest), "--json"))

    assert details["problem"] == UNLISTED and details["partitions"] == [f"order_date={target.days[-2]}"]
    target.attached_back_and_run_again(manifest, target.days[-2])


def test_on_18_16_a_full_refresh_loads_a_day_an_earlier_refresh_committed_back_in_the_source(
    server_target: Target,
) -> None:
    """The day left the source, a refresh truncated the table without it, and it came back. Red before:
    its commit by the refresh before was taken for a detach, and every run stopped; nothing was detached."""
    target = server_target
    manifest = target.loaded(strategy="full_refresh")
    hold_back(target.base, target.days[0])
    assert dpone("run", str(manifest)).exit_code == 0
    release(target.base)

    result = dpone("run", str(manifest), "--json")

    assert result.exit_code == 0, result.output
    assert target.rows() == source_rows(target.base)
