"""dpone's hooks turn standard and dpone connections into endpoint descriptors, and never touch a target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Connection

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.checkpoints import DponeCheckpointStoreHook
from airflow_provider_dpone.hooks.clickhouse import DponeClickHouseHook
from airflow_provider_dpone.hooks.endpoint_resolver import AirflowEndpointResolver
from airflow_provider_dpone.hooks.mssql import DponeMsSqlHook

SECRET = "s3cr3t-Pa55word!"


def conn(conn_id: str, uri: str) -> Any:
    """An Airflow connection from a URI (URI schemes spell ``_`` as ``-``: ``dpone-mssql://``)."""
    return Connection.from_uri(uri, conn_id=conn_id)


def assert_secret_hidden(*shown: object) -> None:
    for item in shown:
        assert SECRET not in repr(item)
        assert SECRET not in str(item)


# -- SQL Server --------------------------------------------------------------------------------------


@pytest.mark.parametrize("conn_type", ["mssql", "dpone_mssql"])
def test_mssql_connection_becomes_mssql_endpoint(conn_type: str) -> None:
    hook = DponeMsSqlHook(
        connection=conn(
            "orders_mssql", f"{conn_type.replace('_', '-')}://etl:{SECRET}@sql.internal:1433/sales"
        ),
        mssql_conn_id="orders_mssql",
    )
    endpoint = hook.get_endpoint()
    assert endpoint.kind is EndpointKind.MSSQL
    assert (endpoint.name, endpoint.host, endpoint.port) == ("orders_mssql", "sql.internal", 1433)
    assert (endpoint.database, endpoint.user, endpoint.secret()) == ("sales", "etl", SECRET)
    assert_secret_hidden(hook, endpoint, endpoint.model_dump_json(), endpoint.describe())


def test_mssql_hook_connects_over_pymssql_to_the_tds_emulator(tds_emulator: EndpointDescriptor) -> None:
    connection = Connection(
        conn_id="orders_mssql",
        conn_type="mssql",
        host=tds_emulator.host,
        port=tds_emulator.port,
        login=tds_emulator.user,
        password=tds_emulator.secret(),
        schema=tds_emulator.database,
    )
    hook = DponeMsSqlHook(connection=connection, mssql_conn_id="orders_mssql")
    assert hook.get_first("SELECT COUNT(*) FROM dbo.orders")[0] > 0


def test_mssql_hook_refuses_a_clickhouse_connection() -> None:
    hook = DponeMsSqlHook(connection=conn("wrong", "clickhouse://ch.internal:8123/x"), mssql_conn_id="wrong")
    with pytest.raises(DponeError) as caught:
        hook.get_endpoint()
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


# -- ClickHouse -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("conn_type", ["clickhouse", "dpone_clickhouse"])
def test_clickhouse_http_connection_becomes_http_endpoint(conn_type: str) -> None:
    hook = DponeClickHouseHook(
        connection=conn(
            "analytics_clickhouse",
            f"{conn_type.replace('_', '-')}://loader:{SECRET}@ch.internal:8443/analytics?secure=true",
        ),
        clickhouse_conn_id="analytics_clickhouse",
    )
    endpoint = hook.get_endpoint()
    assert (endpoint.kind, endpoint.interface) == (EndpointKind.CLICKHOUSE, ClickHouseInterface.HTTP)
    assert (endpoint.host, endpoint.port, endpoint.database, endpoint.secure) == (
        "ch.internal",
        8443,
        "analytics",
        True,
    )
    assert (endpoint.user, endpoint.secret()) == ("loader", SECRET)
    assert_secret_hidden(hook, endpoint, endpoint.model_dump_json())


def test_clickhouse_chdb_extra_becomes_embedded_endpoint_without_creating_anything(tmp_path: Path) -> None:
    target = tmp_path / "chdb"
    connection = Connection(
        conn_id="analytics_clickhouse",
        conn_type="clickhouse",
        extra=json.dumps({"interface": "chdb", "path": str(target)}),
    )
    hook = DponeClickHouseHook(connection=connection, clickhouse_conn_id="analytics_clickhouse")
    endpoint = hook.get_endpoint()
    assert (endpoint.interface, endpoint.path) == (ClickHouseInterface.CHDB, str(target))
    assert hook.test_connection()[0] is True
    assert not target.exists(), "describing or testing a chDB connection must not open the database"


def test_clickhouse_chdb_relative_path_resolves_against_the_manifest_folder(tmp_path: Path) -> None:
    connection = Connection(
        conn_id="ch", conn_type="dpone_clickhouse", extra=json.dumps({"interface": "chdb", "path": "data/ch"})
    )
    hook = DponeClickHouseHook(connection=connection, clickhouse_conn_id="ch")
    assert hook.get_endpoint(manifest_dir=tmp_path).path == str(tmp_path / "data" / "ch")


def test_clickhouse_chdb_without_path_is_refused() -> None:
    connection = Connection(conn_id="ch", conn_type="clickhouse", extra=json.dumps({"interface": "chdb"}))
    with pytest.raises(DponeError) as caught:
        DponeClickHouseHook(connection=connection, clickhouse_conn_id="ch").get_endpoint()
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


def test_clickhouse_hook_test_connection_pings_a_real_server(clickhouse_http: EndpointDescriptor) -> None:
    connection = Connection(
        conn_id="ch",
        conn_type="clickhouse",
        host=clickhouse_http.host,
        port=clickhouse_http.port,
        login=clickhouse_http.user,
        password=clickhouse_http.secret(),
    )
    ok, message = DponeClickHouseHook(connection=connection, clickhouse_conn_id="ch").test_connection()
    assert ok, message


def test_clickhouse_hook_test_connection_reports_an_unreachable_server_safely() -> None:
    hook = DponeClickHouseHook(
        connection=conn("ch", f"clickhouse://loader:{SECRET}@127.0.0.1:9/analytics"), clickhouse_conn_id="ch"
    )
    ok, message = hook.test_connection()
    assert ok is False
    assert "target_unreachable" in message
    assert SECRET not in message


REFUSED_CALLS = {
    "run": lambda h: h.run("INSERT INTO analytics.orders VALUES (1)"),
    "insert_rows": lambda h: h.insert_rows("analytics.orders", [(1,)]),
    "bulk_load": lambda h: h.bulk_load("analytics.orders", "/tmp/rows.tsv"),
    "bulk_dump": lambda h: h.bulk_dump("analytics.orders", "/tmp/rows.tsv"),
    "get_sqlalchemy_engine": lambda h: h.get_sqlalchemy_engine(),
    "get_records": lambda h: h.get_records("TRUNCATE TABLE analytics.orders"),
    "get_first": lambda h: h.get_first("DROP TABLE analytics.orders"),
}


@pytest.mark.parametrize("call", sorted(REFUSED_CALLS))
def test_clickhouse_hook_refuses_every_way_to_change_the_target(call: str, tmp_path: Path) -> None:
    # reads (get_conn, get_records of a SELECT, the check operators): tests/airflow/test_clickhouse_hook_reads.py
    target = tmp_path / "chdb"
    connection = Connection(
        conn_id="ch", conn_type="clickhouse", extra=json.dumps({"interface": "chdb", "path": str(target)})
    )
    hook = DponeClickHouseHook(connection=connection, clickhouse_conn_id="ch")
    with pytest.raises(DponeError) as caught:
        REFUSED_CALLS[call](hook)
    assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED
    assert not target.exists(), "a refused call must not have opened the target"


def test_clickhouse_hook_refuses_before_any_network_io() -> None:
    # Port 9 on loopback: nothing listens. A refusal, not a connection error, proves no I/O was tried.
    hook = DponeClickHouseHook(connection=conn("ch", "clickhouse://127.0.0.1:9/x"), clickhouse_conn_id="ch")
    with pytest.raises(DponeError) as caught:
        hook.run("INSERT INTO x.t VALUES (1)")
    assert caught.value.code is ErrorCode.TARGET_MUTATION_UNGUARDED


def test_clickhouse_hook_exposes_no_insert_or_ddl_helpers() -> None:
    words = ("insert", "load", "ddl", "create", "truncate", "drop", "execute", "write", "mutat")
    own = {name for cls in DponeClickHouseHook.__mro__[:2] for name in vars(cls)}
    risky = sorted(name for name in own if any(w in name.lower() for w in words) and not name.startswith("_"))
    assert risky == ["bulk_load", "insert_rows"], "only the refusing overrides may carry such names"


# -- checkpoint store ------------------------------------------------------------------------------------


def test_postgres_connection_becomes_checkpoint_store_endpoint() -> None:
    hook = DponeCheckpointStoreHook(
        connection=conn("dpone_state", f"postgresql://dpone:{SECRET}@pg.internal:5432/dpone"),
        checkpoints_conn_id="dpone_state",
    )
    endpoint = hook.get_endpoint()
    assert (endpoint.kind, endpoint.host, endpoint.port, endpoint.database) == (
        EndpointKind.POSTGRES,
        "pg.internal",
        5432,
        "dpone",
    )
    assert_secret_hidden(hook, endpoint)


@pytest.mark.parametrize(
    "connection",
    [
        conn("dpone_state", "sqlite:////var/lib/dpone/state.sqlite"),
        Connection(conn_id="dpone_state", conn_type="sqlite", host="/var/lib/dpone/state.sqlite"),
        Connection(
            conn_id="dpone_state",
            conn_type="dpone_checkpoints",
            extra=json.dumps({"backend": "sqlite", "path": "/var/lib/dpone/state.sqlite"}),
        ),
        Connection(
            conn_id="dpone_state",
            conn_type="dpone_checkpoints",
            extra=json.dumps({"path": "/var/lib/dpone/state.sqlite"}),
        ),
    ],
    ids=["sqlite-uri", "sqlite-host-field", "dpone-backend-sqlite", "dpone-path-only"],
)
def test_sqlite_connections_become_checkpoint_store_endpoint(connection: Any) -> None:
    endpoint = DponeCheckpointStoreHook(
        connection=connection, checkpoints_conn_id="dpone_state"
    ).get_endpoint()
    assert (endpoint.kind, endpoint.path) == (EndpointKind.SQLITE, "/var/lib/dpone/state.sqlite")


def test_checkpoint_hook_reads_a_real_postgres_store(postgres_url: str) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_url)
    connection = Connection(
        conn_id="dpone_state",
        conn_type="postgres",
        host=url.host,
        port=url.port,
        login=url.username,
        password=url.password,
        schema=url.database,
    )
    hook = DponeCheckpointStoreHook(connection=connection, checkpoints_conn_id="dpone_state")
    assert hook.get_first("SELECT 1")[0] == 1


