"""User errors fail before the target, never after arming (issue 11, point 4).

Black-box: ``dpone run`` on a SQLite source into chDB (and the 18.16 server where the target matters).
A manifest naming a column the source does not have, a column name the ClickHouse client would misquote,
an empty query and a query returning one name twice all end as exit 2 with no checkpoint row written, so
the route is not blocked: after the manifest is fixed, the next run succeeds and the target holds exactly
the source's values.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.route_rig import (
    ROWS,
    chdb_query,
    checkpoint_rows,
    dpone,
    source_rows,
    target_rows,
)
from tests.integration.server_rig import server_database

GOOD_COLUMNS = "[id, order_date, customer, amount, updated_at]"


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source

    create_demo_source(tmp_path / "source.sqlite", ROWS, days=4)
    monkeypatch.setenv("AIRFLOW_CONN_USER_ERRORS_STATE", f"sqlite:///{tmp_path / 'state.sqlite'}")
    return tmp_path


def orders_manifest(
    base: Path,
    *,
    cursor: str = "updated_at",
    order_by: str = "[order_date, id]",
    columns: str = GOOD_COLUMNS,
    partition_column: str = "order_date",
    strategy: str = "incremental_append",
) -> Path:
    path = base / "orders.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: user_errors
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  columns: {columns}
  partitioning: {{kind: day, column: {partition_column}}}
  incremental: {{cursor: {cursor}}}
  chunk_rows: 500
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.orders
  strategy: {strategy}
  order_by: {order_by}
checkpoints:
  connection: user_errors_state
""",
        encoding="utf-8",
    )
    return path


def assert_refused_before_anything(base: Path, manifest: Path, *fragments: str) -> None:
    result = dpone("run", str(manifest), "--run-id", "typo")
    assert result.exit_code == 2, result.output
    for fragment in fragments:
        assert fragment in result.output
    assert "Traceback" not in result.output and "unexpected_error" not in result.output
    assert checkpoint_rows(base) == []  # nothing armed, nothing unknown: the route is not blocked
    checkpoints = dpone("checkpoints", str(manifest))
    assert checkpoints.exit_code == 0 and "no checkpoints yet" in checkpoints.output


TYPOS = {
    "source.incremental.cursor": ({"cursor": "updated_att"}, "'updated_att'", "did you mean 'updated_at'?"),
    "source.incremental.cursor left out by source.columns": (
        {"columns": "[id, order_date, customer, amount]"},
        "'updated_at', which source.columns leaves out",
        "source.incremental.cursor",
    ),
    "sink.order_by": ({"order_by": "[order_date, idd]"}, "'idd'", "sink.order_by"),
    "source.columns": ({"columns": "[id, order_date, customer, amont, updated_at]"}, "'amont'", "'amount'"),
    "source.partitioning.column": ({"partition_column": "order_dat"}, "'order_dat'", "'order_date'"),
}


@pytest.mark.parametrize("field", list(TYPOS))
def test_a_misspelled_column_in_a_manifest_field_exits_2_blocks_nothing_and_the_fixed_run_lands_the_source(
    base: Path, field: str
) -> None:
    typo, *fragments = TYPOS[field]
    manifest = orders_manifest(base, **typo)  # type: ignore[arg-type]

    assert_refused_before_anything(base, manifest, "manifest_invalid", field.split(" ")[0], *fragments)
    assert not (base / "clickhouse").exists() or chdb_query(base, "EXISTS TABLE demo.orders") == [(0,)]

    fixed = dpone("run", str(orders_manifest(base)), "--run-id", "fixed")
    assert fixed.exit_code == 0, fixed.output
    assert target_rows(base) == source_rows(base)
    assert len(target_rows(base)) == ROWS


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_a_partitioned_route_that_leaves_its_partition_column_unwritten_stops_before_arming(
    base: Path, strategy: str
) -> None:
    """The guard counts (and a replace deletes) a partition's target rows by its partition column: left out
    of source.columns, an append could count nothing after its first run and a replace blocked its route."""
    unwritten = "[id, customer, amount, updated_at]"
    manifest = orders_manifest(base, columns=unwritten, order_by="[id]", strategy=strategy)
    assert_refused_before_anything(
        base, manifest, "manifest_invalid", "'order_date'", "source.columns leaves out", strategy
    )
    assert not (base / "clickhouse").exists() or chdb_query(base, "EXISTS TABLE demo.orders") == [(0,)]

    fixed = dpone("run", str(orders_manifest(base, strategy=strategy)), "--run-id", "fixed")
    assert fixed.exit_code == 0, fixed.output
    assert target_rows(base) == source_rows(base) and len(target_rows(base)) == ROWS


