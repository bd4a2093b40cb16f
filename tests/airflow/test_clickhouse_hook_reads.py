"""Issue 13, point 3: ``DponeClickHouseHook`` serves read-only SQL, so common-sql's four check operators run
against a ``dpone_clickhouse`` connection, on embedded chDB and on the ClickHouse 18.16 server over HTTP.

The operators are the real ones (``SQLCheckOperator``, ``SQLValueCheckOperator``,
``SQLColumnCheckOperator``, ``SQLTableCheckOperator``), reading the connection from ``AIRFLOW_CONN_*`` as
Airflow does. Each passes on a good table and fails on a bad one. Every mutation path still refuses with
``target_mutation_unguarded``; with the statement check switched off, the target itself refuses the change
(``readonly=1``); the server's ``system.query_log`` shows ``readonly=1`` on every request of the hook, the
driver's start-up queries included; a chDB directory another process holds is refused and left untouched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.sql.operators.sql import (
    SQLCheckOperator,
    SQLColumnCheckOperator,
    SQLTableCheckOperator,
    SQLValueCheckOperator,
)

from airflow_provider_dpone.adapters.clickhouse import read_connection
from airflow_provider_dpone.adapters.clickhouse.client import close_client, open_client
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from tests.loopback_proxy import LoopbackProxy

try:  # Airflow 3.2+: the task SDK holds the exceptions
    from airflow.sdk.exceptions import AirflowException
except ImportError:  # Airflow 3.1 (the tested floor)
    from airflow.exceptions import AirflowException  # type: ignore[no-redef,attr-defined,unused-ignore]

CONN_ID = "ch_reads"
DATABASE = "dpone_hook_reads"
GOOD_IDS = list(range(1, 11))  # ten distinct ids, amounts all >= 0
BAD_IDS = [*range(1, 10), 9]  # ten rows, one id twice, one negative amount


def _rows(ids: list[int], *, negative: bool) -> list[tuple[int, int]]:
    return [(i, -5 if negative and n == 0 else i * 10) for n, i in enumerate(ids)]


def _fill(client: Any, table: str, rows: list[tuple[int, int]], engine: str) -> None:
    client.command(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    client.command(f"CREATE TABLE {table} (id UInt32, amount Int32) ENGINE = {engine}")
    values = ", ".join(f"({i}, {a})" for i, a in rows)
    client.command(f"INSERT INTO {table} (id, amount) VALUES {values}")


class Target:
    """One ClickHouse target with a good and a bad table, reachable as Airflow connection ``ch_reads``."""

    def __init__(self, kind: str, endpoint: EndpointDescriptor, conn: dict[str, Any]) -> None:
        self.kind = kind
        self.endpoint = endpoint
        self.conn = conn
        suffix = uuid.uuid4().hex[:8]
        self.good = f"{DATABASE}.good_{suffix}"
        self.bad = f"{DATABASE}.bad_{suffix}"

    def admin(self) -> Any:
        return open_client(self.endpoint)

    def count(self, table: str) -> int:
        client = self.admin()
        try:
            return int(client.query(f"SELECT count() FROM {table}").result_rows[0][0])
        finally:
            close_client(client)

    def hook(self) -> DponeClickHouseHook:
        return DponeClickHouseHook(clickhouse_conn_id=CONN_ID)


def _server_conn(endpoint: EndpointDescriptor, **extra: Any) -> dict[str, Any]:
    return {
        "conn_type": "dpone_clickhouse",
        "host": endpoint.host,
        "port": endpoint.port,
        "login": endpoint.user,
        "password": endpoint.secret() or "",
        "extra": extra,
    }


@pytest.fixture(params=["chdb", "server"])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Target]:
    if request.param == "chdb":
        path = tmp_path / "chdb"
        endpoint = EndpointDescriptor(
            name=CONN_ID, kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(path)
        )
        made = Target(
            "chdb",
            endpoint,
            {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(path)}},
        )
        engine = "MergeTree ORDER BY id"
    else:
        endpoint = request.getfixturevalue("clickhouse_http")
        made = Target("server", endpoint, _server_conn(endpoint))
        engine = "Memory"
    client = made.admin()
    try:
        _fill(client, made.good, _rows(GOOD_IDS, negative=False), engine)
        _fill(client, made.bad, _rows(BAD_IDS, negative=True), engine)
    finally:
        close_client(client)  # before the hook opens it: one process holds a chDB path at a time
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(made.conn))
    yield made
    if made.kind == "server":
        client = made.admin()
        try:
            client.command(f"DROP TABLE IF EXISTS {made.good}")
            client.command(f"DROP TABLE IF EXISTS {made.bad}")
        finally:
            close_client(client)


# -- the four check operators ----------------------------------------------------------------------------


def _sql_check(table: str) -> Any:
    return SQLCheckOperator(
        task_id="ids_unique",
        conn_id=CONN_ID,
        sql=f"SELECT count() = uniqExact(id), min(amount) >= 0 FROM {table}",
    )


def _value_check(table: str) -> Any:
    return SQLValueCheckOperator(
        task_id="distinct_ids", conn_id=CONN_ID, sql=f"SELECT uniqExact(id) FROM {table}", pass_value=10
    )


def _column_check(table: str) -> Any:
    # ClickHouse unites the UNION ALL branches' result types: keep one operator's checks unsigned (or signed)
    return SQLColumnCheckOperator(
        task_id="id_columns",
        conn_id=CONN_ID,
        table=table,
        column_mapping={
            "id": {"null_check": {"equal_to": 0}, "distinct_check": {"equal_to": 10}, "min": {"geq_to": 1}}
        },
    )


def _table_check(table: str) -> Any:
    return SQLTableCheckOperator(
        task_id="table_rules",
        conn_id=CONN_ID,
        table=table,
        checks={
            "row_count_check": {"check_statement": "COUNT(*) = 10"},
            "amount_ok": {"check_statement": "amount >= 0"},
        },
    )


OPERATORS: dict[str, Callable[[str], Any]] = {
    "SQLCheckOperator": _sql_check,
    "SQLValueCheckOperator": _value_check,
    "SQLColumnCheckOperator": _column_check,
    "SQLTableCheckOperator": _table_check,
}


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_check_operator_passes_on_good_data_and_fails_on_bad_data(target: Target, operator: str) -> None:
    OPERATORS[operator](target.good).execute(context={})
    with pytest.raises(AirflowException):
        OPERATORS[operator](target.bad).execute(context={})
    assert target.count(target.good) == len(GOOD_IDS)  # the reads changed nothing


def test_get_records_get_first_and_description(target: Target) -> None:
    hook = target.hook()
    assert hook.get_first(f"SELECT count(), max(id) FROM {target.good}") == (10, 10)
    rows = hook.get_records(
        f"SELECT id, amount FROM {target.good} WHERE id <= %s ORDER BY id", parameters=[2]
    )
    assert rows == [(1, 10), (2, 20)]
    assert [d[:2] for d in hook.last_description or []] == [("id", "UInt32"), ("amount", "Int32")]
    cursor = hook.get_cursor()
    try:
        cursor.execute(f"SELECT id FROM {target.good} ORDER BY id LIMIT 3")
        assert (cursor.fetchone(), cursor.fetchmany(1), cursor.fetchall()) == ((1,), [(2,)], [(3,)])
    finally:
        cursor.close()


# -- mutations ---------------------------------------------------------------------------------------------


def _on_a_cursor(hook: DponeClickHouseHook, sql: str) -> None:
    cursor = hook.get_cursor()
    try:
        cursor.execute(sql)
    finally:
        cursor.close()  # releases the connection (and an embedded directory) it owns


MUTATIONS: dict[str, Callable[[DponeClickHouseHook, str], Any]] = {
    "run_insert": lambda h, t: h.run(f"INSERT INTO {t} (id, amount) VALUES (99, 1)"),
    "run_ddl_list": lambda h, t: h.run([f"SELECT 1 FROM {t}", f"DROP TABLE {t}"]),
    "run_split": lambda h, t: h.run(f"SELECT 1; TRUNCATE TABLE {t}", split_statements=True),
    "get_records_alter": lambda h, t: h.get_records(f"ALTER TABLE {t} DELETE WHERE 1"),
    "get_first_create": lambda h, t: h.get_first(f"CREATE TABLE {t}_x (a UInt8) ENGINE = Memory"),
    "two_statements": lambda h, t: h.get_records(f"SELECT 1; INSERT INTO {t} (id, amount) VALUES (98, 1)"),
    "cursor_insert": lambda h, t: _on_a_cursor(h, f"INSERT INTO {t} (id, amount) VALUES (97, 1)"),
    "insert_rows": lambda h, t: h.insert_rows(t, [(96, 1)]),
    "bulk_load": lambda h, t: h.bulk_load(t, "/tmp/rows.tsv"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_mutation_through_the_hook_is_refused(target: Target, mutation: str) -> None:
    with pytest.raises(DponeError) as caught:
        MUTATIONS[mutation](target.hook(), target.good)
    assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert caught.value.details["connection"] == CONN_ID
    assert target.good not in str(caught.value)  # the error names the connection, never the SQL
    assert target.count(target.good) == len(GOOD_IDS)


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO {t} (id, amount) VALUES (95, 1)",
        "CREATE TABLE {t}_w (a UInt8) ENGINE = Memory",
        "DROP TABLE {t}",
    ],
)
def test_the_target_itself_refuses_a_change_the_statement_check_missed(
    target: Target, statement: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """readonly=1 is the enforcement: with the hook's statement check switched off, the target refuses."""
    monkeypatch.setattr(read_connection, "refusal_reason", lambda sql: None)
    with pytest.raises(DponeError) as caught:
        target.hook().run(statement.format(t=target.good))
    assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert caught.value.details.get("server_code") == read_connection.READONLY_SERVER_CODE
    assert target.count(target.good) == len(GOOD_IDS)


