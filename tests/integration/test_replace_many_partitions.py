"""A replacing run over thousands of partitions deletes them in statements the server accepts.

``replace_partition`` deletes every armed partition's rows before inserting them again. As one ``OR`` of
every partition's range the statement grew past the server's ``max_query_size`` (262,144 characters by
default) at about 3,200 day ranges: the delete failed inside the target call, the route blocked, and every
retry after ``guard resolve`` failed the same way. Adjacent ranges are now merged (a run of consecutive days
is one range) and the rest split into statements of at most ``RANGES_PER_DELETE`` ranges. Here 3,600 days
with a day missing between each (nothing merges: 36 statements), on chDB, then a ``lookback`` over all of
the newest 1,200 of them after the source changed: the target equals the source, value for value.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.integration.hand_made_target_rig import chdb_at, query_rows, run

DAYS = 400
FIRST = date(2000, 1, 1)
#: the partitions the second run replaces again (two delete statements)
LOOKBACK = 150


def write_source(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, d DATE NOT NULL, amount INTEGER NOT NULL)")
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(i, (FIRST + timedelta(days=2 * i)).isoformat(), i) for i in range(DAYS)],
        )


def write_manifest(base: Path, lookback: str = "") -> Path:
    path = base / "manifest.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: many
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: d{lookback}}}
sink: {{type: clickhouse, connection: limited_ch, table: demo.many, strategy: replace_partition}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
        encoding="utf-8",
    )
    return path


def both_sides(base: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        source = sorted(db.execute("SELECT id, d, amount FROM orders").fetchall())
    target = sorted(query_rows(chdb_at(base), "SELECT id, toString(d), amount FROM demo.many"))
    return source, target


def test_thousands_of_replaced_partitions_are_deleted_in_statements_the_server_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {
        "interface": "chdb",
        "path": str(tmp_path / "ch"),
        "session_settings": {"max_query_size": 20_000},
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_LIMITED_CH", json.dumps({"conn_type": "dpone_clickhouse", "extra": extra})
    )
    write_source(tmp_path / "source.sqlite")

    assert run(write_manifest(tmp_path), "first").rows_committed == DAYS  # red: max_query_size, blocked
    source, target = both_sides(tmp_path)
    assert target == source

    newest = DAYS - LOOKBACK
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # late, changed and deleted rows in the window
        db.execute("UPDATE orders SET amount = amount + 1000000 WHERE id % 7 = 0 AND id >= ?", (newest,))
        db.execute("DELETE FROM orders WHERE id % 11 = 0 AND id % 7 <> 0 AND id >= ?", (newest + 1,))
        late_day = (FIRST + timedelta(days=2 * newest)).isoformat()
        db.execute("INSERT INTO orders VALUES (?, ?, 1)", (DAYS + 1, late_day))
    again = run(write_manifest(tmp_path, lookback=f", lookback: {LOOKBACK}"), "again")
    with sqlite3.connect(tmp_path / "source.sqlite") as db:  # the LOOKBACK newest days that hold rows
        (in_window,) = db.execute(
            "SELECT count(*) FROM orders WHERE d >= "
            "(SELECT d FROM (SELECT DISTINCT d FROM orders ORDER BY d DESC LIMIT 1 OFFSET ?))",
            (LOOKBACK - 1,),
        ).fetchone()
    assert again.rows_committed == in_window  # the days emptied beside them (0 rows) take no slot
    source, target = both_sides(tmp_path)
    assert target == source