def test_a_full_refresh_measured_by_durable_replay_needs_its_partition_column(base: Path) -> None:
    """Red before: the run published, then the replay reader's per-partition query failed (the column is
    not in the target), and every later run was blocked by the pending evidence."""
    unwritten = "[id, customer, amount, updated_at]"
    manifest = orders_manifest(base, columns=unwritten, order_by="[id]", strategy="full_refresh")
    text = manifest.read_text(encoding="utf-8").replace(
        "  order_by: [id]\n", "  order_by: [id]\n  options: {durable_quality_replay: true}\n"
    )
    manifest.write_text(text + "quality: {checks: [{type: row_count}]}\n", encoding="utf-8")
    assert_refused_before_anything(
        base, manifest, "manifest_invalid", "'order_date'", "source.columns leaves out", "full_refresh"
    )


def test_a_full_refresh_may_leave_its_partition_column_unwritten(base: Path) -> None:
    unwritten = "[id, customer, amount, updated_at]"
    manifest = orders_manifest(base, columns=unwritten, order_by="[id]", strategy="full_refresh")
    for run_id in ("first", "second"):  # it replaces the whole table: nothing is counted by partition
        result = dpone("run", str(manifest), "--run-id", run_id)
        assert result.exit_code == 0, result.output
    assert chdb_query(base, "SELECT count(), uniqExact(id) FROM demo.orders") == [(ROWS, ROWS)]


# -- column names the ClickHouse client would misquote -------------------------------------------------------

#: SQLite column -> value per row id; the names exercise the client's "already quoted" rule and its neighbours.
ODD_COLUMNS = {
    "`x`": "INTEGER",  # taken for a quoted `x` by the client: refused
    "a`b": "TEXT",  # inner backtick: quoted correctly, arrives
    "`lead": "TEXT",  # one backtick at the start only: arrives
    'say "hi"': "TEXT",  # inner double quotes: arrives
    "back\\slash": "TEXT",
}


def odd_source(base: Path) -> list[tuple[Any, ...]]:
    rows = [(i, i * 7, f"ab`{i}", f"`{i}`", f'"{i}"', f"\\{i}") for i in range(1, 41)]
    with sqlite3.connect(base / "odd.sqlite") as db:
        columns = ", ".join(f'"{n.replace(chr(34), chr(34) * 2)}" {t}' for n, t in ODD_COLUMNS.items())
        db.execute(f"CREATE TABLE odd (id INTEGER PRIMARY KEY, {columns})")
        db.executemany("INSERT INTO odd VALUES (?, ?, ?, ?, ?, ?)", rows)
    return rows


def odd_manifest(base: Path, sink: str, table: str, *, query: str | None = None) -> Path:
    path = base / f"odd-{uuid.uuid4().hex[:6]}.yaml"
    query_line = f"  query: '{query}'\n" if query else ""
    path.write_text(
        "kind: native_transfer\nname: odd\nsource:\n  type: sqlite\n  connection: sqlite:///odd.sqlite\n"
        f"  table: odd\n{query_line}sink:\n  type: clickhouse\n  connection: {sink}\n  table: {table}\n"
        "  strategy: full_refresh\n  order_by: [id]\ncheckpoints:\n  connection: user_errors_state\n",
        encoding="utf-8",
    )
    return path


FIXED_QUERY = 'SELECT id, "`x`" AS x_quoted, "a`b", "`lead", "say ""hi""", "back\\slash" FROM odd'.replace(
    "'", "''"
)


