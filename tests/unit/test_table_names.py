"""Canonical source table names: every spelling of one table gives one route key."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming
from airflow_provider_dpone.adapters.sources.table_names import canonical_source_table
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy


@pytest.mark.parametrize(
    "spelling", ["orders", "ORDERS", "main.orders", '"orders"', "[Main].[Orders]", "`orders`"]
)
def test_sqlite_spellings_of_one_table_are_one_name(spelling: str) -> None:
    assert canonical_source_table(SourceType.SQLITE, spelling) == "main.orders"


@pytest.mark.parametrize(
    "spelling", ["orders", "dbo.orders", "[dbo].[orders]", "DBO.Orders", '"dbo"."ORDERS"']
)
def test_sql_server_spellings_of_one_table_are_one_name(spelling: str) -> None:
    assert canonical_source_table(SourceType.MSSQL, spelling) == "dbo.orders"


@pytest.mark.parametrize(
    ("source_type", "a", "b"),
    [
        (SourceType.SQLITE, "orders", "aux.orders"),
        (SourceType.SQLITE, "orders", "orders2"),
        (SourceType.MSSQL, "orders", "sales.orders"),
        (SourceType.MSSQL, "dbo.orders", "other.dbo.orders"),
        (SourceType.MSSQL, "[a.b]", "a.b"),
    ],
)
def test_different_tables_keep_different_names(source_type: SourceType, a: str, b: str) -> None:
    assert canonical_source_table(source_type, a) != canonical_source_table(source_type, b)


IDENT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)


@given(schema=IDENT, name=IDENT, source_type=st.sampled_from(list(SourceType)))
def test_a_canonical_name_is_its_own_canonical_name(schema: str, name: str, source_type: SourceType) -> None:
    quote = (
        (lambda p: "[" + p.replace("]", "]]") + "]")
        if source_type is SourceType.MSSQL
        else (lambda p: '"' + p.replace('"', '""') + '"')
    )
    if source_type is SourceType.MSSQL or "]" not in schema + name:
        once = canonical_source_table(source_type, f"{quote(schema)}.{quote(name)}")
        assert canonical_source_table(source_type, once) == once


def test_the_route_naming_changes_only_the_source_table() -> None:
    spec = SourceSpec.model_validate_json(
        json.dumps({"type": "sqlite", "connection": "sqlite:///s.sqlite", "table": "ORDERS"})
    )
    route = RouteIdentity(
        source_table="ORDERS", target_table="Demo.Orders", strategy=Strategy.INCREMENTAL_APPEND
    )
    assert SourceRouteNaming(spec).canonical(route) == route.model_copy(
        update={"source_table": "main.orders"}
    )
    assert SourceRouteNaming(spec).legacy_query_hash("ORDERS") != SourceRouteNaming(spec).legacy_query_hash(
        "orders"
    )
