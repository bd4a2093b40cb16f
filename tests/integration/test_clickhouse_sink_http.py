"""ClickHouseSink against a real ClickHouse 18.16 server over HTTP (clickhouse-connect 1.6.0).

18.16 is the old-server profile: no ``mutations_sync`` (partition deletes are awaited through
``system.mutations``), no nullable sorting keys (``assumeNotNull`` keys), no lz4. The fault tests use a
private server of their own (``private_clickhouse``) so they can kill it, or an address nobody listens on.
Each test on the shared server works in a database of its own.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from tests.builders import BATCH, permit_for

SECRET = "pw-Sup3r-s3cret-9431"
SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date"),
        ColumnSpec(name="customer", clickhouse_type="String"),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)"),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime"),
    )
)
D1, D2, D3 = date(2026, 11, 29), date(2026, 11, 30), date(2026, 12, 1)


@pytest.fixture
def sink(clickhouse_http: EndpointDescriptor) -> Iterator[ClickHouseSink]:
    target = ClickHouseSink(clickhouse_http)
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def table(sink: ClickHouseSink) -> Iterator[str]:
    """``<unique db>.orders`` on the shared server; the database is dropped afterwards."""
    database = f"dpone_sink_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{database}.orders"
    finally:
        sink._client().command(f"DROP DATABASE IF EXISTS {database}")


def rows_chunk(ids: Sequence[int], day: date | None) -> ColumnChunk:
    n = len(ids)
    stamp = datetime(2026, 12, 1, 8, 30) if day is None else datetime(day.year, day.month, day.day, 8, 30)
    return ColumnChunk(
        partition_id="p",
        names=SCHEMA.names,
        columns=(list(ids), [day] * n, [f"c{i}" for i in ids], [Decimal("3.10")] * n, [stamp] * n),
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


def ids_in(sink: ClickHouseSink, table: str) -> list[int]:
    return [int(r[0]) for r in sink._client().query(f"SELECT id FROM {table} ORDER BY id").result_rows]


def seed(sink: ClickHouseSink, table: str) -> None:
    sink.prepare_target(table, SCHEMA, ("order_date", "id"))
    chunks = [rows_chunk([1, 2], D1), rows_chunk([3, 4], D2), rows_chunk([5], D3)]
    assert sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, SCHEMA, chunks) == 5


def assert_no_secret(error: DponeError, *secrets: str) -> None:
    surfaces = [str(error), error.render(), json.dumps(error.to_json(), default=str), repr(error.details)]
    for secret in secrets:
        for text in surfaces:
            assert secret not in text


# -- 18.16 specifics -------------------------------------------------------------------------------------


def test_server_is_the_old_profile_without_mutations_sync(sink: ClickHouseSink) -> None:
    client = sink._client()
    assert str(client.server_version).startswith("18.16")
    assert "mutations_sync" not in client.server_settings  # so replace_partition polls system.mutations


def test_nullable_order_by_column_is_keyed_through_assume_not_null(sink: ClickHouseSink, table: str) -> None:
    sink.prepare_target(table, SCHEMA, ("order_date", "id"))
    sink.prepare_target(table, SCHEMA, ("order_date", "id"))  # re-use is compatible

    ddl = sink._client().query(f"SHOW CREATE TABLE {table}").result_rows[0][0]
    assert "ORDER BY (assumeNotNull(order_date), id)" in ddl
    assert "Nullable(Date)" in ddl  # the stored values keep their NULLs
    sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, SCHEMA, [rows_chunk([1, 2], None)])
    assert sink.column_summary(table, None, ["order_date", "customer"]) == {
        "rows": 2,
        "null_counts": {"order_date": 2, "customer": 0},
        "distinct_counts": {"order_date": 0, "customer": 2},
    }


def test_incompatible_table_is_refused_by_name_and_nothing_is_written(
    sink: ClickHouseSink, table: str
) -> None:
    database = table.split(".")[0]
    client = sink._client()
    client.command(f"CREATE DATABASE {database}")
    client.command(
        f"CREATE TABLE {table} (id Int64, order_date Nullable(Date), customer Nullable(String), "
        "amount Nullable(Decimal(12, 2)), updated_at Nullable(String)) ENGINE = MergeTree ORDER BY id"
    )
    client.command(f"INSERT INTO {table} (id) VALUES (42)")

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(table, SCHEMA, ("id",))
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert refused.value.details["column"] == "updated_at"
    with pytest.raises(DponeError) as load_refused:
        sink.load(permit_for(table, Strategy.FULL_REFRESH), table, SCHEMA, [rows_chunk([1], D1)])
    assert load_refused.value.code is ErrorCode.TARGET_INCOMPATIBLE

    assert ids_in(sink, table) == [42]


def test_a_target_column_the_route_does_not_write_without_a_default_is_refused_on_the_server(
    sink: ClickHouseSink, table: str
) -> None:
    database = table.split(".")[0]
    client = sink._client()
    client.command(f"CREATE DATABASE {database}")
    client.command(
        f"CREATE TABLE {table} (id Int64, order_date Nullable(Date), customer Nullable(String), "
        "amount Nullable(Decimal(12, 2)), updated_at Nullable(DateTime), region String, noted Nullable(String), "
        "loaded DateTime DEFAULT now()) "
        "ENGINE = MergeTree ORDER BY id"
    )

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(table, SCHEMA, ("id",))

    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE
    assert [p["column"] for p in refused.value.details["problems"]] == ["region"]  # not noted, not loaded
    client.command(f"ALTER TABLE {table} MODIFY COLUMN region String DEFAULT 'unknown'")
    sink.prepare_target(table, SCHEMA, ("id",))
    assert (
        sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, SCHEMA, [rows_chunk([1], D1)]) == 1
    )
    assert client.query(f"SELECT region, noted FROM {table}").result_rows == [("unknown", None)]


def _with_column(name: str) -> TableSchema:
    return TableSchema(columns=(*SCHEMA.columns, ColumnSpec(name=name, clickhouse_type="String")))


def test_a_column_whose_file_names_the_server_cannot_open_is_refused_before_anything_is_created(
    sink: ClickHouseSink, table: str
) -> None:
    """Red before: 18.16 names a column's files after it (each non-word byte as %XX) and cannot open one past
    255 bytes: CREATE TABLE succeeded, every insert failed after arming, and the route stayed blocked."""
    longest = "\u0434" * 41  # Nullable: <6 x 41 = 246 chars>.null.mrk is 255 bytes: it fits
    too_long = "\u4e2d" * 28
    with pytest.raises(DponeError) as refused:
        sink.check_target(table, _with_column(too_long), ("id",))
    with pytest.raises(DponeError) as refused_again:
        sink.prepare_target(table, _with_column(too_long), ("id",))
    for error in (refused.value, refused_again.value):
        assert error.code is ErrorCode.TARGET_INCOMPATIBLE
        assert error.details["problem"] == "column_file_name_too_long"
    assert not sink._client().query(f"EXISTS TABLE {table}").result_rows[0][0]

    schema = _with_column(longest)
    sink.prepare_target(table, schema, ("id",))
    chunk = rows_chunk([1, 2], D1)
    chunk = ColumnChunk(
        partition_id="p",
        names=schema.names,
        columns=(*chunk.columns, ["\u00e9t\u00e9", None]),
        row_count=2,
    )
    assert sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, schema, [chunk]) == 2
    got = sink._client().query(f"SELECT id, `{longest}` FROM {table} ORDER BY id").result_rows
    assert got == [(1, "\u00e9t\u00e9"), (2, None)]


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("`{long}` String DEFAULT ''", ""),  # a column of the target's own the route never writes
        ("", "PARTITION BY toYYYYMM(`{long}`)"),  # a partition key's minmax_<name>.idx
    ],
    ids=["own-column", "partition-key"],
)
def test_a_hand_made_targets_own_long_names_are_refused_before_arming(
    sink: ClickHouseSink, table: str, extra: str, key: str
) -> None:
    """Red with the first form of the check, which looked at the route's columns only, each with the
    longest mark suffix: both tables took the route's rows into a failing insert after arming."""
    database = table.split(".")[0]
    long = "\u0434" * 40 + "abcde"  # 245 escaped: <long>.mrk fits, minmax_<long>.idx does not
    as_date = "\u0434" * 42  # 252 escaped: <long>.bin fits, <long>.mrk does not
    client = sink._client()
    client.command(f"CREATE DATABASE {database}")
    columns = (
        "id Int64, order_date Nullable(Date), customer Nullable(String), amount Nullable(Decimal(12, 2)), "
    )
    columns += "updated_at Nullable(DateTime)"
    if extra:
        columns += ", " + extra.format(long=as_date)
    else:
        columns += f", `{long}` Date DEFAULT toDate('2026-01-01')"
    client.command(f"CREATE TABLE {table} ({columns}) ENGINE = MergeTree {key.format(long=long)} ORDER BY id")

    with pytest.raises(DponeError) as refused:
        sink.prepare_target(table, SCHEMA, ("id",))

    assert refused.value.details["problem"] == "column_file_name_too_long"
    assert ids_in(sink, table) == []


