"""The real worker measuring real ClickHouse: chDB (modern engine) and the 18.16 server over HTTP.

Counts are exact and limited to the selected generation; the worker's session is verifiably read-only.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
from airflow_provider_dpone.adapters.target_reader.worker import (
    READONLY_VALUE,
    classify_failure,
    close_quietly,
    open_readonly_client,
    server_error_code,
)
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    ObservationMetric,
    ObservationStatus,
    ReaderOutcome,
    ReaderOutcomeKind,
    ReaderReason,
    TargetObservation,
    TargetReadRequest,
    WorkerErrorCode,
)
from tests.builders import day
from tests.loopback_proxy import LoopbackProxy

pytestmark = pytest.mark.service

REPO_ROOT = Path(__file__).resolve().parents[2]
ALL_METRICS = (ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT)
#: (order_date, amount, customer, load_id). Generation "L1" on 2026-01-01..02: 4 rows, 1 null amount,
#: 2 distinct amounts (NULL not counted), 3 distinct customers. Other rows must never be counted.
ROWS = [
    ("2026-01-01", "10", "'a'", "'L1'"),
    ("2026-01-01", "NULL", "'b'", "'L1'"),
    ("2026-01-02", "10", "'c'", "'L1'"),
    ("2026-01-02", "20", "'a'", "'L1'"),
    ("2026-01-02", "99", "'z'", "'L0'"),  # an older generation in the same partition
    ("2026-01-03", "NULL", "'y'", "'L1'"),  # same load id, outside the selected partitions
]
CREATE = (
    "CREATE TABLE {table} (order_date Date, amount Nullable(Int64), customer String, load_id String) "
    "ENGINE = MergeTree() ORDER BY order_date"
)


def generation_plan(table: str, *, allow_unavailable: bool = False) -> TargetReadRequest:
    return TargetReadRequest(
        target_table=table,
        selector=GenerationSelector(
            partitions=(day("2026-01-01", "2026-01-02"), day("2026-01-02", "2026-01-03")),
            load_id=LoadIdSelector(column="load_id", value="L1"),
        ),
        columns=("amount", "customer"),
        metrics=ALL_METRICS,
        allow_unavailable=allow_unavailable,
    )


def assert_generation_counts(observation: TargetObservation) -> None:
    assert observation.status is ObservationStatus.COMPLETE
    assert observation.value_of(ObservationMetric.ROW_COUNT) == 4
    assert observation.value_of(ObservationMetric.NULL_COUNT, "amount") == 1
    assert observation.value_of(ObservationMetric.NULL_COUNT, "customer") == 0
    assert observation.value_of(ObservationMetric.DISTINCT_COUNT, "amount") == 2
    assert observation.value_of(ObservationMetric.DISTINCT_COUNT, "customer") == 3


def insert_rows(client: Any, table: str) -> None:
    values = ", ".join(f"(toDate('{d}'), {a}, {c}, {lid})" for d, a, c, lid in ROWS)
    client.command(f"INSERT INTO {table} (order_date, amount, customer, load_id) VALUES {values}")


# --- chDB ---------------------------------------------------------------------------------------------


@pytest.fixture
def chdb_target(chdb_dir: Path) -> Iterator[EndpointDescriptor]:
    """A chDB path holding demo.orders; the test process's own client is closed before any worker runs."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_dir))
    try:
        client.command("CREATE DATABASE IF NOT EXISTS demo")
        client.command(CREATE.format(table="demo.orders"))
        insert_rows(client, "demo.orders")
    finally:
        client.close()
    yield EndpointDescriptor(
        name="chdb_target",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.CHDB,
        path=str(chdb_dir),
    )


def test_chdb_observation_counts_exactly_the_selected_generation(chdb_target: EndpointDescriptor) -> None:
    request = generation_plan("demo.orders")
    outcome = SupervisedTargetReader().observe(chdb_target, request, 30.0)
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.termination_verified
    assert outcome.observation is not None
    outcome.observation.check_answers(request)
    assert_generation_counts(outcome.observation)


