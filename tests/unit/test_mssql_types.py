"""SQL Server type map and value normalization (every mapped type; the emulator cannot serve most of them)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal

import pytest

from airflow_provider_dpone.adapters.sources import mssql_types
from airflow_provider_dpone.adapters.sources.column_values import converter_for
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

EXPECTED = {
    "tinyint": "UInt8",
    "smallint": "Int16",
    "int": "Int32",
    "bigint": "Int64",
    "bit": "UInt8",
    "money": "Decimal(19, 4)",
    "smallmoney": "Decimal(10, 4)",
    "float": "Float64",
    "real": "Float32",
    "char": "String",
    "varchar": "String",
    "nchar": "String",
    "nvarchar": "String",
    "text": "String",
    "ntext": "String",
    "date": "Date",
    "datetime": "DateTime",
    "datetime2": "DateTime",
    "smalldatetime": "DateTime",
    "datetimeoffset": "DateTime",
    "time": "String",
    "uniqueidentifier": "UUID",
    "binary": "String",
    "varbinary": "String",
}


@pytest.mark.parametrize(("sql_type", "clickhouse"), sorted(EXPECTED.items()))
def test_each_supported_sql_server_type_maps_to_its_clickhouse_type(sql_type: str, clickhouse: str) -> None:
    assert mssql_types.clickhouse_type("c", sql_type, None, None) == clickhouse


def test_every_fixed_mapping_is_pinned_by_this_test() -> None:
    assert set(EXPECTED) <= set(mssql_types.FIXED_TYPES)


@pytest.mark.parametrize("sql_type", ["decimal", "numeric", "DECIMAL", "Numeric(12,2)"])
def test_decimal_and_numeric_keep_precision_and_scale(sql_type: str) -> None:
    assert mssql_types.clickhouse_type("amount", sql_type, 12, 2) == "Decimal(12, 2)"
    assert mssql_types.clickhouse_type("amount", sql_type, 38, 0) == "Decimal(38, 0)"


def test_type_names_are_matched_case_insensitively_and_without_length() -> None:
    assert mssql_types.clickhouse_type("c", "NVARCHAR(max)", None, None) == "String"
    assert mssql_types.clickhouse_type("c", "DateTime2(7)", None, None) == "DateTime"


def test_nullability_and_source_type_are_kept() -> None:
    spec = mssql_types.column_spec("amount", "decimal", False, 12, 2)
    assert spec == ColumnSpec(
        name="amount", clickhouse_type="Decimal(12, 2)", nullable=False, source_type="decimal(12,2)"
    )
    assert mssql_types.column_spec("note", "nvarchar", True).nullable is True


@pytest.mark.parametrize(
    "sql_type", ["xml", "geography", "geometry", "hierarchyid", "sql_variant", "cursor", "foo"]
)
def test_unsupported_type_raises_naming_the_column(sql_type: str) -> None:
    with pytest.raises(DponeError) as caught:
        mssql_types.column_spec("shape]col", sql_type, True)
    error = caught.value
    assert error.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE
    assert "shape]col" in error.safe_message
    assert error.details == {"column": "shape]col", "source_type": sql_type}


def test_decimal_precision_beyond_clickhouse_limits_is_unsupported() -> None:
    with pytest.raises(DponeError) as caught:
        mssql_types.column_spec("big", "decimal", True, 39, 2)
    assert caught.value.code is ErrorCode.UNSUPPORTED_COLUMN_TYPE


def test_coarse_wire_descriptions_map_every_pymssql_type_code() -> None:
    assert [mssql_types.coarse_column_spec("c", code).clickhouse_type for code in (1, 2, 3, 4, 5)] == [
        "String",
        "String",
        "Float64",
        "DateTime",
        "Decimal(38, 10)",
    ]
    assert all(mssql_types.coarse_column_spec("c", code).nullable for code in (1, 2, 3, 4, 5))


# -- value normalization: what pymssql and the TDS emulator hand back -> the mapped type -------------------


def _convert(
    sql_type: str, values: Sequence[object], precision: int | None = None, scale: int | None = None
) -> list:
    column = mssql_types.column_spec("c", sql_type, True, precision, scale)
    convert = converter_for(column, coerce=mssql_types.needs_coercion(column))
    return list(values) if convert is None else list(convert(values))


def test_emulator_decimals_arrive_as_float_and_become_exact_decimals() -> None:
    assert _convert("decimal", [17.31, None, 0.3, 100.0], 12, 2) == [
        Decimal("17.31"),
        None,
        Decimal("0.3"),
        Decimal("100.0"),
    ]


@pytest.mark.parametrize(
    "value",
    [
        0.1 + 0.2,  # 0.30000000000000004: float arithmetic, not a decimal(12,2)
        1.234,  # a digit past the scale
        12345678901234.56,  # 14 digits before the point of a decimal(12,2)
        1234567890123456.7,  # 17 significant digits: a double cannot prove them
    ],
)
def test_emulator_floats_that_are_not_exactly_the_decimal_are_refused_naming_the_column(value: float) -> None:
    with pytest.raises(DponeError) as caught:
        _convert("decimal", [1.5, value], 38 if value > 1e15 else 12, 2)
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert "'c'" in caught.value.safe_message
    assert repr(value) not in caught.value.safe_message and str(value) not in str(caught.value.details)


def test_real_server_decimals_pass_through_unchanged() -> None:
    values = [Decimal("12.34"), None]
    assert _convert("decimal", values, 12, 2) == values


def test_money_is_a_four_digit_decimal() -> None:
    assert _convert("money", [1.5, Decimal("2.0001")]) == [Decimal("1.5000"), Decimal("2.0001")]


def test_emulator_dates_arrive_as_datetime_and_become_dates() -> None:
    assert _convert("date", [datetime(2026, 11, 30), None, date(2026, 12, 1)]) == [
        date(2026, 11, 30),
        None,
        date(2026, 12, 1),
    ]


@pytest.mark.parametrize("source_type", ["datetime", "datetime2", "datetimeoffset"])
def test_sub_second_digits_are_refused_naming_the_column_never_dropped(source_type: str) -> None:
    moment = datetime(2026, 11, 30, 10, 0, 0, 997_000)
    if source_type == "datetimeoffset":
        moment = moment.replace(tzinfo=timezone.utc)
    with pytest.raises(DponeError) as refused:
        _convert(source_type, [datetime(2026, 11, 30, 9), moment])
    assert refused.value.code is ErrorCode.SOURCE_READ_FAILED
    assert refused.value.details["column"] == "c"
    assert "sub-second" in refused.value.safe_message and "997" not in str(refused.value)


def test_whole_second_datetime2_arrives_unchanged() -> None:
    assert _convert("datetime2", [datetime(2026, 11, 30, 10, 0, 0), None]) == [
        datetime(2026, 11, 30, 10),
        None,
    ]


def test_datetimeoffset_is_converted_to_utc_and_made_naive() -> None:
    moment = datetime(2026, 11, 30, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert _convert("datetimeoffset", [moment]) == [datetime(2026, 12, 1, 4, 30)]


def test_bit_becomes_integer_flags() -> None:
    assert _convert("bit", [True, False, None]) == [1, 0, None]
    assert all(type(v) is int for v in _convert("bit", [True, False]))


def test_time_becomes_iso_text() -> None:
    assert _convert("time", [time(8, 30, 5), None]) == ["08:30:05", None]


def test_uniqueidentifier_becomes_canonical_uuid_text() -> None:
    value = uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
    text = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
    assert _convert("uniqueidentifier", [value, str(value).upper(), value.bytes_le, None]) == [
        text,
        text,
        text,
        None,
    ]


def test_binary_stays_bytes_and_text_stays_text() -> None:
    assert _convert("varbinary", [b"\x00\xff"]) == [b"\x00\xff"]
    assert _convert("nvarchar", ["Zoë"]) == ["Zoë"]


def test_integers_and_floats_pass_through_without_a_converter() -> None:
    for sql_type in ("tinyint", "smallint", "int", "bigint", "float", "real", "nvarchar", "varbinary"):
        column = mssql_types.column_spec("c", sql_type, True)
        assert converter_for(column, coerce=mssql_types.needs_coercion(column)) is None, sql_type


def test_date_before_the_clickhouse_epoch_fails_naming_the_column() -> None:
    with pytest.raises(DponeError) as caught:
        _convert("date", [date(1900, 1, 1)])
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert caught.value.details["column"] == "c"
    assert "1900" not in caught.value.render()


def test_datetime_beyond_the_clickhouse_range_fails() -> None:
    with pytest.raises(DponeError) as caught:
        _convert("datetime2", [datetime(2200, 1, 1)])
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED


def test_a_value_of_the_wrong_kind_fails_without_echoing_it() -> None:
    with pytest.raises(DponeError) as caught:
        _convert("decimal", ["secret-text"], 12, 2)
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert "secret-text" not in caught.value.render()


def test_coarse_number_columns_turn_integers_and_booleans_into_floats() -> None:
    column = mssql_types.coarse_column_spec("n", 3)
    convert = converter_for(column, coerce=True)
    assert convert is not None
    assert list(convert([1, True, 2.5, None])) == [1.0, 1.0, 2.5, None]


# -- the pre-arm value audit's T-SQL (what a SQL Server read could refuse) -------------------------------------


def _audit_schema() -> TableSchema:
    return TableSchema(
        columns=(
            mssql_types.column_spec("d", "date", True),
            mssql_types.column_spec("ts", "datetime2", True),
            mssql_types.column_spec("at", "datetimeoffset", True),
            mssql_types.column_spec("small", "smalldatetime", True),
            mssql_types.column_spec("amount", "decimal", True, 12, 2),
            mssql_types.column_spec("name", "nvarchar", True),
            mssql_types.column_spec("clock", "time(7)", True),
        )
    )


def test_the_audit_checks_calendar_ranges_and_sub_second_digits_only_where_a_read_could_refuse() -> None:
    from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS
    from airflow_provider_dpone.adapters.sources import value_audit

    checks = value_audit.mssql_checks(_audit_schema(), LEGACY_LIMITS)
    by_column: dict[str, list[str]] = {}
    for check in checks:
        by_column.setdefault(check.column.name, []).append(check.expression)
    assert by_column["d"] == ["MIN([d])", "MAX([d])"]
    assert "CAST([ts] AS DATETIME2(0)) <> [ts]" in by_column["ts"][2]
    assert by_column["at"][0] == "MIN(CAST(SWITCHOFFSET([at], '+00:00') AS DATETIME2))"  # ranges in UTC
    assert "CAST([at] AS DATETIMEOFFSET(0)) <> [at]" in by_column["at"][2]
    assert len(by_column["small"]) == 2  # smalldatetime holds no seconds' fraction
    assert by_column["clock"] == [
        "COALESCE(SUM(CASE WHEN CAST([clock] AS TIME(6)) <> [clock] THEN 1 ELSE 0 END), 0)"
    ]
    assert (
        "amount" not in by_column and "name" not in by_column
    )  # decimal(p,s) maps exactly; text never refused
    high = next(c for c in checks if c.column.name == "ts" and c.expression.startswith("MAX"))
    assert high.refused(datetime(2106, 2, 6, 23, 59, 59)) == 0
    assert high.refused(datetime(2106, 2, 7)) == 1
    low = next(c for c in checks if c.column.name == "d" and c.expression.startswith("MIN"))
    assert (
        low.refused(datetime(1969, 12, 31)) == 1
        and low.refused(date(1970, 1, 1)) == 0
        and not low.refused(None)
    )


def test_a_time_with_a_seventh_digit_stops_the_run_naming_the_column_and_how_to_keep_it() -> None:
    """pymssql hands ``time`` over as ``datetime.time`` (microseconds): the 100 ns digit of ``time(7)`` would
    be dropped without a word, so the audit counts the values a cast to ``time(6)`` changes."""
    from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS
    from airflow_provider_dpone.adapters.sources import value_audit

    checks = value_audit.mssql_checks(_audit_schema(), LEGACY_LIMITS)
    row = [3 if c.column.name == "clock" else (None if c.expression.startswith("M") else 0) for c in checks]
    with pytest.raises(DponeError) as caught:
        value_audit.require_clean(checks, row, "dbo.t")
    error = caught.value
    assert error.code is ErrorCode.MANIFEST_INVALID
    assert error.details == {
        "column": "clock",
        "clickhouse_type": "String",
        "reason": "sub_microsecond_digits",
        "table": "dbo.t",
        "rows": 3,
    }
    assert "seventh fractional digit" in error.safe_message and "(3 rows)" in error.safe_message
    assert any("CAST(col AS varchar(16))" in line for line in error.hint_lines)
    value_audit.require_clean(checks, [0 if v == 3 else v for v in row], "dbo.t")  # none: the run goes on


def test_a_datetimeoffset_day_partition_column_is_refused_by_its_type() -> None:
    from airflow_provider_dpone.adapters.sources import value_audit
    from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds

    day = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="at",
        lower="2026-11-30",
        upper="2026-12-01",
        value_type="date",
        label="d",
    )
    assert value_audit.mssql_offset_partition(_audit_schema(), [day]) is not None
    other = day.model_copy(update={"column": "ts"})
    assert value_audit.mssql_offset_partition(_audit_schema(), [other]) is None


def test_a_coarse_decimal_with_more_whole_digits_than_its_type_holds_stops_the_run_before_arming() -> None:
    """A coarse description names every decimal ``Decimal(38, 10)``; a ``decimal(38,0)`` value of 29+ digits
    kept its ``ROUND`` to 10 places, so the audit passed it and the read refused it inside the target call,
    blocking the route. The audit now also counts values at or past 10**28, an exact numeric literal, and
    compares with the value truncated (rounding a ``decimal(38,38)`` value up overflows on the server)."""
    from airflow_provider_dpone.adapters.clickhouse.column_encoders import LEGACY_LIMITS
    from airflow_provider_dpone.adapters.sources import value_audit

    schema = TableSchema(columns=(mssql_types.coarse_column_spec("d380", 5),))
    (check,) = value_audit.mssql_checks(schema, LEGACY_LIMITS)
    assert check.expression == (
        "COALESCE(SUM(CASE WHEN ROUND([d380], 10, 1) <> [d380] OR ABS([d380]) >= "
        "10000000000000000000000000000 THEN 1 ELSE 0 END), 0)"
    )
    with pytest.raises(DponeError) as caught:
        value_audit.require_clean([check], [1], "dbo.nums")
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    assert caught.value.details["column"] == "d380"
    assert caught.value.details["reason"] == "decimal_digits"
