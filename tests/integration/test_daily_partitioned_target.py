"""A hand-made target partitioned by day takes a load of more days than one insert block may touch.

Found by hand: 150 days of 20 rows into a table declared ``PARTITION BY order_date``. dpone merges small
chunks into insert blocks, and the staged path copies every staged row in one ``INSERT ... SELECT``; the
engine refuses a block that touches more than ``max_partitions_per_insert_block`` (100) partitions. Every
path failed inside the guarded call (``target_load_failed`` after 20 rows on a direct load), leaving the
route blocked with part of the rows written. dpone's inserts now lift the limit where the engine knows it
(the 18.16 server has none). Real chDB; every row compared with the source.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    create_target,
    query_rows,
    run,
    write_manifest,
)

TABLE = "demo.orders"
DAYS = 150  # past the engine's default of 100 partitions per insert block


def source_rows(base: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(base / "source.sqlite") as conn:
        rows = conn.execute("SELECT id, order_date, customer, amount FROM orders ORDER BY id").fetchall()
    return [(i, d, c, f"{a:.2f}") for i, d, c, a in rows]


def target_rows(base: Path) -> list[tuple[object, ...]]:
    rows = query_rows(
        chdb_at(base),
        f"SELECT id, toString(order_date), customer, toString(amount) FROM {TABLE} ORDER BY id",
    )
    return [(i, d, c, f"{float(a):.2f}") for i, d, c, a in rows]


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
@pytest.mark.parametrize(("export", "load"), PATHS)
def test_more_days_than_one_block_may_touch_load_into_a_table_partitioned_by_day(
    tmp_path: Path, export: str, load: str, strategy: str
) -> None:
    create_demo_source(tmp_path / "source.sqlite", DAYS * 20, days=DAYS)
    create_target(
        chdb_at(tmp_path),
        TABLE,
        "id Int64, order_date Date, customer String, amount Decimal(12, 2), updated_at DateTime",
        "(order_date, id) PARTITION BY order_date",
    )
    manifest = write_manifest(
        tmp_path,
        source="  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: orders",
        partitioning="{kind: day, column: order_date}",
        connection=CHDB_CONNECTION,
        table=TABLE,
        export=export,
        load=load,
        strategy=strategy,
    )

    report = run(manifest, "r1")

    assert report.partitions_committed == DAYS
    assert target_rows(tmp_path) == source_rows(tmp_path)
    partitions = query_rows(
        chdb_at(tmp_path),
        "SELECT uniqExact(partition) FROM system.parts WHERE database = 'demo' AND table = 'orders' AND active",
    )
    assert partitions == [(DAYS,)]  # the table's own partitioning, one partition per day