def test_checkpoint_hook_refuses_an_mssql_connection() -> None:
    hook = DponeCheckpointStoreHook(connection=conn("x", "mssql://u:p@h:1433/db"), checkpoints_conn_id="x")
    with pytest.raises(DponeError) as caught:
        hook.get_endpoint()
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


def test_invalid_connection_errors_never_repeat_the_password() -> None:
    hook = DponeClickHouseHook(
        connection=Connection(
            conn_id="ch",
            conn_type="clickhouse",
            host="h",
            password=SECRET,
            extra=json.dumps({"interface": "odbc"}),
        ),
        clickhouse_conn_id="ch",
    )
    with pytest.raises(DponeError) as caught:
        hook.get_endpoint()
    assert SECRET not in caught.value.render()
    assert SECRET not in json.dumps(caught.value.to_json())


# -- the operator's resolver ------------------------------------------------------------------------------


def test_resolver_reads_airflow_connections_and_inline_uris(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ORDERS_MSSQL", f"mssql://etl:{SECRET}@sql.internal:1433/sales")
    monkeypatch.setenv(
        "AIRFLOW_CONN_ANALYTICS_CLICKHOUSE",
        json.dumps({"conn_type": "clickhouse", "extra": {"interface": "chdb", "path": "ch"}}),
    )
    resolve = AirflowEndpointResolver(tmp_path)
    source = resolve("orders_mssql", "source")
    sink = resolve("analytics_clickhouse", "sink")
    state = resolve("sqlite:///state.sqlite", "checkpoints")
    assert (source.kind, source.secret()) == (EndpointKind.MSSQL, SECRET)
    assert (sink.interface, sink.path) == (ClickHouseInterface.CHDB, str(tmp_path / "ch"))
    assert (state.kind, state.path) == (EndpointKind.SQLITE, str(tmp_path / "state.sqlite"))


def test_resolver_operator_arguments_replace_the_manifest_connections(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_OTHER_STATE", "postgres://u:p@pg.internal:5432/state")
    resolve = AirflowEndpointResolver(tmp_path, overrides={"checkpoints": "other_state", "sink": None})
    assert resolve("sqlite:///state.sqlite", "checkpoints").kind is EndpointKind.POSTGRES


def test_resolver_reports_a_missing_connection_with_a_stable_code() -> None:
    with pytest.raises(DponeError) as caught:
        AirflowEndpointResolver(Path.cwd())("dpone_no_such_connection", "sink")
    assert caught.value.code is ErrorCode.CONNECTION_MISSING


def test_resolver_refuses_a_connection_in_the_wrong_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_STATE_PG", "postgres://u:p@pg.internal:5432/state")
    with pytest.raises(DponeError) as caught:
        AirflowEndpointResolver(Path.cwd())("state_pg", "sink")
    assert caught.value.code is ErrorCode.CONNECTION_INVALID


def test_resolver_refuses_an_inline_uri_with_a_password(tmp_path: Path) -> None:
    with pytest.raises(DponeError) as caught:
        AirflowEndpointResolver(tmp_path)(f"clickhouse://u:{SECRET}@h:8123/db", "sink")
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    assert SECRET not in caught.value.render()


# -- one connect path per vendor: the hook sees the connection the transfer sees ------------------------


def _tds_connection(tds_emulator: EndpointDescriptor, extra: dict[str, Any], port: int | None = None) -> Any:
    return Connection(
        conn_id="orders_mssql",
        conn_type="dpone_mssql",
        host=tds_emulator.host,
        port=port or tds_emulator.port,
        login=tds_emulator.user,
        password=tds_emulator.secret(),
        schema=tds_emulator.database,
        extra=json.dumps(extra),
    )


def test_mssql_hook_get_conn_honours_the_tds_version_extra(tds_emulator: EndpointDescriptor) -> None:
    import pymssql

    good = DponeMsSqlHook(
        connection=_tds_connection(tds_emulator, {"tds_version": "7.4"}), mssql_conn_id="orders_mssql"
    )
    assert good.get_first("SELECT COUNT(*) FROM dbo.orders")[0] > 0
    # the emulator speaks TDS 7.2 and newer, so the extra visibly reaches pymssql
    old = DponeMsSqlHook(
        connection=_tds_connection(tds_emulator, {"tds_version": "7.1"}), mssql_conn_id="orders_mssql"
    )
    with pytest.raises(pymssql.OperationalError):
        old.get_conn()


def test_mssql_hook_login_timeout_bounds_a_silent_server(tds_emulator: EndpointDescriptor) -> None:
    import socket
    import time

    import pymssql

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        connection = _tds_connection(tds_emulator, {"login_timeout": 2}, port=listener.getsockname()[1])
        hook = DponeMsSqlHook(connection=connection, mssql_conn_id="orders_mssql")
        started = time.monotonic()
        with pytest.raises(pymssql.OperationalError):
            hook.get_conn()
        assert time.monotonic() - started < 10  # the default is 30 s


def test_mssql_hook_and_source_share_the_connect_options(tds_emulator: EndpointDescriptor) -> None:
    from airflow_provider_dpone.adapters.sources.mssql_connect import connect_options

    extra = {"tds_version": "7.3", "login_timeout": 9, "query_timeout": 60}
    hook = DponeMsSqlHook(connection=_tds_connection(tds_emulator, extra), mssql_conn_id="orders_mssql")
    options = connect_options(hook.get_endpoint())
    assert (options["tds_version"], options["login_timeout"], options["timeout"]) == ("7.3", 9, 60)
    assert hook.sqlalchemy_url.query == {"tds_version": "7.3", "login_timeout": "9", "timeout": "60"}


@pytest.mark.parametrize(
    ("hook_class", "attr", "conn_type", "extra", "key"),
    [
        (DponeMsSqlHook, "mssql_conn_id", "dpone_mssql", {"tds_verison": "7.4"}, "tds_verison"),
        (
            DponeClickHouseHook,
            "clickhouse_conn_id",
            "dpone_clickhouse",
            {"client_kwargs": {"verify": False}},
            "client_kwargs",
        ),
        (
            DponeCheckpointStoreHook,
            "checkpoints_conn_id",
            "dpone_checkpoints",
            {"backend": "postgres", "sslmode": "x"},
            "sslmode",
        ),
    ],
)
def test_hooks_refuse_an_extra_they_do_not_read_naming_only_known_keys(
    hook_class: Any, attr: str, conn_type: str, extra: dict[str, Any], key: str
) -> None:
    """A refused extra dpone knows (``client_kwargs``) is named; an unknown one is not, only the known key
    it is close to: Airflow parses a URI's query into the extras itself, and an unencoded '?' in a password
    put part of it there, which the error printed into the task log."""
    connection = Connection(
        conn_id="c", conn_type=conn_type, host="h.internal", password=SECRET, extra=json.dumps(extra)
    )
    hook = hook_class(connection=connection, **{attr: "c"})
    with pytest.raises(DponeError) as caught:
        hook.get_endpoint()
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    shown = caught.value.render()
    if key == "client_kwargs":
        assert key in shown
    else:
        assert f"'{key}'" not in shown and "not shown" in shown
    if key == "tds_verison":
        assert "did you mean 'tds_version'?" in shown
    assert_secret_hidden(shown)


def test_checkpoint_hook_uses_the_store_url(tmp_path: Path) -> None:
    from airflow_provider_dpone.adapters.checkpoint_sql.from_endpoint import (
        store_from_endpoint,
        store_url_for,
    )

    path = tmp_path / "state.sqlite"
    connection = Connection(
        conn_id="dpone_state",
        conn_type="dpone_checkpoints",
        extra=json.dumps({"backend": "sqlite", "path": str(path), "secure": False}),
    )
    hook = DponeCheckpointStoreHook(connection=connection, checkpoints_conn_id="dpone_state")
    endpoint = hook.get_endpoint()
    assert hook.sqlalchemy_url == store_url_for(endpoint)
    store_from_endpoint(endpoint).ensure_schema()
    tables = {row[0] for row in hook.get_records("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "dpone_partition_checkpoints" in tables


def test_clickhouse_hook_test_connection_reports_a_refused_session_setting(
    clickhouse_http: EndpointDescriptor,
) -> None:
    def connection(settings: dict[str, Any]) -> Any:
        return Connection(
            conn_id="ch",
            conn_type="dpone_clickhouse",
            host=clickhouse_http.host,
            port=clickhouse_http.port,
            login=clickhouse_http.user,
            password=clickhouse_http.secret(),
            extra=json.dumps({"session_settings": settings, "connect_timeout": 5}),
        )

    ok, _ = DponeClickHouseHook(
        connection=connection({"max_threads": 2}), clickhouse_conn_id="ch"
    ).test_connection()
    assert ok
    ok, message = DponeClickHouseHook(
        connection=connection({"no_such_setting_dpone": 1}), clickhouse_conn_id="ch"
    ).test_connection()
    assert not ok
    assert "connection_invalid" in message
