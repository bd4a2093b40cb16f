"""A target changed while a ``direct`` load writes it stops the load inside its target call, blocked.

Seen on the 18.16 server, each run exit 0 (helper-target's repros): a DBA widened a Decimal column (a type
the route accepts) while a load ran, and every later insert, still declaring the old type, stored the value
divided by 100 (18.16 reads a declared type's bytes as the column's type; made ``Nullable``, the next insert
crashed the server); a DBA renamed the table away and created it anew, or truncated it, and the load went
on into the new or emptied table, and the next run took the missing history for retention. Then (helper-attack91's
repros): with ``allow_target_ttl`` no count was compared, so a truncate went unseen the same way; and an
``ALTER ... UPDATE`` of rows the load had inserted, or a delete of them and the same count inserted again,
left identity and counts as they were: exit 0, 300 rows holding other values than the source's.

The DBA's statement runs at a fixed point of the load: between two inserts (a progress listener, called
once a partition's last chunk has gone to the target, before the next partition's are read), before the
first insert (the chunk stream, which the sink reads only after pinning the table), or right before the
server receives an insert (the client's own insert call).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.clickhouse.mutations import await_mutations
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.compose import open_runtime
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.builders import permit_for
from tests.integration.route_rig import add_a_new_day
from tests.integration.server_rig import server_database
from tests.integration.test_clickhouse_sink_http import day_bounds

pytestmark = pytest.mark.service


def swap(client: Any, table: str) -> None:
    """The usual rebuild: the table renamed away, an empty one of the same definition under its name."""
    client.command(f"RENAME TABLE {table} TO {table}_old")
    client.command(f"CREATE TABLE {table} AS {table}_old")


@pytest.fixture
def server(clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    with server_database(clickhouse_http, monkeypatch, "changed_server", "changed_") as (client, database):
        client.command(f"CREATE DATABASE {database}")
        yield client, f"{database}.orders"


class AfterFirstPartition:
    """A progress listener that runs ``statement`` once, when the first partition has gone to the target."""

    def __init__(self, statement: Callable[[], None]) -> None:
        self._statement: Callable[[], None] | None = statement

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        return None

    def stage(self, name: str) -> None:
        return None

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        if self._statement is not None:
            statement, self._statement = self._statement, None
            statement()


def write_route(base: Path, table: str, strategy: str = "incremental_append", options: str = "") -> Path:
    """``options``: the sink's options as a YAML flow mapping (``{allow_target_ttl: true}``)."""
    manifest = base / "orders.yaml"
    options_line = f"\n  options: {options}" if options else ""
    manifest.write_text(
        f"""
kind: native_transfer
name: changed
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: changed_server
  table: {table}
  strategy: {strategy}
  load: direct
  order_by: [order_date, id]{options_line}
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return manifest


def loaded_then_two_new_days(
    base: Path, table: str, strategy: str = "incremental_append", options: str = ""
) -> Path:
    """A route whose first run loaded 1,200 rows over four days, and two new days in the source since: the
    next run loads two partitions, so a change can land between them. Returns the manifest."""
    create_demo_source(base / "source.sqlite", 1_200, days=4)
    manifest = write_route(base, table, strategy=strategy, options=options)
    with open_runtime(load_manifest(manifest)) as runtime:
        assert runtime.run("r1").rows_committed == 1_200
    add_a_new_day(base)
    add_a_new_day(base)
    return manifest


def source_amounts(base: Path) -> dict[int, Decimal]:
    with sqlite3.connect(base / "source.sqlite") as db:
        return {
            int(i): Decimal(str(a)).quantize(Decimal("0.01"))
            for i, a in db.execute("SELECT id, amount FROM orders")
        }


def target_amounts(client: Any, table: str) -> dict[int, Decimal]:
    rows = client.query(f"SELECT id, toString(amount) FROM {table}").result_rows
    return {int(i): Decimal(a).quantize(Decimal("0.01")) for i, a in rows}


def blocked_phases(manifest: Path) -> set[str]:
    with open_runtime(load_manifest(manifest)) as runtime:
        return {row.phase for row in runtime.inspect(with_source=False)}


def test_a_column_widened_between_two_inserts_stops_the_load_before_it_writes_other_values(
    tmp_path: Path, server: tuple[Any, str]
) -> None:
    client, table = server
    create_demo_source(tmp_path / "source.sqlite", 1_200, days=4)
    manifest = write_route(tmp_path, table)
    widen = AfterFirstPartition(
        lambda: client.command(f"ALTER TABLE {table} MODIFY COLUMN amount Decimal(18, 4)")
    )

    with (
        open_runtime(load_manifest(manifest), progress=widen) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r1")  # red before: exit 0, days 2-4 stored as amount / 100

    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == "column_types_changed"
    assert stopped.value.details["columns"] == [
        {"column": "amount", "declared_type": "Decimal(12, 2)", "found_type": "Decimal(18, 4)"}
    ]
    assert stopped.value.details["stopped_before_insert"] is True
    # what the load wrote before the change is the source's, value for value; nothing after it was written
    source, target = source_amounts(tmp_path), target_amounts(client, table)
    assert len(target) == stopped.value.details["rows_inserted"] == 300
    assert target == {i: source[i] for i in target}
    assert blocked_phases(manifest) == {"target_outcome_unknown"}
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as next_run:
        runtime.run("r2")
    assert next_run.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED


@pytest.mark.parametrize("how", ["swap", "truncate"])
def test_a_table_swapped_or_truncated_between_two_inserts_stops_the_load_blocked(
    tmp_path: Path, server: tuple[Any, str], how: str
) -> None:
    client, table = server
    manifest = loaded_then_two_new_days(tmp_path, table)

    def change() -> None:
        if how == "swap":
            time.sleep(1.1)  # 18.16 tells tables apart by when their definition changed, in seconds
            swap(client, table)
        else:
            client.command(f"TRUNCATE TABLE {table}")

    with (
        open_runtime(load_manifest(manifest), progress=AfterFirstPartition(change)) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r2")  # red before: exit 0, and the next run took the lost history for retention

    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == ("table_replaced" if how == "swap" else "rows_missing")
    assert stopped.value.details["rows_inserted"] == 600
    assert blocked_phases(manifest) == {"target_outcome_unknown"}
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as next_run:
        runtime.run("r3")
    assert next_run.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED
    if how == "swap":  # the history and the first new day are in the table renamed away, as on-call is told
        assert int(client.query(f"SELECT count() FROM {table}_old").result_rows[0][0]) == 1_500


def test_a_route_allowing_target_ttls_still_finds_its_table_truncated_between_two_inserts(
    tmp_path: Path, server: tuple[Any, str]
) -> None:
    """``allow_target_ttl`` says rows may expire; the armed partitions are younger than the TTL, so their count
    is still compared (18.16 has no TTL at all: every count is)."""
    client, table = server
    manifest = loaded_then_two_new_days(tmp_path, table, options="{allow_target_ttl: true}")
    truncate = AfterFirstPartition(lambda: client.command(f"TRUNCATE TABLE {table}"))

    with (
        open_runtime(load_manifest(manifest), progress=truncate) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r2")  # red before: exit 0, and the next run took the lost history for retention

    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == "rows_missing"
    assert (stopped.value.details["rows_within_after"], stopped.value.details["rows_inserted"]) == (300, 600)
    assert "table_ttl_deletes_rows" not in stopped.value.details  # the option alone is no TTL
    assert blocked_phases(manifest) == {"target_outcome_unknown"}


def of(table: str) -> str:
    """The condition of ``table``'s rows in a system table."""
    database, name = table.split(".")
    return f"database = '{database}' AND table = '{name}'"


def wait_for_mutations(client: Any, table: str) -> None:
    """18.16 runs a mutation after its statement returns: the next insert then finds it done."""
    await_mutations(client, TableName.parse(table), 30.0)


def update_new_rows(client: Any, table: str) -> None:
    client.command(f"ALTER TABLE {table} UPDATE amount = amount * 2 WHERE id > 1200")
    wait_for_mutations(client, table)


def delete_and_insert_again(client: Any, table: str) -> None:
    """The first new day's rows deleted and as many inserted again, with other amounts: counts as they were."""
    client.command(f"CREATE TABLE {table}_saved AS {table}")
    client.command(f"INSERT INTO {table}_saved SELECT * FROM {table} WHERE id > 1200")
    client.command(f"ALTER TABLE {table} DELETE WHERE id > 1200")
    wait_for_mutations(client, table)
    client.command(
        f"INSERT INTO {table} SELECT id, order_date, customer, amount * 2, updated_at FROM {table}_saved"
    )


@pytest.mark.parametrize("how", ["update", "delete_and_insert_again"])
def test_rows_the_load_inserted_mutated_between_two_inserts_stop_it_blocked(
    tmp_path: Path, server: tuple[Any, str], how: str
) -> None:
    client, table = server
    manifest = loaded_then_two_new_days(tmp_path, table)
    change = update_new_rows if how == "update" else delete_and_insert_again

    with (
        open_runtime(
            load_manifest(manifest), progress=AfterFirstPartition(lambda: change(client, table))
        ) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r2")  # red before: exit 0 with the first new day's 300 rows at twice the source's amount

    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == "mutated"
    assert stopped.value.details["mutations"] == 1
    assert stopped.value.details["rows_inserted"] == 600
    # identity and counts are as a clean load leaves them: only the mutation tells
    assert stopped.value.details["rows_within_after"] == 600
    assert stopped.value.details["rows_total_after"] == 1_800
    # why it must stop: the target holds every source row, 300 of them with other values
    source, target = source_amounts(tmp_path), target_amounts(client, table)
    assert set(target) == set(source)
    wrong = {i: target[i] for i in target if target[i] != source[i]}
    assert len(wrong) == 300  # the first new day's, at twice the source's amount
    assert wrong == {i: source[i] * 2 for i in wrong}
    assert blocked_phases(manifest) == {"target_outcome_unknown"}
    with open_runtime(load_manifest(manifest)) as runtime, pytest.raises(DponeError) as next_run:
        runtime.run("r3")
    assert next_run.value.code is ErrorCode.MANUAL_RECONCILIATION_REQUIRED


def test_a_replacing_load_tells_its_own_delete_from_an_update_made_during_it(
    tmp_path: Path, server: tuple[Any, str]
) -> None:
    client, table = server
    # the first run's own deletes are no change to the target
    manifest = loaded_then_two_new_days(tmp_path, table, strategy="replace_partition")
    with (
        open_runtime(
            load_manifest(manifest), progress=AfterFirstPartition(lambda: update_new_rows(client, table))
        ) as runtime,
        pytest.raises(DponeError) as stopped,
    ):
        runtime.run("r2")  # red before: exit 0 with 300 rows at twice the source's amount

    assert stopped.value.details["problem"] == "mutated"
    # the update is named; r2's own delete of the new days, a mutation too, is not
    commands = dict(
        client.query(f"SELECT mutation_id, command FROM system.mutations WHERE {of(table)}").result_rows
    )
    assert [commands[m].split(" ")[0] for m in stopped.value.details["mutation_ids"]] == ["UPDATE"]
    assert sum(command.startswith("DELETE") for command in commands.values()) >= 2  # r1's and r2's
    assert blocked_phases(manifest) == {"target_outcome_unknown"}


# -- the sink alone: a change at a point no listener reaches ------------------------------------------------

SCHEMA = TableSchema(  # the demo's columns, as dpone creates them for a source without NULLs
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="order_date", clickhouse_type="Date", nullable=False),
        ColumnSpec(name="customer", clickhouse_type="String", nullable=False),
        ColumnSpec(name="amount", clickhouse_type="Decimal(12,2)", nullable=False),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime", nullable=False),
    )
)
HISTORY, NEW = date(2026, 11, 29), date(2026, 11, 30)