def test_chdb_value_list_selector_and_row_count_only(chdb_target: EndpointDescriptor) -> None:
    request = TargetReadRequest(
        target_table="demo.orders",
        selector=GenerationSelector(
            partitions=(
                PartitionBounds(
                    kind=BoundsKind.VALUES, column="customer", values=("a", "it's"), label="customers"
                ),
            )
        ),
        metrics=(ObservationMetric.ROW_COUNT,),
    )
    outcome = SupervisedTargetReader().observe(chdb_target, request, 30.0)
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert outcome.observation.value_of(ObservationMetric.ROW_COUNT) == 2


def test_chdb_worker_session_is_verified_read_only(chdb_target: EndpointDescriptor) -> None:
    client = open_readonly_client(chdb_target, 10.0)
    try:
        assert client.query("SELECT value FROM system.settings WHERE name = 'readonly'").result_rows == [
            (READONLY_VALUE,)
        ]
        with pytest.raises(Exception):  # noqa: B017 - any refusal will do; the count below proves it
            client.command(
                "INSERT INTO demo.orders (order_date, amount, customer, load_id) VALUES ('2026-01-01', 1, 'w', 'L1')"
            )
        with pytest.raises(Exception):  # noqa: B017
            client.command("SET readonly = 0")
        assert client.query("SELECT count() FROM demo.orders").result_rows == [(len(ROWS),)]
    finally:
        close_quietly(client)


# --- ClickHouse 18.16 over HTTP -------------------------------------------------------------------------


@pytest.fixture
def server_table(clickhouse_http: EndpointDescriptor) -> Iterator[str]:
    import clickhouse_connect

    table = f"default.reader_{uuid.uuid4().hex[:12]}"
    client = clickhouse_connect.get_client(
        host=clickhouse_http.host,
        port=clickhouse_http.port,
        username=clickhouse_http.user or "default",
        password=clickhouse_http.secret() or "",
        compress=False,
    )
    try:
        client.command(CREATE.format(table=table))
        insert_rows(client, table)
        yield table
    finally:
        client.command(f"DROP TABLE IF EXISTS {table}")
        client.close()


