"""``dpone guard resolve`` where equal or zero counts hide a wrong answer, on a real target (chDB).

Each was an operator path that ended exit 0 with values lost, duplicated or changed: ``committed`` over a
replacing attempt killed before its delete (old values kept), ``not-applied`` after a fan-in's partial day
was deleted by its bounds (the other route's rows gone), and a target feeding a materialized view that no
output named (the view's table got the attempt's rows twice). Values are compared with the source.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.route_rig import (
    TARGET,
    TARGET_COLUMNS,
    append_armed,
    chdb_command,
    chdb_query,
    dpone,
    latest_of,
    manifest_at,
    printed,
    source_rows,
    target_rows,
    write_manifest,
)


def _delete_day(base: Path, table: str, day: object, where: str = "1") -> None:
    chdb_command(
        base, f"ALTER TABLE {table} DELETE WHERE order_date = '{day}' AND {where} SETTINGS mutations_sync = 2"
    )


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@pytest.mark.parametrize("strategy", ["replace_partition", "full_refresh"])
def test_committed_over_a_replacing_attempt_is_refused_and_not_applied_brings_the_corrected_values(
    base: Path, store_url: str, strategy: str
) -> None:
    """Red before: a replacing attempt killed after arming, before its delete, left the day's old rows,
    as many as the source holds; ``committed`` on those equal counts was accepted, and the corrected
    values never arrived (every run exit 0, ``--verify`` 0 drifted)."""
    manifest = write_manifest(base, "orders", store_url, strategy=strategy)
    assert dpone("run", str(manifest)).exit_code == 0
    route = load_manifest(manifest).route
    day = min(str(c.bounds.lower) for c in latest_of(store_url, route))
    with sqlite3.connect(base / "source.sqlite") as db:  # values corrected at the source, counts unchanged
        db.execute("UPDATE orders SET amount = 7.77 WHERE order_date = ?", (day,))
    append_armed(store_url, sorted(latest_of(store_url, route), key=lambda c: str(c.bounds.lower)))
    inspected = json.loads(dpone("guard", "inspect", str(manifest), "--json").stdout)["blocked"]
    assert [(r["target_rows"] == r["source_rows"]) for r in inspected] == [True]  # the counts cannot tell

    refused = dpone("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", "x")

    assert refused.exit_code == 2, refused.output
    assert "refusing --as committed on a replacing route" in refused.output
    assert "Resolve --as not-applied" in refused.output
    assert dpone("run", str(manifest)).exit_code == 3  # nothing was recorded: still blocked
    resolved = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )
    assert resolved.exit_code == 0, resolved.output
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)


def _fan_in(base: Path, store_url: str) -> tuple[Path, Path]:
    """Source tables ``orders_a`` (odd ids) and ``orders_b`` (even ids) appending into one target, both
    committed; returns their manifests (A, B)."""
    with sqlite3.connect(base / "source.sqlite") as db:
        (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'orders'").fetchone()
        for name, parity in (("orders_a", 1), ("orders_b", 0)):
            db.execute(ddl.replace("orders", name, 1))
            db.execute(f"INSERT INTO {name} SELECT * FROM orders WHERE id % 2 = {parity}")
    route_a = write_manifest(base, "orders_a", store_url, name="fan_a")
    route_b = write_manifest(base, "orders_b", store_url, name="fan_b")
    assert dpone("run", str(route_b)).exit_code == 0
    assert dpone("run", str(route_a), "--allow-nonempty-target").exit_code == 0
    return route_a, route_b


def test_a_fan_in_day_deleted_by_its_bounds_is_named_and_refused_until_the_other_routes_rows_are_back(
    base: Path, store_url: str
) -> None:
    """Red before: route A's blocked day was deleted by its bounds (the runbook's example delete), which
    took route B's committed rows too; ``guard inspect`` showed ``target_rows=0`` beside B's rows, and
    ``not-applied`` was accepted: A's rows came back, B's never did, every command exit 0."""
    route_a, route_b = _fan_in(base, store_url)
    committed_a = sorted(
        latest_of(store_url, load_manifest(route_a).route), key=lambda c: str(c.bounds.lower)
    )
    day = committed_a[0].bounds.lower
    append_armed(store_url, committed_a)  # A's attempt of that day, killed inside its target call
    _delete_day(base, TARGET, day)  # by the bounds alone

    inspected = dpone("guard", "inspect", str(route_a))
    assert "main.orders_b" in inspected.stderr and "deleted" in inspected.stderr, inspected.output
    (row,) = json.loads(dpone("guard", "inspect", str(route_a), "--json").stdout)["blocked"]
    assert row["target_rows"] == 0 and row["other_routes_rows_lost_by"] == [
        "main.orders_b -> demo.orders (incremental_append)"
    ]
    refused = dpone("guard", "resolve", str(route_a), "--all-blocked", "--as", "not-applied", "--reason", "x")
    assert refused.exit_code == 2, refused.output
    assert "main.orders_b" in refused.output and "were deleted" in refused.output
    assert dpone("run", str(route_a)).exit_code == 3  # nothing was recorded: still blocked

    # as the refusal says: B's rows restored from its source by its own key, then A's attempt resolved
    with sqlite3.connect(base / "source.sqlite") as db:
        b_rows = db.execute("SELECT * FROM orders_b WHERE order_date = ?", (str(day),)).fetchall()
    values = ", ".join(f"({i}, '{d}', {_quoted(c)}, {a}, '{u}')" for i, d, c, a, u in b_rows)
    chdb_command(base, f"INSERT INTO {TARGET} VALUES {values}")
    assert "deleted" not in dpone("guard", "inspect", str(route_a)).stderr
    resolved = dpone(
        "guard", "resolve", str(route_a), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )
    assert resolved.exit_code == 0, resolved.output
    assert dpone("run", str(route_a)).exit_code == 0
    assert dpone("run", str(route_b)).exit_code == 0
    assert target_rows(base) == source_rows(base)  # orders_a and orders_b together are the demo's rows


def test_a_target_feeding_a_view_is_named_by_inspect_the_refusal_and_the_resolution(
    base: Path, store_url: str
) -> None:
    """Red before: a partial day deleted from a target that feeds a materialized view, resolved
    ``not-applied`` as the refusal's hint said: the view's table kept the attempt's rows and received them
    again (duplicates), and nothing dpone printed named the view."""
    columns = "id Int64, order_date Date, customer String, amount Decimal(12, 2), updated_at DateTime"
    chdb_command(base, "CREATE DATABASE demo")
    chdb_command(base, f"CREATE TABLE {TARGET} ({columns}) ENGINE = MergeTree ORDER BY (order_date, id)")
    chdb_command(base, f"CREATE TABLE demo.orders_copy ({columns}) ENGINE = MergeTree ORDER BY id")
    chdb_command(
        base, f"CREATE MATERIALIZED VIEW demo.orders_mv TO demo.orders_copy AS SELECT * FROM {TARGET}"
    )
    manifest = manifest_at(base, state="spelling_state")
    assert dpone("run", str(manifest)).exit_code == 0
    committed = sorted(latest_of(store_url, load_manifest(manifest).route), key=lambda c: str(c.bounds.lower))
    day = committed[0].bounds.lower
    append_armed(store_url, committed)  # its rows are in the target and in the view's table

    inspected = dpone("guard", "inspect", str(manifest))
    assert "demo.orders_mv" in inspected.stderr, inspected.output
    assert json.loads(dpone("guard", "inspect", str(manifest), "--json").stdout)["views_fed"] == [
        "demo.orders_mv"
    ]
    refused = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )
    assert refused.exit_code == 2 and "demo.orders_mv" in refused.output, refused.output

    _delete_day(base, TARGET, day)
    resolved = dpone(
        "guard", "resolve", str(manifest), "--all-blocked", "--as", "not-applied", "--reason", "x"
    )
    assert resolved.exit_code == 0, resolved.output
    assert "demo.orders_mv" in resolved.stderr and "view's table" in resolved.stderr
    # as the warning says: the same rows out of the view's table, then the run feeds them once
    _delete_day(base, "demo.orders_copy", day)
    assert dpone("run", str(manifest)).exit_code == 0
    assert target_rows(base) == source_rows(base)
    assert printed(chdb_query(base, f"SELECT {TARGET_COLUMNS} FROM demo.orders_copy")) == source_rows(base)
