"""DateTime day partitions, loaded and re-run by processes in different time zones, never move or double.

Black-box: ``dpone run`` as a subprocess with ``TZ`` set (a DST-gap wall time in the data), a SQLite source
partitioned by day on a DATETIME column, chDB target. The first run is in New York, the re-run of every
partition in Kathmandu (+05:45) finds every partition committed and the target intact,
and every value is the source's wall time, read back as UTC epoch seconds.
"""

from __future__ import annotations

import calendar
import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from tests.builders import chdb_endpoint

STAMPS = [
    "2026-03-08 02:30:00",  # does not exist in New York (DST gap)
    "2026-03-08 23:59:59",
    "2026-03-08 00:00:00",
    "2026-03-09 00:00:01",
    "2026-11-01 01:30:00",  # exists twice in New York (DST fold)
    "2026-11-01 12:00:00",
]


def _write(base: Path, strategy: str) -> Path:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, at DATETIME NOT NULL)")
        db.executemany("INSERT INTO events VALUES (?, ?)", list(enumerate(STAMPS, start=1)))
    return _write_manifest(base, strategy)


def _write_manifest(base: Path, strategy: str) -> Path:
    manifest = base / "events.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: events
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: events
  partitioning: {{kind: day, column: at}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.events
  strategy: {strategy}
  order_by: [at, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return manifest


def _run(manifest: Path, zone: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": zone}
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_dpone.cli.main", "run", str(manifest), *extra],
        cwd=manifest.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _client(base: Path) -> Client:
    return open_client(chdb_endpoint(base / "clickhouse"))


def _target(base: Path) -> list[tuple[int, int]]:
    client = _client(base)
    try:
        return sorted(client.query("SELECT id, toUnixTimestamp(at) FROM demo.events").result_rows)
    finally:
        client.close()


def _source_epochs() -> list[tuple[int, int]]:
    return [
        (i, calendar.timegm(datetime.fromisoformat(s).timetuple())) for i, s in enumerate(STAMPS, start=1)
    ]


@pytest.mark.parametrize("strategy", ["replace_partition", "incremental_append"])
def test_datetime_day_partitions_arrive_as_utc_wall_times_whatever_the_worker_zone(
    tmp_path: Path, strategy: str
) -> None:
    manifest = _write(tmp_path, strategy)
    first = _run(manifest, "America/New_York")
    assert first.returncode == 0, first.stdout + first.stderr
    assert _target(tmp_path) == _source_epochs()

    # a re-run from a worker in another zone finds every partition committed and the target intact
    again = _run(manifest, "Asia/Kathmandu", "--run-id", "second")
    assert again.returncode == 0, again.stdout + again.stderr
    assert _target(tmp_path) == _source_epochs()


def _dpone(base: Path, zone: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_dpone.cli.main", *args],
        cwd=base,
        env={**os.environ, "TZ": zone},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_target_partitioned_by_a_calendar_of_its_datetime_is_counted_alike_from_every_zone(
    tmp_path: Path,
) -> None:
    """chDB took its zone from the process's ``TZ``: a part's ``toYYYYMMDD(at)`` was computed in the zone
    that inserted it, and a count pruned parts in the zone that counted. Red before: loaded in Kolkata, the
    store lost, ``guard rebaseline --adopt-target`` in New York found none of 2026-11-01's rows (23:00 UTC is
    the next day in Kolkata), left the day to run, and the run appended it again: 4 rows for 3, exit 0."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, at DATETIME NOT NULL)")
        db.executemany(
            "INSERT INTO events VALUES (?, ?)",
            [(1, "2026-10-31 12:00:00"), (2, "2026-11-01 23:00:00"), (3, "2026-11-02 12:00:00")],
        )
    manifest = _write_manifest(tmp_path, "incremental_append")
    client = _client(tmp_path)
    try:
        client.command("CREATE DATABASE demo")
        client.command(
            "CREATE TABLE demo.events (id Int64, at DateTime) ENGINE = MergeTree "
            "PARTITION BY toYYYYMMDD(at) ORDER BY id"
        )
    finally:
        client.close()
    loaded = _dpone(tmp_path, "Asia/Kolkata", "run", str(manifest))
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    for state in tmp_path.glob("state.sqlite*"):
        state.unlink()  # the checkpoint store is lost; the runbook: a new store, then adopt the target

    adopted = _dpone(
        tmp_path,
        "America/New_York",
        "guard",
        "rebaseline",
        str(manifest),
        "--adopt-target",
        "--reason",
        "lost",
    )
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    again = _dpone(tmp_path, "America/New_York", "run", str(manifest))

    assert again.returncode == 0, again.stdout + again.stderr
    assert _target(tmp_path) == [
        (1, calendar.timegm(datetime(2026, 10, 31, 12).timetuple())),
        (2, calendar.timegm(datetime(2026, 11, 1, 23).timetuple())),
        (3, calendar.timegm(datetime(2026, 11, 2, 12).timetuple())),
    ]
