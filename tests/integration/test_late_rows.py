"""Late-arriving rows (issue 12, point 3) on real components.

* Grouped partition counts (``Source.count_partitions``) against the per-partition ``count`` of the same
  source, on SQLite and over pymssql to the TDS emulator: one grouped statement per route for day, month
  and integer_range partitioning; list partitions and bounds of another partitioning counted one by one.
* Black-box ``dpone`` (its CLI, in this process), SQLite source into chDB: ``settle`` leaves today's partition planned
  but unmoved (``open_partition``, no checkpoint); ``checkpoints --verify`` finds late and deleted rows and
  never opens the target; ``lookback`` on ``replace_partition`` reloads the most recent committed day so
  the target again holds exactly the source's rows; after a run on a worker whose clock ran ahead, a
  correct worker still holds a filling day back (``settle`` decides by the worker's own clock).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters import local_host
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.adapters.sources.partition_planning import day_partitions, month_partitions
from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType
from tests.integration.route_rig import Ran, dpone_from

pytestmark = pytest.mark.service

UTC = dt.timezone.utc


# -- grouped counts: SQLite ------------------------------------------------------------------------------


def _sqlite_orders(path: Path, days: list[dt.date], per_day: int = 5) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL, "
            "amount INTEGER NOT NULL, updated_at DATETIME NOT NULL)"
        )
        next_id = 1
        for index, day in enumerate(days):
            for n in range(per_day + index % 3):  # days hold different counts
                stamp = f"{day.isoformat()} {8 + n:02d}:00:00"
                db.execute(
                    "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                    (next_id, day.isoformat(), f"c{n % 2}", next_id * 7, stamp),
                )
                next_id += 1


def _spec(kind: str, column: str = "order_date", **extra: Any) -> SourceSpec:
    return SourceSpec(
        type=SourceType.SQLITE,
        connection="sqlite:///x",
        table="orders",
        partitioning=Partitioning(kind=PartitionKind(kind), column=column, **extra),
    )


class _CountingStatements:
    """SQLite's own trace hook on the source's connection: every statement the source runs."""

    def __init__(self, source: SqliteSource) -> None:
        self.statements: list[str] = []
        source._db().set_trace_callback(self.statements.append)

    def selects(self) -> list[str]:
        return [s for s in self.statements if s.lstrip().upper().startswith("SELECT")]


DAYS = [dt.date(2026, 10, 30) + dt.timedelta(days=i) for i in range(5)]  # across a month end


@pytest.mark.parametrize(
    ("kind", "column", "extra"),
    [("day", "order_date", {}), ("month", "order_date", {}), ("integer_range", "id", {"size": 4})],
)
def test_sqlite_grouped_counts_equal_the_per_partition_counts_in_one_statement(
    tmp_path: Path, kind: str, column: str, extra: dict[str, Any]
) -> None:
    _sqlite_orders(tmp_path / "s.sqlite", DAYS)
    source = SqliteSource(tmp_path / "s.sqlite", _spec(kind, column, **extra))
    try:
        bounds = source.plan_partitions()
        expected = [source.count(b) for b in bounds]
        assert sum(expected) == 29 and len(set(expected)) > 1
        trace = _CountingStatements(source)
        assert source.count_partitions(bounds) == expected
        grouped = [s for s in trace.selects() if "GROUP BY" in s]
        assert len(grouped) == 1 and len(trace.selects()) == 1  # one grouped query for the whole route
    finally:
        source.close()


def test_sqlite_counts_late_rows_and_bounds_of_another_partitioning_one_by_one(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _sqlite_orders(path, DAYS)
    source = SqliteSource(path, _spec("day"))
    try:
        days = source.plan_partitions()
        before = source.count_partitions(days)
        with sqlite3.connect(path) as db:  # two late rows for 10-31, one row of 11-02 deleted
            db.execute("INSERT INTO orders VALUES (100, '2026-10-31', 'late', 1, '2026-11-05 01:00:00')")
            db.execute("INSERT INTO orders VALUES (101, '2026-10-31T23:59:59', 'late', 2, '2026-11-05')")
            db.execute(
                "DELETE FROM orders WHERE id = (SELECT MIN(id) FROM orders WHERE order_date = '2026-11-02')"
            )
        after = source.count_partitions(days)
        assert [a - b for a, b in zip(after, before, strict=True)] == [0, 2, 0, -1, 0]
        # month bounds (an earlier partitioning) and a day outside the data: exact, one query each
        foreign = month_partitions("order_date", [(2026, 10), (2026, 11)])
        trace = _CountingStatements(source)
        assert source.count_partitions(foreign) == [source.count(b) for b in foreign]
        assert not any("GROUP BY" in s for s in trace.selects())
        # a day of this partitioning with no rows at all is grouped too, and counts 0
        assert source.count_partitions(day_partitions("order_date", [dt.date(2027, 1, 1)])) == [0]
    finally:
        source.close()


def test_sqlite_list_partitions_are_counted_with_their_own_predicate(tmp_path: Path) -> None:
    _sqlite_orders(tmp_path / "s.sqlite", DAYS)
    source = SqliteSource(tmp_path / "s.sqlite", _spec("list", "customer", values=("c0", "c1", "nobody")))
    try:
        bounds = source.plan_partitions()
        counts = source.count_partitions(bounds)
        assert counts == [source.count(b) for b in bounds] and counts[2] == 0 and sum(counts) == 29
    finally:
        source.close()


# -- grouped counts: SQL Server over the TDS emulator -----------------------------------------------------


@pytest.fixture
def tds_source(tds_emulator: EndpointDescriptor) -> Iterator[Any]:
    opened: list[MssqlSource] = []

    def make(kind: str, column: str = "order_date", **extra: Any) -> MssqlSource:
        spec = SourceSpec(
            type=SourceType.MSSQL,
            connection="mssql_test",
            table="dbo.orders",
            partitioning=Partitioning(kind=PartitionKind(kind), column=column, **extra),
        )
        source = MssqlSource(tds_emulator, spec)
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()


@pytest.mark.parametrize(
    ("kind", "column", "extra"),
    [("day", "order_date", {}), ("month", "order_date", {}), ("integer_range", "id", {"size": 7})],
)
def test_tds_grouped_counts_equal_the_per_partition_counts_in_one_statement(
    tds_source: Any, tds_orders: list[dict[str, Any]], kind: str, column: str, extra: dict[str, Any]
) -> None:
    source = tds_source(kind, column, **extra)
    bounds = source.plan_partitions()
    expected = [source.count(b) for b in bounds]
    assert sum(expected) == len(tds_orders)
    statements: list[str] = []
    fetch = source._fetch_all

    def spy(statement: Any, *, what: str) -> Any:
        statements.append(statement.text)
        return fetch(statement, what=what)

    source._fetch_all = spy
    assert source.count_partitions(bounds) == expected
    assert len([s for s in statements if "GROUP BY" in s]) == 1
    assert not any("COUNT_BIG(*) AS row_count\nFROM [dbo]" in s for s in statements)  # no per-partition count


def test_tds_bounds_of_another_partitioning_fall_back_to_exact_counts(
    tds_source: Any, tds_orders: list[dict[str, Any]]
) -> None:
    source = tds_source("day")
    months = month_partitions(
        "order_date", sorted({(r["order_date"].year, r["order_date"].month) for r in tds_orders})
    )
    counts = source.count_partitions(months)
    assert counts == [source.count(b) for b in months]
    assert sum(counts) == len(tds_orders)
    expected_days = {}
    for row in tds_orders:
        expected_days[row["order_date"]] = expected_days.get(row["order_date"], 0) + 1
    days = source.plan_partitions()
    assert source.count_partitions(days) == [expected_days[dt.date.fromisoformat(b.lower)] for b in days]


# -- black-box dpone: settle, verify, lookback -----------------------------------------------------------


def dpone(*args: str, cwd: Path) -> Ran:
    return dpone_from(cwd, *args)


def _write_manifest(
    base: Path, *, strategy: str, partitioning: str, sink: str = "chdb:///clickhouse"
) -> Path:
    path = base / "orders.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: late_rows
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {partitioning}
  incremental: {{cursor: updated_at}}
sink:
  type: clickhouse
  connection: {sink}
  table: demo.orders
  strategy: {strategy}
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


def _source_rows(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return sorted(db.execute("SELECT id, order_date, customer, amount FROM orders").fetchall())


def _target_client(base: Path) -> Any:
    return open_client(
        EndpointDescriptor(
            name="t",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=str(base / "clickhouse"),
        )
    )


def _target_rows(base: Path) -> list[tuple[Any, ...]]:
    client = _target_client(base)
    try:
        result = client.query("SELECT id, toString(order_date), customer, amount FROM demo.orders")
        return sorted(tuple(r) for r in result.result_rows)
    finally:
        client.close()


def _json(result: Ran) -> dict[str, Any]:
    assert result.returncode == 0, result.stdout + result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


@pytest.fixture
def relative_days(tmp_path: Path) -> list[dt.date]:
    """Four days ending today (UTC): three settled under ``settle: 1d``, today open whatever the hour."""
    today = dt.datetime.now(UTC).date()
    days = [today - dt.timedelta(days=n) for n in (5, 4, 3, 0)]
    _sqlite_orders(tmp_path / "source.sqlite", days)
    return days


def test_settle_plans_todays_partition_but_moves_only_settled_days(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    manifest = _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date, settle: 1d}"
    )
    report = _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    text = json.dumps(report)
    today = relative_days[-1].isoformat()
    outcomes = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(report)}
    assert outcomes[f"order_date={today}"] == ("skip", "open_partition"), text
    assert all(v == ("run", "missing_checkpoint") for k, v in outcomes.items() if today not in k), text
    assert _target_rows(tmp_path) == [r for r in _source_rows(tmp_path) if r[1] != today]
    listing = _json(dpone("checkpoints", str(manifest), "--json", cwd=tmp_path))
    assert {p["bounds"] for p in listing["partitions"]} == {f"order_date={d}" for d in relative_days[:3]}

    # the same run again moves nothing and still holds today back
    again = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))
    assert {p["reason"] for p in _find_partitions(again)} == {"committed", "open_partition"}
    assert _target_rows(tmp_path) == [r for r in _source_rows(tmp_path) if r[1] != today]


def test_adopting_a_target_never_records_a_day_settle_still_holds_open(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    """A store lost after runs without ``settle``; the manifest now has it. ``--adopt-target`` recorded
    today at its count so far, and a run skipped it as committed: the row that arrived later never moved
    (exit 0). A day still filling that the target holds rows of stops the adoption (nothing recorded); once
    the target holds none of it, the adoption leaves it to a run."""
    day_route = "{kind: day, column: order_date}"
    manifest = _write_manifest(tmp_path, strategy="incremental_append", partitioning=day_route)
    assert dpone("run", str(manifest), "--run-id", "r1", cwd=tmp_path).returncode == 0  # today moved too
    (tmp_path / "state.sqlite").unlink()  # the store is lost
    _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date, settle: 1d}"
    )
    adopt = ("guard", "rebaseline", str(manifest), "--adopt-target", "--reason", "store lost")
    refused = dpone(*adopt, cwd=tmp_path)
    today = relative_days[-1].isoformat()
    assert refused.returncode != 0 and "still filling" in refused.stdout + refused.stderr
    assert (
        not (tmp_path / "state.sqlite").exists()
        or not _json(dpone("checkpoints", str(manifest), "--json", cwd=tmp_path))["partitions"]
    )
    # a replacing route leaves the open day to the run that replaces it once settled: adopted without it
    _write_manifest(
        tmp_path, strategy="replace_partition", partitioning="{kind: day, column: order_date, settle: 1d}"
    )
    assert dpone(*adopt, cwd=tmp_path).returncode == 0
    listing = _json(dpone("checkpoints", str(manifest), "--json", cwd=tmp_path))
    assert {p["bounds"] for p in listing["partitions"]} == {f"order_date={d}" for d in relative_days[:3]}
    (tmp_path / "state.sqlite").unlink()  # lost again, for the append route
    _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date, settle: 1d}"
    )

    _delete_target_day(tmp_path, today)  # the day's rows out of the target: the adoption leaves it to a run
    assert dpone(*adopt, cwd=tmp_path).returncode == 0
    listing = _json(dpone("checkpoints", str(manifest), "--json", cwd=tmp_path))
    assert {p["bounds"] for p in listing["partitions"]} == {f"order_date={d}" for d in relative_days[:3]}


def _find_partitions(report: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("partitions", "report"):
        value = report.get(key)
        if isinstance(value, list):
            return value
        if isinstance(value, dict) and isinstance(value.get("partitions"), list):
            partitions: list[dict[str, Any]] = value["partitions"]
            return partitions
    raise AssertionError(f"no partitions in the run report: {sorted(report)}")


def test_verify_finds_late_and_deleted_rows_and_never_opens_the_target(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    manifest = _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date}"
    )
    assert dpone("run", str(manifest), "--run-id", "r1", cwd=tmp_path).returncode == 0
    clean = dpone("checkpoints", str(manifest), "--verify", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.rstrip().splitlines()[-1].startswith("0 drifted partitions (4 committed")

    late_day, deleted_day = relative_days[1].isoformat(), relative_days[2].isoformat()
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("INSERT INTO orders VALUES (900, ?, 'late', 1, ?)", (late_day, f"{late_day} 23:00:00"))
        db.execute("INSERT INTO orders VALUES (901, ?, 'late', 2, ?)", (late_day, f"{late_day} 23:30:00"))
        db.execute(
            "DELETE FROM orders WHERE id = (SELECT MIN(id) FROM orders WHERE order_date = ?)", (deleted_day,)
        )
    # point the sink at a connection that does not exist: verify must not need (or touch) the target
    _write_manifest(
        tmp_path,
        strategy="incremental_append",
        partitioning="{kind: day, column: order_date}",
        sink="no_such_target",
    )
    target_before = sorted(p.name for p in (tmp_path / "clickhouse").rglob("*"))
    listing = _json(dpone("checkpoints", str(manifest), "--verify", "--json", cwd=tmp_path))
    by_day = {p["bounds"]: p for p in listing["partitions"]}
    drifted = {k: (p["rows"], p["source_rows"]) for k, p in by_day.items() if p["drifted"]}
    rows = {k: p["rows"] for k, p in by_day.items()}
    assert drifted == {
        f"order_date={late_day}": (rows[f"order_date={late_day}"], rows[f"order_date={late_day}"] + 2),
        f"order_date={deleted_day}": (
            rows[f"order_date={deleted_day}"],
            rows[f"order_date={deleted_day}"] - 1,
        ),
    }
    assert all(p["source_rows"] == p["rows"] for p in by_day.values() if not p["drifted"])
    assert listing["summary"]["drifted"] == 2 and listing["summary"]["verified"] == 4
    text = dpone("checkpoints", str(manifest), "--verify", cwd=tmp_path)
    assert text.returncode == 0 and text.stdout.rstrip().splitlines()[-1].startswith("2 drifted partitions")
    assert "DRIFTED" in text.stdout
    assert sorted(p.name for p in (tmp_path / "clickhouse").rglob("*")) == target_before


def test_verify_on_a_store_that_does_not_exist_creates_nothing(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    manifest = _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date}"
    )
    result = dpone("checkpoints", str(manifest), "--verify", cwd=tmp_path)
    assert result.returncode in (0, 2), result.stderr  # an empty listing, or "no checkpoint store" (usage)
    assert "no checkpoint" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state.sqlite").exists() and not (tmp_path / "clickhouse").exists()


def test_lookback_reloads_the_most_recent_committed_day_and_the_target_matches_the_source_again(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    partitioning = "{kind: day, column: order_date, settle: 1d, lookback: 1}"
    manifest = _write_manifest(tmp_path, strategy="replace_partition", partitioning=partitioning)
    today = relative_days[-1].isoformat()
    recent, older = relative_days[2].isoformat(), relative_days[0].isoformat()
    first = _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    assert {p["label"]: p["reason"] for p in _find_partitions(first)}[
        f"order_date={today}"
    ] == "open_partition"

    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # late rows for the most recent settled day
        db.execute("INSERT INTO orders VALUES (900, ?, 'late', 1, ?)", (recent, f"{recent} 23:00:00"))
        db.execute(
            "UPDATE orders SET amount = -1 WHERE id = (SELECT MIN(id) FROM orders WHERE order_date = ?)",
            (recent,),
        )
        db.execute("INSERT INTO orders VALUES (901, ?, 'late', 2, ?)", (older, f"{older} 23:00:00"))
    second = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))
    reasons = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(second)}
    assert reasons[f"order_date={recent}"] == ("run", "lookback")
    assert reasons[f"order_date={older}"] == ("skip", "committed")
    assert reasons[f"order_date={today}"] == ("skip", "open_partition")

    source = [r for r in _source_rows(tmp_path) if r[1] != today]
    target = _target_rows(tmp_path)
    assert [r for r in target if r[1] == recent] == [
        r for r in source if r[1] == recent
    ]  # values, no duplicates
    assert len(target) == len(set(target))
    assert [r for r in source if r not in target] == [
        r for r in source if r[0] == 901
    ]  # only the older day lags
    listing = _json(dpone("checkpoints", str(manifest), "--verify", "--json", cwd=tmp_path))
    assert [p["bounds"] for p in listing["partitions"] if p["drifted"]] == [f"order_date={older}"]
    history = [p for p in listing["partitions"] if p["bounds"] == f"order_date={recent}"]
    assert history[0]["run_id"] == "r2" and history[0]["guard_phase"] == "checkpoint_committed"


def test_a_day_ahead_of_the_clock_takes_no_lookback_slot_and_todays_late_rows_arrive(tmp_path: Path) -> None:
    """A scheduled order 40 days ahead was the newest partition by bounds: it held the only slot of
    ``lookback: 1`` for good, and today's day, committed while still filling, never ran again (a late row
    of today lost, exit 0, no notice). A day ranks for the slots once it has begun."""
    today = dt.datetime.now(UTC).date()
    ahead = today + dt.timedelta(days=40)
    _sqlite_orders(tmp_path / "source.sqlite", [today - dt.timedelta(days=1), today, ahead], per_day=2)
    manifest = _write_manifest(
        tmp_path, strategy="replace_partition", partitioning="{kind: day, column: order_date, lookback: 1}"
    )
    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # a late row of today
        db.execute(
            "INSERT INTO orders VALUES (900, ?, 'late', 1, ?)", (today.isoformat(), f"{today} 23:00:00")
        )

    second = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    reasons = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(second)}
    assert reasons[f"order_date={today}"] == ("run", "lookback")
    assert reasons[f"order_date={ahead}"] == ("skip", "committed")
    assert _target_rows(tmp_path) == _source_rows(tmp_path)


def test_a_day_still_filling_is_held_back_on_a_correct_worker_after_one_whose_clock_ran_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run on a worker whose clock ran two days ahead wrote its records two days in the future; every
    later worker's clock was floored to them (``CausalClock``), and ``settle: 2h`` took a day still filling
    as settled: committed at 01:00, its row of 01:30 never moved (exit 0). What has settled is decided by
    the worker's own clock; the run says which records are ahead of it."""

    def worker_at(moment: str) -> None:  # the worker's wall clock (the runtime's Clock port)
        at = dt.datetime.fromisoformat(moment).replace(tzinfo=UTC)
        monkeypatch.setattr(local_host.SystemClock, "now", lambda self: at)

    _sqlite_orders(tmp_path / "source.sqlite", [dt.date(2026, 1, d) for d in (1, 2, 3)], per_day=2)
    manifest = _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date, settle: 2h}"
    )
    worker_at("2026-01-06T03:00:00")  # real time 2026-01-04T03:00: two days ahead
    _json(dpone("run", str(manifest), "--run-id", "skewed", "--json", cwd=tmp_path))

    def add(row_id: int, at: str) -> None:
        with sqlite3.connect(tmp_path / "source.sqlite") as db:
            db.execute("INSERT INTO orders VALUES (?, '2026-01-04', 'c', ?, ?)", (row_id, row_id * 7, at))

    add(100, "2026-01-04 10:00:00")
    worker_at("2026-01-05T01:00:00")  # a correct worker: 01-04 is open until 01-05T02:00
    early = _json(dpone("run", str(manifest), "--run-id", "correct-0100", "--json", cwd=tmp_path))
    add(101, "2026-01-05 01:30:00")  # a late row of the still-open day
    worker_at("2026-01-05T03:00:00")
    later = _json(dpone("run", str(manifest), "--run-id", "correct-0300", "--json", cwd=tmp_path))

    early_reasons = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(early)}
    assert early_reasons["order_date=2026-01-04"] == ("skip", "open_partition")
    later_reasons = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(later)}
    assert later_reasons["order_date=2026-01-04"] == ("run", "missing_checkpoint")
    assert _target_rows(tmp_path) == _source_rows(tmp_path)  # every value, the late row's too
    ahead = [n for n in early["notices"] if "records of target table" in n]
    assert len(ahead) == 1 and "run(s) skewed wrote them first" in ahead[0], early["notices"]
    assert "settle (2h)" in ahead[0] and "correct the clock of the worker(s) that ran skewed" in ahead[0]
    assert not any("committed while still open" in n for n in early["notices"])  # its days had settled


