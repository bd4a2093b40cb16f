"""A hand-made target may declare wider time types than the source gives: the same instants and days arrive.

``DateTime('UTC')`` (or any zone) stores the same epoch seconds as ``DateTime``; the zone only says how the
server shows and parses them. ``DateTime64(P[, 'zone'])`` stores ticks of 10^-P seconds, of which a whole
second is a whole number, and ``Date32`` the same day numbers as ``Date`` over a wider range. These are how
ClickHouse tables are often declared by hand, and were refused as "of a different type". Loaded here on
every path, with the run's process in a zone of its own (``Europe/Berlin``) and the columns in two others,
over UTC day edges and the hour New York repeats when DST ends; days partitioned on the wider column itself,
so the day predicates of a ``replace_partition`` re-run (deletes) and of the counts select exactly the rows
they wrote. Zoned ``DateTime`` on chDB and the 18.16 server; ``DateTime64`` and ``Date32`` on chDB (the
18.16 server has neither). Every target instant is compared with the source's, in ticks, row by row.
"""

from __future__ import annotations

import calendar
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    column_types,
    create_target,
    query_rows,
    run,
    server_connection,
    write_manifest,
)

SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: events"
#: UTC wall times: the edges of UTC days, and 05:00-06:59 UTC on 2026-11-01 (01:00-01:59 twice in New York)
FIRST = datetime(2026, 10, 31)
OFFSETS = [timedelta(seconds=s) for s in (0, 1, 3599, 5 * 3600, 5 * 3600 + 1800, 6 * 3600 + 1800, 86399)]
EPOCH = datetime(1970, 1, 1)
Row = tuple[int, str, str, str | None]  # id, day, ts, seen (NULL every third row)


@pytest.fixture(autouse=True)
def process_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The run's process in a zone that is neither UTC nor the columns' zones."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_source(path: Path) -> list[Row]:
    """``events``: a ``DATE`` column and two ``DATETIME`` ones, naive text (UTC wall times)."""
    rows: list[Row] = []
    for day in range(3):
        for offset in OFFSETS:
            moment = FIRST + timedelta(days=day) + offset
            seen = None if len(rows) % 3 == 0 else (moment + timedelta(minutes=7)).isoformat(sep=" ")
            rows.append((len(rows) + 1, moment.date().isoformat(), moment.isoformat(sep=" "), seen))
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, day DATE NOT NULL, ts DATETIME NOT NULL, seen DATETIME)"
        )
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    return rows


def epoch(text: str) -> int:
    return calendar.timegm(datetime.fromisoformat(text).timetuple())


@dataclass(frozen=True)
class TimeColumns:
    """A target's declaration of the source's time columns, and how to read them back exactly."""

    columns: str
    read: str  # the SELECT list after ``id``
    per_second: tuple[int, int]  # ticks per second of ``ts`` and ``seen``

    def expected(self, rows: list[Row]) -> list[tuple[object, ...]]:
        ts_ticks, seen_ticks = self.per_second
        return [
            (
                i,
                (datetime.fromisoformat(day) - EPOCH).days,
                epoch(ts) * ts_ticks,
                None if seen is None else epoch(seen) * seen_ticks,
            )
            for i, day, ts, seen in rows
        ]

    def stored(self, endpoint: EndpointDescriptor, table: str) -> list[tuple[object, ...]]:
        return query_rows(endpoint, f"SELECT id, {self.read} FROM {table} ORDER BY id")


ZONED = TimeColumns(
    "id Int64, day Date, ts DateTime('America/New_York'), seen Nullable(DateTime('Asia/Tokyo'))",
    "toInt32(day), toUnixTimestamp(ts), toUnixTimestamp(seen)",
    (1, 1),
)
#: ``ts`` in milliseconds, ``seen`` in microseconds, ``day`` a ``Date32``
TICKS = TimeColumns(
    "id Int64, day Date32, ts DateTime64(3, 'America/New_York'), seen Nullable(DateTime64(6))",
    "toInt32(day), toUnixTimestamp64Milli(ts), toUnixTimestamp64Micro(seen)",
    (1000, 1_000_000),
)


def moves_exactly(
    base: Path,
    target: tuple[EndpointDescriptor, str, str],
    kind: TimeColumns,
    partition_column: str,
    path: tuple[str, str],
    strategy: str,
) -> None:
    """Two runs of a day route on ``partition_column`` into a table declared with ``kind``: every instant
    and day as the source's; a ``replace_partition`` re-run replaces its newest day (lookback)."""
    endpoint, connection, table = target
    source = make_source(base / "source.sqlite")
    create_target(endpoint, table, kind.columns, f"({partition_column}, id)")
    declared = column_types(endpoint, table)
    lookback = ", lookback: 1" if strategy == "replace_partition" else ""
    export, load = path
    manifest = write_manifest(
        base,
        source=SOURCE,
        partitioning=f"{{kind: day, column: {partition_column}{lookback}}}",
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy=strategy,
    )

    assert run(manifest, "r1").rows_committed == len(source)
    assert kind.stored(endpoint, table) == kind.expected(source)
    assert column_types(endpoint, table) == declared  # the owner's types and zones kept

    if strategy == "replace_partition":
        # the newest day again: its rows deleted by their day predicate and loaded once more
        with sqlite3.connect(base / "source.sqlite") as conn:
            conn.execute("UPDATE events SET seen = NULL WHERE id = ?", (len(source),))
        source[-1] = (*source[-1][:3], None)
        assert run(manifest, "r2").rows_committed == len(OFFSETS)
    else:
        assert run(manifest, "r2").rows_committed == 0
    assert kind.stored(endpoint, table) == kind.expected(source)


def on_chdb(base: Path) -> tuple[EndpointDescriptor, str, str]:
    return chdb_at(base), CHDB_CONNECTION, "demo.events"


@pytest.mark.parametrize(
    ("path", "strategy"),
    [*((path, "incremental_append") for path in PATHS), *((p, "replace_partition") for p in PATHS[:2])],
)
def test_zoned_datetime_columns_take_the_same_instants_on_chdb(
    tmp_path: Path, path: tuple[str, str], strategy: str
) -> None:
    moves_exactly(tmp_path, on_chdb(tmp_path), ZONED, "ts", path, strategy)


@pytest.mark.parametrize(
    ("path", "strategy"),
    [*((path, "incremental_append") for path in PATHS[:3]), *((p, "replace_partition") for p in PATHS[:2])],
)
def test_zoned_datetime_columns_take_the_same_instants_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    path: tuple[str, str],
    strategy: str,
) -> None:
    connection = server_connection(clickhouse_http, monkeypatch, "zoned_clickhouse")
    table = f"zoned_{uuid.uuid4().hex[:8]}.events"
    moves_exactly(tmp_path, (clickhouse_http, connection, table), ZONED, "ts", path, strategy)


@pytest.mark.parametrize(
    ("path", "strategy", "partition_column"),
    [
        *((path, "incremental_append", "ts") for path in PATHS),
        (PATHS[0], "replace_partition", "ts"),
        (PATHS[1], "replace_partition", "ts"),
        (PATHS[0], "replace_partition", "day"),
        (PATHS[3], "incremental_append", "day"),
    ],
)
def test_datetime64_and_date32_columns_take_the_same_ticks_and_days_on_chdb(
    tmp_path: Path, path: tuple[str, str], strategy: str, partition_column: str
) -> None:
    moves_exactly(tmp_path, on_chdb(tmp_path), TICKS, partition_column, path, strategy)