def exercise_odd_names(base: Path, sink: str, table: str, read: Any) -> None:
    rows = odd_source(base)
    refused = odd_manifest(base, sink, table)
    assert_refused_before_anything(base, refused, "manifest_invalid", "'`x`'", "source.query")
    database, name = table.split(".")
    tables = f"SELECT count() FROM system.tables WHERE database = '{database}' AND name = '{name}'"
    if sink.startswith("chdb"):
        assert not (base / "clickhouse").exists()  # the target was never opened
    else:
        assert read(tables) == [(0,)]

    fixed = dpone("run", str(odd_manifest(base, sink, table, query=FIXED_QUERY)), "--run-id", "aliased")
    assert fixed.exit_code == 0, fixed.output
    names = [r[0] for r in read(f"DESCRIBE TABLE {table}")]
    assert names == ["id", "x_quoted", "a`b", "`lead", 'say "hi"', "back\\slash"]
    got = read(
        'SELECT id, x_quoted, `a\\`b`, `\\`lead`, `say "hi"`, `back\\\\slash` FROM ' + table + " ORDER BY id"
    )
    assert [tuple(r) for r in got] == rows


@pytest.fixture
def odd_base(base: Path) -> Path:
    return base


def test_a_column_name_the_client_would_misquote_is_refused_before_arming_on_chdb(odd_base: Path) -> None:
    exercise_odd_names(odd_base, "chdb:///clickhouse", "demo.odd", lambda sql: chdb_query(odd_base, sql))


def test_a_column_name_the_client_would_misquote_is_refused_before_arming_on_the_18_16_server(
    odd_base: Path, clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    with server_database(clickhouse_http, monkeypatch, "odd_clickhouse", "odd_") as (client, database):
        exercise_odd_names(
            odd_base, "odd_clickhouse", f"{database}.odd", lambda sql: list(client.query(sql).result_rows)
        )


# -- queries: empty, and one name twice -----------------------------------------------------------------------


@pytest.mark.parametrize("query", ['""', "'   '", "' ; '"])
def test_an_empty_or_blank_query_is_a_manifest_error(base: Path, query: str) -> None:
    manifest = orders_manifest(base)
    text = manifest.read_text(encoding="utf-8").replace(
        "  table: orders\n", f"  table: orders\n  query: {query}\n"
    )
    manifest.write_text(text, encoding="utf-8")

    assert dpone("manifest", "validate", str(manifest)).exit_code == 2
    result = dpone("run", str(manifest))
    assert result.exit_code == 2
    assert "source.query" in result.output and "the query is empty" in result.output
    assert checkpoint_rows(base) == []


@pytest.mark.parametrize(
    ("query", "column"),
    [
        ("SELECT id, id, order_date FROM orders", "'id'"),  # SQLite would name the second one id:1
        ("SELECT id, order_date, customer AS ID FROM orders", "'id'"),  # a case variant: also id:1 in SQLite
        ("SELECT id, order_date, customer, customer, customer FROM orders", "'customer'"),
    ],
)
def test_a_query_returning_one_column_name_twice_is_refused_before_arming(
    base: Path, query: str, column: str
) -> None:
    manifest = base / "dup.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: dup
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  query: '{query}'
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.dup
  strategy: incremental_append
checkpoints:
  connection: user_errors_state
""",
        encoding="utf-8",
    )
    assert_refused_before_anything(base, manifest, "manifest_invalid", f"returns column {column} twice")
    assert not (base / "clickhouse").exists()

    fixed_query = "SELECT id, id AS id_again, order_date FROM orders"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(query, fixed_query), encoding="utf-8")
    fixed = dpone("run", str(manifest), "--run-id", "aliased")
    assert fixed.exit_code == 0, fixed.output
    got = sorted(chdb_query(base, "SELECT id, id_again, toString(order_date) FROM demo.dup"))
    with sqlite3.connect(base / "source.sqlite") as db:
        expected = sorted(db.execute(fixed_query).fetchall())
    assert got == expected
    assert [r[0] for r in chdb_query(base, "DESCRIBE TABLE demo.dup")] == ["id", "id_again", "order_date"]