@pytest.mark.parametrize(
    ("export", "load"),
    # both deletes (a direct ALTER DELETE, a staged partition swap) and both exports, each once
    [("lazy_plan", "direct"), ("file_artifact", "staged")],
)
def test_lookback_empties_a_day_the_source_deleted_whole_and_the_target_matches_the_source_again(
    tmp_path: Path, relative_days: list[dt.date], export: str, load: str
) -> None:
    """A day whose rows were all deleted is no partition the source plans any more; before, the lookback
    moved older days and the deleted day's rows stayed in the target for good (exit 0)."""
    partitioning = "{kind: day, column: order_date, settle: 1d, lookback: 2}"
    manifest = _write_manifest(tmp_path, strategy="replace_partition", partitioning=partitioning)
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("  incremental:", f"  export: {export}\n  incremental:").replace(
            "  order_by:", f"  load: {load}\n  order_by:"
        ),
        encoding="utf-8",
    )
    today = relative_days[-1].isoformat()
    oldest, middle, recent = (d.isoformat() for d in relative_days[:3])
    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", (recent,))

    second = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    reasons = {p["label"]: (p["decision"], p["reason"]) for p in _find_partitions(second)}
    assert reasons[f"order_date={recent}"] == ("run", "lookback")  # the emptied day, beside the 2 newest
    assert reasons[f"order_date={middle}"] == ("run", "lookback")
    assert reasons[f"order_date={oldest}"] == ("run", "lookback")  # an emptied day takes no slot
    source = [r for r in _source_rows(tmp_path) if r[1] != today]
    assert _target_rows(tmp_path) == source  # every value; the deleted day's rows are gone
    third = _json(dpone("run", str(manifest), "--run-id", "r3", "--json", cwd=tmp_path))
    assert {p["label"]: p["rows"] for p in _find_partitions(third) if p["decision"] == "run"} == {
        f"order_date={oldest}": sum(1 for r in source if r[1] == oldest),
        f"order_date={middle}": sum(1 for r in source if r[1] == middle),
    }  # the emptied day is empty in the target: nothing to do there
    assert _target_rows(tmp_path) == source


