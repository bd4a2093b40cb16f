"""Which table TTLs a target may have: rules that only move or recompress parts, never ones that delete.

The rules are read from the server's formatting of the engine clause (``system.tables.engine_full``), so
these cases are written the way chDB and current servers print them. Anything not recognised as a move or
a recompression is refused: a reading that is unsure fails closed.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.table_schema import TargetColumn, compatibility_problems
from airflow_provider_dpone.adapters.clickhouse.target_engine import rows_dropping_ttl, ttl_rules
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

SETTINGS = " SETTINGS index_granularity = 8192"


def engine_full(ttl: str) -> str:
    return f"MergeTree ORDER BY (day, id){ttl}{SETTINGS}"


def test_a_table_without_ttl_keeps_its_rows() -> None:
    assert ttl_rules(engine_full("")) is None and not rows_dropping_ttl(engine_full(""))
    replicated = "ReplicatedMergeTree('/clickhouse/TTL/{shard}', '{replica}') ORDER BY (day, id)" + SETTINGS
    assert ttl_rules(replicated) is None and not rows_dropping_ttl(replicated)  # TTL inside a quoted path


def test_a_delete_ttl_in_any_spelling_is_refused() -> None:
    for ttl in (
        " TTL day + toIntervalDay(10)",
        " TTL day + toIntervalDay(10) DELETE",
        " TTL day + toIntervalDay(10) WHERE customer = 'x'",
        " TTL day + toIntervalDay(10) GROUP BY day SET amount = max(amount)",
        " TTL day + toIntervalDay(10) TO VOLUME 'cold', day + toIntervalDay(400)",
        " TTL day + toIntervalDay(400), day + toIntervalDay(10) TO DISK 'cold'",
    ):
        assert rows_dropping_ttl(engine_full(ttl)), ttl


def test_rules_that_only_move_or_recompress_are_accepted() -> None:
    ttl = (
        " TTL day + toIntervalDay(10) TO VOLUME 'cold', day + toIntervalDay(20) TO DISK 'archive, old',"
        " day + toIntervalDay(30) RECOMPRESS CODEC(ZSTD(17))"
    )
    assert ttl_rules(engine_full(ttl)) == [
        "day + toIntervalDay(10) TO VOLUME 'cold'",
        "day + toIntervalDay(20) TO DISK 'archive, old'",
        "day + toIntervalDay(30) RECOMPRESS CODEC(ZSTD(17))",
    ]
    assert not rows_dropping_ttl(engine_full(ttl))


def test_a_quoted_move_inside_a_delete_condition_is_still_a_delete() -> None:
    ttl = " TTL day + toIntervalDay(10) DELETE WHERE note = 'x TO VOLUME \\'cold\\''"
    assert rows_dropping_ttl(engine_full(ttl))


EXPRESSIONS = st.sampled_from(
    [
        "day + toIntervalDay(10)",
        "toDate(updated_at) + toIntervalMonth(1)",
        "if(customer = 'a, b', day, day + toIntervalDay(1))",
        "day + toIntervalDay(length('TTL, DELETE'))",
    ]
)
KEEPING = st.sampled_from([" TO VOLUME 'cold'", " TO DISK 'disk, 2'", " RECOMPRESS CODEC(ZSTD(3), LZ4)"])
DROPPING = st.sampled_from(["", " DELETE", " DELETE WHERE customer != 'TO DISK'"])


@given(st.lists(st.tuples(EXPRESSIONS, st.one_of(KEEPING, DROPPING)), min_size=1, max_size=4))
def test_any_rule_that_is_not_a_move_or_recompression_makes_the_table_refused(
    rules: list[tuple[str, str]],
) -> None:
    text = engine_full(" TTL " + ", ".join(expression + action for expression, action in rules))
    parsed = ttl_rules(text)
    assert parsed == [expression + action for expression, action in rules]
    keeps = all(action.startswith((" TO ", " RECOMPRESS")) for _, action in rules)
    assert rows_dropping_ttl(text) is not keeps


def test_a_written_column_with_a_ttl_is_refused_and_an_unwritten_one_is_not() -> None:
    schema = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    target = {
        "id": TargetColumn("id", "Int64", "", ttl="day + toIntervalDay(1)"),
        "note": TargetColumn("note", "String", "DEFAULT", ttl="day + toIntervalDay(1)"),
    }
    [problem] = compatibility_problems(schema, target)
    assert problem.column == "id" and "TTL" in problem.reason
    assert compatibility_problems(schema, {**target, "id": TargetColumn("id", "Int64", "")}) == []
