"""T-SQL generation: bracket quoting, table names, partition predicates, bound rendering, probes."""

from __future__ import annotations

import pytest

from airflow_provider_dpone.adapters.sources import mssql_sql as tsql
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec

DAY = PartitionBounds(
    kind=BoundsKind.RANGE,
    column="order_date",
    lower="2026-11-30",
    upper="2026-12-01",
    value_type="date",
    label="order_date=2026-11-30",
)
IDS = PartitionBounds(
    kind=BoundsKind.RANGE,
    column="id",
    lower="1000",
    upper="2000",
    value_type="integer",
    label="id=[1000,2000)",
)
ALL = PartitionBounds(kind=BoundsKind.ALL, label="all")


# -- quoting and names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("orders", "[orders]"),
        ("a]b", "[a]]b]"),
        ("]]", "[]]]]]"),
        ("with space", "[with space]"),
        ("dots.inside", "[dots.inside]"),
        ("[already]", "[[already]]]"),
        ("semi;colon--", "[semi;colon--]"),
    ],
)
def test_identifiers_are_bracket_quoted_with_closing_brackets_doubled(name: str, quoted: str) -> None:
    assert tsql.quote_ident(name) == quoted


@pytest.mark.parametrize("name", ["", "nul\x00byte"])
def test_empty_or_nul_identifiers_are_refused(name: str) -> None:
    with pytest.raises(tsql.SqlBuildError):
        tsql.quote_ident(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", "[dbo].[orders]"),
        ("dbo.orders", "[dbo].[orders]"),
        ("sales.orders", "[sales].[orders]"),
        ("[dbo].[orders]", "[dbo].[orders]"),
        ("[my.schema].[odd]]name]", "[my.schema].[odd]]name]"),
        ('"quoted"."t"', "[quoted].[t]"),
        ("warehouse.dbo.orders", "[warehouse].[dbo].[orders]"),
    ],
)
def test_table_names_parse_into_bracketed_parts(text: str, expected: str) -> None:
    assert tsql.TableRef.parse(text).sql() == expected


@pytest.mark.parametrize("text", ["", "a..b", "a.b.c.d", "[unclosed", "dbo."])
def test_malformed_table_names_are_refused(text: str) -> None:
    with pytest.raises(tsql.SqlBuildError):
        tsql.TableRef.parse(text)


def test_three_part_names_read_the_catalog_information_schema() -> None:
    table = tsql.TableRef.parse("warehouse.dbo.orders")
    assert "[warehouse].INFORMATION_SCHEMA.COLUMNS" in tsql.describe_table(table).text


# -- predicates ------------------------------------------------------------------------------------------


def test_day_range_uses_parameters_cast_to_date() -> None:
    statement = tsql.predicate(DAY)
    assert statement is not None
    assert statement.text == "[order_date] >= CAST(%s AS DATE) AND [order_date] < CAST(%s AS DATE)"
    assert statement.params == ("2026-11-30", "2026-12-01")
    assert statement.render() == (
        "[order_date] >= CAST(N'2026-11-30' AS DATE) AND [order_date] < CAST(N'2026-12-01' AS DATE)"
    )


def test_integer_range_binds_integers() -> None:
    statement = tsql.predicate(IDS)
    assert statement is not None
    assert statement.text == "[id] >= %s AND [id] < %s"
    assert statement.params == (1000, 2000)
    assert statement.render() == "[id] >= 1000 AND [id] < 2000"


def test_list_partition_is_an_in_list_with_quotes_escaped() -> None:
    bounds = PartitionBounds(
        kind=BoundsKind.VALUES,
        column="customer",
        values=("O'Brien & Sons", "東京商事"),
        label="customer=O'Brien & Sons",
    )
    statement = tsql.predicate(bounds)
    assert statement is not None
    assert statement.text == "[customer] IN (%s, %s)"
    assert statement.render() == "[customer] IN (N'O''Brien & Sons', N'東京商事')"


def test_an_injection_attempt_stays_one_string_literal() -> None:
    bounds = PartitionBounds(
        kind=BoundsKind.VALUES, column="c", values=("x'); DROP TABLE t; --",), label="c=x"
    )
    statement = tsql.predicate(bounds)
    assert statement is not None
    assert statement.render() == "[c] IN (N'x''); DROP TABLE t; --')"


def test_empty_value_list_selects_nothing_and_all_has_no_predicate() -> None:
    empty = PartitionBounds(kind=BoundsKind.VALUES, column="c", values=(), label="c=none")
    statement = tsql.predicate(empty)
    assert statement is not None and statement.text == "1 = 0"
    assert tsql.predicate(ALL) is None


def test_open_ended_ranges_have_one_side() -> None:
    lower_only = DAY.model_copy(update={"upper": None})
    statement = tsql.predicate(lower_only)
    assert statement is not None and statement.text == "[order_date] >= CAST(%s AS DATE)"


def test_a_non_integer_integer_bound_is_refused_without_echoing_it() -> None:
    bad = IDS.model_copy(update={"lower": "1; DROP"})
    with pytest.raises(tsql.SqlBuildError) as caught:
        tsql.predicate(bad)
    assert "DROP" not in str(caught.value)