def test_an_append_run_that_commits_list_values_says_rows_arriving_later_are_not_moved(
    tmp_path: Path,
) -> None:
    """A listed value with no rows yet was committed empty without a word; rows arriving for it later
    are never moved by ``incremental_append`` (its committed partitions never run again)."""
    _sqlite_orders(tmp_path / "source.sqlite", DAYS)
    partitioning = "{kind: list, column: customer, values: [c0, c9]}"
    manifest = _write_manifest(tmp_path, strategy="incremental_append", partitioning=partitioning)

    report = _json(dpone("run", str(manifest), "--json", cwd=tmp_path))

    notes = [n for n in report["notices"] if "may still be filling" in n]
    assert len(notes) == 1 and "customer=c0" in notes[0] and "customer=c9" in notes[0], report["notices"]
    assert "lookback" in notes[0]
    assert {p["label"]: p["rows"] for p in _find_partitions(report)}["customer=c9"] == 0
    assert _target_rows(tmp_path) == [r for r in _source_rows(tmp_path) if r[2] == "c0"]


def test_a_replacing_list_route_says_the_rows_of_a_value_taken_out_of_values_stay_in_the_target(
    tmp_path: Path,
) -> None:
    """Red before: a value dropped from ``values`` kept its rows in the target without a word, and rows of
    it the source moved to a listed value were there twice (exit 0). Nothing is deleted: the run says so."""
    _sqlite_orders(tmp_path / "source.sqlite", DAYS)
    manifest = _write_manifest(
        tmp_path,
        strategy="replace_partition",
        partitioning="{kind: list, column: customer, values: [c0, c1]}",
    )
    _json(dpone("run", str(manifest), "--json", cwd=tmp_path))
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace("values: [c0, c1]", "values: [c0]"), "utf-8"
    )

    report = _json(dpone("run", str(manifest), "--json", cwd=tmp_path))

    (note,) = [n for n in report["notices"] if "no longer in source.partitioning.values" in n]
    assert "'c1'" in note and "'c0'" not in note
    assert sorted(r for r in _target_rows(tmp_path) if r[2] == "c1") == [
        r for r in _source_rows(tmp_path) if r[2] == "c1"
    ]


