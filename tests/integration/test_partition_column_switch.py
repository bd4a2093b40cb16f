"""A route whose partitions move to another column where the target's values of it are not the source's.

A run counts the target's rows within each partition's bounds to tell new partitions from ones committed
under an earlier definition (ADR 0078). After a switch to another column, the target's values of it are what
the old loads wrote: ``NULL`` (the application filled the column after the rows were loaded; a column the old
definition did not write, added ``Nullable``). Seen before the fix, on every load path, chDB and 18.16, each
exit 0: an append counted no row anywhere and moved every row again; a ``replace_partition`` run deleted
nothing by those values and inserted every row beside its old copy. Now the run stops before arming
(``rows_beyond_partitioning``) until the target's column holds the source's values; the ordinary switch
(a rebaseline for append) then ends with every row once, value for value.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.integration.route_rig import chdb_command, chdb_query, dpone

TARGET = "demo.orders_shipped"


def source_at(base: Path) -> sqlite3.Connection:
    db = sqlite3.connect(base / "orders.sqlite")
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, d DATE NOT NULL, s DATE, v TEXT)")
    db.executemany(
        "INSERT INTO orders VALUES (?, ?, NULL, ?)",
        [(i, f"2026-01-0{1 + i % 3}", f"v{i}") for i in range(1, 10)],
    )
    db.commit()
    return db


def manifest(base: Path, column: str, strategy: str, columns: str = "", table: str = "orders") -> Path:
    path = base / f"{table}-{column}{'-pinned' if columns else ''}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: {table}
source:
  type: sqlite
  connection: sqlite:///orders.sqlite
  table: {table}
{f"  columns: {columns}" + chr(10) if columns else ""}  partitioning: {{kind: day, column: {column}}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {TARGET}
  strategy: {strategy}
  order_by: [id]
checkpoints:
  connection: spelling_state
""",
        encoding="utf-8",
    )
    return path


def target_held(base: Path) -> list[tuple[int, str, str | None, str]]:
    rows = chdb_query(base, f"SELECT id, toString(d), toString(s), v FROM {TARGET} ORDER BY id")
    return [(int(i), d, None if s in (None, "\\N", "NULL") else s, v) for i, d, s, v in rows]


def source_held(db: sqlite3.Connection) -> list[tuple[int, str, str | None, str]]:
    return [tuple(r) for r in db.execute("SELECT id, d, s, v FROM orders ORDER BY id")]  # type: ignore[misc]


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_a_switch_to_a_column_the_target_holds_null_stops_until_the_target_holds_its_values(
    tmp_path: Path, store_url: str, strategy: str
) -> None:
    db = source_at(tmp_path)
    first = dpone("run", str(manifest(tmp_path, "d", strategy)))
    assert first.exit_code == 0, first.output
    # the orders ship: the application fills the ship date; the route is now partitioned by it
    db.execute("UPDATE orders SET s = date(d, '+2 days')")
    db.execute("INSERT INTO orders VALUES (100, '2026-01-04', '2026-01-06', 'new')")
    db.commit()
    by_ship_date = manifest(tmp_path, "s", strategy)

    stopped = dpone("run", "--json", str(by_ship_date))

    assert stopped.exit_code == 3, stopped.output
    error = json.loads(stopped.output)
    assert error["error"] == "native_transfer_route_identity_changed"
    assert error["details"]["problem"] == "rows_beyond_partitioning"
    assert (error["details"]["column"], error["details"]["rows_beyond"]) == ("s", 9)
    assert [row[0] for row in target_held(tmp_path)] == list(range(1, 10))  # nothing written

    # the way out the error names: the target's rows get their ship date, then the switch is the ordinary one
    chdb_command(
        tmp_path, f"ALTER TABLE {TARGET} UPDATE s = addDays(d, 2) WHERE 1 SETTINGS mutations_sync = 2"
    )
    if strategy == "incremental_append":  # the runbook's step 4: overlaps now counted, load them whole
        overlapping = dpone("run", "--json", str(by_ship_date))
        assert overlapping.exit_code == 3, overlapping.output
        overlaps = json.loads(overlapping.output)["details"]["overlaps"]
        assert "problem" not in json.loads(overlapping.output)["details"]
        days = sorted(o["bounds"].split("=")[1] for o in overlaps)
        assert days == ["2026-01-03", "2026-01-04", "2026-01-05"]
        listed = ", ".join(f"'{day}'" for day in days)
        chdb_command(
            tmp_path, f"ALTER TABLE {TARGET} DELETE WHERE s IN ({listed}) SETTINGS mutations_sync = 2"
        )
    after = dpone("run", str(by_ship_date))
    assert after.exit_code == 0, after.output
    assert target_held(tmp_path) == source_held(db)