def day_chunk(first_id: int, rows: int, day: date) -> ColumnChunk:
    ids = list(range(first_id, first_id + rows))
    stamp = datetime(day.year, day.month, day.day, 8, 30)
    return ColumnChunk(
        partition_id="p",
        names=SCHEMA.names,
        columns=(ids, [day] * rows, [f"c{i}" for i in ids], [Decimal("3.10")] * rows, [stamp] * rows),
        row_count=rows,
    )


@pytest.fixture
def sink_table(
    clickhouse_http: EndpointDescriptor, server: tuple[Any, str]
) -> Iterator[tuple[ClickHouseSink, str]]:
    """A sink on the shared server and its table, holding 100 rows of a day before the load under test."""
    _, table = server
    sink = ClickHouseSink(clickhouse_http)
    try:
        sink.prepare_target(table, SCHEMA, ("order_date", "id"))
        history = permit_for(table, Strategy.INCREMENTAL_APPEND, [day_bounds(HISTORY)])
        assert sink.load(history, table, SCHEMA, [day_chunk(1, 100, HISTORY)]) == 100
        yield sink, table
    finally:
        sink.close()


def load_new_day(sink: ClickHouseSink, table: str, chunks: Iterator[ColumnChunk]) -> DponeError:
    permit = permit_for(table, Strategy.INCREMENTAL_APPEND, [day_bounds(NEW)])
    with pytest.raises(DponeError) as stopped:
        sink.load(permit, table, SCHEMA, chunks)
    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    return stopped.value


