"""Partition planning: bounds, labels, ordering and validation from the manifest's partitioning.

The probe below is an in-memory implementation of the planner's own ``PartitionProbe`` protocol (answers a
source would give), not a stand-in for a vendor library; the real probes run in the SQLite and TDS tests.
"""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources import partition_planning as planning
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime"),
        ColumnSpec(name="customer", clickhouse_type="String"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12, 2)"),
    )
)


class ProbeAnswers:
    """What a source would answer, plus a record of which queries planning asked."""

    def __init__(
        self,
        *,
        rows: int = 10,
        unplaceable: int = 0,
        days: list[date] | None = None,
        months: list[tuple[int, int]] | None = None,
        starts: list[int] | None = None,
    ) -> None:
        self.stats = planning.ColumnStats(rows=rows, unplaceable=unplaceable, lower=None, upper=None)
        self.days = days or []
        self.months = months or []
        self.starts = starts or []
        self.asked: list[str] = []

    def column_stats(self, column: ColumnSpec, kind: PartitionKind) -> planning.ColumnStats:
        self.asked.append("stats")
        return self.stats

    def distinct_days(self, column: ColumnSpec) -> list[date]:
        self.asked.append("days")
        return self.days

    def distinct_months(self, column: ColumnSpec) -> list[tuple[int, int]]:
        self.asked.append("months")
        return self.months

    def distinct_range_starts(self, column: ColumnSpec, size: int) -> list[int]:
        self.asked.append("starts")
        return self.starts


def _plan(partitioning: Partitioning, probe: ProbeAnswers | None = None) -> list[PartitionBounds]:
    return planning.plan(partitioning, SCHEMA, probe or ProbeAnswers())


def test_no_partitioning_is_one_partition_over_everything_without_any_query() -> None:
    probe = ProbeAnswers()
    assert _plan(Partitioning(kind=PartitionKind.NONE), probe) == [
        PartitionBounds(kind=BoundsKind.ALL, label="all")
    ]
    assert probe.asked == []


def test_day_partitions_cover_only_days_with_rows_in_order() -> None:
    probe = ProbeAnswers(days=[date(2026, 12, 1), date(2026, 11, 30), date(2026, 12, 5)])
    bounds = _plan(Partitioning(kind=PartitionKind.DAY, column="order_date"), probe)
    assert probe.asked == ["stats", "days"]
    assert [b.label for b in bounds] == [
        "order_date=2026-11-30",
        "order_date=2026-12-01",
        "order_date=2026-12-05",
    ]
    first = bounds[0]
    assert (first.kind, first.column, first.lower, first.upper, first.value_type) == (
        BoundsKind.RANGE,
        "order_date",
        "2026-11-30",
        "2026-12-01",
        "date",
    )


def test_month_partitions_roll_over_the_year_end() -> None:
    probe = ProbeAnswers(months=[(2026, 12), (2026, 11), (2027, 1)])
    bounds = _plan(Partitioning(kind=PartitionKind.MONTH, column="updated_at"), probe)
    assert [(b.label, b.lower, b.upper) for b in bounds] == [
        ("updated_at=2026-11", "2026-11-01", "2026-12-01"),
        ("updated_at=2026-12", "2026-12-01", "2027-01-01"),
        ("updated_at=2027-01", "2027-01-01", "2027-02-01"),
    ]
    assert {b.value_type for b in bounds} == {"date"}


def test_integer_ranges_align_to_multiples_of_size_also_below_zero() -> None:
    probe = ProbeAnswers(starts=[1000, -1000, 3000, 1234])
    bounds = _plan(Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=1000), probe)
    assert [b.label for b in bounds] == ["id=[-1000,0)", "id=[1000,2000)", "id=[3000,4000)"]
    assert [(b.lower, b.upper, b.value_type) for b in bounds][1] == ("1000", "2000", "integer")
    assert planning.range_start(-1, 1000) == -1000
    assert planning.range_start(999, 1000) == 0


def test_list_partitions_follow_the_manifest_order_and_fold_duplicates() -> None:
    probe = ProbeAnswers()
    bounds = _plan(
        Partitioning(kind=PartitionKind.LIST, column="customer", values=("Zoë", "Acme", "Zoë")), probe
    )
    assert probe.asked == []
    assert [(b.kind, b.values, b.label, b.value_type) for b in bounds] == [
        (BoundsKind.VALUES, ("Zoë",), "customer=Zoë", "string"),
        (BoundsKind.VALUES, ("Acme",), "customer=Acme", "string"),
    ]


