"""A partition at the very end of a calendar type's range stops the run before arming.

Its values fit the target's type (the value audit passed them), but the partition's exclusive upper bound
does not: chDB saturates the literal (``toDateTime(2**32)`` is the last second, so ``< upper`` missed the
rows there) and 18.16 wraps it or parses no date text in 2106 at all. A ``replace_partition`` route with a
lookback deleted nothing there and appended the rows again on every run (4 -> 5 -> 5 rows on chDB,
4 -> 8 -> 11 on 18.16, exit 0). Black-box ``dpone run`` into chDB and the 18.16 server: the edge partition is
refused (exit 2, ``partition_bound_outside_target_range``, the column named, no checkpoint), and the last
partition whose bounds fit is replaced exactly on every re-run.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.local_host import SystemClock
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.route_rig import chdb_query, checkpoint_rows, dpone
from tests.integration.server_rig import server_database

pytestmark = pytest.mark.service

Query = Callable[[str], list[tuple[Any, ...]]]


def make_source(base: Path, column_type: str, values: list[str]) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(f"CREATE TABLE ev (id INTEGER PRIMARY KEY, at {column_type} NOT NULL, v TEXT NOT NULL)")
        db.executemany(
            "INSERT INTO ev VALUES (?, ?, ?)", [(i, at, f"v{i}") for i, at in enumerate(values, 1)]
        )


def edit_source(base: Path, sql: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(sql)


def manifest(base: Path, sink: str, table: str, kind: str) -> Path:
    path = base / f"ev-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: edge
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: ev
  partitioning: {{kind: {kind}, column: at, lookback: 5}}
sink:
  type: clickhouse
  connection: {sink}
  table: {table}
  strategy: replace_partition
  order_by: [id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


def refused_before_arming(base: Path, path: Path) -> None:
    result = dpone("run", str(path), "--run-id", "edge")
    assert result.exit_code == 2, result.output
    assert "manifest_invalid" in result.output and "partition column 'at'" in result.output
    assert "Traceback" not in result.output and "unexpected" not in result.output
    assert checkpoint_rows(base) == []  # nothing armed: the route is not blocked


def replaced_exactly_on_every_run(base: Path, path: Path, read: Query, table: str, epoch: str) -> None:
    """Three runs, the values edited before each and a row deleted before the last: the target equals
    the source after every one (the edge-most partition that fits is deleted and reloaded each time)."""
    for attempt in range(3):
        edit_source(base, f"UPDATE ev SET v = v || '{attempt}'")
        if attempt == 2:
            edit_source(base, "DELETE FROM ev WHERE id = 2")
        result = dpone("run", str(path), "--run-id", f"r{attempt}")
        assert result.exit_code == 0, result.output
        with sqlite3.connect(base / "source.sqlite") as db:
            source = sorted(db.execute(f"SELECT id, CAST({epoch} AS INTEGER), v FROM ev").fetchall())
        assert sorted(read(f"SELECT id, toUInt32(at), v FROM {table}")) == source


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    # the runs happen after every day of these tests has begun: the lookback ranks only begun partitions
    # (a day ahead of the clock takes no slot), and these tests replace the edge-most one on every run
    after_them = datetime(2149, 7, 1, tzinfo=timezone.utc)
    monkeypatch.setattr(SystemClock, "now", lambda self: after_them)
    return tmp_path


@pytest.fixture
def server(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Query, str]]:
    with server_database(clickhouse_http, monkeypatch, "edge_ch", "edge_") as (client, database):
        yield (lambda sql: [tuple(r) for r in client.query(sql).result_rows]), database


DATETIME_EPOCH = "strftime('%s', at)"
DATE_DAYS = "julianday(at) - julianday('1970-01-01')"


@pytest.mark.parametrize(
    ("kind", "edge", "fits"),
    [
        ("day", "2106-02-07 06:28:15", "2106-02-06 12:00:00"),  # the day's end, 2106-02-08, is past the type
        ("month", "2106-02-01 00:00:00", "2106-01-31 23:59:59"),
    ],
)
def test_chdb_datetime_partition_at_the_types_end_is_refused_and_the_last_that_fits_replaces_exactly(
    base: Path, kind: str, edge: str, fits: str
) -> None:
    make_source(base, "DATETIME", ["2106-01-15 00:00:00", edge, "2106-01-20 08:00:00"])
    path = manifest(base, "chdb:///clickhouse", "demo.ev", kind)
    refused_before_arming(base, path)
    edit_source(base, f"UPDATE ev SET at = '{fits}' WHERE id = 2")
    replaced_exactly_on_every_run(base, path, lambda sql: chdb_query(base, sql), "demo.ev", DATETIME_EPOCH)


def test_chdb_date_partition_on_the_last_day_a_date_holds_is_refused(base: Path) -> None:
    make_source(base, "DATE", ["2149-06-01", "2149-06-06", "2149-06-03"])
    path = manifest(base, "chdb:///clickhouse", "demo.ev", "day")
    refused_before_arming(base, path)
    edit_source(base, "UPDATE ev SET at = '2149-06-05' WHERE id = 2")
    replaced_exactly_on_every_run(base, path, lambda sql: chdb_query(base, sql), "demo.ev", DATE_DAYS)


@pytest.mark.parametrize(
    ("column_type", "kind", "edge", "fits", "epoch"),
    [
        ("DATE", "day", "2106-01-15", "2105-12-30", DATE_DAYS),  # 18.16 parses no date text in 2106
        ("DATETIME", "month", "2106-02-01 00:00:00", "2105-12-31 23:59:59", DATETIME_EPOCH),
    ],
)
def test_the_18_16_server_refuses_partitions_whose_bounds_it_misreads(
    base: Path, server: tuple[Query, str], column_type: str, kind: str, edge: str, fits: str, epoch: str
) -> None:
    read, database = server
    make_source(base, column_type, [fits.replace("2105-12-3", "2105-12-2"), edge, fits])
    path = manifest(base, "edge_ch", f"{database}.ev", kind)
    refused_before_arming(base, path)
    edit_source(base, f"UPDATE ev SET at = '{fits}' WHERE id = 2")
    replaced_exactly_on_every_run(base, path, read, f"{database}.ev", epoch)


@pytest.mark.parametrize("kind", ["day", "month"])
def test_a_value_on_the_calendars_last_day_is_refused_naming_the_column(base: Path, kind: str) -> None:
    make_source(base, "DATE", ["2026-01-01", "9999-12-31"])
    path = manifest(base, "chdb:///clickhouse", "demo.ev", kind)
    refused_before_arming(base, path)