# -- strategies on the server ---------------------------------------------------------------------------


def test_incremental_append_twice_doubles_the_rows(sink: ClickHouseSink, table: str) -> None:
    seed(sink, table)
    sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, SCHEMA, [rows_chunk([1, 2], D1)])
    assert ids_in(sink, table) == [1, 1, 2, 2, 3, 4, 5]


def test_full_refresh_replaces_every_row(sink: ClickHouseSink, table: str) -> None:
    seed(sink, table)
    assert sink.load(permit_for(table, Strategy.FULL_REFRESH), table, SCHEMA, [rows_chunk([9], D3)]) == 1
    assert ids_in(sink, table) == [9]


def test_replace_partition_waits_for_its_delete_and_touches_only_the_bounds(
    sink: ClickHouseSink, table: str
) -> None:
    seed(sink, table)
    permit = permit_for(table, Strategy.REPLACE_PARTITION, [day_bounds(D1), day_bounds(D3)])

    sink.load(permit, table, SCHEMA, [rows_chunk([10, 11], D1), rows_chunk([50], D3)])

    # read right away: the delete finished before load() returned
    assert ids_in(sink, table) == [3, 4, 10, 11, 50]
    database, name = table.split(".")
    pending = sink._client().query(
        f"SELECT count() FROM system.mutations WHERE database = '{database}' AND table = '{name}' "
        "AND is_done = 0"
    )
    assert pending.result_rows[0][0] == 0


