"""A replacing route's first run stops in front of rows in its scope that no route of its store loaded.

Found by hand: a new ``full_refresh`` route into a table another loader had filled truncated it (exit 0),
and a new ``replace_partition`` route deleted that loader's rows within its days. ``incremental_append``
already stopped in front of a non-empty table; a replacing route deletes, so a ``sink.table`` naming the
wrong table, or a table kept by another tool or another checkpoint store, lost rows no one meant to
replace. Now the first run stops (``native_transfer_target_not_empty``, nothing written, no checkpoint)
unless ``--allow-nonempty-target``; rows outside a ``replace_partition`` scope never stop it, and once the
route (or a sibling of its source table) committed, the table's rows are its own history. Real SQLite and
chDB; every target row compared with the source.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    chdb_at,
    checkpoints,
    create_target,
    query_rows,
    run,
    write_manifest,
)

TABLE = "demo.orders"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: orders"
FOREIGN = (9_001, "2026-03-01", "another loader")  # a day the source holds
FOREIGN_ELSEWHERE = (9_002, "2020-01-01", "another loader")  # a day the source does not hold


def make_source(base: Path) -> list[tuple[int, str, str]]:
    rows = [(i, f"2026-03-0{1 + i % 3}", f"customer-{i % 5}") for i in range(1, 31)]
    with sqlite3.connect(base / "source.sqlite") as conn:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date DATE NOT NULL, customer TEXT NOT NULL)"
        )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", rows)
    return rows


def filled_target(base: Path, *rows: tuple[int, str, str]) -> None:
    endpoint = chdb_at(base)
    create_target(endpoint, TABLE, "id Int64, order_date Date, customer String", "(order_date, id)")
    values = ", ".join(f"({i}, '{day}', '{who}')" for i, day, who in rows)
    query_rows(endpoint, f"INSERT INTO {TABLE} VALUES {values}")


def target_rows(base: Path) -> list[tuple[object, ...]]:
    return query_rows(chdb_at(base), f"SELECT id, toString(order_date), customer FROM {TABLE} ORDER BY id")


def manifest(base: Path, strategy: str) -> Path:
    return write_manifest(
        base,
        source=SOURCE,
        partitioning="{kind: day, column: order_date}",
        connection=CHDB_CONNECTION,
        table=TABLE,
        strategy=strategy,
    )


@pytest.mark.parametrize("strategy", ["full_refresh", "replace_partition"])
@pytest.mark.parametrize("load", ["direct", "staged"])
def test_a_new_replacing_route_stops_in_front_of_rows_no_route_loaded(
    tmp_path: Path, strategy: str, load: str
) -> None:
    rows = make_source(tmp_path)
    filled_target(tmp_path, FOREIGN)
    path = manifest(tmp_path, strategy)
    path.write_text(path.read_text().replace("load: direct", f"load: {load}"))

    with pytest.raises(DponeError) as stopped:
        run(path, "r1")

    assert stopped.value.code is ErrorCode.TARGET_NOT_EMPTY
    assert stopped.value.details["problem"] == "unknown_rows_in_scope"
    assert "--allow-nonempty-target" in "\n".join(stopped.value.hint_lines)
    assert target_rows(tmp_path) == [FOREIGN]  # nothing deleted
    assert checkpoints(path) == []  # the route is not blocked

    with open_runtime(load_manifest(path)) as runtime:
        report = runtime.run("r2", allow_nonempty_target=True)
    assert any("allow_nonempty_target" in n for n in report.notices)
    assert target_rows(tmp_path) == rows  # taken over: the source's rows, exactly


def test_rows_outside_a_replace_partition_scope_never_stop_it_and_stay(tmp_path: Path) -> None:
    rows = make_source(tmp_path)
    filled_target(tmp_path, FOREIGN_ELSEWHERE)

    run(manifest(tmp_path, "replace_partition"), "r1")

    assert target_rows(tmp_path) == sorted([*rows, FOREIGN_ELSEWHERE])


def test_after_its_first_commit_a_replacing_route_owns_what_the_table_holds(tmp_path: Path) -> None:
    rows = make_source(tmp_path)
    path = manifest(tmp_path, "full_refresh")
    run(path, "r1")
    query_rows(chdb_at(tmp_path), f"INSERT INTO {TABLE} VALUES (9001, '2026-03-01', 'another loader')")

    run(path, "r2")  # a refresh replaces the table: rows written beside it since are not protected

    assert target_rows(tmp_path) == rows


def test_a_strategy_switch_is_not_a_first_run(tmp_path: Path) -> None:
    rows = make_source(tmp_path)
    run(manifest(tmp_path, "incremental_append"), "r1")

    run(manifest(tmp_path, "full_refresh"), "r2")  # the sibling of the same source table loaded the rows

    assert target_rows(tmp_path) == rows
