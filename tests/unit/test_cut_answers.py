"""A read whose answer was cut to nothing stops; it is never taken for a real "no rows" (ADR 0094, addendum).

Through an HTTP proxy that speaks HTTP/1.0 to the 18.16 server (nginx's default) the server ends each answer
by closing, so an answer cut right after its headers arrives as a complete, empty body, and clickhouse-connect
reads an empty Native body as 0 rows (helper-167, ``/tmp/helper-167``). Each test answers ONE chosen
statement with no rows, as that proxy delivers it, and everything else as a server holding the table would:
a decision-bearing read must then stop the call (or, for the staged publish's part listing, fall back on the
copy, which needs no listing), never go on as if the server had said "none".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import OperationalError

from airflow_provider_dpone.adapters.clickhouse import sink as sink_module
from airflow_provider_dpone.adapters.clickhouse.file_names import (
    StoredColumn,
    require_storable_column_names,
    stored_columns,
)
from airflow_provider_dpone.adapters.clickhouse.mutations import await_mutations
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink
from airflow_provider_dpone.adapters.clickhouse.target_pin import own_mutations
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.contracts.schema import ColumnSpec, TableSchema
from tests.builders import day, permit_for

TARGET = "demo.orders"
STAGING = "demo._dpone_stage_0123456789abcdef_0a1b2c3d4e5f"
STAGED_ROWS = 6
SCHEMA = TableSchema(
    columns=(
        ColumnSpec(name="id", clickhouse_type="Int64", nullable=False),
        ColumnSpec(name="updated_at", clickhouse_type="DateTime", nullable=False),
    )
)
DEFINITION = (
    " (`id` Int64, `updated_at` DateTime) ENGINE = MergeTree ORDER BY id SETTINGS index_granularity = 8192"
)

#: the statements a test cuts, as the substrings (all of them) that name each one, old and fixed forms alike
PART_LISTING = ("FROM system.parts", "partition_id")
TABLE_FACTS = ("FROM system.tables", "engine_full")
DESCRIBE = ("DESCRIBE TABLE",)
DETACHED = ("FROM system.detached_parts",)
MUTATIONS = ("FROM system.mutations",)
PIN = ("metadata_modification_time",)


@dataclass
class Answer:
    """What clickhouse-connect returns for a query: its rows and column names (none for a cut answer)."""

    result_rows: list[tuple[Any, ...]]
    column_names: tuple[str, ...] = ()


class WriteAttempted(AssertionError):
    """The double was asked for an insert: the code went on writing."""


@dataclass
class CutAnswerClient:
    """A server holding ``demo.orders`` (and a staging table of six rows defined as it is) that answers the
    one statement named by ``cut`` with no rows. ``commands``: every command sent (names unquoted);
    ``writes``: inserts."""

    cut: tuple[str, ...] = ()
    engine: str = "MergeTree"
    server_version: str = "18.16.1"
    server_settings: dict[str, object] = field(default_factory=lambda: {"insert_deduplicate": object()})
    commands: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    cut_seen: int = 0

    def query(self, sql: str, **_: object) -> Answer:
        plain = sql.replace("`", "")  # names as the tests spell them
        if self.cut and all(part in plain for part in self.cut):
            self.cut_seen += 1
            return Answer([])
        return self._answer(plain)

    def command(self, sql: str, **_: object) -> int:
        self.commands.append(sql.replace("`", ""))
        return 0

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def write(*_args: object, **_kwargs: object) -> Any:
            self.writes.append(name)
            raise WriteAttempted(name)

        return write

    def _answer(self, sql: str) -> Answer:
        if (found := re.fullmatch(r"EXISTS TABLE (\S+)", sql)) is not None:
            return Answer([(int(found.group(1) in (TARGET, STAGING, "system.detached_parts")),)])
        if sql.startswith("DESCRIBE TABLE"):
            return Answer(
                [("id", "Int64", "", ""), ("updated_at", "DateTime", "", "")],
                ("name", "type", "default_type", "default_expression"),
            )
        if sql.startswith(f"SELECT count() FROM {STAGING}"):
            return Answer([(STAGED_ROWS,)])
        if sql.startswith(f"SELECT count() FROM {TARGET}"):
            return Answer([(500,)])
        if "FROM system.parts" in sql:  # the staging table: one partition of six rows
            return Answer([("all", STAGED_ROWS)] if "sum(rows)" in sql else [("all",)])
        if "create_table_query" in sql:  # the staged publish's definitions
            return Answer(
                [
                    (STAGING.split(".")[1], "MergeTree", f"CREATE TABLE {STAGING}{DEFINITION}", []),
                    ("orders", "MergeTree", f"CREATE TABLE {TARGET}{DEFINITION}", []),
                ]
            )
        if "engine_full" in sql and "FROM system.tables" in sql and "metadata_modification_time" not in sql:
            facts: tuple[Any, ...] = (
                self.engine,
                f"{self.engine} ORDER BY id SETTINGS index_granularity = 8192",
                [],
                [],
            )
            return Answer([(1, *facts)] if sql.startswith("SELECT count()") else [facts])
        if "metadata_modification_time" in sql:  # the load's pin
            return Answer([(self.engine, "2026-12-07 10:00:00", "", [])])
        if "system.columns" in sql and "'uuid'" in sql:
            return Answer([(0,)])
        if "FROM system.mutations" in sql:
            return Answer([(0, [])] if "groupArray" in sql else [(0,)])
        if "FROM system.detached_parts" in sql:
            part = ("20261129", "20261129_1_1_0", "")
            return Answer([(1, [part])] if "groupArray" in sql else [part])
        if "partition_key FROM system.tables" in sql:
            return Answer([("toYYYYMMDD(updated_at)",)])
        if "type FROM system.columns" in sql:
            return Answer([("DateTime",)])
        raise AssertionError(f"the double has no answer for: {sql[:120]}")


@pytest.fixture
def server(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., tuple[ClickHouseSink, CutAnswerClient]]]:
    """``server(cut=..., **sink_options)``: a sink over the double, which answers ``cut`` with no rows."""

    def make(
        *, cut: tuple[str, ...] = (), engine: str = "MergeTree", **options: Any
    ) -> tuple[ClickHouseSink, CutAnswerClient]:
        client = CutAnswerClient(cut=cut, engine=engine)
        monkeypatch.setattr(sink_module, "open_client", lambda _endpoint: client)
        endpoint = EndpointDescriptor(
            name="ch",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.HTTP,
            host="127.0.0.1",
            port=8123,
        )
        return ClickHouseSink(endpoint, **options), client

    yield make


def _stops(call: Callable[[], object], client: CutAnswerClient) -> DponeError:
    with pytest.raises(DponeError) as stopped:
        call()
    assert client.cut_seen, "the chosen statement was never sent"
    assert stopped.value.code in (ErrorCode.TARGET_UNREACHABLE, ErrorCode.TARGET_LOAD_FAILED)
    return stopped.value


# -- finding 1: the staged publish's part listing ------------------------------------------------------


def test_a_whole_answer_to_the_part_listing_publishes_by_attaching_the_parts(server: Any) -> None:
    sink, client = server()
    assert sink.finalize_staged_load(permit_for(TARGET), STAGING, TARGET) == STAGED_ROWS
    assert [c.split(" FROM ")[0] for c in client.commands[:1]] == [
        f"ALTER TABLE {TARGET} ATTACH PARTITION ID 'all'"
    ]


def test_a_cut_answer_to_the_part_listing_copies_the_staged_rows_instead_of_attaching_none(
    server: Any,
) -> None:
    """Before: "no part" attached nothing, the staging table was dropped and its rows reported published."""
    sink, client = server(cut=PART_LISTING)
    assert sink.finalize_staged_load(permit_for(TARGET), STAGING, TARGET) == STAGED_ROWS
    assert client.cut_seen == 1
    copies = [c for c in client.commands if c.startswith(f"INSERT INTO {TARGET}")]
    assert copies == [f"INSERT INTO {TARGET} (id, updated_at) SELECT id, updated_at FROM {STAGING}"]
    assert not [c for c in client.commands if "ATTACH" in c]


@pytest.mark.parametrize("strategy", [Strategy.REPLACE_PARTITION, Strategy.FULL_REFRESH])
def test_a_cut_answer_to_the_part_listing_of_a_replacing_publish_still_copies_after_the_delete(
    server: Any, strategy: Strategy
) -> None:
    """The scope is applied (days deleted, or the table truncated) and the staged rows then copied in."""
    sink, client = server(cut=PART_LISTING)
    bounds = [day("2026-11-29", "2026-11-30", column="updated_at")]
    permit = permit_for(TARGET, strategy, bounds if strategy is Strategy.REPLACE_PARTITION else ())
    assert sink.finalize_staged_load(permit, STAGING, TARGET) == STAGED_ROWS
    scope = [c for c in client.commands if c.startswith(("ALTER TABLE demo.orders DELETE", "TRUNCATE"))]
    copy = [c for c in client.commands if c.startswith(f"INSERT INTO {TARGET}")]
    assert len(scope) == 1 and len(copy) == 1
    assert client.commands.index(scope[0]) < client.commands.index(copy[0])


# -- finding 2: the target's system.tables facts (ADR 0083 engine and TTL, ADR 0086 views) -----------------


def test_the_facts_of_a_replacing_target_refuse_it(server: Any) -> None:
    sink, _ = server(engine="ReplacingMergeTree")
    with pytest.raises(DponeError) as refused:
        sink.check_target(TARGET, SCHEMA, ("id",))
    assert refused.value.code is ErrorCode.TARGET_INCOMPATIBLE


@pytest.mark.parametrize("step", ["check_target", "prepare_target"])
def test_a_cut_answer_to_the_target_facts_stops_before_arming(server: Any, step: str) -> None:
    """Before: read as "no such table", the engine, TTL, views and pending-mutation checks were skipped and a
    ReplacingMergeTree target was loaded (exit 0; it collapsed after the merge)."""
    sink, client = server(cut=TABLE_FACTS, engine="ReplacingMergeTree")
    stopped = _stops(lambda: getattr(sink, step)(TARGET, SCHEMA, ("id",)), client)
    assert stopped.code is ErrorCode.TARGET_UNREACHABLE  # retryable: the next try reads the facts again


@pytest.mark.parametrize("reader", ["deleting_ttl", "views_fed_by"])
def test_a_cut_answer_to_the_target_facts_stops_every_other_reader_of_them(server: Any, reader: str) -> None:
    """Before: ``False`` (no deleting TTL) and ``[]`` (no view) as for a table that does not exist."""
    sink, client = server(cut=TABLE_FACTS)
    _stops(lambda: getattr(sink, reader)(TARGET), client)


# -- finding 3: DESCRIBE ---------------------------------------------------------------------------------


def test_a_cut_answer_to_describe_stops_a_count_instead_of_counting_without_column_types(server: Any) -> None:
    """Before: "no column", so a day bound on a DateTime column was written ``toDate(...)`` and 18.16 counted
    0: ``guard resolve --as not-applied`` was accepted over applied rows."""
    sink, client = server(cut=DESCRIBE)
    _stops(lambda: sink.count_rows(TARGET, day("2026-11-29", "2026-11-30", column="updated_at")), client)


def test_a_cut_answer_to_describe_stops_the_check_before_arming(server: Any) -> None:
    sink, client = server(cut=DESCRIBE)
    _stops(lambda: sink.check_target(TARGET, SCHEMA, ("id",)), client)


# -- finding 4: detached parts, mutations, the load's pin, long file names -----------------------------------


def test_a_cut_answer_to_the_detached_parts_listing_stops_instead_of_reading_none(server: Any) -> None:
    sink, client = server()
    assert [p.name for p in sink.detached_parts(TARGET)] == ["20261129_1_1_0"]
    sink, client = server(cut=DETACHED)
    _stops(lambda: sink.detached_parts(TARGET), client)


def test_a_cut_answer_to_the_pending_mutation_count_stops_a_deleting_route_before_arming(server: Any) -> None:
    """A one-row ``count()`` already: no row fails the read (this held before the fix too)."""
    sink, client = server(cut=MUTATIONS, deletes_rows=True)
    _stops(lambda: sink.check_target(TARGET, SCHEMA, ("id",)), client)


def test_a_cut_answer_to_the_own_mutation_listing_raises_instead_of_reading_none() -> None:
    """Before: "none of its own", so the load's own delete was taken for someone else's after the load."""
    with pytest.raises(OperationalError, match=r"system\.mutations answered no row"):
        own_mutations(CutAnswerClient(cut=MUTATIONS), TableName.parse(TARGET), "dpone-0123456789abcdef-")  # type: ignore[arg-type]
    assert own_mutations(CutAnswerClient(), TableName.parse(TARGET), "dpone-0123456789abcdef-") == frozenset()  # type: ignore[arg-type]


def test_a_cut_answer_to_the_mutation_poll_raises_instead_of_reading_the_delete_done() -> None:
    """A one-row ``count()`` already (18.16 polls it after its delete): this held before the fix too."""
    with pytest.raises(IndexError):
        await_mutations(CutAnswerClient(cut=MUTATIONS), TableName.parse(TARGET), 5.0)  # type: ignore[arg-type]


def test_a_cut_answer_to_the_loads_first_pin_stops_before_any_write(server: Any) -> None:
    """Before: the pin read as "no such table", the load wrote its rows, then stopped as if the table had
    been replaced meanwhile (partitions blocked after writing)."""
    sink, client = server(cut=PIN)
    rows = ColumnChunk(
        partition_id="p", names=("id", "updated_at"), columns=([1], [date(2026, 11, 29)]), row_count=1
    )
    stopped = _stops(lambda: sink.load(permit_for(TARGET), TARGET, SCHEMA, [rows]), client)
    assert stopped.details["step"] == "describe"
    assert client.writes == [] and client.commands == []


LONG = "c" * 251  # its .mrk2 file name is 256 bytes, its .mrk one 255


def test_a_cut_answer_to_the_merge_tree_settings_stops_instead_of_passing_a_name_too_long() -> None:
    """Before: no setting listed read as non-adaptive marks (``.mrk``), one byte short of the real name."""
    with pytest.raises(OperationalError, match="answered no row"):
        require_storable_column_names(
            CutAnswerClient(cut=("FROM system.merge_tree_settings",)),  # type: ignore[arg-type]
            TableName.parse(TARGET),
            [StoredColumn(LONG, "String", False)],
        )


def test_a_cut_answer_to_the_partition_key_columns_stops_instead_of_reading_no_key() -> None:
    with pytest.raises(OperationalError, match="answered no row"):
        stored_columns(
            CutAnswerClient(cut=("is_in_partition_key",)),  # type: ignore[arg-type]
            TableName.parse(TARGET),
            [(LONG, "Date")],
        )