def test_datetime_integer_and_value_list_bounds_select_exactly_on_the_server(
    sink: ClickHouseSink, table: str
) -> None:
    seed(sink, table)  # updated_at is 08:30 on each row's day; ids 1..5; customers c1..c5
    by_time = PartitionBounds(
        kind=BoundsKind.RANGE,
        column="updated_at",
        lower="2026-11-30T08:30:00",
        upper="2026-12-01T08:30:00",
        value_type="datetime",
        label="updated_at=2026-11-30",
    )
    by_id = PartitionBounds(
        kind=BoundsKind.RANGE, column="id", lower="2", upper="5", value_type="integer", label="id=[2,5)"
    )
    by_name = PartitionBounds(
        kind=BoundsKind.VALUES, column="customer", values=("c1", "c5", "c'9"), label="customer=list"
    )
    assert [sink.count_rows(table, b) for b in (by_time, by_id, by_name)] == [2, 3, 2]


# -- staged publication on the server -------------------------------------------------------------------


def test_staged_finalize_publishes_under_the_strategy_and_drops_staging(
    sink: ClickHouseSink, table: str
) -> None:
    seed(sink, table)
    staging = sink.begin_staging(table, SCHEMA, BATCH)
    assert sink.stage(staging, SCHEMA, [rows_chunk([20, 21], D2)]) == 2

    permit = permit_for(table, Strategy.REPLACE_PARTITION, [day_bounds(D2)])
    assert sink.finalize_staged_load(permit, staging, table) == 2

    assert ids_in(sink, table) == [1, 2, 5, 20, 21]
    assert not sink.table_exists(staging)


def test_staged_abort_drops_staging_and_leaves_the_target(sink: ClickHouseSink, table: str) -> None:
    seed(sink, table)
    staging = sink.begin_staging(table, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([20], D2)])

    sink.abort_staged_load(staging)
    sink.abort_staged_load(staging)

    assert not sink.table_exists(staging)
    assert ids_in(sink, table) == [1, 2, 3, 4, 5]


def test_load_and_finalize_without_an_open_permit_write_nothing(sink: ClickHouseSink, table: str) -> None:
    seed(sink, table)
    staging = sink.begin_staging(table, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([20], D2)])
    closed = permit_for(table, Strategy.FULL_REFRESH, open_=False)

    for attempt in (
        lambda: sink.load(closed, table, SCHEMA, [rows_chunk([7], D1)]),
        lambda: sink.finalize_staged_load(closed, staging, table),
    ):
        with pytest.raises(DponeError) as refused:
            attempt()
        assert refused.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED

    assert ids_in(sink, table) == [1, 2, 3, 4, 5]


# -- faults: unreachable, refused credentials, a server killed mid-insert ----------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_server_is_target_unreachable_and_names_no_secret(
    clickhouse_http: EndpointDescriptor,
) -> None:
    endpoint = clickhouse_http.model_copy(update={"port": _closed_port(), "password": SecretStr(SECRET)})
    sink = ClickHouseSink(endpoint)
    try:
        with pytest.raises(DponeError) as unreachable:
            sink.count_rows("analytics.orders", None)
    finally:
        sink.close()

    assert unreachable.value.code is ErrorCode.TARGET_UNREACHABLE
    assert unreachable.value.__cause__ is not None
    assert_no_secret(unreachable.value, SECRET, "Connection refused", "HTTPConnectionPool")


