"""Day and month partitions on a DateTime column, end to end on the ClickHouse 18.16 server (issue 11, point 5).

18.16 compares a DateTime column with a Date numerically, so bounds written as ``toDate('...')`` matched
nothing: a ``replace_partition`` re-run deleted nothing and doubled the rows, and ``dpone guard inspect``
counted 0 rows in partitions that held them. Here every strategy, on both load paths, runs three times
(with source changes in between that each strategy must pick up), and after each run the target equals
the source value for value (``toUnixTimestamp`` against the source's UTC wall time). Then a crash is
simulated (every latest checkpoint armed) and ``dpone guard inspect`` must report, for each partition,
the rows the target really holds within its bounds, equal to the source's own count.
"""

from __future__ import annotations

import calendar
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.checkpoint_sql.store import SqlCheckpointStore
from airflow_provider_dpone.adapters.local_host import SystemClock
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import append_armed, dpone
from tests.integration.server_rig import server_database

pytestmark = pytest.mark.service


@pytest.fixture(autouse=True)
def after_every_day_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs happen after every day these tests load has begun (2028): the lookback ranks only begun
    partitions, and a day ahead of the clock takes no slot (it runs again once it has begun)."""
    monkeypatch.setattr(SystemClock, "now", lambda self: datetime(2029, 1, 1, tzinfo=timezone.utc))


#: Edges of days and months, a leap day, the first and last second of a day.
STAMPS = [
    "2028-01-31 23:59:59",
    "2028-02-01 00:00:00",
    "2028-02-28 12:00:00",
    "2028-02-29 00:00:00",
    "2028-02-29 23:59:59",
    "2028-03-01 00:00:00",
    "2028-03-01 00:00:01",
    "2028-03-15 08:30:00",
    "2028-03-31 23:59:59",
]
LATE = ("2028-03-31 12:00:00", "2028-02-01 00:00:00")  # rows that arrive after the first run


def make_source(base: Path) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, at DATETIME NOT NULL, amount NUMERIC(10,2), note TEXT)"
        )
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?)",
            [(i, stamp, i * 10.25, f"n{i}") for i, stamp in enumerate(STAMPS * 3, start=1)],
        )


def add_late_row(base: Path, stamp: str) -> None:
    with sqlite3.connect(base / "source.sqlite") as db:
        (top,) = db.execute("SELECT max(id) FROM events").fetchone()
        db.execute("INSERT INTO events VALUES (?, ?, ?, ?)", (top + 1, stamp, 1.5, "late"))


def source_rows(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute("SELECT id, at, amount, note FROM events ORDER BY id").fetchall()
    return [
        (i, _epoch(at), Decimal(str(amount)).quantize(Decimal("0.01")), note) for i, at, amount, note in rows
    ]


def _epoch(stamp: str) -> int:
    return calendar.timegm(datetime.fromisoformat(stamp).timetuple())


def source_counts(base: Path, kind: str) -> Counter[str]:
    width = 10 if kind == "day" else 7
    with sqlite3.connect(base / "source.sqlite") as db:
        return Counter(at[:width] for (at,) in db.execute("SELECT at FROM events"))


@pytest.fixture
def server(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    with server_database(clickhouse_http, monkeypatch, "dt_server", "dtp_") as made:
        yield made


def write_manifest(base: Path, table: str, kind: str, strategy: str, export: str, load: str) -> Path:
    lookback = ", lookback: 2" if strategy == "replace_partition" else ""  # re-runs replace committed ones
    path = base / "events.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: dt_server
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: events
  partitioning: {{kind: {kind}, column: at{lookback}}}
  export: {export}
  chunk_rows: 4
sink:
  type: clickhouse
  connection: dt_server
  table: {table}
  strategy: {strategy}
  load: {load}
  order_by: [id]
checkpoints:
  connection: dt_state
""",
        encoding="utf-8",
    )
    return path


def with_durable_replay(manifest: Path) -> None:
    """The manifest with durable quality replay on and two checks measured on both sides."""
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("  order_by: [id]\n", "  order_by: [id]\n  options: {durable_quality_replay: true}\n")
        + "quality:\n  checks:\n    - type: row_count\n    - type: not_null\n      columns: [id, at]\n",
        encoding="utf-8",
    )


def target_rows(client: Any, table: str) -> list[tuple[Any, ...]]:
    rows = client.query(
        f"SELECT id, toUnixTimestamp(at), toString(amount), note FROM {table} ORDER BY id"
    ).result_rows
    return [(i, at, Decimal(amount).quantize(Decimal("0.01")), note) for i, at, amount, note in rows]


PATHS = [("lazy_plan", "direct"), ("lazy_plan", "staged"), ("file_artifact", "direct")]


