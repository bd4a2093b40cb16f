"""A SQL Server route (pymssql over the TDS emulator) compares an earlier ``source.query`` with its own.

The emulator runs the comparison's grouped ``UNION ALL`` (NULLs in one group: ``customer`` is NULL in two
rows), so the comparison is the one a real server makes. Black-box ``dpone`` into chDB, ``replace_partition``
by day: a query that leaves out rows an earlier one committed, or copies of them, stops before arming with
the target unchanged; allowed, it replaces them; a query that reads every earlier row again goes on. Target
values compared with the served rows.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.integration.route_rig import chdb_query
from tests.integration.test_route_identity_tds import TARGET, dpone, root, target_rows
from tests.integration.windowed_rig import refusal, replacing_route

__all__ = ["root"]  # the SQL Server connection's fixture


def manifest(
    root: Path,
    where: str,
    *,
    select: str = "id, order_date, customer, amount, updated_at",
    order_by: Sequence[str] = ("order_date", "id"),
) -> Path:
    source = {
        "type": "mssql",
        "connection": "tds_source",
        "table": "dbo.orders",
        "query": f"SELECT {select} FROM dbo.orders WHERE {where}",
        "partitioning": {"kind": "day", "column": "order_date"},
    }
    return replacing_route(
        root, source, name="tds_windows", target=TARGET, order_by=order_by, state="sqlite:///state.sqlite"
    )


def served(tds_orders: list[dict[str, Any]], low: int, high: int) -> list[tuple[Any, ...]]:
    return sorted(
        (r["id"], r["order_date"].isoformat(), r["customer"], r["amount"])
        for r in tds_orders
        if low <= r["id"] <= high
    )


def test_a_sql_server_query_leaving_out_earlier_rows_stops_and_one_reading_them_again_goes_on(
    root: Path, tds_orders: list[dict[str, Any]]
) -> None:
    first = dpone("run", str(manifest(root, "id <= 20")))
    assert first.exit_code == 0, first.output

    stopped = dpone("run", "--json", str(manifest(root, "id > 10")))

    assert stopped.exit_code == 3, stopped.output
    error = json.loads(stopped.output)
    assert error["error"] == "native_transfer_target_not_empty"
    assert error["details"]["rows"] == 10  # ids 1-10, two per day, each day replaced by ids 11-50
    assert len(error["details"]["partitions"]) == 5
    assert target_rows(root) == served(tds_orders, 1, 20)
    allowed = dpone("run", str(manifest(root, "id > 10")), "--allow-nonempty-target")
    assert allowed.exit_code == 0, allowed.output
    assert target_rows(root) == served(tds_orders, 11, 50)

    wider = dpone("run", str(manifest(root, "id > 5")))  # every row of "id > 10" and more

    assert wider.exit_code == 0, wider.output
    assert "compared on the source" in wider.output
    assert target_rows(root) == served(tds_orders, 6, 50)


def test_an_ntext_column_is_compared_as_nvarchar_max_not_left_uncompared(
    root: Path, tds_orders: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A legacy table's ``ntext`` column (the emulator serves ``customer`` as nvarchar: the description says
    ntext here, as a real server's would). Red before: that one column turned the comparison off for the
    whole route, and the second window deleted the first's rows, exit 0, only a note. Now it is compared as
    ``nvarchar(max)`` on the emulator's ``GROUP BY``, and the run stops with the target unchanged."""
    from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
    from airflow_provider_dpone.contracts.schema import TableSchema

    described = MssqlSource.describe

    def legacy_ntext(self: MssqlSource) -> TableSchema:
        schema = described(self)
        return TableSchema(
            columns=tuple(
                c.model_copy(update={"source_type": "ntext"}) if c.name == "customer" else c
                for c in schema.columns
            )
        )

    monkeypatch.setattr(MssqlSource, "describe", legacy_ntext)
    first = dpone("run", str(manifest(root, "id <= 20")))
    assert first.exit_code == 0, first.output

    stopped = dpone("run", "--json", str(manifest(root, "id > 10")))

    assert stopped.exit_code == 3, stopped.output
    assert json.loads(stopped.output)["details"]["rows"] == 10
    assert target_rows(root) == served(tds_orders, 1, 20)
    changed = dpone("run", str(manifest(root, "id <= 20 AND customer IS NOT NULL OR id <= 20")))
    assert changed.exit_code == 0, changed.output  # the same rows, NULLs equal: compared, and it goes on
    assert "compared on the source" in changed.output
    assert target_rows(root) == served(tds_orders, 1, 20)


def day_and_customer(rows: list[dict[str, Any]]) -> Counter[tuple[str, str | None]]:
    """(order_date, customer) of ``rows``, each as often as it occurs."""
    return Counter((r["order_date"].isoformat(), r["customer"]) for r in rows)


def target_day_and_customer(root: Path) -> Counter[tuple[str, str | None]]:
    rows = chdb_query(root, f"SELECT toString(toDate(order_date)), customer FROM {TARGET}")
    return Counter((str(d), c) for d, c in rows)


def test_a_sql_server_query_that_drops_the_key_stops_on_a_left_out_row_equal_to_a_kept_one(
    root: Path, tds_orders: list[dict[str, Any]]
) -> None:
    """Ids 1 and 31 are equal on (order_date, customer). Red before: the new query drops ``id`` and leaves out
    31; ``EXCEPT`` over the columns both return matched it with row 1, and the run deleted it, exit 0."""
    first = dpone("run", str(manifest(root, "1 = 1", select="id, order_date, customer, amount")))
    assert first.exit_code == 0, first.output

    dropped = manifest(root, "id <> 31", select="order_date, customer", order_by=["order_date"])
    error = refusal(dpone("run", "--json", str(dropped)))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["rows"] == 1 and error["details"]["partitions"] == ["order_date=2026-11-26"]
    assert target_rows(root) == served(tds_orders, 1, 50)


def test_a_sql_server_distinct_read_stops_on_every_copy_it_leaves_out(
    root: Path, tds_orders: list[dict[str, Any]]
) -> None:
    """(order_date, customer) repeats: 50 rows, 32 distinct (the two NULL customers each once per day, so a
    NULL that failed to match itself would count too). Red before: ``EXCEPT`` saw the same distinct rows on
    both sides, and the ``DISTINCT`` read deleted the 18 copies, exit 0. The counts are the emulator's."""
    columns = "order_date, customer"
    first = dpone("run", str(manifest(root, "1 = 1", select=columns, order_by=["order_date"])))
    assert first.exit_code == 0, first.output
    expected = day_and_customer(tds_orders)
    assert target_day_and_customer(root) == expected

    distinct = manifest(root, "1 = 1", select="DISTINCT " + columns, order_by=["order_date"])
    error = refusal(dpone("run", "--json", str(distinct)))

    assert error["details"]["problem"] == "rows_left_out_by_new_definition"
    assert error["details"]["rows"] == sum(n - 1 for n in expected.values()) == 18
    assert target_day_and_customer(root) == expected
    same = dpone("run", str(manifest(root, "1 = 1 AND 2 = 2", select=columns, order_by=["order_date"])))
    assert same.exit_code == 0, same.output  # every copy read again: compared, and it goes on
    assert "compared on the source" in same.output
    assert target_day_and_customer(root) == expected
