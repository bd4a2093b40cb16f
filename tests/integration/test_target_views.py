"""A replacing route into a target that feeds materialized views stops before arming (ADR 0086).

A materialized view receives every block inserted into the target and nothing else: deletes and replaced
partitions never reach it. Found trying it as a user would: a ``SummingMergeTree`` of daily totals fed from
a ``replace_partition`` target with ``lookback: 2`` grew by the two lookback days on every run, exit 0,
while the target itself stayed exact. A replacing route (``replace_partition``, ``full_refresh``) into such
a target is refused before arming, on every path, naming the views; ``incremental_append`` feeds each
partition once and goes on; ``sink.options.allow_target_views: true`` accepts the views. Real chDB tables and
the 18.16 server; every view total is compared with the source.
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.route_identity import RebaselineRequest
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    checkpoints,
    create_target,
    query_rows,
    refused_before_arming,
    run,
    target_for,
    write_manifest,
)

TABLE = "demo.orders"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: orders"
COLUMNS = "id Int64, order_date Date, amount Decimal(12, 2)"
FIRST_DAY = date(2026, 10, 1)
DAYS = 4


def make_source(path: Path) -> list[tuple[int, str, Decimal]]:
    rows = [
        (i, (FIRST_DAY + timedelta(days=i % DAYS)).isoformat(), Decimal(i) / 4 + Decimal("0.25"))
        for i in range(1, 121)
    ]
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, amount NUMERIC(12, 2) NOT NULL)"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, d, str(a)) for i, d, a in rows])
    return rows


def daily_totals(rows: list[tuple[int, str, Decimal]]) -> list[tuple[str, int, Decimal]]:
    days: dict[str, tuple[int, Decimal]] = {}
    for _, day, amount in rows:
        count, total = days.get(day, (0, Decimal(0)))
        days[day] = (count + 1, total + amount)
    return sorted((day, count, total) for day, (count, total) in days.items())


def command(endpoint: EndpointDescriptor, *statements: str) -> None:
    client = open_client(endpoint)
    try:
        for statement in statements:
            client.command(statement)
    finally:
        client.close()


def add_daily_view(endpoint: EndpointDescriptor, table: str, engine: str = "SummingMergeTree") -> str:
    """A materialized view of ``table``'s daily count and total into a table of its own, filled first with
    what ``table`` already holds (as its owner would); returns the view table's name."""
    database = table.split(".")[0]
    daily = f"{database}.daily"
    command(
        endpoint,
        f"CREATE TABLE {daily} (order_date Date, n UInt64, total Decimal(38, 2)) ENGINE = {engine} "
        "ORDER BY order_date",
        f"CREATE MATERIALIZED VIEW {database}.orders_daily TO {daily} AS SELECT order_date, count() AS n, "
        f"sum(amount) AS total FROM {table} GROUP BY order_date",
        f"INSERT INTO {daily} SELECT order_date, count(), sum(amount) FROM {table} GROUP BY order_date",
    )
    return daily


def view_totals(endpoint: EndpointDescriptor, daily: str) -> list[tuple[str, int, Decimal]]:
    rows = query_rows(
        endpoint,
        f"SELECT toString(order_date), sum(n), toString(sum(total)) FROM {daily} GROUP BY order_date "
        "ORDER BY order_date",
    )
    return [(str(day), int(n), Decimal(str(total))) for day, n, total in rows]


def target_rows(endpoint: EndpointDescriptor, table: str) -> list[tuple[int, str, Decimal]]:
    rows = query_rows(endpoint, f"SELECT id, toString(order_date), toString(amount) FROM {table} ORDER BY id")
    return [(int(i), str(d), Decimal(str(a))) for i, d, a in rows]


def manifest_for(
    base: Path,
    connection: str,
    table: str,
    strategy: Strategy,
    export: str = "lazy_plan",
    load: str = "direct",
) -> Path:
    lookback = ", lookback: 2" if strategy is Strategy.REPLACE_PARTITION else ""
    return write_manifest(
        base,
        source=SOURCE,
        partitioning=f"{{kind: day, column: order_date{lookback}}}",
        connection=connection,
        table=table,
        export=export,
        load=load,
        strategy=strategy.value,
    )


def allowing_views(manifest: Path) -> Path:
    """``manifest`` with ``sink.options.allow_target_views: true`` (the views' owner said so)."""
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("  load: ", "  options:\n    allow_target_views: true\n  load: ", 1), encoding="utf-8"
    )
    return manifest