@pytest.mark.parametrize("kind", ["day", "month"])
@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition", "full_refresh"])
@pytest.mark.parametrize(("export", "load"), PATHS)
def test_datetime_partitions_on_the_18_16_server_land_the_source_exactly_and_inspect_counts_them(
    tmp_path: Path,
    server: tuple[Any, str],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    strategy: str,
    export: str,
    load: str,
) -> None:
    client, database = server
    store_url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    monkeypatch.setenv("AIRFLOW_CONN_DT_STATE", store_url)
    make_source(tmp_path)
    table = f"{database}.events"
    manifest = write_manifest(tmp_path, table, kind, strategy, export, load)

    for attempt, late in enumerate((None, *LATE)):
        if late is not None:
            # a new row in the newest partition: full_refresh reloads it, replace_partition's lookback
            # replaces it; an older partition's late row is picked up by full_refresh only
            add_late_row(tmp_path, late)
        result = dpone("run", str(manifest), "--run-id", f"run-{attempt}")
        assert result.exit_code == 0, result.output
        expected = source_rows(tmp_path)
        if strategy == "incremental_append" and late is not None:
            expected = [r for r in expected if r[3] != "late"]  # committed partitions are never re-appended
        elif strategy == "replace_partition" and kind == "day":
            # the late February row's day is not among the two most recent: it stays out (by design)
            expected = [r for r in expected if r[1] != _epoch(LATE[1]) or r[3] != "late"]
        assert target_rows(client, table) == expected, f"run {attempt}"

    # an interrupted attempt: every latest checkpoint armed; inspect must count the target's real rows
    with SqlCheckpointStore(store_url) as store:
        latest = store.list_latest(load_manifest(manifest).route)
    append_armed(store_url, latest, how_many=len(latest))
    inspected = dpone("guard", "inspect", str(manifest), "--json")
    assert inspected.exit_code == 0, inspected.output
    blocked = json.loads(inspected.output)["blocked"]
    assert len(blocked) == len(latest)
    in_target: Counter[str] = Counter()
    for _, at, _, _ in target_rows(client, table):
        moment = datetime.fromtimestamp(at, tz=timezone.utc)
        in_target[moment.strftime("%Y-%m-%d" if kind == "day" else "%Y-%m")] += 1
    assert sum(row["target_rows"] for row in blocked) == len(target_rows(client, table))
    for row in blocked:
        key = next(k for k in in_target if k in row["label"])
        assert row["target_rows"] == in_target[key], row
        assert row["source_rows"] == source_counts(tmp_path, kind)[key], row


@pytest.mark.parametrize("kind", ["day", "month"])
def test_the_durable_replay_reader_counts_datetime_partitions_on_the_18_16_server(
    tmp_path: Path, server: tuple[Any, str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The bounded reader measures the published rows within day/month bounds on a DateTime column: a
    reader that wrote the bounds as dates would count 0 and fail the row_count check after publication."""
    client, database = server
    monkeypatch.setenv("AIRFLOW_CONN_DT_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    make_source(tmp_path)
    table = f"{database}.events"
    manifest = write_manifest(tmp_path, table, kind, "replace_partition", "lazy_plan", "staged")
    with_durable_replay(manifest)

    result = dpone("run", "--json", str(manifest), "--run-id", "replay-1")

    assert result.exit_code == 0, result.output
    quality = json.loads(result.output)["quality"]
    assert (quality["verdict"], quality["capsule_state"]) == ("passed", "complete")
    rows = len(STAMPS) * 3
    measured = {key: value for check in quality["checks"] for key, value in check["values"].items()}
    assert measured.get("target.row_count") == rows, measured
    assert target_rows(client, table) == source_rows(tmp_path)


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_a_day_the_source_deleted_whole_is_emptied_by_the_lookback_on_the_18_16_server(
    tmp_path: Path,
    server: tuple[Any, str],
    monkeypatch: pytest.MonkeyPatch,
    export: str,
    load: str,
) -> None:
    """The newest day's rows all deleted in the source: no partition plans it any more, and before, the
    lookback moved older days while its rows stayed in the target (exit 0)."""
    client, database = server
    monkeypatch.setenv("AIRFLOW_CONN_DT_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    make_source(tmp_path)
    table = f"{database}.events"
    manifest = write_manifest(tmp_path, table, "day", "replace_partition", export, load)
    assert dpone("run", str(manifest), "--run-id", "run-1").exit_code == 0
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM events WHERE at >= '2028-03-31'")

    result = dpone("run", str(manifest), "--run-id", "run-2", "--json")

    assert result.exit_code == 0, result.output
    moved = {p["label"]: p["rows"] for p in json.loads(result.output)["partitions"] if p["decision"] == "run"}
    assert moved == {
        "at=2028-03-01": 6,
        "at=2028-03-15": 3,
        "at=2028-03-31": 0,
    }  # the emptied day takes no slot
    assert target_rows(client, table) == source_rows(tmp_path)


def test_an_emptied_day_passes_the_durable_quality_replay_with_the_target_counted_on_the_server(
    tmp_path: Path, server: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The emptied partition is measured like any other: 0 rows in the source, 0 in the target after."""
    client, database = server
    monkeypatch.setenv("AIRFLOW_CONN_DT_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    make_source(tmp_path)
    table = f"{database}.events"
    manifest = write_manifest(tmp_path, table, "day", "replace_partition", "lazy_plan", "staged")
    with_durable_replay(manifest)
    assert dpone("run", str(manifest), "--run-id", "replay-1").exit_code == 0
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM events WHERE at >= '2028-03-31'")

    result = dpone("run", "--json", str(manifest), "--run-id", "replay-2")

    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["quality"]["verdict"], report["quality"]["capsule_state"]) == ("passed", "complete")
    assert {p["label"]: p["rows"] for p in report["partitions"] if p["decision"] == "run"} == {
        "at=2028-03-01": 6,
        "at=2028-03-15": 3,
        "at=2028-03-31": 0,
    }
    assert target_rows(client, table) == source_rows(tmp_path)
