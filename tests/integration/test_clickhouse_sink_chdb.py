"""ClickHouseSink on embedded chDB (modern engine): table creation, compatibility, strategies, staging,
permits, predicates and metrics, all against a real chDB database through clickhouse-connect.

Each test gets a fresh chDB directory; the ``sink`` fixture closes its client in teardown, because only
one chDB path can be open per process.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.artifacts.arrow_ipc import ArrowIpcArtifactStore
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import STAGING_PREFIX, ClickHouseSink
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from tests import builders

TABLE = "demo.orders"
BATCH = "sha256:" + "ab" * 32

SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date"),
        ColumnSpec(name="customer", clickhouse_type="String"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)"),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime"),
    )
)


def chdb_endpoint(path: Path) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="warehouse", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(path)
    )


@pytest.fixture
def sink(chdb_dir: Path) -> Iterator[ClickHouseSink]:
    target = ClickHouseSink(chdb_endpoint(chdb_dir))
    try:
        yield target
    finally:
        target.close()


def rows_chunk(ids: Sequence[int], day: date, customer: str = "acme", partition_id: str = "p") -> ColumnChunk:
    n = len(ids)
    return ColumnChunk(
        partition_id=partition_id,
        names=SCHEMA.names,
        columns=(
            list(ids),
            [day] * n,
            [customer] * n,
            [Decimal("12.50")] * n,
            [datetime(day.year, day.month, day.day, 8, 30)] * n,
        ),
        row_count=n,
    )


def day_bounds(day: date) -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="order_date",
        lower=day.isoformat(),
        upper=(day + timedelta(days=1)).isoformat(),
        value_type="date",
        label=f"order_date={day.isoformat()}",
    )


def permit_for(
    strategy: Strategy, bounds: Sequence[PartitionBounds] = (), *, table: str = TABLE, open_: bool = True
) -> TargetPermit:
    return builders.permit_for(table, strategy, bounds, batch=BATCH, open_=open_)


def ids_in(sink: ClickHouseSink, table: str = TABLE) -> list[int]:
    rows = sink._client().query(f"SELECT id FROM {table} ORDER BY id").result_rows
    return [int(r[0]) for r in rows]


D1, D2, D3 = date(2026, 11, 29), date(2026, 11, 30), date(2026, 12, 1)


def seed(sink: ClickHouseSink) -> None:
    """Three days in the target: ids 1-2 on D1, 3-4 on D2, 5 on D3."""
    sink.prepare_target(TABLE, SCHEMA, ("order_date", "id"))
    chunks = [rows_chunk([1, 2], D1), rows_chunk([3, 4], D2), rows_chunk([5], D3)]
    assert sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, chunks) == 5


# -- table creation and compatibility ----------------------------------------------------------------


def test_prepare_target_creates_database_and_mergetree_table_keyed_by_order_by(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("order_date", "id"))

    client = sink._client()
    engine, sorting_key = client.query(
        "SELECT engine, sorting_key FROM system.tables WHERE database = 'demo' AND name = 'orders'"
    ).result_rows[0]
    assert engine == "MergeTree"
    assert sorting_key.replace(" ", "") == "order_date,id"
    described = [(r[0], r[1]) for r in client.query("DESCRIBE TABLE demo.orders").result_rows]
    assert described == [
        ("id", "Int64"),
        ("order_date", "Nullable(Date)"),
        ("customer", "Nullable(String)"),
        ("amount", "Nullable(Decimal(12, 2))"),
        ("updated_at", "Nullable(DateTime)"),
    ]
    assert sink.count_rows(TABLE, None) == 0


def test_prepare_target_without_order_by_keys_the_table_by_tuple(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ())
    key = (
        sink._client().query("SELECT sorting_key FROM system.tables WHERE name = 'orders'").result_rows[0][0]
    )
    assert key == ""


def test_prepare_target_reuses_a_compatible_table_and_keeps_its_rows(sink: ClickHouseSink) -> None:
    client = sink._client()
    client.command("CREATE DATABASE demo")
    # spelled differently, id widened to Nullable, and an extra column with a default: all compatible
    client.command(
        "CREATE TABLE demo.orders (id Nullable(Int64), order_date Nullable(Date), customer Nullable(String), "
        "amount Nullable(Decimal( 12 ,2 )) , updated_at Nullable(DateTime), loaded_at DateTime DEFAULT now()) "
        "ENGINE = MergeTree ORDER BY tuple()"
    )
    client.command("INSERT INTO demo.orders (id) VALUES (99)")

    sink.prepare_target(TABLE, SCHEMA, ("order_date", "id"))
    assert sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [rows_chunk([1], D1)]) == 1

    assert ids_in(sink) == [1, 99]


def test_prepare_target_refuses_a_retyped_column_by_name_and_load_writes_nothing(
    sink: ClickHouseSink,
) -> None:
    client = sink._client()
    client.command("CREATE DATABASE demo")
    client.command(
        "CREATE TABLE demo.orders (id Int64, order_date Nullable(Date), customer Nullable(String), "
        "amount Nullable(Float64), updated_at Nullable(DateTime)) ENGINE = MergeTree ORDER BY id"
    )
    client.command("INSERT INTO demo.orders (id) VALUES (7)")

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(TABLE, SCHEMA, ("id",))
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert "'amount'" in refused.value.safe_message
    assert refused.value.details["column"] == "amount"
    assert refused.value.details["problems"][0]["found_type"] == "Nullable(Float64)"

    consumed: list[int] = []

    def chunks() -> Iterator[ColumnChunk]:
        consumed.append(1)
        yield rows_chunk([1, 2], D1)

    # even a full_refresh load under an open permit refuses before its truncate
    with pytest.raises(DponeError) as load_refused:
        sink.load(permit_for(Strategy.FULL_REFRESH), TABLE, SCHEMA, chunks())
    assert load_refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert ids_in(sink) == [7]


def test_a_source_column_the_target_lacks_is_refused_with_how_to_add_it_with_the_sources_values(
    sink: ClickHouseSink,
) -> None:
    """Red before: the stop said only that the column was missing; added as the operator's first guess
    (``ADD COLUMN channel String``), every row already loaded read '' where the source held 'web'."""
    client = sink._client()
    client.command("CREATE DATABASE demo")
    client.command(
        "CREATE TABLE demo.orders (id Int64, order_date Nullable(Date), customer Nullable(String), "
        "updated_at Nullable(DateTime)) ENGINE = MergeTree ORDER BY id"
    )

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(TABLE, SCHEMA, ("id",))

    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert "'amount' is missing from the target table" in refused.value.safe_message
    hints = " ".join(refused.value.hint_lines)
    assert "ADD COLUMN <column> <type> DEFAULT <the source column's DEFAULT>" in hints
    assert "backfill" in hints and "--schema-checked" in hints


@pytest.mark.parametrize(
    ("extra", "accepted"),
    [
        ("note String", False),  # would read '' in every new row
        ("score UInt32", False),  # would read 0
        ("note Nullable(String)", True),  # reads NULL: no value
        ("note String DEFAULT 'n/a'", True),  # the table's owner said how
        ("note String MATERIALIZED customer", True),
    ],
)
def test_a_target_column_the_route_does_not_write_needs_a_default_or_null(
    sink: ClickHouseSink, extra: str, accepted: bool
) -> None:
    client = sink._client()
    client.command("CREATE DATABASE demo")
    client.command(
        "CREATE TABLE demo.orders (id Int64, order_date Nullable(Date), customer Nullable(String), "
        f"amount Nullable(Decimal(12, 2)), updated_at Nullable(DateTime), {extra}) ENGINE = MergeTree ORDER BY id"
    )

    if accepted:
        sink.prepare_target(TABLE, SCHEMA, ("id",))
        assert sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [rows_chunk([1], D1)]) == 1
        return
    with pytest.raises(DponeError) as refused:
        sink.prepare_target(TABLE, SCHEMA, ("id",))
    name = extra.split()[0]
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert refused.value.details["column"] == name
    assert f"'{name}'" in refused.value.safe_message and "no DEFAULT" in refused.value.safe_message
    assert any("source.columns" in line for line in refused.value.hint_lines)
    with pytest.raises(DponeError) as load_refused:
        sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [rows_chunk([1], D1)])
    assert load_refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert ids_in(sink) == []


def test_prepare_target_refuses_a_missing_column(sink: ClickHouseSink) -> None:
    client = sink._client()
    client.command("CREATE DATABASE demo")
    client.command("CREATE TABLE demo.orders (id Int64, order_date Date) ENGINE = MergeTree ORDER BY id")

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(TABLE, SCHEMA, ("id",))

    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert "'order_date'" in refused.value.safe_message  # Date is not Nullable(Date): the first problem
    assert {p["column"] for p in refused.value.details["problems"]} == {
        "order_date",
        "customer",
        "amount",
        "updated_at",
    }


def test_prepare_target_rejects_an_order_by_column_the_source_lacks(sink: ClickHouseSink) -> None:
    with pytest.raises(DponeError) as refused:
        sink.prepare_target(TABLE, SCHEMA, ("order_day",))
    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert not sink.table_exists(TABLE)


def test_nullable_order_by_column_keeps_the_key_usable_with_allow_nullable_key(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("order_date",))
    ddl = sink._client().query("SHOW CREATE TABLE demo.orders").result_rows[0][0]
    assert "allow_nullable_key = 1" in ddl
    chunk = ColumnChunk("p", SCHEMA.names, ([1, 2], [None, D1], [None, None], [None, None], [None, None]), 2)
    assert sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [chunk]) == 2


# -- strategies ----------------------------------------------------------------------------------------


def test_incremental_append_twice_doubles_the_rows(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("order_date", "id"))
    for _ in range(2):
        permit = permit_for(Strategy.INCREMENTAL_APPEND, [day_bounds(D1)])
        assert sink.load(permit, TABLE, SCHEMA, [rows_chunk([1, 2], D1), rows_chunk([3], D1)]) == 3

    assert sink.count_rows(TABLE, None) == 6
    assert ids_in(sink) == [1, 1, 2, 2, 3, 3]


def test_full_refresh_replaces_every_row(sink: ClickHouseSink) -> None:
    seed(sink)
    assert sink.load(permit_for(Strategy.FULL_REFRESH), TABLE, SCHEMA, [rows_chunk([10, 11], D3)]) == 2
    assert ids_in(sink) == [10, 11]


def test_replace_partition_replaces_only_the_armed_bounds(sink: ClickHouseSink) -> None:
    seed(sink)
    permit = permit_for(Strategy.REPLACE_PARTITION, [day_bounds(D2)])

    assert sink.load(permit, TABLE, SCHEMA, [rows_chunk([30, 31, 32], D2)]) == 3

    assert ids_in(sink) == [1, 2, 5, 30, 31, 32]
    assert sink.count_rows(TABLE, day_bounds(D1)) == 2
    assert sink.count_rows(TABLE, day_bounds(D2)) == 3
    assert sink.count_rows(TABLE, day_bounds(D3)) == 1


def test_replace_partition_of_several_partitions_deletes_each_range_once(sink: ClickHouseSink) -> None:
    seed(sink)
    permit = permit_for(Strategy.REPLACE_PARTITION, [day_bounds(D1), day_bounds(D3)])

    sink.load(permit, TABLE, SCHEMA, [rows_chunk([40], D1), rows_chunk([50], D3)])

    assert ids_in(sink) == [3, 4, 40, 50]


def test_replace_partition_by_datetime_range_keeps_the_upper_bound_exclusive(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    stamps = [
        datetime(2026, 12, 1, 0, 0, 0),
        datetime(2026, 12, 1, 23, 59, 59),
        datetime(2026, 12, 2, 0, 0, 0),
    ]
    chunk = ColumnChunk("p", SCHEMA.names, ([1, 2, 3], [D3] * 3, ["a"] * 3, [Decimal(1)] * 3, stamps), 3)
    sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [chunk])
    bounds = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="updated_at",
        lower="2026-12-01T00:00:00",
        upper="2026-12-02T00:00:00",
        value_type="datetime",
        label="updated_at=2026-12-01",
    )
    assert sink.count_rows(TABLE, bounds) == 2

    sink.load(permit_for(Strategy.REPLACE_PARTITION, [bounds]), TABLE, SCHEMA, [])

    assert ids_in(sink) == [3]


def test_replace_partition_by_value_list_escapes_quotes_and_backslashes(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    tricky = "o'brien \\ sons"
    chunks = [rows_chunk([1], D1, tricky), rows_chunk([2], D1, "o"), rows_chunk([3], D1, "x' OR 1=1 --")]
    sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, chunks)
    bounds = PartitionBounds(
        kind=BoundsKind.VALUES, column="customer", values=(tricky,), label="customer=obrien"
    )
    assert sink.count_rows(TABLE, bounds) == 1

    sink.load(permit_for(Strategy.REPLACE_PARTITION, [bounds]), TABLE, SCHEMA, [rows_chunk([9], D1, tricky)])

    assert ids_in(sink) == [2, 3, 9]


def test_replace_partition_by_integer_range(sink: ClickHouseSink) -> None:
    seed(sink)
    bounds = PartitionBounds(
        kind=BoundsKind.RANGE, column="id", lower="2", upper="4", value_type="integer", label="id=[2,4)"
    )
    # the rows a replace loads lie within its bounds (the source read them by those bounds)
    sink.load(permit_for(Strategy.REPLACE_PARTITION, [bounds]), TABLE, SCHEMA, [rows_chunk([3], D1)])
    assert ids_in(sink) == [1, 3, 4, 5]


def test_malformed_bounds_fail_before_any_delete(sink: ClickHouseSink) -> None:
    seed(sink)
    bad = PartitionBounds(
        kind=BoundsKind.RANGE, column="id", lower="two", upper="4", value_type="integer", label="id=bad"
    )
    with pytest.raises(DponeError) as failed:
        sink.load(permit_for(Strategy.REPLACE_PARTITION, [bad]), TABLE, SCHEMA, [rows_chunk([20], D1)])
    assert failed.value.code is ErrorCode.TARGET_LOAD_FAILED
    assert "two" not in failed.value.safe_message
    assert sink.count_rows(TABLE, None) == 5


# -- permits ---------------------------------------------------------------------------------------------


def test_load_without_an_open_permit_is_unguarded_and_writes_nothing(sink: ClickHouseSink) -> None:
    seed(sink)
    pulled: list[int] = []

    def chunks() -> Iterator[ColumnChunk]:
        pulled.append(1)
        yield rows_chunk([100], D1)

    never_opened = permit_for(Strategy.FULL_REFRESH, open_=False)
    closed = permit_for(Strategy.FULL_REFRESH)
    closed._close_window()
    for permit in (never_opened, closed):
        with pytest.raises(DponeError) as refused:
            sink.load(permit, TABLE, SCHEMA, chunks())
        assert refused.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED

    assert pulled == []  # not even the source was read
    assert ids_in(sink) == [1, 2, 3, 4, 5]


def test_a_permit_for_another_table_is_refused(sink: ClickHouseSink) -> None:
    seed(sink)
    other = permit_for(Strategy.FULL_REFRESH, table="demo.other")
    with pytest.raises(DponeError) as refused:
        sink.load(other, TABLE, SCHEMA, [rows_chunk([100], D1)])
    assert refused.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert sink.count_rows(TABLE, None) == 5


def test_a_source_failing_at_its_first_chunk_leaves_the_target_untouched(sink: ClickHouseSink) -> None:
    seed(sink)
    boom = RuntimeError("source went away")

    def chunks() -> Iterator[ColumnChunk]:
        raise boom
        yield  # pragma: no cover

    with pytest.raises(RuntimeError) as raised:
        sink.load(permit_for(Strategy.FULL_REFRESH), TABLE, SCHEMA, chunks())
    assert raised.value is boom  # the source's own exception, not relabelled
    assert sink.count_rows(TABLE, None) == 5  # the truncate never ran


def test_an_insert_rejected_by_the_engine_is_target_load_failed_and_chained(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    bad = ColumnChunk("p", SCHEMA.names, (["not-a-number"], [D1], ["x"], [Decimal(1)], [None]), 1)

    with pytest.raises(DponeError) as failed:
        sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [rows_chunk([1], D1), bad])

    assert failed.value.code is ErrorCode.TARGET_LOAD_FAILED
    assert failed.value.__cause__ is not None
    assert "not-a-number" not in failed.value.render()
    assert failed.value.details["rows_inserted_before"] == 1
    assert failed.value.details["chunk_index"] == 1


def test_a_chunk_with_columns_other_than_the_schema_is_refused(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    partial = ColumnChunk("p", ("id", "order_date"), ([1], [D1]), 1)
    with pytest.raises(DponeError) as refused:
        sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [partial])
    assert refused.value.code is ErrorCode.TARGET_LOAD_FAILED
    assert sink.count_rows(TABLE, None) == 0


# -- staged publication --------------------------------------------------------------------------------


def test_staged_append_publishes_the_staging_rows_and_drops_staging(sink: ClickHouseSink) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    assert staging.startswith("demo." + STAGING_PREFIX)
    assert sink.stage(staging, SCHEMA, [rows_chunk([6, 7], D3), rows_chunk([8], D3)]) == 3
    assert sink.count_rows(TABLE, None) == 5  # staging is not the target

    published = sink.finalize_staged_load(permit_for(Strategy.INCREMENTAL_APPEND), staging, TABLE)

    assert published == 3
    assert ids_in(sink) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert not sink.table_exists(staging)


def test_staged_full_refresh_replaces_the_target(sink: ClickHouseSink) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([60], D1)])
    assert sink.finalize_staged_load(permit_for(Strategy.FULL_REFRESH), staging, TABLE) == 1
    assert ids_in(sink) == [60]


def test_staged_replace_partition_replaces_only_the_armed_bounds(sink: ClickHouseSink) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([70, 71], D2)])
    permit = permit_for(Strategy.REPLACE_PARTITION, [day_bounds(D2)])
    assert sink.finalize_staged_load(permit, staging, TABLE) == 2
    assert ids_in(sink) == [1, 2, 5, 70, 71]


def test_finalize_without_an_open_permit_is_refused_and_keeps_staging(sink: ClickHouseSink) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([6], D3)])

    with pytest.raises(DponeError) as refused:
        sink.finalize_staged_load(permit_for(Strategy.FULL_REFRESH, open_=False), staging, TABLE)

    assert refused.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert sink.count_rows(TABLE, None) == 5
    assert sink.count_rows(staging, None) == 1


def test_begin_staging_gives_each_attempt_its_own_table_and_drops_the_operations_leftovers(
    sink: ClickHouseSink,
) -> None:
    """An attempt stages into a table of its own: a run whose lease ended under it cannot insert into the
    table of the run that took over (which would publish those rows too). Earlier attempts' tables of the
    same operation are dropped, the route's lease being held; another operation's are kept."""
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    first = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.stage(first, SCHEMA, [rows_chunk([1, 2], D1)])
    other = sink.begin_staging(TABLE, SCHEMA, "sha256:" + "cd" * 32)

    again = sink.begin_staging(TABLE, SCHEMA, BATCH)  # a retry of the same operation

    assert again != first and not sink.table_exists(first)
    assert sink.count_rows(again, None) == 0
    assert sink.table_exists(other)
    sink.drop_leftover_staging(TABLE, BATCH)  # a later run with nothing to move
    assert not sink.table_exists(again) and sink.table_exists(other)


def test_abort_staged_load_drops_staging_is_idempotent_and_never_drops_other_tables(
    sink: ClickHouseSink,
) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([6], D3)])

    sink.abort_staged_load(staging)
    sink.abort_staged_load(staging)
    sink.abort_staged_load(TABLE)  # not a staging table: refused quietly

    assert not sink.table_exists(staging)
    assert sink.count_rows(TABLE, None) == 5


def test_finalize_of_a_vanished_staging_table_publishes_nothing(sink: ClickHouseSink) -> None:
    seed(sink)
    staging = sink.begin_staging(TABLE, SCHEMA, BATCH)
    sink.abort_staged_load(staging)
    with pytest.raises(DponeError) as failed:
        sink.finalize_staged_load(permit_for(Strategy.FULL_REFRESH), staging, TABLE)
    assert failed.value.code is ErrorCode.TARGET_LOAD_FAILED
    assert sink.count_rows(TABLE, None) == 5


# -- read-only helpers ---------------------------------------------------------------------------------


def test_count_rows_of_a_missing_table_is_zero(sink: ClickHouseSink) -> None:
    assert sink.count_rows(TABLE, day_bounds(D1)) == 0
    assert not sink.table_exists(TABLE)


def test_column_summary_counts_rows_nulls_and_exact_distincts_within_bounds(sink: ClickHouseSink) -> None:
    sink.prepare_target(TABLE, SCHEMA, ("id",))
    chunk = ColumnChunk(
        "p",
        SCHEMA.names,
        ([1, 2, 3, 4], [D1, D1, D1, D2], ["a", None, "a", "b"], [None] * 4, [None] * 4),
        4,
    )
    sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, [chunk])

    summary = sink.column_summary(TABLE, day_bounds(D1), ["id", "customer", "amount"])

    assert summary == {
        "rows": 3,
        "null_counts": {"id": 0, "customer": 1, "amount": 3},
        "distinct_counts": {"id": 3, "customer": 1, "amount": 0},
    }


# -- artifacts into the target -------------------------------------------------------------------------


def test_rows_from_an_arrow_artifact_load_exactly(sink: ClickHouseSink, tmp_path: Path) -> None:
    store = ArrowIpcArtifactStore(tmp_path / "artifacts")
    chunks = [rows_chunk(range(i * 1000, (i + 1) * 1000), D1) for i in range(5)]
    ref = store.write("sha256:" + "01" * 32, SCHEMA, chunks)
    sink.prepare_target(TABLE, SCHEMA, ("order_date", "id"))

    loaded = sink.load(permit_for(Strategy.INCREMENTAL_APPEND), TABLE, SCHEMA, store.read(ref, 700))

    assert loaded == ref.rows == 5000
    count, distinct, total = (
        sink._client().query("SELECT count(), uniqExact(id), sum(amount) FROM demo.orders").result_rows[0]
    )
    assert (count, distinct, total) == (5000, 5000, Decimal("62500.00"))


def test_a_tampered_artifact_fails_before_the_target_is_touched(sink: ClickHouseSink, tmp_path: Path) -> None:
    seed(sink)
    store = ArrowIpcArtifactStore(tmp_path / "artifacts")
    ref = store.write("sha256:" + "02" * 32, SCHEMA, [rows_chunk([1, 2, 3], D1)])
    data = bytearray(Path(ref.path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(ref.path).write_bytes(bytes(data))

    # the engine builds the stream lazily, so the artifact is opened inside the target call
    lazy = itertools.chain.from_iterable(store.read(r, 100) for r in [ref])
    with pytest.raises(DponeError) as invalid:
        sink.load(permit_for(Strategy.FULL_REFRESH), TABLE, SCHEMA, lazy)

    assert invalid.value.code is ErrorCode.ARTIFACT_INVALID
    assert ids_in(sink) == [1, 2, 3, 4, 5]  # not truncated, nothing inserted


# -- the chDB process rules ------------------------------------------------------------------------------


def test_close_releases_the_chdb_path_so_another_path_can_open(sink: ClickHouseSink, tmp_path: Path) -> None:
    seed(sink)
    sink.close()
    sink.close()  # idempotent

    other = ClickHouseSink(chdb_endpoint(tmp_path / "other-chdb"))
    try:
        other.prepare_target(TABLE, SCHEMA, ())
        with pytest.raises(DponeError) as busy:
            open_client(sink._endpoint)  # the first path, while the other one is open
        assert busy.value.code is ErrorCode.TARGET_UNREACHABLE
        assert busy.value.hint_lines
    finally:
        other.close()

    assert sink.count_rows(TABLE, None) == 5  # the sink reopens its client on next use


def test_without_chdb_installed_an_embedded_target_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, chdb_dir: Path
) -> None:
    monkeypatch.setitem(sys.modules, "chdb", None)  # what `import chdb` sees when it is not installed
    with pytest.raises(DponeError) as missing:
        ClickHouseSink(chdb_endpoint(chdb_dir)).table_exists(TABLE)
    assert missing.value.code is ErrorCode.EMBEDDED_EXTRA_MISSING
    assert "pip install 'airflow-provider-dpone[embedded]'" in missing.value.safe_message