@pytest.mark.parametrize("how", ["swap", "truncate"])
def test_a_table_swapped_or_truncated_before_the_first_insert_is_found_after_the_last(
    sink_table: tuple[ClickHouseSink, str], how: str
) -> None:
    sink, table = sink_table
    client = sink._client()
    if how == "swap":
        time.sleep(1.1)  # 18.16 tells tables apart by when their definition changed, in seconds

    def chunks() -> Iterator[ColumnChunk]:  # read by the sink once it pinned the table, before any insert
        if how == "swap":
            swap(client, table)
        else:
            client.command(f"TRUNCATE TABLE {table}")
        yield day_chunk(1_000, 50, NEW)

    stopped = load_new_day(sink, table, chunks())  # red before: loaded, the history gone

    # the armed day's own count is whole: the table's identity, or the rows it held outside the day, tell
    assert stopped.details["problem"] == ("table_replaced" if how == "swap" else "rows_outside_emptied")
    if how == "truncate":
        assert (stopped.details["rows_within_after"], stopped.details["rows_total_before"]) == (50, 100)


def test_a_column_widened_as_an_insert_is_sent_is_found_after_the_last_insert(
    sink_table: tuple[ClickHouseSink, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sink, table = sink_table
    client = sink._client()
    sent: list[int] = []
    raw_insert = client.raw_insert

    def widen_then_insert(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        if len(sent) == 2:  # after every check dpone makes before it, right before the server reads it
            client.command(f"ALTER TABLE {table} MODIFY COLUMN amount Decimal(18, 4)")
        return raw_insert(*args, **kwargs)

    monkeypatch.setattr(client, "raw_insert", widen_then_insert)

    def chunks() -> Iterator[ColumnChunk]:
        yield day_chunk(1_000, 50, NEW)  # the first chunk is inserted at once
        yield day_chunk(1_050, 50, NEW)

    stopped = load_new_day(sink, table, chunks())  # red before: loaded, exit 0

    assert stopped.details["problem"] == "column_types_changed"
    assert stopped.details["stopped_before_insert"] is False
    monkeypatch.undo()
    # why it must stop: 18.16 stored that insert's 3.10 as 0.0310
    amounts = client.query(
        f"SELECT toString(amount) FROM {table} WHERE id >= 1050 GROUP BY amount"
    ).result_rows
    assert [Decimal(a) for (a,) in amounts] == [Decimal("0.031")]


def test_a_column_made_nullable_between_two_inserts_stops_the_load_and_the_server_lives(
    private_clickhouse: Any,
) -> None:
    """Without the check the next insert crashed the 18.16 server (a private one here)."""
    sink = ClickHouseSink(private_clickhouse.endpoint)
    table = "shop.orders"
    try:
        sink.prepare_target(table, SCHEMA, ("order_date", "id"))
        client = sink._client()

        def chunks() -> Iterator[ColumnChunk]:
            yield day_chunk(1, 50, NEW)
            client.command(f"ALTER TABLE {table} MODIFY COLUMN customer Nullable(String)")
            yield day_chunk(51, 50, NEW)

        stopped = load_new_day(sink, table, chunks())

        assert stopped.details["problem"] == "column_types_changed"
        assert stopped.details["column"] == "customer"
        assert stopped.details["stopped_before_insert"] is True
        assert int(client.query(f"SELECT count() FROM {table}").result_rows[0][0]) == 50
    finally:
        sink.close()


def test_an_update_begun_while_a_replacing_load_deletes_is_not_taken_for_its_delete(
    sink_table: tuple[ClickHouseSink, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mutation of someone else that appears with the load's own delete is told apart by the delete's tag."""
    sink, table = sink_table
    client = sink._client()
    raw_command = client.command

    def update_along(statement: str, *args: Any, **kwargs: Any) -> Any:
        result = raw_command(statement, *args, **kwargs)
        if statement.startswith("ALTER TABLE") and " DELETE WHERE " in statement:  # the load's own delete
            raw_command(f"ALTER TABLE {table} UPDATE customer = 'other' WHERE id < 50")
        return result

    monkeypatch.setattr(client, "command", update_along)
    permit = permit_for(table, Strategy.REPLACE_PARTITION, [day_bounds(NEW)])
    with pytest.raises(DponeError) as stopped:
        sink.load(permit, table, SCHEMA, iter([day_chunk(1_000, 50, NEW)]))  # red before: loaded

    assert stopped.value.code is ErrorCode.TARGET_CHANGED_DURING_LOAD
    assert stopped.value.details["problem"] == "mutated"
    assert stopped.value.details["mutations"] == 1
