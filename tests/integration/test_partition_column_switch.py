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


def manifest(base: Path, column: str, strategy: str, columns: str = "") -> Path:
    path = base / f"shipped-{column}{'-pinned' if columns else ''}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: shipped
source:
  type: sqlite
  connection: sqlite:///orders.sqlite
  table: orders
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
