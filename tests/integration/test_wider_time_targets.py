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
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    chdb_at,
    column_types,
    create_target,
    query_rows,
    run,
    server_connection,
    write_manifest,
)

PATHS = [
    ("lazy_plan", "direct"),
    ("lazy_plan", "staged"),
    ("file_artifact", "direct"),
    ("file_artifact", "staged"),
]
COLUMNS = "id Int64, ts DateTime('America/New_York'), seen Nullable(DateTime('Asia/Tokyo'))"
KEY = "(ts, id)"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: events"
#: UTC wall times: the edges of UTC days, and 05:00-06:59 UTC on 2026-11-01 (01:00-01:59 twice in New York)
FIRST = datetime(2026, 10, 31)
OFFSETS = [timedelta(seconds=s) for s in (0, 1, 3599, 5 * 3600, 5 * 3600 + 1800, 6 * 3600 + 1800, 86399)]


@pytest.fixture(autouse=True)
def process_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The run's process in a zone that is neither UTC nor the columns' zones."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_source(path: Path) -> list[tuple[int, str, str | None]]:
    rows: list[tuple[int, str, str | None]] = []
    for day in range(3):
        for offset in OFFSETS:
            moment = FIRST + timedelta(days=day) + offset
            seen = None if len(rows) % 3 == 0 else (moment + timedelta(minutes=7)).isoformat(sep=" ")
            rows.append((len(rows) + 1, moment.isoformat(sep=" "), seen))
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, seen DATETIME)")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
    return rows


def epochs(rows: list[tuple[int, str, str | None]]) -> list[tuple[int, int, int | None]]:
    """The source's instants: its naive text is a UTC wall time."""

    def epoch(text: str) -> int:
        return calendar.timegm(datetime.fromisoformat(text).timetuple())

    return [(i, epoch(ts), None if seen is None else epoch(seen)) for i, ts, seen in rows]


def target_epochs(endpoint: EndpointDescriptor, table: str) -> list[tuple[object, ...]]:
    return query_rows(
        endpoint, f"SELECT id, toUnixTimestamp(ts), toUnixTimestamp(seen) FROM {table} ORDER BY id"
    )


def moves_exact_instants(
    base: Path,
    endpoint: EndpointDescriptor,
    connection: str,
    table: str,
    export: str,
    load: str,
    strategy: str,
) -> None:
    source = make_source(base / "source.sqlite")
    create_target(endpoint, table, COLUMNS, KEY)
    declared = column_types(endpoint, table)
    lookback = ", lookback: 1" if strategy == "replace_partition" else ""
    manifest = write_manifest(
        base,
        source=SOURCE,
        partitioning=f"{{kind: day, column: ts{lookback}}}",
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy=strategy,
    )

    assert run(manifest, "r1").rows_committed == len(source)
    assert target_epochs(endpoint, table) == epochs(source)
    assert column_types(endpoint, table) == declared  # the owner's zones kept

    if strategy == "replace_partition":
        # the newest day again (lookback): its rows deleted by their day predicate and loaded once more
        with sqlite3.connect(base / "source.sqlite") as conn:
            conn.execute("UPDATE events SET seen = NULL WHERE id = ?", (len(source),))
        source[-1] = (source[-1][0], source[-1][1], None)
        second = run(manifest, "r2")
        assert second.rows_committed == len(OFFSETS)
    else:
        assert run(manifest, "r2").rows_committed == 0
    assert target_epochs(endpoint, table) == epochs(source)


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_every_path_loads_the_same_instants_into_zoned_datetime_columns_on_chdb(
    tmp_path: Path, export: str, load: str
) -> None:
    moves_exact_instants(
        tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.events", export, load, "incremental_append"
    )


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_replace_partition_rerun_deletes_and_reloads_its_day_on_a_zoned_column_on_chdb(
    tmp_path: Path, load: str
) -> None:
    moves_exact_instants(
        tmp_path, chdb_at(tmp_path), CHDB_CONNECTION, "demo.events", "lazy_plan", load, "replace_partition"
    )