def test_a_failed_read_names_the_connection_never_the_sql(target: Target) -> None:
    with pytest.raises(DponeError) as caught:
        target.hook().get_records(f"SELECT secret_column FROM {DATABASE}.no_such_table_dpone")
    assert caught.value.code is ErrorCode.TARGET_QUERY_FAILED
    assert caught.value.details["connection"] == CONN_ID
    rendered = caught.value.render() + json.dumps(caught.value.to_json())
    assert "no_such_table_dpone" not in rendered and "secret_column" not in rendered


# -- the server: every request carries readonly=1 -------------------------------------------------------


class _LoggingProxy(LoopbackProxy):
    """Asks the server to log each forwarded request (``log_queries=1`` put first in its URL, so the
    hook's ``readonly=1``, last, still applies) and records the local port of every upstream connection:
    the port ``system.query_log`` shows. First in the URL, it reaches the driver's start-up queries too."""

    def __init__(self, host: str, port: int) -> None:
        self.ports: list[int] = []
        super().__init__(host, port)

    def connected(self, upstream: Any) -> None:
        self.ports.append(int(upstream.getsockname()[1]))

    def client_chunk(self, chunk: bytes, client: Any, upstream: Any) -> bytes | None:
        return re.sub(rb"^(POST|GET) /\??", rb"\1 /?log_queries=1&", chunk)


