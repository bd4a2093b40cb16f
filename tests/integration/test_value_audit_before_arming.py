"""A value the reads would refuse stops the run before arming (issue 11, points 1-4).

Black-box: ``dpone run`` on a SQLite source into chDB and the ClickHouse 18.16 server. Each bad value is
found by the source's read-only value audit before ``prepare_target``: exit 2 (``manifest_invalid``), the
column named, the value never printed, no checkpoint written, so the route is not blocked — on the
``lazy_plan`` + ``direct`` path too, where the converters meet rows only inside the guarded target call.
After the row is corrected the next run lands every source value exactly. Calendar limits depend on the
target: each edge value is loaded and read back on both, one past it is refused.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.builders import sqlite_day_manifest
from tests.integration.route_rig import chdb_query, checkpoint_rows, dpone
from tests.integration.server_rig import server_database

DDL = (
    "CREATE TABLE vals (id INTEGER PRIMARY KEY, day DATE NOT NULL, ts DATETIME, amount NUMERIC(12,2),"
    " qty INTEGER, flag BOOLEAN, ratio REAL, d DATE)"
)
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
COLUMNS = "id, toString(day), toString(ts, 'UTC'), toString(amount), qty, flag, ratio, toString(d)"

Query = Callable[[str], list[tuple[Any, ...]]]


def make_source(base: Path) -> None:
    rows = [
        (
            i,
            DAYS[i % 3],
            f"{DAYS[i % 3]} {i % 24:02d}:{i % 60:02d}:07",
            i * 1.25,
            i,
            i % 2,
            i / 4,
            "2026-01-01",
        )
        for i in range(1, 13)
    ]
    with sqlite3.connect(base / "source.sqlite") as db:
        db.execute(DDL)
        db.executemany("INSERT INTO vals VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)


def set_value(base: Path, column: str, literal: str, row_id: int = 5) -> str:
    """Set one cell (an SQL literal, so the storage class is SQLite's own); returns the old value's literal."""
    with sqlite3.connect(base / "source.sqlite") as db:
        (old,) = db.execute(f"SELECT quote({column}) FROM vals WHERE id = ?", (row_id,)).fetchone()
        db.execute(f"UPDATE vals SET {column} = {literal} WHERE id = ?", (row_id,))
    return str(old)


def source_values(base: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        rows = db.execute("SELECT id, day, ts, amount, qty, flag, ratio, d FROM vals ORDER BY id").fetchall()
    return [(r[0], r[1], r[2], cents(r[3]), r[4], r[5], r[6], r[7]) for r in rows]


def target_values(read: Query, table: str) -> list[tuple[Any, ...]]:
    rows = read(f"SELECT {COLUMNS} FROM {table} ORDER BY id")
    return [(r[0], r[1], r[2], cents(r[3]), r[4], r[5], r[6], r[7]) for r in rows]


def cents(value: object) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(Decimal("0.01"))


def manifest(
    base: Path,
    sink: str,
    table: str,
    *,
    export: str = "lazy_plan",
    load: str = "direct",
    strategy: str = "replace_partition",
) -> Path:
    return sqlite_day_manifest(
        base,
        "vals",
        state="value_audit_state",
        sink=sink,
        target=table,
        export=export,
        load=load,
        strategy=strategy,
    )


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_source(tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_VALUE_AUDIT_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    return tmp_path


@pytest.fixture
def server(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Query, str]]:
    """The 18.16 server as connection ``value_audit_ch`` and a fresh database on it."""
    with server_database(clickhouse_http, monkeypatch, "value_audit_ch", "audit_") as (client, database):
        yield (lambda sql: [tuple(r) for r in client.query(sql).result_rows]), database


def refused_before_arming(base: Path, path: Path, column: str, *fragments: str, hidden: str = "") -> None:
    result = dpone("run", str(path), "--run-id", "bad")
    assert result.exit_code == 2, result.output
    assert "manifest_invalid" in result.output and f"column {column!r}" in result.output
    for fragment in fragments:
        assert fragment in result.output, result.output
    if hidden:
        assert hidden not in result.output  # never the value
    assert "target_outcome_unknown" not in result.output and "Traceback" not in result.output
    assert checkpoint_rows(base) == []  # nothing armed: the route is not blocked


# column, SQL literal of the bad value, what the error says; the value is never printed
BAD_VALUES = {
    "decimal too wide (text)": ("amount", "'12345678901234.56'", "more digits"),
    "decimal past the scale": ("amount", "1.234", "more digits"),
    "integer holding 1.5": ("qty", "1.5", "are not integers"),
    "integer holding ''": ("qty", "''", "are not integers"),
    "flag holding 2": ("flag", "2", "0/1 flags"),
    "flag holding 0.5": ("flag", "0.5", "0/1 flags"),
    "float holding text": ("ratio", "'n/a'", "Float64"),
    "date that is not ISO": ("d", "'30/11/2026'", "ISO dates"),
    "date past 2149-06-06": ("d", "'2149-06-07'", "outside the range"),
    "datetime before 1970": ("ts", "'1969-12-31 23:59:59'", "outside the range"),
    "datetime past 2106-02-07 06:28:15": ("ts", "'2106-02-07 06:28:16'", "outside the range"),
    "datetime with sub-second digits": ("ts", "'2026-11-30 10:00:00.250'", "sub-second"),
    "datetime at hour 24 (SQLite reads it, the converters do not)": (
        "ts",
        "'2026-11-30 24:00:00'",
        "ISO datetimes",
    ),
    # a day 01-28 skips SQLite's normalizing modifier, which alone showed hour 24 (exit 1, blocked before)
    "datetime at hour 24 on an early day": ("ts", "'2026-11-01 24:00:00'", "ISO datetimes"),
    "datetime at hour 24 with minutes": ("ts", "'2026-11-01 24:59:59'", "ISO datetimes"),
    # SQLite's functions read up to the NUL (midnight), Python's parser past it (20:24): blocked, or 20:24
    "date with a NUL before a time": ("d", "'2026-01-01' || char(0) || '2024'", "ISO dates"),
    "datetime with a NUL as its separator": ("ts", "'2026-11-30' || char(0) || '2024'", "ISO datetimes"),
    "datetime with a letter as its separator": ("ts", "'2026-11-30x10:00:00'", "ISO datetimes"),
    "datetime with a lowercase z": ("ts", "'2026-11-30 10:00:00z'", "ISO datetimes"),
    "date with a time of day": ("d", "'2026-01-01 10:30:00'", "time of day"),
    "date at midnight with an offset": ("d", "'2026-01-01 00:00:00-05:00'", "time of day"),
    "date a fraction past midnight": ("d", "'2026-01-01 00:00:00.5'", "time of day"),
    "day partition column with a time of day": ("day", "'2026-11-29 23:00:00'", "time of day"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_a_bad_value_on_the_lazy_direct_path_exits_2_before_arming_and_the_fixed_run_lands_the_source(
    base: Path, case: str
) -> None:
    column, literal, fragment = BAD_VALUES[case]
    old = set_value(base, column, literal)
    path = manifest(base, "chdb:///clickhouse", "demo.vals")

    refused_before_arming(base, path, column, fragment, hidden=literal.strip("'") if len(literal) > 4 else "")
    assert not (base / "clickhouse").exists() or chdb_query(base, "EXISTS TABLE demo.vals") == [(0,)]

    set_value(base, column, old)
    fixed = dpone("run", str(path), "--run-id", "fixed")
    assert fixed.exit_code == 0, fixed.output
    assert target_values(lambda sql: chdb_query(base, sql), "demo.vals") == source_values(base)


@pytest.mark.parametrize(("export", "load"), [("file_artifact", "direct"), ("lazy_plan", "staged")])
def test_the_other_paths_stop_the_same_way(base: Path, export: str, load: str) -> None:
    set_value(base, "qty", "1.5")
    refused_before_arming(
        base, manifest(base, "chdb:///clickhouse", "demo.vals", export=export, load=load), "qty"
    )


def test_every_refused_column_is_listed_at_once(base: Path) -> None:
    set_value(base, "qty", "1.5")
    set_value(base, "ts", "'2026-11-30 10:00:00.250'", row_id=7)
    result = dpone("run", str(manifest(base, "chdb:///clickhouse", "demo.vals")), "--json")
    assert result.exit_code == 2
    details = json.loads(result.output)["details"]
    assert (details["column"], details["reason"]) == ("ts", "sub_second_digits")  # in the read's column order
    assert details["also"] == [{"column": "qty", "reason": "not_an_integer"}]
    assert checkpoint_rows(base) == []


def test_only_the_partitions_of_the_run_are_audited(base: Path) -> None:
    path = manifest(base, "chdb:///clickhouse", "demo.vals", strategy="incremental_append")
    assert dpone("run", str(path), "--run-id", "first").exit_code == 0
    set_value(base, "qty", "1.5")  # a committed partition's row changes afterwards: not this run's business
    again = dpone("run", str(path), "--run-id", "second")
    assert again.exit_code == 0 and "0 partition(s) committed" in again.output, again.output


# -- per-target calendar limits ---------------------------------------------------------------------------------

#: (Date edge, DateTime edge, one day past the Date edge, one second past the DateTime edge)
LIMITS = {
    "chdb": ("2149-06-06", "2106-02-07 06:28:15", "2149-06-07", "2106-02-07 06:28:16"),
    "18.16": ("2106-02-07", "2106-02-06 23:59:59", "2106-02-08", "2106-02-07 00:00:00"),
}


def exercise_limits(base: Path, sink: str, table: str, read: Query, target: str) -> None:
    date_edge, datetime_edge, date_past, datetime_past = LIMITS[target]
    path = manifest(base, sink, table, strategy="full_refresh")
    set_value(base, "d", f"'{date_past}'", row_id=3)
    refused_before_arming(base, path, "d", "outside the range")
    set_value(base, "d", f"'{date_edge}'", row_id=3)
    set_value(base, "ts", f"'{datetime_past}'", row_id=4)
    refused_before_arming(base, path, "ts", "outside the range")
    set_value(base, "ts", f"'{datetime_edge}'", row_id=4)
    set_value(base, "ts", "'1970-01-01 00:00:00'", row_id=6)

    loaded = dpone("run", str(path), "--run-id", "edges")
    assert loaded.exit_code == 0, loaded.output
    # read back through ClickHouse's own functions (on 18.16 a value past its edge reads as 1970-01-01)
    edges = read(
        f"SELECT toString(d), toString(ts, 'UTC'), toYYYYMMDD(d) FROM {table} WHERE id IN (3, 4) ORDER BY id"
    )
    assert edges[0][0] == date_edge and edges[0][2] == int(date_edge.replace("-", ""))
    assert edges[1][1] == datetime_edge
    assert read(f"SELECT toUnixTimestamp(ts) FROM {table} WHERE id = 6") == [(0,)]
    assert target_values(read, table)[6:] == source_values(base)[6:]


def test_chdb_holds_the_full_range_and_refuses_one_past_it(base: Path) -> None:
    exercise_limits(base, "chdb:///clickhouse", "demo.vals", lambda sql: chdb_query(base, sql), "chdb")


def test_the_18_16_server_holds_dates_to_2106_and_refuses_one_past_its_edge(
    base: Path, server: tuple[Query, str]
) -> None:
    read, database = server
    exercise_limits(base, "value_audit_ch", f"{database}.vals", read, "18.16")


@pytest.mark.parametrize(
    ("export", "load"), [("lazy_plan", "direct"), ("file_artifact", "direct"), ("lazy_plan", "staged")]
)
def test_a_date_the_18_16_server_cannot_hold_is_refused_on_every_path_and_accepted_by_chdb(
    base: Path, server: tuple[Query, str], export: str, load: str
) -> None:
    _read, database = server
    set_value(base, "d", "'2120-01-01'")
    on_server = manifest(base, "value_audit_ch", f"{database}.vals", export=export, load=load)
    refused_before_arming(base, on_server, "d", "2106-02-07")
    landed = dpone("run", str(manifest(base, "chdb:///clickhouse", "demo.vals")), "--run-id", "chdb")
    assert landed.exit_code == 0, landed.output
    assert target_values(lambda sql: chdb_query(base, sql), "demo.vals") == source_values(base)


# -- offset-bearing partition columns, sub-second digits ---------------------------------------------------------

EVENTS = [
    (1, "2026-11-30T23:30:00-05:00"),  # local 11-30, UTC 12-01 04:30
    (2, "2026-11-30T10:00:00+02:00"),
    (3, "2026-12-01 08:00:00"),
    (4, "2026-11-30 22:00:00"),
    (5, "2026-12-01T01:00:00Z"),
]


def events_manifest(base: Path, *, query: str | None = None) -> Path:
    with sqlite3.connect(base / "events.sqlite") as db:
        db.execute("CREATE TABLE IF NOT EXISTS ev (id INTEGER PRIMARY KEY, ts DATETIME NOT NULL, v TEXT)")
        db.executemany("INSERT OR IGNORE INTO ev VALUES (?, ?, ?)", [(i, t, f"v{i}") for i, t in EVENTS])
    path = base / f"ev-{uuid.uuid4().hex[:6]}.yaml"
    query_line = f'  query: "{query}"\n' if query else ""
    path.write_text(
        "kind: native_transfer\nname: events\nsource:\n  type: sqlite\n  connection: sqlite:///events.sqlite\n"
        f"  table: ev\n{query_line}  partitioning: {{kind: day, column: ts}}\nsink:\n  type: clickhouse\n"
        "  connection: chdb:///clickhouse\n  table: demo.ev\n  strategy: replace_partition\n  order_by: [id]\n"
        "checkpoints:\n  connection: value_audit_state\n",
        encoding="utf-8",
    )
    return path


def test_an_offset_bearing_day_partition_column_is_refused_and_naive_utc_values_replace_exactly(
    base: Path,
) -> None:
    path = events_manifest(base)
    refused_before_arming(base, path, "ts", "UTC offset", hidden="-05:00")

    with sqlite3.connect(base / "events.sqlite") as db:  # the documented fix: store the UTC instant
        db.execute("UPDATE ev SET ts = datetime(ts)")
        expected = db.execute("SELECT id, ts, v FROM ev ORDER BY id").fetchall()
    per_day = {}
    for _, ts, _ in expected:
        per_day[ts[:10]] = per_day.get(ts[:10], 0) + 1
    for attempt in ("first", "second", "third"):  # replace_partition re-runs: never a duplicate
        result = dpone("run", str(path), "--run-id", attempt, "--json")
        assert result.exit_code == 0, result.output
        got = chdb_query(base, "SELECT id, toString(ts, 'UTC'), v FROM demo.ev ORDER BY id")
        assert got == expected
        days = chdb_query(
            base, "SELECT toString(toDate(ts, 'UTC')), count() FROM demo.ev GROUP BY 1 ORDER BY 1"
        )
        assert dict(days) == per_day


def test_a_date_written_as_its_midnight_lands_as_that_day(base: Path) -> None:
    for row_id, text in ((3, "2026-01-01 00:00:00"), (4, "2026-01-01T00:00:00Z"), (5, "2026-01-01 00:00")):
        set_value(base, "d", f"'{text}'", row_id=row_id)
    landed = dpone("run", str(manifest(base, "chdb:///clickhouse", "demo.vals")), "--run-id", "midnight")
    assert landed.exit_code == 0, landed.output
    days = chdb_query(base, "SELECT DISTINCT toString(d) FROM demo.vals")
    assert days == [("2026-01-01",)]


def test_sub_second_digits_are_refused_and_a_deliberate_truncation_in_the_query_lands_as_written(
    base: Path,
) -> None:
    set_value(base, "ts", "'2026-11-30 10:00:00.250'")
    refused_before_arming(
        base, manifest(base, "chdb:///clickhouse", "demo.vals"), "ts", "sub-second", hidden="250"
    )

    path = manifest(base, "chdb:///clickhouse", "demo.vals")
    text = path.read_text(encoding="utf-8").replace(
        "  table: vals\n",
        "  table: vals\n  query: \"SELECT id, day, strftime('%Y-%m-%d %H:%M:%S', ts) AS ts, amount, qty, flag,"
        ' ratio, d FROM vals"\n',
    )
    path.write_text(text, encoding="utf-8")
    landed = dpone("run", str(path), "--run-id", "truncated")
    assert landed.exit_code == 0, landed.output
    (row,) = chdb_query(base, "SELECT ts FROM demo.vals WHERE id = 5")
    assert row == ("2026-11-30 10:00:00",)  # what the query wrote (an expression arrives as String)


# -- SQL Server over the TDS emulator ----------------------------------------------------------------------------


def test_the_sql_server_audit_runs_on_the_wire_and_refuses_outside_the_targets_range(
    tds_emulator: EndpointDescriptor,
) -> None:
    from datetime import datetime

    from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS, MODERN_LIMITS
    from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
    from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
    from airflow_provider_dpone.contracts.manifest import SourceSpec

    spec = SourceSpec.model_validate_json(
        '{"type": "mssql", "connection": "mssql_test", "table": "dbo.orders",'
        ' "partitioning": {"kind": "day", "column": "order_date"}}'
    )
    source = MssqlSource(tds_emulator, spec)
    try:
        bounds = source.plan_partitions()
        source.audit_values(bounds, LEGACY_LIMITS)  # the emulator's whole-second 2026 rows fit both targets
        source.audit_values(bounds, MODERN_LIMITS)
        narrowed = dict(LEGACY_LIMITS, datetime_min=datetime(2026, 11, 27))  # as if the target began later
        with pytest.raises(DponeError) as refused:
            source.audit_values(bounds, narrowed)  # type: ignore[arg-type]
        assert refused.value.code is ErrorCode.MANIFEST_INVALID
        assert refused.value.details["reason"] == "outside_target_range"
        assert refused.value.details["column"] in ("order_date", "updated_at")
        source.audit_values(bounds[-2:], narrowed)  # type: ignore[arg-type]  # only the run's partitions count
    finally:
        source.close()


@pytest.mark.parametrize(("without_rowid", "audited"), [(False, False), (True, True)])
def test_only_a_true_rowid_alias_is_left_unaudited(
    tmp_path: Path, without_rowid: bool, audited: bool
) -> None:
    from airflow_provider_dpone.adapters.sources.sqlite_source import SqliteSource
    from airflow_provider_dpone.contracts.errors import DponeError
    from airflow_provider_dpone.contracts.manifest import SourceSpec
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

    path = tmp_path / "keys.sqlite"
    suffix = " WITHOUT ROWID" if without_rowid else ""
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE k (id INTEGER PRIMARY KEY, v TEXT){suffix}")
        db.execute("INSERT INTO k VALUES (?, 'x')", (1.5 if without_rowid else 1,))
    source = SqliteSource(
        path, SourceSpec.model_validate_json('{"type": "sqlite", "connection": "c", "table": "k"}')
    )
    try:
        everything = [PartitionBounds(kind=BoundsKind.ALL, label="all")]
        if audited:  # a WITHOUT ROWID table's INTEGER key is no alias: SQLite keeps 1.5 there
            with pytest.raises(DponeError) as refused:
                source.audit_values(everything, None)
            assert refused.value.details["column"] == "id"
        else:
            source.audit_values(everything, None)
            assert source._rowid_alias(source.describe()) == frozenset({"id"})
    finally:
        source.close()