@pytest.mark.parametrize(
    ("export", "load", "strategy"),
    [
        ("lazy_plan", "direct", "incremental_append"),
        ("lazy_plan", "staged", "incremental_append"),
        ("file_artifact", "direct", "incremental_append"),
        ("lazy_plan", "direct", "replace_partition"),
        ("lazy_plan", "staged", "replace_partition"),
    ],
)
def test_zoned_datetime_columns_take_the_same_instants_on_the_http_server(
    tmp_path: Path,
    clickhouse_http: EndpointDescriptor,
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
    strategy: str,
) -> None:
    connection = server_connection(clickhouse_http, monkeypatch, "zoned_clickhouse")
    table = f"zoned_{uuid.uuid4().hex[:8]}.events"
    moves_exact_instants(tmp_path, clickhouse_http, connection, table, export, load, strategy)


#: ticks of each column: ``ts`` in milliseconds, ``seen`` in microseconds; ``day`` as days since the epoch
COLUMNS_64 = "id Int64, day Date32, ts DateTime64(3, 'America/New_York'), seen Nullable(DateTime64(6))"


def make_dated_source(path: Path) -> list[tuple[int, str, str, str | None]]:
    """``events`` with a ``DATE`` column beside the two datetimes of :func:`make_source`."""
    rows = [(i, ts[:10], ts, seen) for i, ts, seen in make_source(path)]
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE events ADD COLUMN day DATE")
        conn.executemany("UPDATE events SET day = ? WHERE id = ?", [(day, i) for i, day, _, _ in rows])
    return rows


def ticks(rows: list[tuple[int, str, str, str | None]]) -> list[tuple[int, int, int, int | None]]:
    instants = epochs([(i, ts, seen) for i, _, ts, seen in rows])
    days = [(datetime.fromisoformat(day) - datetime(1970, 1, 1)).days for _, day, _, _ in rows]
    return [
        (i, day, ts * 1000, None if seen is None else seen * 1_000_000)
        for (i, ts, seen), day in zip(instants, days, strict=True)
    ]


def target_ticks(endpoint: EndpointDescriptor, table: str) -> list[tuple[object, ...]]:
    return query_rows(
        endpoint,
        f"SELECT id, toInt32(day), toUnixTimestamp64Milli(ts), toUnixTimestamp64Micro(seen) FROM {table} ORDER BY id",
    )


@pytest.mark.parametrize(
    ("export", "load", "strategy", "column"),
    [
        *((export, load, "incremental_append", "ts") for export, load in PATHS),
        ("lazy_plan", "direct", "replace_partition", "ts"),
        ("lazy_plan", "staged", "replace_partition", "ts"),
        ("lazy_plan", "direct", "replace_partition", "day"),
        ("file_artifact", "staged", "incremental_append", "day"),
    ],
)
def test_datetime64_and_date32_columns_take_the_same_instants_and_days_on_chdb(
    tmp_path: Path, export: str, load: str, strategy: str, column: str
) -> None:
    endpoint, table = chdb_at(tmp_path), "demo.events"
    source = make_dated_source(tmp_path / "source.sqlite")
    create_target(endpoint, table, COLUMNS_64, f"({column}, id)")
    declared = column_types(endpoint, table)
    lookback = ", lookback: 1" if strategy == "replace_partition" else ""
    manifest = write_manifest(
        tmp_path,
        source=SOURCE,
        partitioning=f"{{kind: day, column: {column}{lookback}}}",
        connection=CHDB_CONNECTION,
        table=table,
        export=export,
        load=load,
        strategy=strategy,
    )

    assert run(manifest, "r1").rows_committed == len(source)
    assert target_ticks(endpoint, table) == ticks(source)
    assert column_types(endpoint, table) == declared

    if strategy == "replace_partition":
        with sqlite3.connect(tmp_path / "source.sqlite") as conn:
            conn.execute("UPDATE events SET seen = NULL WHERE id = ?", (len(source),))
        source[-1] = (*source[-1][:3], None)
        assert run(manifest, "r2").rows_committed == len(OFFSETS)
    else:
        assert run(manifest, "r2").rows_committed == 0
    assert target_ticks(endpoint, table) == ticks(source)