def test_every_request_of_the_hook_carries_readonly_1_in_the_servers_query_log(
    clickhouse_http: EndpointDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert clickhouse_http.host is not None and clickhouse_http.port is not None
    proxy = _LoggingProxy(clickhouse_http.host, clickhouse_http.port)
    try:
        conn = _server_conn(clickhouse_http.model_copy(update={"port": proxy.port}))
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
        SQLValueCheckOperator(
            task_id="one", conn_id=CONN_ID, sql="SELECT count() FROM system.one", pass_value=1
        ).execute(context={})
    finally:
        proxy.close()
    admin = open_client(clickhouse_http)
    try:
        admin.command("SYSTEM FLUSH LOGS")
        ports = ", ".join(str(p) for p in proxy.ports)
        logged = admin.query(
            "SELECT query, Settings.Names, Settings.Values FROM system.query_log "
            f"WHERE port IN ({ports}) AND type IN (1, 3) AND event_date >= yesterday()"
        ).result_rows
    finally:
        close_client(admin)
    texts = [str(q) for q, _, _ in logged]
    assert any("system.one" in q for q in texts), texts  # the check's own query
    assert any("system.settings" in q for q in texts), texts  # the driver's start-up settings lookup
    assert any("version()" in q for q in texts), texts  # and its first query
    for query, names, values in logged:
        assert dict(zip(names, values, strict=True)).get("readonly") == "1", query


# -- embedded chDB: only a directory no other process holds -----------------------------------------------

HOLDER = """
import sys, time
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
endpoint = EndpointDescriptor(name="holder", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=sys.argv[1])
client = open_client(endpoint)
client.query("SELECT 1")
print("held", flush=True)
sys.stdin.read()
client.close()
"""


def test_a_chdb_directory_another_process_holds_is_refused_and_left_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chdb"
    endpoint = EndpointDescriptor(
        name=CONN_ID, kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path=str(path)
    )
    client = open_client(endpoint)
    try:
        _fill(client, f"{DATABASE}.held", _rows(GOOD_IDS, negative=False), "MergeTree ORDER BY id")
    finally:
        close_client(client)
    conn = {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(path)}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        status_before = (path / read_connection.CHDB_STATUS_FILE).read_bytes()
        with pytest.raises(DponeError) as caught:
            DponeClickHouseHook(clickhouse_conn_id=CONN_ID).get_first(f"SELECT count() FROM {DATABASE}.held")
        assert caught.value.code is ErrorCode.ROUTE_BUSY
        assert caught.value.details["connection"] == CONN_ID
        with pytest.raises(DponeError):
            SQLValueCheckOperator(
                task_id="held", conn_id=CONN_ID, sql=f"SELECT count() FROM {DATABASE}.held", pass_value=10
            ).execute(context={})
        # a chDB open of a held directory writes its failure into the holder's status file: nothing did
        assert (path / read_connection.CHDB_STATUS_FILE).read_bytes() == status_before
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # released: the same check now reads
    SQLValueCheckOperator(
        task_id="released", conn_id=CONN_ID, sql=f"SELECT count() FROM {DATABASE}.held", pass_value=10
    ).execute(context={})


def test_a_missing_chdb_directory_is_refused_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "never_created"
    conn = {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(path)}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook(clickhouse_conn_id=CONN_ID).get_records("SELECT 1")
    assert caught.value.code is ErrorCode.TARGET_UNREACHABLE
    assert not path.exists()


def test_closing_the_read_connection_releases_its_pool(clickhouse_http: EndpointDescriptor) -> None:
    from clickhouse_connect.driver import httputil

    before = len(httputil.all_managers)
    for _ in range(3):
        connection = read_connection.open_read_connection(clickhouse_http)
        connection.cursor().execute("SELECT 1")
        connection.close()
    assert len(httputil.all_managers) == before


def test_an_operators_database_argument_selects_the_session_database(target: Target) -> None:
    table = target.good.split(".", 1)[1]
    SQLValueCheckOperator(
        task_id="unqualified",
        conn_id=CONN_ID,
        database=DATABASE,
        sql=f"SELECT count() FROM {table}",
        pass_value=10,
    ).execute(context={})


def test_get_df_reads_through_the_same_read_only_connection(target: Target) -> None:
    frame = target.hook().get_df(f"SELECT id, amount FROM {target.good} ORDER BY id")
    assert list(frame.columns) == ["id", "amount"]
    assert frame["id"].tolist() == GOOD_IDS
    with pytest.raises(DponeError) as caught:
        target.hook().get_df(f"DROP TABLE {target.good}")
    assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert target.count(target.good) == len(GOOD_IDS)


def test_table_functions_that_reach_files_or_urls_are_refused_by_the_target(target: Target) -> None:
    """A read, so the statement check lets it through; readonly=1 forbids table functions on both."""
    for sql in (
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
        "SELECT * FROM url('http://127.0.0.1:9/x', 'CSV', 'a String')",
    ):
        with pytest.raises(DponeError) as caught:
            target.hook().get_records(sql)
        assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
        assert caught.value.details.get("server_code") == read_connection.READONLY_SERVER_CODE