@pytest.mark.parametrize("strategy", [Strategy.REPLACE_PARTITION, Strategy.FULL_REFRESH])
@pytest.mark.parametrize(("export", "load"), PATHS)
def test_a_replacing_route_into_a_target_that_feeds_a_view_stops_before_arming(
    tmp_path: Path, strategy: Strategy, export: str, load: str
) -> None:
    make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, "(order_date, id)")
    daily = add_daily_view(endpoint, TABLE)
    manifest = manifest_for(tmp_path, CHDB_CONNECTION, TABLE, strategy, export, load)

    err = refused_before_arming(manifest, endpoint, TABLE)
    assert err.details["problem"] == "target_feeds_views"
    assert err.details["views"] == ["demo.orders_daily"]
    assert err.details["strategy"] == strategy.value
    assert "sink.options.allow_target_views: true" in err.safe_message
    assert view_totals(endpoint, daily) == []


def test_a_view_added_after_the_first_run_stops_the_next_lookback_run_and_keeps_its_totals(
    tmp_path: Path,
) -> None:
    """Red without the check: the view's last two days doubled on the second run, and tripled on the third."""
    source = make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    manifest = manifest_for(tmp_path, CHDB_CONNECTION, TABLE, Strategy.REPLACE_PARTITION)
    assert run(manifest, "r1").rows_committed == len(source)
    daily = add_daily_view(endpoint, TABLE)
    assert view_totals(endpoint, daily) == daily_totals(source)
    committed = checkpoints(manifest)

    for attempt in ("r2", "r3"):
        with pytest.raises(DponeError) as stopped:
            run(manifest, attempt)
        assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
        assert stopped.value.details["problem"] == "target_feeds_views"
        assert view_totals(endpoint, daily) == daily_totals(source)
        assert target_rows(endpoint, TABLE) == source
        assert checkpoints(manifest) == committed  # nothing armed: the route is not blocked

    command(endpoint, "DROP TABLE demo.orders_daily")  # the view moved elsewhere: the route goes on
    assert run(manifest, "r4").rows_committed == len([r for r in source if r[1] >= "2026-10-03"])
    assert target_rows(endpoint, TABLE) == source


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_an_appending_route_feeds_each_view_once(tmp_path: Path, load: str) -> None:
    """``incremental_append`` inserts each partition once: the view's totals are the source's (a staged
    target that feeds a view is copied into, not attached to, so the view receives the rows)."""
    source = make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, "(order_date, id)")
    daily = add_daily_view(endpoint, TABLE)
    manifest = manifest_for(tmp_path, CHDB_CONNECTION, TABLE, Strategy.INCREMENTAL_APPEND, load=load)

    assert run(manifest, "r1").rows_committed == len(source)
    assert run(manifest, "r2").rows_committed == 0
    assert view_totals(endpoint, daily) == daily_totals(source)
    assert target_rows(endpoint, TABLE) == source


@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_view_whose_table_absorbs_repeats_is_fed_when_the_manifest_allows_views(
    tmp_path: Path, load: str
) -> None:
    """The owner's opt-in: the view copies rows into a ``ReplacingMergeTree`` keyed by the row, so repeated
    lookback days leave it exact; without the option the same target is refused."""
    source = make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, "(order_date, id)")
    manifest = manifest_for(tmp_path, CHDB_CONNECTION, TABLE, Strategy.REPLACE_PARTITION, load=load)
    assert run(manifest, "r1").rows_committed == len(source)
    command(
        endpoint,
        f"CREATE TABLE demo.latest ({COLUMNS}) ENGINE = ReplacingMergeTree ORDER BY id",
        f"CREATE MATERIALIZED VIEW demo.orders_latest TO demo.latest AS SELECT * FROM {TABLE}",
        f"INSERT INTO demo.latest SELECT * FROM {TABLE}",
    )
    with pytest.raises(DponeError):
        run(manifest, "r2")

    allowing_views(manifest)
    for attempt in ("r3", "r4"):
        assert run(manifest, attempt).rows_committed == len([r for r in source if r[1] >= "2026-10-03"])
    assert query_rows(endpoint, "SELECT count() FROM demo.latest") > [(len(source),)]  # the repeats arrived
    command(endpoint, "OPTIMIZE TABLE demo.latest FINAL")
    assert target_rows(endpoint, "demo.latest") == source
    assert target_rows(endpoint, TABLE) == source


def test_a_plain_view_over_the_target_is_never_fed_and_does_not_stop_a_replacing_route(
    tmp_path: Path,
) -> None:
    source = make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, "(order_date, id)")
    command(endpoint, f"CREATE VIEW demo.orders_view AS SELECT * FROM {TABLE}")
    manifest = manifest_for(tmp_path, CHDB_CONNECTION, TABLE, Strategy.FULL_REFRESH)

    assert run(manifest, "r1").rows_committed == len(source)
    assert run(manifest, "r2").rows_committed == len(source)
    assert target_rows(endpoint, "demo.orders_view") == source