def test_bound_literals_only_accept_integers_and_strings() -> None:
    with pytest.raises(tsql.SqlBuildError):
        tsql.literal(1.5)
    with pytest.raises(tsql.SqlBuildError):
        tsql.literal(True)
    with pytest.raises(tsql.SqlBuildError):
        tsql.literal("nul\x00")


# -- statements ------------------------------------------------------------------------------------------


def test_partition_read_selects_orders_and_binds_the_predicate() -> None:
    source = tsql.source_sql(tsql.TableRef.parse("dbo.orders"), None)
    statement = tsql.select_rows(source, ["id", "order_date", "we]ird"], DAY, ["order_date", "id"])
    assert statement.text == (
        "SELECT [id], [order_date], [we]]ird]\nFROM [dbo].[orders]\n"
        "WHERE [order_date] >= CAST(%s AS DATE) AND [order_date] < CAST(%s AS DATE)\n"
        "ORDER BY [order_date], [id]"
    )
    assert statement.params == ("2026-11-30", "2026-12-01")


def test_whole_table_read_has_no_where() -> None:
    source = tsql.source_sql(tsql.TableRef.parse("orders"), None)
    assert (
        tsql.select_rows(source, ["id"], ALL, ["id"]).render()
        == "SELECT [id]\nFROM [dbo].[orders]\nORDER BY [id]"
    )


def test_a_query_is_wrapped_as_a_derived_table_and_its_percent_signs_survive() -> None:
    query = "SELECT id, customer FROM dbo.orders WHERE customer LIKE '%sales%d';"
    source = tsql.source_sql(tsql.TableRef.parse("dbo.orders"), query)
    statement = tsql.select_rows(source, ["id", "customer"], IDS, ["id"])
    rendered = statement.render()
    assert "LIKE '%sales%d'" in rendered
    assert rendered.startswith("SELECT [id], [customer]\nFROM (\nSELECT id, customer FROM dbo.orders WHERE")
    assert ") AS [dpone_src]\nWHERE [id] >= 1000 AND [id] < 2000\nORDER BY [id]" in rendered
    assert ";" not in rendered


def test_count_uses_the_same_predicate() -> None:
    source = tsql.source_sql(tsql.TableRef.parse("dbo.orders"), None)
    statement = tsql.count_rows(source, DAY)
    assert statement.text.startswith(
        "SELECT COUNT_BIG(*) AS row_count\nFROM [dbo].[orders]\nWHERE [order_date] >= "
    )
    assert statement.params == ("2026-11-30", "2026-12-01")


def test_describe_reads_information_schema_with_bound_names() -> None:
    statement = tsql.describe_table(tsql.TableRef.parse("[sa'les].orders"))
    assert "FROM INFORMATION_SCHEMA.COLUMNS" in statement.text
    assert statement.params == ("sa'les", "orders")
    assert "TABLE_SCHEMA = N'sa''les' AND TABLE_NAME = N'orders'" in statement.render()


def test_query_description_uses_the_dmv_with_the_query_as_a_parameter() -> None:
    statement = tsql.describe_query("SELECT 'it''s' AS x")
    assert "sys.dm_exec_describe_first_result_set(%s, NULL, 0)" in statement.text
    assert "N'SELECT ''it''''s'' AS x'" in statement.render()


def _col(name: str, source_type: str, clickhouse: str = "DateTime") -> ColumnSpec:
    return ColumnSpec(name=name, clickhouse_type=clickhouse, source_type=source_type)


def test_calendar_expressions_truncate_to_a_date_in_utc() -> None:
    assert tsql.calendar_expression(_col("d", "date", "Date")) == "[d]"
    assert tsql.calendar_expression(_col("d", "datetime2")) == "CAST([d] AS DATE)"
    assert tsql.calendar_expression(_col("d", "nvarchar", "String")) == "CAST([d] AS DATE)"
    assert (
        tsql.calendar_expression(_col("d", "datetimeoffset")) == "CAST(SWITCHOFFSET([d], '+00:00') AS DATE)"
    )


def test_planning_probes_enumerate_only_values_that_hold_rows() -> None:
    source = "[dbo].[orders]"
    days = tsql.distinct_days(source, _col("order_date", "datetime2")).text
    assert days.startswith("SELECT DISTINCT CAST([order_date] AS DATE) AS dpone_day\nFROM [dbo].[orders]")
    assert days.endswith("ORDER BY dpone_day")
    months = tsql.distinct_months(source, _col("order_date", "date", "Date")).text
    assert "YEAR([order_date]) AS dpone_year, MONTH([order_date]) AS dpone_month" in months
    starts = tsql.distinct_range_starts(source, _col("id", "int", "Int32"), 1000).text
    # the range's floored index, never ``id - id mod 1000``: that overflows a bigint below -2**63's range
    assert "([id] / 1000 - CASE WHEN [id] % 1000 < 0 THEN 1 ELSE 0 END) AS dpone_start" in starts
    stats = tsql.column_stats(source, _col("order_date", "date", "Date")).text
    assert "COUNT_BIG(*) - COUNT_BIG([order_date]) AS null_count" in stats


def test_statements_need_one_parameter_per_placeholder() -> None:
    with pytest.raises(tsql.SqlBuildError):
        tsql.Statement(("a", "b"), ())
    joined = tsql.sql("x = ") + tsql.param(1) + " AND y = " + tsql.param("z")
    assert joined.text == "x = %s AND y = %s"
    assert joined.render() == "x = 1 AND y = N'z'"