def test_list_values_are_canonical_for_the_column_type() -> None:
    ids = _plan(Partitioning(kind=PartitionKind.LIST, column="id", values=(7, "07", " 8 ")))
    assert [(b.values, b.value_type) for b in ids] == [(("7",), "integer"), (("8",), "integer")]
    days = _plan(Partitioning(kind=PartitionKind.LIST, column="order_date", values=("2026-11-30",)))
    assert days[0].value_type == "date"


def test_a_list_value_that_does_not_fit_the_column_is_a_manifest_error() -> None:
    with pytest.raises(DponeError) as caught:
        _plan(Partitioning(kind=PartitionKind.LIST, column="id", values=("seven",)))
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    assert "seven" not in caught.value.render()
    assert caught.value.details["position"] == 1


@given(outside=st.one_of(st.integers(max_value=-(2**63) - 1), st.integers(min_value=2**63)))
def test_a_listed_integer_outside_64_bits_is_a_manifest_error_naming_no_value(outside: int) -> None:
    """Red before: a source binds such a value as a float, and -2**63-1 selected the row holding -2**63
    (that row moved twice, exit 0)."""
    with pytest.raises(DponeError) as caught:
        _plan(Partitioning(kind=PartitionKind.LIST, column="id", values=(5, outside)))
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    assert "64-bit" in caught.value.render() and str(outside) not in caught.value.render()
    assert caught.value.details["position"] == 2