def test_clickhouse_18_16_observation_counts_exactly_the_selected_generation(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    request = generation_plan(server_table)
    outcome = SupervisedTargetReader().observe(clickhouse_http, request, 30.0)
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.termination_verified
    assert outcome.observation is not None
    assert_generation_counts(outcome.observation)


def test_clickhouse_18_16_counts_no_distinct_value_in_an_empty_generation_of_a_nullable_column(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    """Red before: 18.16's uniqExact over no row of a Nullable column is NULL, read as a failed query, so a
    route whose lookback day the source emptied blocked on every run (the source's count is 0)."""
    request = TargetReadRequest(
        target_table=server_table,
        selector=GenerationSelector(
            partitions=(day("2026-02-01", "2026-02-02"),),
            load_id=LoadIdSelector(column="load_id", value="L1"),
        ),
        columns=("amount",),
        metrics=ALL_METRICS,
    )

    outcome = SupervisedTargetReader().observe(clickhouse_http, request, 30.0)

    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert outcome.observation.value_of(ObservationMetric.ROW_COUNT) == 0
    assert outcome.observation.value_of(ObservationMetric.DISTINCT_COUNT, "amount") == 0


def test_clickhouse_18_16_session_refuses_writes_and_setting_changes(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    client = open_readonly_client(clickhouse_http, 10.0)
    try:
        assert client.query("SELECT value FROM system.settings WHERE name = 'readonly'").result_rows == [
            (READONLY_VALUE,)
        ]
        with pytest.raises(Exception):  # noqa: B017
            client.command(
                f"INSERT INTO {server_table} (order_date, amount, customer, load_id) VALUES ('2026-01-01', 1, 'w', 'L1')"
            )
        with pytest.raises(Exception):  # noqa: B017
            client.command(f"CREATE TABLE {server_table}_w (x UInt8) ENGINE = Memory")
        with pytest.raises(Exception):  # noqa: B017
            client.command("SET readonly = 0")
        assert client.query(f"SELECT count() FROM {server_table}").result_rows == [(str(len(ROWS)),)]
    finally:
        close_quietly(client)


@pytest.mark.parametrize(
    "limits",
    [
        {"max_execution_time": 30, "timeout_overflow_mode": "break"},
        {"max_result_rows": 1000, "result_overflow_mode": "break"},
    ],
    ids=["execution_time", "result_rows"],
)
def test_a_connection_whose_overflow_modes_say_break_is_measured_whole(
    clickhouse_http: EndpointDescriptor, server_table: str, limits: dict[str, object]
) -> None:
    """With ``break``, a limit ends a SELECT early without an error: the counts would be of part of the
    generation (a duplicate past the cut passes ``count == distinct``). The reader applies the connection's
    settings with every overflow mode ``throw``, as the sink's writing clients do, and measures whole."""
    endpoint = clickhouse_http.model_copy(update={"session_settings": limits})
    outcome = SupervisedTargetReader().observe(endpoint, generation_plan(server_table), 30.0)
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert_generation_counts(outcome.observation)


def test_a_read_limit_the_measuring_select_reaches_fails_it_instead_of_cutting_it(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    endpoint = clickhouse_http.model_copy(
        update={"session_settings": {"max_rows_to_read": 2, "read_overflow_mode": "break"}}
    )
    outcome = SupervisedTargetReader().observe(endpoint, generation_plan(server_table), 30.0)
    assert outcome.kind is ReaderOutcomeKind.WORKER_FAILED, outcome
    # an error, never a count of part of the rows (here the settings read-back already reads past 2 rows)
    assert outcome.reason in (ReaderReason.READONLY_UNVERIFIED, ReaderReason.QUERY_FAILED)
    assert outcome.termination_verified


class _SettingsClient:
    """A worker client whose session reads back the given settings."""

    def __init__(self, settings: dict[str, str]) -> None:
        self._settings = settings

    def query(self, sql: str) -> Any:
        class _Result:
            result_rows = list(self._settings.items())

        return _Result()


def test_a_profile_that_says_break_is_refused_before_anything_is_measured() -> None:
    """A user profile's ``break`` (which the session cannot override under ``readonly=1``): the worker
    reads every mode back and measures nothing (``limits_may_cut_reads``)."""
    from airflow_provider_dpone.adapters.target_reader.worker import WorkerFault, verify_readonly

    verify_readonly(_SettingsClient({"readonly": "1", "read_overflow_mode": "throw"}))
    with pytest.raises(WorkerFault) as refused:
        verify_readonly(_SettingsClient({"readonly": "1", "read_overflow_mode": "break"}))
    assert refused.value.code is WorkerErrorCode.LIMITS_MAY_CUT_READS
    with pytest.raises(WorkerFault) as unverified:
        verify_readonly(_SettingsClient({"readonly": "0", "read_overflow_mode": "throw"}))
    assert unverified.value.code is WorkerErrorCode.READONLY_UNVERIFIED


class _LoggingProxy(LoopbackProxy):
    """A loopback proxy that asks the server to log each forwarded request (``log_queries=1`` put first
    in its URL, so the worker's own ``readonly=1`` still applies after it) and records the local port
    of every upstream connection: the port ``system.query_log`` shows for those queries."""

    def __init__(self, host: str, port: int) -> None:
        self.ports: list[int] = []
        super().__init__(host, port)

    def connected(self, upstream: socket.socket) -> None:
        self.ports.append(int(upstream.getsockname()[1]))

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        return re.sub(rb"^(POST|GET) /\??", rb"\1 /?log_queries=1&", chunk)


def test_every_request_of_the_worker_carries_readonly_1_in_the_servers_query_log(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    """Point 4 of issue 14: no start-up query of a client library goes out without ``readonly=1``."""
    assert clickhouse_http.host is not None and clickhouse_http.port is not None
    proxy = _LoggingProxy(clickhouse_http.host, clickhouse_http.port)
    try:
        endpoint = clickhouse_http.model_copy(update={"port": proxy.port})
        outcome = SupervisedTargetReader().observe(endpoint, generation_plan(server_table), 30.0)
    finally:
        proxy.close()
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    assert_generation_counts(outcome.observation)
    admin = _admin(clickhouse_http)
    try:
        admin.command("SYSTEM FLUSH LOGS")
        ports = ", ".join(str(p) for p in proxy.ports)
        logged = admin.query(
            "SELECT query, Settings.Names, Settings.Values FROM system.query_log "
            f"WHERE port IN ({ports}) AND type IN (1, 3) AND event_date >= yesterday()"
        ).result_rows
    finally:
        admin.close()
    assert len(logged) == len(proxy.ports) == 3  # the read-back, the type lookup, the measuring SELECT
    for query, names, values in logged:
        assert dict(zip(names, values, strict=True)).get("readonly") == "1", query
    texts = sorted(str(q) for q, _, _ in logged)
    assert any("system.settings" in q for q in texts)
    assert any("system.columns" in q for q in texts)
    assert any(" AS m0" in q for q in texts)


def test_a_write_through_a_worker_process_session_is_refused(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    """A (test-only) worker that opens the real verified session and then tries an INSERT."""
    request = TargetReadRequest(
        target_table=server_table,
        selector=GenerationSelector(load_id=LoadIdSelector(column="load_id", value="write_attempt")),
        metrics=(ObservationMetric.ROW_COUNT,),
    )
    reader = SupervisedTargetReader(
        worker_module="tests.integration.target_reader_fake_worker", worker_path=(str(REPO_ROOT),)
    )
    outcome = reader.observe(clickhouse_http, request, 20.0)
    # The fake answers query_failed when the INSERT was refused, worker_internal if it went through.
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.QUERY_FAILED)
    assert outcome.termination_verified


@pytest.mark.parametrize("allow_unavailable", [True, False])
@pytest.mark.parametrize("table", ["default.dpone_missing_table", "dpone_missing_db.orders"])
def test_missing_table_or_database_is_a_worker_failure_even_when_unavailable_is_permitted(
    clickhouse_http: EndpointDescriptor, table: str, allow_unavailable: bool
) -> None:
    """A generation that is gone is missing evidence, never a warn-only ``unavailable``."""
    plan = generation_plan(table, allow_unavailable=allow_unavailable)
    outcome = SupervisedTargetReader().observe(clickhouse_http, plan, 30.0)
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.TARGET_MISSING)
    assert outcome.observation is None
    assert outcome.termination_verified


def test_a_plan_column_the_target_lacks_is_a_worker_failure(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    plan = generation_plan(server_table, allow_unavailable=True).model_copy(
        update={"columns": ("amount", "no_such_column")}
    )
    outcome = SupervisedTargetReader().observe(clickhouse_http, plan, 30.0)
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.TARGET_MISSING)


@pytest.fixture
def endless_view(clickhouse_http: EndpointDescriptor) -> Iterator[str]:
    """A view the measuring SELECT scans for minutes (system.numbers, 10^11 rows)."""
    database = f"dpone_kill_{uuid.uuid4().hex[:10]}"
    client = _admin(clickhouse_http)
    try:
        client.command(f"CREATE DATABASE {database}")
        client.command(
            f"CREATE VIEW {database}.endless AS SELECT number AS load_id FROM system.numbers "
            "LIMIT 100000000000"
        )
        yield f"{database}.endless"
    finally:
        client.command(f"DROP DATABASE IF EXISTS {database}")
        client.close()


def _admin(endpoint: EndpointDescriptor) -> Any:
    import clickhouse_connect

    return clickhouse_connect.get_client(
        host=endpoint.host,
        port=endpoint.port,
        username=endpoint.user or "default",
        password=endpoint.secret() or "",
        compress=False,
    )


def test_a_killed_measuring_query_is_a_worker_failure_not_unavailable(
    clickhouse_http: EndpointDescriptor, endless_view: str
) -> None:
    """``KILL QUERY`` (server code 394) on a warn-only plan: the capsule must stay pending."""
    plan = TargetReadRequest(
        target_table=endless_view,
        selector=GenerationSelector(
            load_id=LoadIdSelector(column="load_id", value="5", value_type="integer")
        ),
        metrics=(ObservationMetric.ROW_COUNT,),
        allow_unavailable=True,
    )
    box: list[ReaderOutcome] = []
    thread = threading.Thread(
        target=lambda: box.append(SupervisedTargetReader().observe(clickhouse_http, plan, 40.0))
    )
    thread.start()
    admin = _admin(clickhouse_http)
    try:
        table = endless_view.split(".", 1)[1]
        killed = False
        deadline = time.monotonic() + 20
        while not killed and time.monotonic() < deadline:
            running = admin.query(
                "SELECT query_id FROM system.processes WHERE position(query, 'AS m0 FROM') > 0 "
                f"AND position(query, '{table}') > 0 AND position(query, 'system.processes') = 0"
            ).result_rows
            for (query_id,) in running:
                admin.command(f"KILL QUERY WHERE query_id = '{query_id}' SYNC")
                killed = True
            time.sleep(0.05)
        assert killed, "the measuring query never showed up in system.processes"
    finally:
        thread.join(60)
        admin.close()
    (outcome,) = box
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.QUERY_CANCELLED)
    assert outcome.observation is None
    assert outcome.termination_verified


class _CuttingProxy(LoopbackProxy):
    """A loopback TCP proxy to the server that drops both sides the moment the measuring SELECT passes."""

    def __init__(self, host: str, port: int) -> None:
        self.cut = threading.Event()
        super().__init__(host, port)

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        if b"AS m0" not in chunk:
            return chunk
        self.cut.set()
        for s in (client, upstream):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        return None


def test_a_connection_lost_during_the_measuring_query_is_a_worker_failure(
    clickhouse_http: EndpointDescriptor, server_table: str
) -> None:
    assert clickhouse_http.host is not None and clickhouse_http.port is not None
    proxy = _CuttingProxy(clickhouse_http.host, clickhouse_http.port)
    try:
        endpoint = clickhouse_http.model_copy(update={"port": proxy.port})
        plan = generation_plan(server_table, allow_unavailable=True)
        outcome = SupervisedTargetReader().observe(endpoint, plan, 30.0)
    finally:
        proxy.close()
    assert proxy.cut.is_set()  # the session was verified, then its measuring request was cut
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.CONNECTION_LOST)
    assert outcome.observation is None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (394, WorkerErrorCode.QUERY_CANCELLED),
        (60, WorkerErrorCode.TARGET_MISSING),
        (81, WorkerErrorCode.TARGET_MISSING),
        (497, WorkerErrorCode.ACCESS_DENIED),
        (516, WorkerErrorCode.ACCESS_DENIED),
        (241, WorkerErrorCode.QUERY_FAILED),
        (43, WorkerErrorCode.QUERY_FAILED),  # not computable: a failure unless the plan permits unavailable
    ],
)
def test_server_answers_are_classified_by_their_code(code: int, expected: WorkerErrorCode) -> None:
    from clickhouse_connect.driver.exceptions import DatabaseError

    text = DatabaseError(
        f"HTTP driver received HTTP status 500, server response: Code: {code}, e.displayText()"
    )
    assert server_error_code(text) == code
    assert classify_failure(text) is expected
    assert classify_failure(DatabaseError("no code here", code=code)) is expected
