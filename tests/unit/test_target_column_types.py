"""Which hand-made target column types take every value of a source column exactly (``table_schema``,
``type_names``): ``LowCardinality(String)``, wider integers and decimals, columns without ``Nullable`` a run
must prove NULL-free; properties over every integer type pair and random decimal types prove the rule never
accepts a column that cannot hold a source value."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.clickhouse.arrow_insert import arrow_table, arrow_type
from airflow_provider_dpone.adapters.clickhouse.table_schema import (
    TargetColumn,
    columns_refusing_null,
    compatibility_problems,
    types_compatible,
)
from airflow_provider_dpone.adapters.clickhouse.type_names import (
    holds_every_value,
    stored_type,
    ticks_per_second,
)
from airflow_provider_dpone.adapters.sources.profiling import null_counts_from_row
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema


@pytest.mark.parametrize(
    ("source", "target", "compatible"),
    [
        ("String", "LowCardinality(String)", True),
        ("String", "LowCardinality( String )", True),  # spelled with blanks
        ("String", "LowCardinality(Nullable(String))", True),  # every value fits, no NULL comes
        ("Nullable(String)", "LowCardinality(Nullable(String))", True),
        ("Nullable(String)", "LowCardinality(String)", False),  # a NULL would read ''
        ("Int64", "LowCardinality(Int64)", False),  # only String was proven
        ("Date", "LowCardinality(String)", False),
        ("String", "LowCardinality(FixedString(3))", False),
        ("String", "Nullable(LowCardinality(String))", False),  # not a type ClickHouse makes
    ],
)
def test_a_low_cardinality_column_takes_exactly_the_values_of_its_inner_string_type(
    source: str, target: str, compatible: bool
) -> None:
    assert types_compatible(source, target) is compatible


def test_an_unwritten_nullable_low_cardinality_column_is_accepted_and_a_non_nullable_one_is_not() -> None:
    schema = TableSchema(columns=(ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),))
    target = {
        "id": TargetColumn("id", "Int64", ""),
        "note": TargetColumn("note", "LowCardinality(Nullable(String))", ""),  # new rows read NULL
        "tag": TargetColumn("tag", "LowCardinality(String)", ""),  # new rows would read ''
    }
    assert [p.column for p in compatibility_problems(schema, target)] == ["tag"]


def test_the_stored_type_of_an_encoded_string_column_and_its_arrow_form() -> None:
    assert stored_type("LowCardinality(Nullable(String))") == "Nullable(String)"
    assert stored_type("LowCardinality(Int64)") == "LowCardinality(Int64)"
    assert arrow_type("LowCardinality(String)") == pa.binary()
    assert arrow_type("LowCardinality(Nullable(String))") == pa.binary()


INTEGERS = [f"{sign}Int{bits}" for sign in ("", "U") for bits in (8, 16, 32, 64)]


def integer_range(type_name: str) -> tuple[int, int]:
    bits = int(type_name.lstrip("U").removeprefix("Int"))
    return (0, 2**bits - 1) if type_name.startswith("U") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


@pytest.mark.parametrize("source", INTEGERS)
@pytest.mark.parametrize("target", INTEGERS)
def test_an_integer_type_is_accepted_exactly_when_it_holds_the_whole_source_range(
    source: str, target: str
) -> None:
    (low, high), (target_low, target_high) = integer_range(source), integer_range(target)
    assert holds_every_value(source, target) is (target_low <= low and high <= target_high)


@given(
    st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))),
    st.integers(1, 76).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))),
)
def test_a_decimal_type_is_accepted_only_when_the_source_extremes_fit_it_unchanged(
    source: tuple[int, int], target: tuple[int, int]
) -> None:
    (precision, scale), (target_precision, target_scale) = source, target
    accepted = holds_every_value(
        f"Decimal({precision},{scale})", f"Decimal({target_precision},{target_scale})"
    )
    with localcontext() as context:
        context.prec = 200

        def fits(value: Decimal) -> bool:
            step = Decimal(1).scaleb(-target_scale)
            return value.quantize(step) == value and abs(value) < Decimal(10) ** (
                target_precision - target_scale
            )

        # every value of Decimal(p, s) is a multiple of its smallest step no larger than its largest value
        largest, step = Decimal(10**precision - 1).scaleb(-scale), Decimal(1).scaleb(-scale)
        assert accepted is (fits(largest) and fits(step))


@pytest.mark.parametrize(
    ("source", "target", "accepted"),
    [
        ("Float32", "Float64", True),
        ("Float64", "Float32", False),
        ("Int32", "Float64", False),  # a number of another kind, though it would fit
        ("Date", "Date32", True),  # the same day numbers over a wider range
        ("DateTime", "Date32", False),
        ("DateTime", "DateTime64(3)", True),  # whole seconds are whole ticks
        ("DateTime", "DateTime64(0, 'UTC')", True),
        ("DateTime", "Nullable(DateTime64(9, 'Asia/Tokyo'))", True),
        ("DateTime", "DateTime64(10)", False),  # not a type
        ("Date", "DateTime64(3)", False),
        ("DateTime", "DateTime('UTC')", True),  # the same epoch seconds; the zone is how they are shown
        ("DateTime", "DateTime( 'America/New_York' )", True),
        ("DateTime", "Nullable(DateTime('Asia/Tokyo'))", True),
        ("Nullable(DateTime)", "DateTime('UTC')", False),  # a NULL there must be counted first
        ("DateTime", "LowCardinality(DateTime('UTC'))", False),
        ("Date", "DateTime('UTC')", False),
        ("Int64", "Int128", False),
        ("Nullable(Int32)", "Int64", False),
        ("Int32", "Nullable(Int64)", True),
    ],
)
def test_other_type_pairs(source: str, target: str, accepted: bool) -> None:
    assert types_compatible(source, target) is accepted


def test_the_columns_a_run_must_prove_null_free_are_the_nullable_ones_the_target_declares_without_nullable() -> (
    None
):
    schema = TableSchema(
        columns=(
            ColumnSpec(name="id", clickhouse_type="Int32", nullable=True),
            ColumnSpec(name="note", clickhouse_type="String", nullable=True),
            ColumnSpec(name="code", clickhouse_type="String", nullable=True),
            ColumnSpec(name="day", clickhouse_type="Date", nullable=False),
            ColumnSpec(name="amount", clickhouse_type="Decimal(12, 2)", nullable=True),
            ColumnSpec(name="gone", clickhouse_type="String", nullable=True),
        )
    )
    target = {
        "id": TargetColumn("id", "Int64", ""),  # wider, without Nullable: prove it
        "note": TargetColumn("note", "Nullable(String)", ""),  # takes NULL
        "code": TargetColumn("code", "LowCardinality(String)", ""),  # prove it
        "day": TargetColumn("day", "Date", ""),  # the source holds no NULL anyway
        "amount": TargetColumn("amount", "Decimal(10, 2)", ""),  # incompatible for another reason
    }
    assert columns_refusing_null(schema, target) == ["id", "code"]
    narrowed = schema.with_not_null(["id", "code"])
    assert [c.nullable for c in narrowed.columns] == [False, True, False, False, True, True]
    assert compatibility_problems(narrowed, {**target, "gone": TargetColumn("gone", "String", "")})[
        0
    ].column == ("amount")


@pytest.mark.parametrize("row", [(1,), (1, -1), (1, True), (1, "2"), (1, None)])
def test_null_counts_that_are_not_exact_counts_fail_closed(row: tuple[object, ...]) -> None:
    with pytest.raises(DponeError) as failed:
        null_counts_from_row(row, ["a", "b"], "t")
    assert failed.value.code is ErrorCode.SOURCE_READ_FAILED


def test_an_arrow_block_with_a_null_in_a_column_without_nullable_is_left_to_the_native_encoder() -> None:
    """An Arrow insert would write the NULL as 0; clickhouse-connect's Native encoder refuses it."""
    assert arrow_table(["c"], ["Int64"], [[1, None]]) is None
    assert arrow_table(["c"], ["LowCardinality(String)"], [["a", None]]) is None
    nullable = arrow_table(["c"], ["Nullable(Int64)"], [[1, None]])
    assert nullable is not None and nullable.column("c").null_count == 1
    assert arrow_table(["c"], ["LowCardinality(Nullable(String))"], [["a", None]]) is not None


@pytest.mark.parametrize(
    ("type_name", "ticks"),
    [
        ("DateTime64(0)", 1),
        ("DateTime64(3)", 1000),
        ("DateTime64(6, 'UTC')", 1_000_000),
        ("Nullable(DateTime64(9,'Asia/Tokyo'))", 1_000_000_000),
        ("DateTime", None),
        ("DateTime('UTC')", None),
        ("Date32", None),
    ],
)
def test_what_a_whole_second_is_in_a_columns_ticks(type_name: str, ticks: int | None) -> None:
    assert ticks_per_second(type_name) == ticks


def test_a_datetime64_column_is_handed_whole_seconds_as_ticks_nulls_kept() -> None:
    """Integers, never naive datetimes: clickhouse-connect would read those in the process's time zone."""
    from datetime import datetime

    from airflow_provider_dpone.adapters.clickhouse.column_encoders import insert_columns

    values = [datetime(2026, 11, 1, 5, 30), None, datetime(1970, 1, 1)]
    assert insert_columns(["Nullable(DateTime64(3))"], [values]) == [[1793511000 * 1000, None, 0]]