def test_a_route_without_partitioning_says_on_every_run_that_it_moved_the_table_once(tmp_path: Path) -> None:
    """Before: the first run committed the whole table, and every later run said "nothing to do", exit 0,
    while the source grew; no word that ``incremental_append`` never moves those rows."""
    _sqlite_orders(tmp_path / "source.sqlite", DAYS)
    manifest = _write_manifest(tmp_path, strategy="incremental_append", partitioning="{kind: none}")

    first = _json(dpone("run", str(manifest), "--json", cwd=tmp_path))

    assert any("may still be filling" in n and "full_refresh" in n for n in first["notices"]), first[
        "notices"
    ]
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("INSERT INTO orders VALUES (900, '2026-11-04', 'late', 1, '2026-11-04 09:00:00')")
    second = _json(dpone("run", str(manifest), "--json", cwd=tmp_path))
    assert second["rows_committed"] == 0
    assert any("no source.partitioning" in n for n in second["notices"]), second["notices"]
    assert _target_rows(tmp_path) == [r for r in _source_rows(tmp_path) if r[0] != 900]
    listing = _json(dpone("checkpoints", str(manifest), "--verify", "--json", cwd=tmp_path))
    assert [p["drifted"] for p in listing["partitions"]] == [True]


def test_days_that_rolled_out_of_a_windowed_source_stay_in_the_target(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    """A source that keeps a window (a retention job, a staging table cleared each night) no longer holds
    its oldest days: they are not deletions, and the lookback never empties them."""
    partitioning = "{kind: day, column: order_date, settle: 1d, lookback: 3}"
    manifest = _write_manifest(tmp_path, strategy="replace_partition", partitioning=partitioning)
    today = relative_days[-1].isoformat()
    oldest, middle = relative_days[0].isoformat(), relative_days[1].isoformat()
    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    kept = [r for r in _target_rows(tmp_path) if r[1] in (oldest, middle)]
    assert kept
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date IN (?, ?)", (oldest, middle))

    second = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    assert all(p["rows"] > 0 for p in _find_partitions(second) if p["decision"] == "run")
    target = _target_rows(tmp_path)
    assert [r for r in target if r[1] in (oldest, middle)] == kept
    assert [r for r in target if r[1] not in (oldest, middle)] == [
        r for r in _source_rows(tmp_path) if r[1] != today
    ]


def test_a_kept_oldest_day_the_lookback_still_reaches_is_named_with_what_to_do(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    """Red before: every row of the oldest day moved to the next day (an UPDATE of the partition column) and
    the oldest day was kept as rolled out of a windowed source: its rows were in the target twice, exit 0,
    no word. No run can tell a move from a retention job without a key: the run names the day (the lookback
    still reaches it: the source plans fewer than its N days), and says so no more once it is deleted."""
    manifest = _write_manifest(
        tmp_path, strategy="replace_partition", partitioning="{kind: day, column: order_date, lookback: 4}"
    )
    oldest, second = relative_days[0].isoformat(), relative_days[1].isoformat()
    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("UPDATE orders SET order_date = ? WHERE order_date = ?", (second, oldest))

    moved = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    said = [n for n in moved["notices"] if "rolled out" in n]
    assert len(said) == 1 and f"order_date={oldest}" in said[0] and "twice" in said[0]
    target = _target_rows(tmp_path)
    assert len(target) == len(_source_rows(tmp_path)) + sum(1 for r in target if r[1] == oldest)
    _delete_target_day(tmp_path, oldest)

    after = _json(dpone("run", str(manifest), "--run-id", "r3", "--json", cwd=tmp_path))

    assert not [n for n in after["notices"] if "rolled out" in n]
    assert _target_rows(tmp_path) == _source_rows(tmp_path)


def test_a_row_the_lookback_lost_to_an_older_committed_day_is_named_and_a_wider_lookback_reloads_it(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    """Red before: a row moved (an UPDATE of the partition column) from a day the lookback replaces into an
    older committed day it no longer reaches was deleted with its old day and never loaded into the new one:
    gone from the target, exit 0, no word. The run cannot tell that from a delete; it names the day that
    came back short and the commands that find and reload the row."""
    manifest = _write_manifest(
        tmp_path, strategy="replace_partition", partitioning="{kind: day, column: order_date, lookback: 2}"
    )
    oldest, recent = relative_days[0].isoformat(), relative_days[2].isoformat()
    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute(
            "UPDATE orders SET order_date = ? WHERE id = (SELECT MIN(id) FROM orders WHERE order_date = ?)",
            (oldest, recent),
        )

    moved = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    (said,) = [n for n in moved["notices"] if "fewer rows at the source than their commit recorded" in n]
    assert f"order_date={recent}" in said and oldest not in said and "1 row(s) fewer" in said, said
    assert f"dpone checkpoints {manifest} --verify" in said and "lookback reaches it" in said, said
    lost = [r for r in _source_rows(tmp_path) if r not in _target_rows(tmp_path)]
    assert [(r[1], r[2]) for r in lost] == [(oldest, "c0")]  # the moved row, and nothing else
    listing = _json(dpone("checkpoints", str(manifest), "--verify", "--json", cwd=tmp_path))
    assert [p["bounds"] for p in listing["partitions"] if p["drifted"]] == [f"order_date={oldest}"]

    # the repair the notice names: one run whose lookback reaches the drifted day
    wide = "{kind: day, column: order_date, lookback: 4}"
    _write_manifest(tmp_path, strategy="replace_partition", partitioning=wide)
    repaired = _json(dpone("run", str(manifest), "--run-id", "r3", "--json", cwd=tmp_path))

    assert not [n for n in repaired["notices"] if "than their commit recorded" in n], repaired["notices"]
    assert _target_rows(tmp_path) == _source_rows(tmp_path)


def _delete_target_day(base: Path, day: str) -> None:
    client = _target_client(base)
    try:
        client.command(
            f"ALTER TABLE demo.orders DELETE WHERE order_date = '{day}' SETTINGS mutations_sync = 2"
        )
    finally:
        client.close()


def test_a_run_that_moves_only_an_older_late_day_keeps_the_cursors_high_water_mark(
    tmp_path: Path, relative_days: list[dt.date]
) -> None:
    """Red before: the mark was this run's maximum alone, so a late day with older cursor values moved it
    back (a month, seen), while the source and the target still held the newer rows."""
    manifest = _write_manifest(
        tmp_path, strategy="incremental_append", partitioning="{kind: day, column: order_date}"
    )

    def mark() -> Any:
        return _source_state(tmp_path / "state.sqlite")["high_water"]

    _json(dpone("run", str(manifest), "--run-id", "r1", "--json", cwd=tmp_path))
    first = mark()
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        newest = db.execute("SELECT max(updated_at) FROM orders").fetchone()[0]
        older = (relative_days[0] - dt.timedelta(days=30)).isoformat()
        db.execute("INSERT INTO orders VALUES (900, ?, 'late', 1, ?)", (older, f"{older} 08:00:00"))
    second = _json(dpone("run", str(manifest), "--run-id", "r2", "--json", cwd=tmp_path))

    assert second["rows_committed"] == 1
    assert first == mark() and dt.datetime.fromisoformat(first) == dt.datetime.fromisoformat(newest)


@pytest.mark.parametrize(
    ("column_type", "values", "later", "expected"),
    [
        # a NUMERIC cursor's mark was stored as text and lost to the next run's lower maximum (900.00 -> 10.00)
        ("NUMERIC(12,2)", ["900.00", "1.50"], "10.00", "900.00"),
        # an infinite REAL failed the run after its commit (exit 1: JSON has no inf) and no mark was kept
        ("REAL", ["9e999", "1.5"], "2.0", "inf"),
    ],
    ids=["decimal", "infinite-real"],
)
def test_a_cursor_mark_of_decimals_or_infinite_reals_is_kept_and_never_goes_back(
    tmp_path: Path, column_type: str, values: list[str], later: str, expected: str
) -> None:
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE NOT NULL, c {column_type} NOT NULL)")
        db.executemany(
            "INSERT INTO t VALUES (?, '2026-11-01', CAST(? AS REAL))"
            if column_type == "REAL"
            else "INSERT INTO t VALUES (?, '2026-11-01', ?)",
            list(enumerate(values, start=1)),
        )
    manifest = tmp_path / "t.yaml"
    manifest.write_text(
        """
kind: native_transfer
name: marks
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: t
  partitioning: {kind: day, column: d}
  incremental: {cursor: c}
sink: {type: clickhouse, connection: "chdb:///clickhouse", table: demo.t, strategy: incremental_append}
checkpoints: {connection: "sqlite:///state.sqlite"}
""",
        encoding="utf-8",
    )

    def mark() -> str:
        return str(_source_state(tmp_path / "state.sqlite")["high_water"])

    first = dpone("run", str(manifest), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert mark() == expected
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # a new day whose cursor values are all lower
        db.execute("INSERT INTO t VALUES (9, '2026-11-02', ?)", (later,))
    second = dpone("run", str(manifest), "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert mark() == expected


def _cursor_route(tmp_path: Path, load: str) -> Path:
    manifest = tmp_path / f"{load}.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: marks_{load}
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: t
  partitioning: {{kind: day, column: d}}
  incremental: {{cursor: c}}
  chunk_rows: 1
sink:
  type: clickhouse
  connection: "chdb:///clickhouse_{load}"
  table: demo.t
  strategy: incremental_append
  load: {load}
checkpoints: {{connection: "sqlite:///state_{load}.sqlite"}}
""",
        encoding="utf-8",
    )
    return manifest


def _source_state(store: Path) -> dict[str, Any]:
    """The route's ``dpone_source_state`` payload in a SQLite checkpoint store (one route per store here)."""
    with sqlite3.connect(store) as db:
        (state,) = db.execute("SELECT payload FROM dpone_source_state").fetchone()
    return dict(json.loads(state))


def _state(tmp_path: Path, load: str) -> dict[str, Any]:
    return _source_state(tmp_path / f"state_{load}.sqlite")


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_cursor_column_holding_text_and_bytes_moves_every_value_and_marks_the_bytes_highest(
    tmp_path: Path, load: str
) -> None:
    """Red before: the mark took ``max`` of ``str`` and ``bytes`` inside the target call (``TypeError``):
    the run failed with part of the batch written and the route blocked on every retry."""
    rows = [(1, "2026-01-01", "a"), (2, "2026-01-01", b"b"), (3, "2026-01-02", "c")]
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE NOT NULL, c TEXT)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    manifest = _cursor_route(tmp_path, load)

    result = dpone("run", str(manifest), "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    endpoint = EndpointDescriptor(
        name="t",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.CHDB,
        path=str(tmp_path / f"clickhouse_{load}"),
    )
    client = open_client(endpoint)
    try:
        moved = client.query("SELECT id, hex(c) FROM demo.t ORDER BY id").result_rows
    finally:
        client.close()
    assert [tuple(r) for r in moved] == [
        (i, (v if isinstance(v, bytes) else v.encode()).hex().upper()) for i, _, v in rows
    ]
    state = _state(tmp_path, load)
    assert (state["high_water"], state["high_water_kind"]) == ("0x62", "bytes")


def test_a_binary_cursor_mark_is_kept_as_hex_and_never_goes_back(tmp_path: Path) -> None:
    """Red before: the mark of a binary cursor (a SQL Server ``rowversion``, a blob) was stored as Python's
    text for bytes and a later run's lower counter replaced it."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE NOT NULL, c BLOB NOT NULL)")
        db.executemany(
            "INSERT INTO t VALUES (?, ?, ?)",
            [(1, "2026-01-01", (5).to_bytes(8, "big")), (2, "2026-01-02", (9).to_bytes(8, "big"))],
        )
    manifest = _cursor_route(tmp_path, "direct")
    first = dpone("run", str(manifest), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert _state(tmp_path, "direct")["high_water"] == "0x0000000000000009"
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # a new day whose counter is lower
        db.execute("INSERT INTO t VALUES (3, '2026-01-03', ?)", ((7).to_bytes(8, "big"),))

    second = dpone("run", str(manifest), "--json", cwd=tmp_path)

    assert second.returncode == 0, second.stdout + second.stderr
    assert json.loads(second.stdout)["rows_committed"] == 1
    state = _state(tmp_path, "direct")
    assert (state["high_water"], state["high_water_kind"]) == ("0x0000000000000009", "bytes")


def test_a_cursor_renamed_to_another_column_does_not_take_the_old_columns_mark(tmp_path: Path) -> None:
    """Red before: a run whose new cursor column held only NULLs kept the old column's mark (bytes, ordered
    above every number), so the new cursor's mark never moved."""
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, d DATE NOT NULL, b BLOB, n INTEGER)")
        db.execute("INSERT INTO t VALUES (1, '2026-01-01', ?, NULL)", ((2001).to_bytes(8, "big"),))
    manifest = _cursor_route(tmp_path, "direct")
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("cursor: c", "cursor: b"), "utf-8")
    assert dpone("run", str(manifest), cwd=tmp_path).returncode == 0
    assert _state(tmp_path, "direct")["high_water"] == "0x00000000000007D1"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("cursor: b", "cursor: n"), "utf-8")
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("INSERT INTO t VALUES (2, '2026-01-02', NULL, NULL)")
    assert dpone("run", str(manifest), cwd=tmp_path).returncode == 0
    renamed = _state(tmp_path, "direct")
    assert (renamed["cursor"], renamed["high_water"], "high_water_kind" in renamed) == ("n", None, False)
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("INSERT INTO t VALUES (3, '2026-01-03', NULL, 500)")

    assert dpone("run", str(manifest), cwd=tmp_path).returncode == 0

    assert _state(tmp_path, "direct")["high_water"] == 500