@pytest.mark.parametrize(
    ("user", "server_words"),
    [(None, ("Wrong password",)), ("nobody_here", ("nobody_here", "Unknown user"))],
    ids=["wrong-password", "unknown-user"],
)
def test_a_refused_login_is_target_unreachable_says_so_and_names_no_secret(
    clickhouse_http: EndpointDescriptor, user: str | None, server_words: tuple[str, ...]
) -> None:
    update: dict[str, object] = {"password": SecretStr(SECRET)}
    if user is not None:
        update["user"] = user
    sink = ClickHouseSink(clickhouse_http.model_copy(update=update))
    try:
        with pytest.raises(DponeError) as refused:
            sink.table_exists("analytics.orders")
    finally:
        sink.close()

    assert refused.value.code is ErrorCode.TARGET_UNREACHABLE  # retryable: the connection may be fixed
    assert "refused the login" in str(refused.value) and refused.value.details["cause"] == "login_refused"
    assert_no_secret(refused.value, SECRET, *server_words, "DB::Exception")


def _wait_until_refused(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed server still accepts connections")


def test_a_server_killed_mid_insert_is_target_load_failed_then_unreachable(private_clickhouse: Any) -> None:
    endpoint: EndpointDescriptor = private_clickhouse.endpoint
    table = "shop.orders"
    sink = ClickHouseSink(endpoint)
    try:
        sink.prepare_target(table, SCHEMA, ("id",))
        assert endpoint.port is not None
        port: int = endpoint.port

        def chunks() -> Iterator[ColumnChunk]:
            yield rows_chunk(range(0, 1000), D1)
            private_clickhouse.kill()  # SIGKILL between two inserts of one load
            _wait_until_refused(port)
            yield rows_chunk(range(1000, 2000), D1)

        with pytest.raises(DponeError) as failed:
            sink.load(permit_for(table, Strategy.INCREMENTAL_APPEND), table, SCHEMA, chunks())
        assert failed.value.code is ErrorCode.TARGET_LOAD_FAILED
        assert failed.value.details["rows_inserted_before"] == 1000
        assert failed.value.details["step"] == "insert"
        assert failed.value.__cause__ is not None
        assert_no_secret(failed.value, "INSERT", "c1000", "HTTPConnectionPool", "Errno")

        with pytest.raises(DponeError) as gone:
            sink.count_rows(table, None)
        assert gone.value.code is ErrorCode.TARGET_UNREACHABLE
    finally:
        sink.close()


# -- day and month partitions of a DateTime column (the 18.16 Date-vs-DateTime comparison) ---------------


def calendar_bounds_on_updated_at(day: date, kind: str) -> PartitionBounds:
    if kind == "day":
        lower, upper = day, day + timedelta(days=1)
    else:
        lower = day.replace(day=1)
        upper = (lower + timedelta(days=32)).replace(day=1)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="updated_at",
        lower=lower.isoformat(),
        upper=upper.isoformat(),
        value_type="date",
        label=f"updated_at={lower.isoformat()}",
    )


@pytest.mark.parametrize("kind", ["day", "month"])
def test_day_and_month_bounds_on_a_datetime_column_count_and_replace_exactly_on_the_server(
    sink: ClickHouseSink, table: str, kind: str
) -> None:
    seed(sink, table)  # updated_at 08:30 on D1 (ids 1, 2), D2 (3, 4) and D3 (5: December)
    bounds = calendar_bounds_on_updated_at(D2, kind)
    expected = [3, 4] if kind == "day" else [1, 2, 3, 4]  # D1 and D2 are in November
    assert sink.count_rows(table, bounds) == len(expected)
    assert sink.column_summary(table, bounds, ["id"])["rows"] == len(expected)

    sink.load(
        permit_for(table, Strategy.REPLACE_PARTITION, [bounds]), table, SCHEMA, [rows_chunk(expected, D2)]
    )

    assert ids_in(sink, table) == sorted([*expected, *(i for i in (1, 2, 3, 4, 5) if i not in expected)])
    assert sink.count_rows(table, bounds) == len(expected)  # replaced, not doubled


def test_staged_replace_of_a_datetime_day_partition_is_exact_on_the_server(
    sink: ClickHouseSink, table: str
) -> None:
    seed(sink, table)
    bounds = calendar_bounds_on_updated_at(D2, "day")
    staging = sink.begin_staging(table, SCHEMA, BATCH)
    sink.stage(staging, SCHEMA, [rows_chunk([3, 4], D2)])

    sink.finalize_staged_load(permit_for(table, Strategy.REPLACE_PARTITION, [bounds]), staging, table)

    assert ids_in(sink, table) == [1, 2, 3, 4, 5]
