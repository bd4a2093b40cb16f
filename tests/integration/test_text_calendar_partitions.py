"""A day partition on a column that arrives as ``String`` (calendar text) keeps working after its first run.

The sources guide advises ``datetime(ts) AS ts`` in ``source.query`` for offset text, and such an expression
arrives as ``String``. The source selects a day's rows by comparing the text with the bounds; the target's
predicates wrote ``toDate('...')``, which ClickHouse cannot compare with a ``String`` (no supertype): from
the second run on, an append stopped on every run ("could not count rows in the target table") and a
replace blocked its route on its delete. The target now compares the text too, as the source did.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.integration.hand_made_target_rig import chdb_at, query_rows, run
from tests.integration.route_rig import cents

QUERY = "SELECT id, datetime(updated_at) AS updated_at, amount FROM orders"


def write_manifest(base: Path, strategy: str) -> Path:
    lookback = ", lookback: 2" if strategy == "replace_partition" else ""
    path = base / f"{strategy}.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: text_days_{strategy}
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  query: "{QUERY}"
  partitioning: {{kind: day, column: updated_at{lookback}}}
sink: {{type: clickhouse, connection: chdb:///ch, table: demo.{strategy}, strategy: {strategy}, order_by: [id]}}
checkpoints: {{connection: sqlite:///state.sqlite}}
""",
        encoding="utf-8",
    )
    return path


def both_sides(base: Path, strategy: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with sqlite3.connect(base / "source.sqlite") as db:
        source = sorted((i, ts, cents(str(amount))) for i, ts, amount in db.execute(QUERY).fetchall())
    target = query_rows(chdb_at(base), f"SELECT id, updated_at, toString(amount) FROM demo.{strategy}")
    return source, sorted((i, ts, cents(amount)) for i, ts, amount in target)


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_day_partitions_on_calendar_text_count_and_replace_on_later_runs(
    tmp_path: Path, strategy: str
) -> None:
    create_demo_source(tmp_path / "source.sqlite", 600, days=4)
    manifest = write_manifest(tmp_path, strategy)
    assert run(manifest, "first").rows_committed == 600
    assert query_rows(chdb_at(tmp_path), f"SELECT toTypeName(updated_at) FROM demo.{strategy} LIMIT 1") == [
        ("Nullable(String)",)
    ]

    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        (last,) = db.execute("SELECT max(date(updated_at)) FROM orders").fetchone()
        db.execute("UPDATE orders SET amount = amount + 1 WHERE date(updated_at) = ?", (last,))  # replaced
        db.execute(
            "INSERT INTO orders VALUES (100000, date(?, '+1 day'), 'late', 1.25, datetime(?, '+1 day', '+1 hour'))",
            (last, last),
        )
    again = run(manifest, "second")  # red: could not count rows / no supertype for String, Date

    assert again.rows_committed >= 1
    source, target = both_sides(tmp_path, strategy)
    if strategy == "replace_partition":
        assert target == source
    else:  # an append does not move a committed day again (the changed amounts stay): every row, once
        assert [row[:2] for row in target] == [row[:2] for row in source]
