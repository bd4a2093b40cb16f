"""A ``list`` value that selects source rows stored under another spelling stops the run before arming.

Found by hand: a SQLite column declared ``COLLATE NOCASE`` and ``values: [EU, eu, US]`` moved the ``EU`` rows
twice (15 rows from a 10-row table, exit 0); ``values: [eu, US]`` under ``replace_partition`` with a
lookback appended the ``EU`` rows again on every run, because the target holds them as ``EU`` and its delete
of ``region = 'eu'`` finds nothing. SQL Server's usual collations ignore case and trailing spaces, so there
this is the default. Each refusal leaves no checkpoint and an untouched target; the fixes it names (list the
values as stored, or normalise the column in ``source.query``) then load every row exactly once. Real
SQLite, chDB and the TDS emulator (which compares text as a case-insensitive collation does).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.integration.hand_made_target_rig import (
    CHDB_CONNECTION,
    PATHS,
    chdb_at,
    checkpoints,
    query_rows,
    run,
    served,
    tds_rows_in,
    write_manifest,
)

TABLE = "demo.regions"
SOURCE = "  type: sqlite\n  connection: sqlite:///source.sqlite\n  table: sales"


def make_source(base: Path, collation: str, regions: list[str]) -> list[tuple[int, str, int]]:
    rows = [(i, regions[i % len(regions)], i * 10) for i in range(1, 31)]
    with sqlite3.connect(base / "source.sqlite") as conn:
        conn.execute(
            f"CREATE TABLE sales (id INTEGER PRIMARY KEY, region TEXT {collation} NOT NULL, amount INTEGER NOT NULL)"
        )
        conn.executemany("INSERT INTO sales VALUES (?, ?, ?)", rows)
    return rows


def route(
    base: Path,
    values: str,
    *,
    strategy: str = "incremental_append",
    lookback: int | None = None,
    source: str = SOURCE,
    export: str = "lazy_plan",
    load: str = "direct",
) -> Path:
    extra = f", lookback: {lookback}" if lookback else ""
    return write_manifest(
        base,
        source=source,
        partitioning=f"{{kind: list, column: region, values: {values}{extra}}}",
        connection=CHDB_CONNECTION,
        table=TABLE,
        export=export,
        load=load,
        strategy=strategy,
    )


def target_rows(base: Path) -> list[tuple[Any, ...]]:
    return query_rows(chdb_at(base), f"SELECT id, region, amount FROM {TABLE} ORDER BY id")


def refused(manifest: Path) -> DponeError:
    """The run stops with ``manifest_invalid`` and leaves no checkpoint (the route stays clear)."""
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r1")
    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details["problem"] == "list_value_spelled_otherwise"
    assert checkpoints(manifest) == []
    return stopped.value


def table_exists(endpoint: EndpointDescriptor) -> bool:
    return query_rows(endpoint, f"EXISTS TABLE {TABLE}") == [(1,)]


@pytest.mark.parametrize(("export", "load"), PATHS)
def test_two_values_one_collation_finds_equal_stop_every_path_before_arming(
    tmp_path: Path, export: str, load: str
) -> None:
    make_source(tmp_path, "COLLATE NOCASE", ["EU", "US"])
    err = refused(route(tmp_path, "[EU, eu, US]", export=export, load=load))
    assert err.details["partitions"] == ["region=eu"] and err.details["column"] == "region"
    assert "another spelling" in err.safe_message and "source.query" in err.safe_message
    assert not table_exists(chdb_at(tmp_path))


def test_a_respelled_value_under_replace_partition_stops_and_the_stored_spelling_loads_once(
    tmp_path: Path,
) -> None:
    rows = make_source(tmp_path, "COLLATE NOCASE", ["EU", "US"])
    refused(route(tmp_path, "[eu, US]", strategy="replace_partition", lookback=2))
    manifest = route(tmp_path, "[EU, US]", strategy="replace_partition", lookback=2)
    for attempt in ("r1", "r2", "r3"):
        run(manifest, attempt)
        assert target_rows(tmp_path) == rows  # every lookback run replaced, none appended again


def test_trailing_spaces_an_rtrim_column_ignores_stop_the_run(tmp_path: Path) -> None:
    make_source(tmp_path, "COLLATE RTRIM", ["EU  ", "US"])
    err = refused(route(tmp_path, "[EU, US]", strategy="replace_partition", lookback=2))
    assert err.details["partitions"] == ["region=EU"]


def test_a_binary_column_keeps_spellings_apart_and_every_value_loads_once(tmp_path: Path) -> None:
    rows = make_source(tmp_path, "", ["EU", "eu", "US"])
    manifest = route(tmp_path, "[EU, eu, US]", strategy="replace_partition", lookback=3)
    for attempt in ("r1", "r2"):
        run(manifest, attempt)
        assert target_rows(tmp_path) == rows


def test_a_column_normalised_in_the_query_loads_every_row_once(tmp_path: Path) -> None:
    rows = make_source(tmp_path, "COLLATE NOCASE", ["EU", "eu", "US"])
    source = SOURCE + "\n  query: SELECT id, UPPER(region) AS region, amount FROM sales"
    manifest = route(tmp_path, "[EU, US]", strategy="replace_partition", lookback=2, source=source)
    for attempt in ("r1", "r2"):
        run(manifest, attempt)
        assert target_rows(tmp_path) == [(i, region.upper(), amount) for i, region, amount in rows]


@pytest.mark.parametrize(("export", "load"), [("lazy_plan", "direct"), ("file_artifact", "staged")])
def test_a_case_insensitive_sql_server_stops_a_respelled_value_and_loads_the_stored_one(
    tmp_path: Path,
    tds_orders_source: str,
    tds_orders: list[dict[str, Any]],
    export: str,
    load: str,
) -> None:
    def manifest(values: str) -> Path:
        return write_manifest(
            tmp_path,
            source=tds_orders_source,
            partitioning=f"{{kind: list, column: customer, values: {values}}}",
            connection=CHDB_CONNECTION,
            table="demo.orders",
            export=export,
            load=load,
        )

    with pytest.raises(DponeError) as stopped:
        run(manifest('["acme gmbh", "Müller AG"]'), "r1")
    assert stopped.value.code is ErrorCode.MANIFEST_INVALID
    assert stopped.value.details["partitions"] == ["customer=acme gmbh"]
    assert checkpoints(manifest('["acme gmbh", "Müller AG"]')) == []

    run(manifest('["Acme GmbH", "Müller AG"]'), "r2")
    chosen = [r for r in tds_orders if r["customer"] in ("Acme GmbH", "Müller AG")]
    assert chosen and tds_rows_in(chdb_at(tmp_path), "demo.orders") == served(chosen)


RESPELLINGS = {
    # stored padded as a char(n) column hands them back, listed as stored; then trimmed in the query
    "rtrim": (["EU  ", "US  "], '["EU  ", "US  "]', "RTRIM(region)", "[EU, US]", str.rstrip),
    # stored and listed as written; then lowered in the query
    "lower": (["EU", "US"], "[EU, US]", "LOWER(region)", "[eu, us]", str.lower),
    # leading spaces, which no collation ignores
    "trim": (["  EU", "  US"], '["  EU", "  US"]', "TRIM(region)", "[EU, US]", str.strip),
    # a character replaced
    "replace": (
        ["E-U", "U-S"],
        "[E-U, U-S]",
        "REPLACE(region, '-', '')",
        "[EU, US]",
        lambda v: v.replace("-", ""),
    ),
}


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
@pytest.mark.parametrize("respelling", sorted(RESPELLINGS))
def test_a_list_column_normalised_after_its_values_moved_stops_until_the_old_spellings_rows_are_gone(
    tmp_path: Path, strategy: str, respelling: str
) -> None:
    """Red before: the normalising manifest (the fix the spelling refusal names) moved every row again,
    exit 0, 20 rows for 10 (a replace deletes its own spelling only; an append counted the target under it,
    found nothing and said "moved as new"; trailing spaces were not even seen to overlap)."""
    stored, listed, normalised, relisted, normalise = RESPELLINGS[respelling]
    rows = make_source(tmp_path, "", stored)
    lookback = 2 if strategy == "replace_partition" else None
    run(route(tmp_path, listed, strategy=strategy, lookback=lookback), "r1")
    assert target_rows(tmp_path) == rows
    source = SOURCE + f"\n  query: SELECT id, {normalised} AS region, amount FROM sales"
    manifest = route(tmp_path, relisted, strategy=strategy, lookback=lookback, source=source)

    with pytest.raises(DponeError) as stopped:
        run(manifest, "r2")

    assert stopped.value.code is ErrorCode.ROUTE_IDENTITY_CHANGED
    assert "DELETE WHERE region IN" in stopped.value.render()
    assert target_rows(tmp_path) == rows  # nothing written
    client = open_client(chdb_at(tmp_path))
    try:  # what the hint says to do
        client.command(
            f"ALTER TABLE {TABLE} DELETE WHERE region IN ({', '.join(repr(v) for v in stored)})",
            settings={"mutations_sync": 2},
        )
    finally:
        client.close()
    for attempt in ("r3", "r4"):
        run(manifest, attempt)
        assert target_rows(tmp_path) == [(i, normalise(region), amount) for i, region, amount in rows]


def test_a_listed_amount_of_a_sql_server_decimal_column_moves_its_rows(
    tmp_path: Path, tds_orders_source: str, tds_orders: list[dict[str, Any]]
) -> None:
    """Red before: every listed number of a ``decimal`` column was refused as spelled otherwise (a value that
    is not text never equals listed text), though the target compares numbers as the source does."""
    amounts = sorted({r["amount"] for r in tds_orders})[:2]
    listed = ", ".join(f"'{a}'" for a in amounts)
    manifest = write_manifest(
        tmp_path,
        source=tds_orders_source,
        partitioning=f"{{kind: list, column: amount, values: [{listed}]}}",
        connection=CHDB_CONNECTION,
        table="demo.orders",
    )

    run(manifest, "r1")

    chosen = [r for r in tds_orders if r["amount"] in amounts]
    assert chosen and tds_rows_in(chdb_at(tmp_path), "demo.orders") == served(chosen)


@pytest.mark.parametrize("strategy", ["incremental_append", "replace_partition"])
def test_a_case_sensitive_column_whose_new_value_differs_only_in_case_moves_it_beside_the_old_one(
    tmp_path: Path, strategy: str
) -> None:
    """The respelling stop errs only where the source no longer delivers the old spelling: a binary column
    holding ``EU`` and ``eu`` apart keeps both values, so a new definition listing ``eu`` moves its own rows
    (red with the stop asking the source nothing: a route blocked until rows of another value were deleted)."""
    rows = make_source(tmp_path, "", ["EU", "eu", "US"])
    lookback = 2 if strategy == "replace_partition" else None
    run(route(tmp_path, "[EU, US]", strategy=strategy, lookback=lookback), "r1")
    source = SOURCE + "\n  query: SELECT id, region, amount FROM sales"

    run(route(tmp_path, "[eu]", strategy=strategy, lookback=lookback, source=source), "r2")

    assert target_rows(tmp_path) == rows


def test_a_sql_server_column_lowered_after_its_values_moved_stops_before_arming(
    tmp_path: Path, tds_orders_source: str, tds_orders: list[dict[str, Any]]
) -> None:
    """Red before: ``LOWER(customer)`` listed as ``acme gmbh`` after ``Acme GmbH`` moved appended the same 16
    rows again, exit 0 (the emulator compares text as a case-insensitive collation does)."""

    def manifest(query: str, values: str) -> Path:
        return write_manifest(
            tmp_path,
            source=tds_orders_source + query,
            partitioning=f"{{kind: list, column: customer, values: {values}}}",
            connection=CHDB_CONNECTION,
            table="demo.orders",
        )

    run(manifest("", '["Acme GmbH", "Müller AG"]'), "r1")
    moved = tds_rows_in(chdb_at(tmp_path), "demo.orders")
    lowered = "\n  query: SELECT id, order_date, LOWER(customer) AS customer, amount FROM dbo.orders"

    with pytest.raises(DponeError) as stopped:
        run(manifest(lowered, '["acme gmbh", "müller ag"]'), "r2")

    assert stopped.value.code is ErrorCode.ROUTE_IDENTITY_CHANGED
    assert stopped.value.details["changed"] == ["spelling"]
    assert moved and tds_rows_in(chdb_at(tmp_path), "demo.orders") == moved


def test_a_full_refresh_after_respelling_empties_the_table_and_is_not_stopped(tmp_path: Path) -> None:
    """A whole-table refresh leaves no old spelling behind (red with the stop for every replacing route)."""
    rows = make_source(tmp_path, "", ["EU", "US"])
    run(route(tmp_path, "[EU, US]", strategy="full_refresh"), "r1")
    source = SOURCE + "\n  query: SELECT id, LOWER(region) AS region, amount FROM sales"

    run(route(tmp_path, "[eu, us]", strategy="full_refresh", source=source), "r2")

    assert target_rows(tmp_path) == [(i, region.lower(), amount) for i, region, amount in rows]


def test_a_purged_value_beside_a_value_committed_before_is_no_respelling(tmp_path: Path) -> None:
    """A case-sensitive column: ``EU`` rows leave the source, new ``eu`` rows arrive, the query gains a
    filter. ``eu`` was committed before, so it is not a new spelling of ``EU`` (red: stopped as respelled)."""
    rows = make_source(tmp_path, "", ["EU", "eu", "US"])
    run(route(tmp_path, "[EU, eu, US]", strategy="replace_partition", lookback=3), "r1")
    with sqlite3.connect(tmp_path / "source.sqlite") as conn:
        conn.execute("DELETE FROM sales WHERE region = 'EU'")
        conn.execute("INSERT INTO sales VALUES (100, 'eu', 1000)")
    source = SOURCE + "\n  query: SELECT id, region, amount FROM sales WHERE amount >= 0"

    run(route(tmp_path, "[EU, eu, US]", strategy="replace_partition", lookback=3, source=source), "r2")

    assert target_rows(tmp_path) == [r for r in rows if r[1] != "EU"] + [(100, "eu", 1000)]


def test_a_new_value_beside_an_old_one_the_source_dropped_moves_with_the_flag_the_stop_names(
    tmp_path: Path,
) -> None:
    """The stop cannot tell a respelling from a value that left the source while a new one arrived; its
    hint names ``--allow-nonempty-target`` for the second, which appends the new value beside the old rows."""
    rows = make_source(tmp_path, "", ["EU", "US"])
    run(route(tmp_path, "[EU, US]"), "r1")
    with sqlite3.connect(tmp_path / "source.sqlite") as conn:
        conn.execute("DELETE FROM sales WHERE region = 'EU'")
        conn.execute("INSERT INTO sales VALUES (100, 'FR', 1000)")
    source = SOURCE + "\n  query: SELECT id, region, amount FROM sales WHERE amount >= 0"
    manifest = route(tmp_path, "[FR]", source=source)
    with pytest.raises(DponeError) as stopped:
        run(manifest, "r2")
    assert "--allow-nonempty-target" in stopped.value.render()

    with open_runtime(load_manifest(manifest)) as runtime:
        runtime.run("r3", allow_nonempty_target=True)

    assert target_rows(tmp_path) == sorted([*rows, (100, "FR", 1000)])