def test_the_server_names_the_views_a_replacing_target_feeds(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 18.16 server lists a target's views in ``system.tables`` as current engines do."""
    source = make_source(tmp_path / "source.sqlite")
    endpoint, connection, table = target_for("server", tmp_path, request, monkeypatch, "orders")
    create_target(endpoint, table, COLUMNS, "(order_date, id)")
    manifest = manifest_for(tmp_path, connection, table, Strategy.REPLACE_PARTITION)
    assert run(manifest, "r1").rows_committed == len(source)
    daily = add_daily_view(endpoint, table)

    with pytest.raises(DponeError) as stopped:
        run(manifest, "r2")
    assert stopped.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert stopped.value.details["views"] == [f"{table.split('.')[0]}.orders_daily"]
    assert view_totals(endpoint, daily) == daily_totals(source)
    assert target_rows(endpoint, table) == source


def _append_route_feeding_a_view(
    tmp_path: Path, engine: str = "SummingMergeTree"
) -> tuple[list[tuple[int, str, Decimal]], EndpointDescriptor, str, Path]:
    """The source, a hand-made chDB target feeding a daily-totals view (``engine``) and an
    ``incremental_append`` manifest into it: the source rows, the endpoint, the view's table, the manifest."""
    source = make_source(tmp_path / "source.sqlite")
    endpoint = chdb_at(tmp_path)
    create_target(endpoint, TABLE, COLUMNS, "(order_date, id)")
    daily = add_daily_view(endpoint, TABLE, engine=engine)
    return (
        source,
        endpoint,
        daily,
        manifest_for(tmp_path, CHDB_CONNECTION, TABLE, Strategy.INCREMENTAL_APPEND),
    )


def _retention_then_a_query_edit(endpoint: EndpointDescriptor, manifest: Path, kept_from: str) -> None:
    """A retention job empties the days before ``kept_from``; the manifest then reads the same rows through
    ``source.query`` (its partitions get new IDs)."""
    command(
        endpoint, f"ALTER TABLE {TABLE} DELETE WHERE order_date < '{kept_from}' SETTINGS mutations_sync = 1"
    )
    text = manifest.read_text(encoding="utf-8")
    edited = text.replace(
        "  table: orders", "  table: orders\n  query: SELECT id, order_date, amount FROM orders", 1
    )
    manifest.write_text(edited, encoding="utf-8")


def test_days_retention_emptied_are_not_appended_again_into_a_view_after_an_edit_and_rebaseline(
    tmp_path: Path,
) -> None:
    """An append route's edit (here a query selecting the same rows) gives its partitions new IDs; the days
    a retention job had emptied in the target were "moved as new", and the view they had fed counted their
    rows twice (red before: 2 x 30 rows on the two oldest days, exit 0). They now stop with the days the
    target still holds, naming the views, and a rebaseline records them: they stay removed from the table,
    and the view's totals stay the source's."""
    source, endpoint, daily, manifest = _append_route_feeding_a_view(tmp_path)
    assert run(manifest, "r1").rows_committed == len(source)
    kept_from = (FIRST_DAY + timedelta(days=2)).isoformat()
    _retention_then_a_query_edit(endpoint, manifest, kept_from)

    with pytest.raises(DponeError) as stopped:
        run(manifest, "r2")

    assert stopped.value.code is ErrorCode.ROUTE_IDENTITY_CHANGED
    fed = {o["bounds"]: o.get("views_fed") for o in stopped.value.details["overlaps"]}
    assert len(fed) == DAYS
    assert {day for day, views in fed.items() if views} == {
        f"order_date={(FIRST_DAY + timedelta(days=d)).isoformat()}" for d in range(2)
    }
    assert set(map(tuple, (v for v in fed.values() if v))) == {("demo.orders_daily",)}
    assert any("give the views those rows twice" in line for line in stopped.value.hint_lines)
    with open_runtime(load_manifest(manifest)) as runtime:
        result = runtime.rebaseline(RebaselineRequest(reason="the same rows through a query", actor="test"))
    assert len(result.recorded) == DAYS
    assert run(manifest, "r3").rows_committed == 0
    assert view_totals(endpoint, daily) == daily_totals(source)
    assert target_rows(endpoint, TABLE) == [r for r in source if r[1] >= kept_from]


def test_days_retention_emptied_are_appended_again_after_an_edit_when_the_manifest_allows_views(
    tmp_path: Path,
) -> None:
    """The owner's opt-in says the views absorb repeated rows: the emptied days are moved as new."""
    source, endpoint, _, manifest = _append_route_feeding_a_view(tmp_path, engine="ReplacingMergeTree")
    allowing_views(manifest)
    assert run(manifest, "r1").rows_committed == len(source)
    _retention_then_a_query_edit(endpoint, manifest, (FIRST_DAY + timedelta(days=1)).isoformat())
    with pytest.raises(DponeError) as stopped:  # the days the target holds still stop
        run(manifest, "r2")
    assert all("views_fed" not in o for o in stopped.value.details["overlaps"])
    assert len(stopped.value.details["overlaps"]) == DAYS - 1


def test_a_day_whose_rows_changed_is_moved_as_new_with_a_note_naming_the_views_not_stopped_for_good(
    tmp_path: Path,
) -> None:
    """The runbook's "load it whole" (a query edit that selects other rows: delete the day in the target,
    then run) on a target that feeds views: red with the first form of the views check, the day stopped with
    ``views_fed`` and no rebaseline could record it (its rows changed), exit 3 for good. It is moved, and the
    run's note names the views whose tables the operator cleans."""
    source, endpoint, _, manifest = _append_route_feeding_a_view(tmp_path)
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("  table: orders", "  table: orders\n  query: SELECT * FROM orders WHERE id > 4", 1),
        encoding="utf-8",
    )
    assert run(manifest, "r1").rows_committed == len(source) - 4
    manifest.write_text(text, encoding="utf-8")  # the filter removed: every day selects more rows now
    command(
        endpoint, f"ALTER TABLE {TABLE} DELETE WHERE order_date = '{FIRST_DAY}' SETTINGS mutations_sync = 1"
    )

    with pytest.raises(DponeError) as stopped:  # the other days, held, still stop
        run(manifest, "r2")

    overlaps = stopped.value.details["overlaps"]
    assert f"order_date={FIRST_DAY}" not in {o["bounds"] for o in overlaps}
    assert all("views_fed" not in o for o in overlaps)


