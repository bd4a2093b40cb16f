"""One reader of ClickHouse type names: the sink's compatibility check and the artifacts' Arrow schema agree."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_dpone.adapters.artifacts.arrow_types import arrow_type, from_arrow, to_arrow
from airflow_provider_dpone.adapters.clickhouse.table_schema import normalize_type
from airflow_provider_dpone.adapters.clickhouse.type_names import decimal_parts
from airflow_provider_dpone.contracts.schema import ColumnSpec


@pytest.mark.parametrize(
    ("spelled", "parts"),
    [
        ("Decimal(12, 2)", (12, 2)),
        ("Decimal32(2)", (9, 2)),
        ("Decimal64( 4 )", (18, 4)),
        ("Decimal128(10)", (38, 10)),
        ("Decimal256(2)", (76, 2)),
        ("String", None),
    ],
)
def test_the_sink_and_the_artifacts_read_a_decimal_type_alike(
    spelled: str, parts: tuple[int, int] | None
) -> None:
    assert decimal_parts(spelled) == parts
    if parts is not None:
        assert normalize_type(spelled) == f"Decimal({parts[0]},{parts[1]})"
        kind = arrow_type(ColumnSpec(name="amount", clickhouse_type=spelled))
        assert (kind.precision, kind.scale) == parts


def test_a_decimal256_column_round_trips_through_arrow_exactly() -> None:
    field = pa.field("amount", arrow_type(ColumnSpec(name="amount", clickhouse_type="Decimal256(2)")))
    value = Decimal("1" * 70 + ".25")
    assert from_arrow(to_arrow([value, None], field)) == [value, None]


def test_artifacts_refuse_a_digit_past_the_scale_instead_of_truncating() -> None:
    field = pa.field("amount", pa.decimal128(12, 2))
    assert from_arrow(to_arrow([1.5, Decimal("2.10")], field)) == [Decimal("1.50"), Decimal("2.10")]
    with pytest.raises(ValueError, match="past the column's scale"):
        to_arrow([Decimal("1.239")], field)
    with pytest.raises(ValueError, match="past the column's scale"):
        to_arrow([0.1 + 0.2], field)