def test_a_switch_to_a_column_the_target_lacks_names_it_before_anything(
    tmp_path: Path, store_url: str
) -> None:
    """Counting the target by a column it lacks failed as ``target_load_failed`` naming nothing, which sent
    people to add the column by hand, empty (the stop above)."""
    db = source_at(tmp_path)
    first = dpone("run", str(manifest(tmp_path, "d", "incremental_append", columns="[id, d, v]")))
    assert first.exit_code == 0, first.output
    db.execute("UPDATE orders SET s = date(d, '+2 days')")
    db.commit()

    stopped = dpone("run", "--json", str(manifest(tmp_path, "s", "incremental_append")))

    assert stopped.exit_code != 0, stopped.output
    error = json.loads(stopped.output)
    assert error["error"] == "target_table_incompatible"
    assert (error["details"]["column"], error["details"]["problem"]) == ("s", "partition_column_missing")
    assert [row[0] for row in chdb_query(tmp_path, f"SELECT id FROM {TARGET} ORDER BY id")] == list(
        range(1, 10)
    )


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_target_values_between_the_planned_days_are_rows_beyond_them_too(
    tmp_path: Path, store_url: str, strategy: str
) -> None:
    """Shipments rescheduled at the source after the load: the target holds a ship date the source no longer
    has, between two it has. Counted in one span from the first planned day to the last, they looked
    inside, and every row moved again (exit 0)."""
    db = source_at(tmp_path)
    db.execute("UPDATE orders SET s = '2026-01-04'")
    db.commit()
    assert dpone("run", str(manifest(tmp_path, "d", strategy))).exit_code == 0
    db.execute("UPDATE orders SET s = CASE WHEN id % 2 = 0 THEN '2026-01-03' ELSE '2026-01-06' END")
    db.commit()

    stopped = dpone("run", "--json", str(manifest(tmp_path, "s", strategy)))

    assert stopped.exit_code == 3, stopped.output
    details = json.loads(stopped.output)["details"]
    assert (details["problem"], details["rows_beyond"]) == ("rows_beyond_partitioning", 9)
    assert len(target_held(tmp_path)) == 9


def test_a_switch_back_to_an_earlier_column_is_checked_again(tmp_path: Path, store_url: str) -> None:
    """Append by ship date, a replacing route by order date (it loads orders not shipped yet, NULL ship date),
    then append by ship date again: its old commits made the check look done, and the unshipped orders,
    shipped since, moved again (exit 0)."""
    db = source_at(tmp_path)
    db.execute("DELETE FROM orders WHERE id > 4")
    db.execute("UPDATE orders SET s = date(d, '+2 days')")
    db.commit()
    by_ship_date = manifest(tmp_path, "s", "incremental_append")
    assert dpone("run", str(by_ship_date)).exit_code == 0  # the shipped orders
    db.execute("INSERT INTO orders VALUES (50, '2026-01-10', NULL, 'unshipped')")
    db.commit()
    assert (
        dpone("run", "--allow-nonempty-target", str(manifest(tmp_path, "d", "replace_partition"))).exit_code
        == 0
    )
    db.execute("UPDATE orders SET s = date(d, '+2 days') WHERE s IS NULL")
    db.commit()

    back = dpone("run", "--json", str(by_ship_date))

    assert back.exit_code == 3, back.output
    assert json.loads(back.output)["details"]["problem"] == "rows_beyond_partitioning"
    assert sorted(row[0] for row in target_held(tmp_path)) == sorted(r[0] for r in source_held(db))


def test_another_source_tables_rows_in_the_partitions_are_not_taken_off_twice(
    tmp_path: Path, store_url: str
) -> None:
    """A fan-in: the US orders append by ship date into the table the EU orders were loaded into by order date
    (their ship date NULL then). The US rows within the EU's planned days were counted inside them and again
    as the other source's share, which hid the EU rows beyond (4 EU rows became 8, exit 0)."""
    db = source_at(tmp_path)
    db.execute("DELETE FROM orders WHERE id > 4")
    db.execute("CREATE TABLE orders_us (id INTEGER PRIMARY KEY, d DATE NOT NULL, s DATE, v TEXT)")
    db.executemany(
        "INSERT INTO orders_us VALUES (?, ?, ?, ?)",
        [(100 + n, f"2026-01-0{n}", f"2026-01-0{n + 1}", "us") for n in range(1, 7)],
    )
    db.commit()
    assert dpone("run", str(manifest(tmp_path, "d", "incremental_append"))).exit_code == 0
    us = manifest(tmp_path, "s", "incremental_append", table="orders_us")
    assert dpone("run", "--allow-nonempty-target", str(us)).exit_code == 0
    db.execute("UPDATE orders SET s = date(d, '+1 days')")
    db.commit()

    stopped = dpone("run", "--json", str(manifest(tmp_path, "s", "incremental_append")))

    assert stopped.exit_code == 3, stopped.output
    details = json.loads(stopped.output)["details"]
    assert (details["problem"], details["rows_beyond"]) == ("rows_beyond_partitioning", 4)
    assert len(target_held(tmp_path)) == 10