def test_adopting_a_target_that_feeds_views_names_the_views_beside_the_partitions_left_to_run(
    tmp_path: Path,
) -> None:
    """A lost store, a retention job, a view: the adoption leaves the emptied days to the next run, which
    gives the views their rows again; it now says so, naming the views and the days."""
    _, endpoint, _, manifest = _append_route_feeding_a_view(tmp_path)
    run(manifest, "r1")
    command(
        endpoint, f"ALTER TABLE {TABLE} DELETE WHERE order_date = '{FIRST_DAY}' SETTINGS mutations_sync = 1"
    )
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("state.sqlite", "new-state.sqlite"), encoding="utf-8")
    assert "new-state.sqlite" in manifest.read_text(encoding="utf-8")

    with open_runtime(load_manifest(manifest)) as runtime:
        result = runtime.rebaseline(RebaselineRequest(reason="store lost", actor="test"), adopt_target=True)

    assert [c.partition.bounds.label for c in result.left_to_run] == [f"order_date={FIRST_DAY}"]
    (note,) = [n for n in result.notices if "view" in n]
    assert "demo.orders_daily" in note and f"order_date={FIRST_DAY}" in note


def test_a_month_of_days_with_a_gap_that_retention_emptied_is_recorded_not_fed_again_after_days_to_months(
    tmp_path: Path,
) -> None:
    """Days -> months over a month that had a day without rows (no old partition for it, so the month is not
    "covered") and that retention emptied: red with the first form of the views check, the month was moved
    as new and the view counted October twice (exit 0, a note only)."""
    _, endpoint, daily, manifest = _append_route_feeding_a_view(tmp_path)
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        db.execute("DELETE FROM orders WHERE order_date = ?", ((FIRST_DAY + timedelta(days=2)).isoformat(),))
        db.execute("INSERT INTO orders VALUES (1000, '2026-11-02', '7.25')")
        source = sorted(db.execute("SELECT id, order_date, amount FROM orders").fetchall())
    source = [(i, d, Decimal(str(a)).quantize(Decimal("0.01"))) for i, d, a in source]
    assert run(manifest, "r1").rows_committed == len(source)
    command(
        endpoint, f"ALTER TABLE {TABLE} DELETE WHERE order_date < '2026-11-01' SETTINGS mutations_sync = 1"
    )
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("kind: day", "kind: month"), "utf-8")

    with pytest.raises(DponeError) as stopped:
        run(manifest, "r2")

    fed = {o["bounds"]: o.get("views_fed") for o in stopped.value.details["overlaps"]}
    assert fed == {"order_date=2026-10": ["demo.orders_daily"], "order_date=2026-11": None}
    with open_runtime(load_manifest(manifest)) as runtime:
        result = runtime.rebaseline(RebaselineRequest(reason="days to months", actor="test"))
    assert len(result.recorded) == 2
    assert run(manifest, "r3").rows_committed == 0
    assert view_totals(endpoint, daily) == daily_totals(source)
