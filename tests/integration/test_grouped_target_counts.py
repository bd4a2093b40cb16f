"""The target's rows within many partitions, counted in one statement per disjoint batch, are ``count_rows``'s.

On ClickHouse 18.16 (no ``system.detached_parts``) a replacing run counts its newest committed partitions
to find one emptied by a detach (ADR 0093): 62 statements, one each. ``target_counts.rows_within_each``
asks the sink for each batch of pairwise disjoint bounds (``key_fingerprint.disjoint_batches``) at once
(``ClickHouseSink.count_rows_each``, the key fingerprint's statement with no key column). Here both ways are
held to the rows inserted, on chDB and on the 18.16 server: days (two batches of them), a month over them
(another layer), integer lists (overlapping ones apart), a day without rows, a bound asked twice, a
missing table.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import pytest

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.runtime.key_fingerprint import disjoint_batches
from airflow_provider_dpone.runtime.target_counts import rows_within_each
from tests.integration.hand_made_target_rig import chdb_at
from tests.integration.server_rig import server_database

FIRST = dt.date(2026, 1, 1)
#: (day, shard, n): day i holds i % 5 rows, of shard i % 7
ROWS = [(FIRST + dt.timedelta(days=i), i % 7, k) for i in range(90) for k in range(i % 5)]


def days(first: int, count: int = 1) -> PartitionBounds:
    lower = FIRST + dt.timedelta(days=first)
    upper = lower + dt.timedelta(days=count)
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="day",
        lower=lower.isoformat(),
        upper=upper.isoformat(),
        value_type="date",
        label=f"day={lower}+{count}",
    )


def shards(*values: int) -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.VALUES,
        column="shard",
        values=tuple(str(v) for v in values),
        value_type="integer",
        label=f"shard={values}",
    )


def held(bounds: PartitionBounds) -> int:
    """The rows inserted within ``bounds``, counted here."""
    if bounds.kind is BoundsKind.VALUES:
        return sum(1 for _, shard, _ in ROWS if str(shard) in (bounds.values or ()))
    lower, upper = dt.date.fromisoformat(str(bounds.lower)), dt.date.fromisoformat(str(bounds.upper))
    return sum(1 for day, _, _ in ROWS if lower <= day < upper)


@pytest.fixture(params=["chdb", pytest.param("server", marks=pytest.mark.service)])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[EndpointDescriptor, str]]:
    """(endpoint, database) of a fresh target: chDB in the test's folder, or a database on the server."""
    with ExitStack() as stack:
        if request.param == "chdb":
            endpoint, database = chdb_at(tmp_path), "demo"
        else:
            endpoint = request.getfixturevalue("clickhouse_http")
            _, database = stack.enter_context(
                server_database(endpoint, monkeypatch, "grouped_counts", "grouped_")
            )
        client = open_client(endpoint)
        try:
            client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
            client.command(
                f"CREATE TABLE {database}.t (day Date, shard Int32, n Int64) ENGINE = MergeTree ORDER BY (day, n)"
            )
            values = ", ".join(f"('{day}', {shard}, {n})" for day, shard, n in ROWS)
            client.command(f"INSERT INTO {database}.t (day, shard, n) VALUES {values}")
        finally:
            client.close()
        yield endpoint, database


def test_partitions_counted_in_grouped_statements_hold_what_each_count_finds(
    target: tuple[EndpointDescriptor, str],
) -> None:
    endpoint, database = target
    table = f"{database}.t"
    asked = [
        *(days(i) for i in range(70)),  # 70 days: two batches of at most 50
        days(0, 31),  # a month over them: a layer of its own
        days(200),  # no row there
        shards(1, 2),
        shards(3),
        shards(2, 5),  # shares 2 with the first list: another batch
        days(5),  # asked twice
    ]
    expected = [held(b) for b in asked]
    assert expected[:5] == [0, 1, 2, 3, 4] and expected[70] == sum(expected[:31]) and expected[71] == 0
    sink = ClickHouseSink(endpoint)
    try:
        with (
            mock.patch.object(sink, "count_rows_each", wraps=sink.count_rows_each) as grouped,
            mock.patch.object(sink, "count_rows", wraps=sink.count_rows) as alone,
        ):
            assert rows_within_each(sink, table, asked) == expected
        assert alone.call_count == 0
        assert grouped.call_count == len(disjoint_batches(list(dict.fromkeys(asked)))) == 5
        assert [sink.count_rows(table, b) for b in asked] == expected
        assert rows_within_each(sink, f"{database}.missing", asked[:3]) == [0, 0, 0]
    finally:
        sink.close()