@given(inside=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_every_64_bit_integer_is_a_list_value(inside: int) -> None:
    assert _plan(Partitioning(kind=PartitionKind.LIST, column="id", values=(inside,)))[0].values == (
        str(inside),
    )


def test_list_values_of_a_decimal_column_fold_by_their_number_and_must_be_numbers() -> None:
    """The source compares numbers: ``10.5``, ``10.50`` and `` 10.5`` select the same rows, and as three
    partitions an append moved them three times. The first spelling stays (its partition ID is unchanged)."""
    bounds = _plan(
        Partitioning(kind=PartitionKind.LIST, column="amount", values=("10.5", "10.50", " 10.5", "7"))
    )
    assert [b.values for b in bounds] == [("10.5",), ("7",)]
    # digits a source rounds before comparing: SQLite reads the first as the double 0.1, SQL Server casts
    # both to the column's scale, so each would select another value's rows under a partition of its own
    for bad in ("ten", "NaN", "Infinity", "0.10000000000000000001", "10.505", "1234567890123456"):
        with pytest.raises(DponeError) as caught:
            _plan(Partitioning(kind=PartitionKind.LIST, column="amount", values=("1", bad)))
        assert caught.value.code is ErrorCode.MANIFEST_INVALID and caught.value.details["position"] == 2
        assert "number" in caught.value.render() and bad not in caught.value.render()


def test_an_empty_source_plans_no_partitions() -> None:
    probe = ProbeAnswers(rows=0)
    assert _plan(Partitioning(kind=PartitionKind.DAY, column="order_date"), probe) == []
    assert probe.asked == ["stats"]


def test_rows_no_partition_would_select_stop_planning() -> None:
    probe = ProbeAnswers(rows=10, unplaceable=3, days=[date(2026, 11, 30)])
    with pytest.raises(DponeError) as caught:
        _plan(Partitioning(kind=PartitionKind.DAY, column="updated_at"), probe)
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert caught.value.details == {"column": "updated_at", "partitioning": "day", "unplaceable_rows": 3}
    assert probe.asked == ["stats"]


@pytest.mark.parametrize(
    ("partitioning", "fragment"),
    [
        (Partitioning(kind=PartitionKind.DAY, column="missing"), "which the source does not have"),
        (Partitioning(kind=PartitionKind.DAY, column="amount"), "date or datetime"),
        (Partitioning(kind=PartitionKind.INTEGER_RANGE, column="customer", size=10), "integer column"),
    ],
)
def test_unknown_or_unsuitable_partition_columns_are_manifest_errors(
    partitioning: Partitioning, fragment: str
) -> None:
    probe = ProbeAnswers()
    with pytest.raises(DponeError) as caught:
        _plan(partitioning, probe)
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    assert fragment in caught.value.safe_message
    assert probe.asked == []


def test_text_columns_may_carry_day_partitions() -> None:
    schema = TableSchema(columns=(ColumnSpec(name="d", clickhouse_type="String"),))
    bounds = planning.plan(
        Partitioning(kind=PartitionKind.DAY, column="d"), schema, ProbeAnswers(days=[date(2026, 1, 2)])
    )
    assert bounds[0].label == "d=2026-01-02"


# -- query hash ------------------------------------------------------------------------------------------


def _spec(**changes: object) -> SourceSpec:
    base: dict[str, object] = {"type": SourceType.MSSQL, "connection": "src", "table": "dbo.orders"}
    base.update(changes)
    return SourceSpec(**base)  # type: ignore[arg-type]


def test_query_hash_is_a_sha256_tag_and_stable() -> None:
    digest = planning.read_definition_hash(_spec())
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert digest == planning.read_definition_hash(_spec())


def test_query_hash_ignores_connection_partitioning_and_chunking() -> None:
    digest = planning.read_definition_hash(_spec())
    assert planning.read_definition_hash(_spec(connection="replica")) == digest
    assert (
        planning.read_definition_hash(_spec(partitioning=Partitioning(kind=PartitionKind.DAY, column="d")))
        == digest
    )
    assert planning.read_definition_hash(_spec(chunk_rows=10)) == digest


def test_query_hash_changes_with_table_query_columns_and_source_type() -> None:
    digest = planning.read_definition_hash(_spec())
    variants = [
        _spec(table="dbo.other"),
        _spec(query="SELECT id FROM dbo.orders"),
        _spec(columns=("id",)),
        _spec(columns=("id", "customer")),
        _spec(columns=("customer", "id")),
        _spec(type=SourceType.SQLITE),
    ]
    digests = {planning.read_definition_hash(v) for v in variants}
    assert digest not in digests
    assert len(digests) == len(variants)


def test_a_listed_date_and_time_with_a_fraction_of_a_second_is_refused_naming_the_column() -> None:
    """SQLite's ``datetime()`` and ClickHouse's ``DateTime`` compare whole seconds: red before, ``10:00:00.5``
    selected the ``10:00:00`` rows, and listed beside ``10:00:00`` moved them twice (exit 0)."""
    column = ColumnSpec(name="at", clickhouse_type="DateTime", nullable=False)
    whole = planning.list_partitions(column, ["2026-01-01 10:00:00", "2026-01-01T11:00:00.000"])
    assert [b.values for b in whole] == [("2026-01-01 10:00:00",), ("2026-01-01 11:00:00",)]
    with pytest.raises(DponeError) as refused:
        planning.list_partitions(column, ["2026-01-01 10:00:00", "2026-01-01 10:00:00.5"])
    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert refused.value.details == {"column": "at", "position": 2, "value_type": "datetime"}
    assert "fraction of a second" in refused.value.safe_message
    assert "10:00:00.5" not in refused.value.render()


@pytest.mark.parametrize(
    ("clickhouse_type", "raw", "reason"),
    [
        ("Date", "2026-02-30-secret", None),
        ("DateTime", "yesterday-secret", None),
        ("Date", True, "a boolean is not a partition value"),
        ("DateTime", "2026-01-01 10:00:00+02:00", "a date and time with a UTC offset"),
        ("DateTime", "2026-01-01T10:00:00Z", "a date and time with a UTC offset"),
        ("Int64", "12-secret", "not an integer"),
        ("Decimal(10, 2)", "1.234", "more fractional digits than the column's scale"),
    ],
)
def test_a_refused_list_value_shows_a_fixed_reason_and_never_the_value(
    clickhouse_type: str, raw: str | bool, reason: str | None
) -> None:
    """Only reasons of our own phrasing are shown: the date parser's own message quotes its input."""
    column = ColumnSpec(name="at", clickhouse_type=clickhouse_type, nullable=False)
    with pytest.raises(DponeError) as refused:
        planning.list_partitions(column, [raw])  # type: ignore[list-item]
    shown = refused.value.render()
    assert "secret" not in shown and "1.234" not in shown and "10:00" not in shown
    if reason is None:
        assert "(" not in refused.value.safe_message
    else:
        assert reason in refused.value.safe_message
