"""Connection extras mean what they say: one parser for AIRFLOW_CONN_* values and Airflow connections.

An unknown key is ``connection_invalid`` naming the key (never its value); a bad value names the key;
every admitted extra lands on the endpoint descriptor the same way from a URI, from JSON and from a
live connection's fields.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.adapters.sources.mssql_connect import connect_options, sqlalchemy_url
from airflow_provider_dpone.connections.extras import (
    CHDB_EXTRAS,
    CLICKHOUSE_HTTP_EXTRAS,
    MSSQL_EXTRAS,
    POSTGRES_EXTRAS,
    SQLITE_EXTRAS,
)
from airflow_provider_dpone.connections.resolve import resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import MAX_TIMEOUT_S, EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection

SECRET_VALUE = "Val-9f3e-secret"
KNOWN = MSSQL_EXTRAS | SQLITE_EXTRAS | POSTGRES_EXTRAS | CLICKHOUSE_HTTP_EXTRAS | CHDB_EXTRAS | {"backend"}


class _Conn:
    """An Airflow ``Connection``'s fields (the hook path), without Airflow."""

    def __init__(self, conn_type: str, extra: dict[str, Any], host: str | None = "h.local") -> None:
        self.conn_id = "c"
        self.conn_type = conn_type
        self.host = host
        self.port = None
        self.schema = "db"
        self.login = "u"
        self.password = "pw"
        self.extra_dejson = dict(extra)


def _both(conn_type: str, extra: dict[str, Any], tmp_path: Path, role: str) -> list[EndpointDescriptor]:
    """The endpoint from an AIRFLOW_CONN_* JSON value and from a live connection (the hook path)."""
    value = json.dumps({"conn_type": conn_type, "host": "h.local", "schema": "db", "extra": extra})
    from_env = resolve_endpoint("c", role=role, manifest_dir=tmp_path, env={"AIRFLOW_CONN_C": value})
    from_hook = endpoint_from_connection(_Conn(conn_type, extra), manifest_dir=tmp_path)  # type: ignore[arg-type]
    return [from_env, from_hook]


def _refusal(conn_type: str, extra: dict[str, Any], tmp_path: Path, role: str) -> list[DponeError]:
    errors: list[DponeError] = []
    value = json.dumps({"conn_type": conn_type, "host": "h.local", "extra": extra})
    with pytest.raises(DponeError) as from_env:
        resolve_endpoint("c", role=role, manifest_dir=tmp_path, env={"AIRFLOW_CONN_C": value})
    errors.append(from_env.value)
    with pytest.raises(DponeError) as from_hook:
        endpoint_from_connection(_Conn(conn_type, extra), manifest_dir=tmp_path)  # type: ignore[arg-type]
    errors.append(from_hook.value)
    for error in errors:
        assert error.code is ErrorCode.CONNECTION_INVALID
    return errors


def _shown(error: DponeError) -> str:
    return error.render() + json.dumps(error.to_json(), default=str)


def test_sql_server_extras_reach_the_endpoint_and_the_connect_options(tmp_path: Path) -> None:
    extra = {"tds_version": "7.3", "login_timeout": "7", "query_timeout": 45}
    for endpoint in _both("dpone_mssql", extra, tmp_path, "source"):
        assert (endpoint.tds_version, endpoint.login_timeout_s, endpoint.query_timeout_s) == ("7.3", 7, 45)
        options = connect_options(endpoint)
        assert (options["tds_version"], options["login_timeout"], options["timeout"]) == ("7.3", 7, 45)
        assert sqlalchemy_url(endpoint).query == {"tds_version": "7.3", "login_timeout": "7", "timeout": "45"}


def test_sql_server_defaults_without_extras(tmp_path: Path) -> None:
    for endpoint in _both("mssql", {}, tmp_path, "source"):
        options = connect_options(endpoint)
        assert (options["tds_version"], options["login_timeout"]) == ("7.4", 30)
        assert "timeout" not in options  # no statement limit unless asked for


def test_uri_query_extras_are_the_same_as_json_extras(tmp_path: Path) -> None:
    env = {
        "AIRFLOW_CONN_C": "dpone-mssql://u:pw@h.local:1433/db?tds_version=7.2&login_timeout=3&query_timeout=9",
        "AIRFLOW_CONN_CH": "clickhouse://u:pw@ch.local:8443/db?secure=true&verify=false"
        "&session_settings=%7B%22max_threads%22%3A%203%7D",
    }
    source = resolve_endpoint("c", role="source", manifest_dir=tmp_path, env=env)
    assert (source.tds_version, source.login_timeout_s, source.query_timeout_s) == ("7.2", 3, 9)
    sink = resolve_endpoint("ch", role="sink", manifest_dir=tmp_path, env=env)
    assert (sink.secure, sink.verify, sink.session_settings) == (True, False, {"max_threads": 3})


def test_clickhouse_extras_reach_the_endpoint(tmp_path: Path) -> None:
    extra = {
        "secure": True,
        "verify": "false",
        "connect_timeout": 4,
        "send_receive_timeout": "60",
        "session_settings": {"max_threads": 2, "join_use_nulls": True, "timezone": "UTC"},
    }
    for endpoint in _both("clickhouse", extra, tmp_path, "sink"):
        assert (endpoint.verify, endpoint.connect_timeout_s, endpoint.receive_timeout_s) == (False, 4, 60)
        assert endpoint.session_settings == {"max_threads": 2, "join_use_nulls": True, "timezone": "UTC"}


def test_airflow_2_prefixed_and_empty_form_fields_are_read(tmp_path: Path) -> None:
    extra = {"extra__dpone_mssql__tds_version": "7.3", "login_timeout": "", "query_timeout": None}
    for endpoint in _both("dpone_mssql", extra, tmp_path, "source"):
        assert (endpoint.tds_version, endpoint.login_timeout_s, endpoint.query_timeout_s) == (
            "7.3",
            None,
            None,
        )


def test_a_form_switch_at_its_neutral_value_is_ignored_where_it_does_not_apply(tmp_path: Path) -> None:
    extra = {"backend": "sqlite", "path": "state.sqlite", "secure": False}
    value = json.dumps({"conn_type": "dpone_checkpoints", "extra": extra})
    endpoint = resolve_endpoint("c", role="checkpoints", manifest_dir=tmp_path, env={"AIRFLOW_CONN_C": value})
    assert endpoint.path == str(tmp_path / "state.sqlite")
    _refusal("dpone_checkpoints", {**extra, "secure": True}, tmp_path, "checkpoints")


@pytest.mark.parametrize(
    ("conn_type", "role", "key"),
    [
        ("mssql", "source", "verify"),  # a ClickHouse extra on SQL Server
        ("mssql", "source", "login_timout"),  # a typo must not fall back to a default
        ("clickhouse", "sink", "tds_version"),
        ("clickhouse", "sink", "path"),  # a chDB extra on a server connection
        ("postgres", "checkpoints", "sslmode"),
    ],
)
def test_an_extra_the_kind_does_not_read_is_refused_naming_the_key_only_where_no_uri_query_held_it(
    conn_type: str, role: str, key: str, tmp_path: Path
) -> None:
    """A JSON-form connection names the key. An Airflow connection's extras may be a URI's query, where an
    unencoded '?' in a password puts part of it: red before, that piece reached the task log as the key."""
    from_json, from_airflow = _refusal(conn_type, {key: SECRET_VALUE}, tmp_path, role)
    assert key in from_json.render()
    assert f"'{key}'" not in from_airflow.render() and "not shown" in from_airflow.render()
    for error in (from_json, from_airflow):
        assert SECRET_VALUE not in _shown(error)


def test_client_kwargs_is_refused_with_its_own_reason(tmp_path: Path) -> None:
    for error in _refusal("clickhouse", {"client_kwargs": {"verify": False}}, tmp_path, "sink"):
        assert "client_kwargs" in error.render()
        assert "not supported" in error.render()


@pytest.mark.parametrize(
    ("conn_type", "role", "key", "value"),
    [
        ("mssql", "source", "tds_version", "8.0"),
        ("mssql", "source", "tds_version", 7.4),  # a number is not a version string
        ("mssql", "source", "login_timeout", 0),
        ("mssql", "source", "query_timeout", MAX_TIMEOUT_S + 1),
        ("mssql", "source", "login_timeout", "5s"),
        ("clickhouse", "sink", "verify", "maybe"),
        ("clickhouse", "sink", "connect_timeout", True),
        ("clickhouse", "sink", "session_settings", ["max_threads", 3]),
        ("clickhouse", "sink", "session_settings", "{not json"),
        ("clickhouse", "sink", "session_settings", {"max threads; DROP": 1}),
        ("clickhouse", "sink", "session_settings", {"Max_Threads": 1}),
        ("clickhouse", "sink", "session_settings", {"max_threads": [1, 2]}),
        ("clickhouse", "sink", "session_settings", {"timezone": "x" * 300}),
    ],
)
def test_a_bad_value_names_the_key(conn_type: str, role: str, key: str, value: Any, tmp_path: Path) -> None:
    for error in _refusal(conn_type, {key: value}, tmp_path, role):
        assert repr(key) in error.render()


_KEYS = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=30).filter(
    lambda k: k not in KNOWN
)


@settings(max_examples=60, deadline=None)
@given(key=_KEYS, value=st.one_of(st.text(max_size=20).map(lambda t: "V@l#" + t), st.integers()))
def test_any_unknown_key_is_refused_on_every_kind(key: str, value: object) -> None:
    cases = [("mssql", "source"), ("clickhouse", "sink"), ("postgres", "checkpoints")]
    for conn_type, role in cases:
        env = {"AIRFLOW_CONN_C": json.dumps({"conn_type": conn_type, "host": "h", "extra": {key: value}})}
        with pytest.raises(DponeError) as caught:
            resolve_endpoint("c", role=role, manifest_dir=Path("/tmp"), env=env)
        assert caught.value.code is ErrorCode.CONNECTION_INVALID
        assert key in caught.value.render()
        if isinstance(value, str):
            assert value not in _shown(caught.value)


@settings(max_examples=80, deadline=None)
@given(seconds=st.integers(min_value=-(10**6), max_value=10**6))
def test_timeouts_are_bounded(seconds: int) -> None:
    env = {"AIRFLOW_CONN_C": f"mssql://u:pw@h:1433/db?login_timeout={seconds}&query_timeout={seconds}"}
    if 1 <= seconds <= MAX_TIMEOUT_S:
        endpoint = resolve_endpoint("c", role="source", manifest_dir=Path("/tmp"), env=env)
        assert (endpoint.login_timeout_s, endpoint.query_timeout_s) == (seconds, seconds)
    else:
        with pytest.raises(DponeError) as caught:
            resolve_endpoint("c", role="source", manifest_dir=Path("/tmp"), env=env)
        assert caught.value.code is ErrorCode.CONNECTION_INVALID


@settings(max_examples=80, deadline=None)
@given(name=st.text(min_size=1, max_size=120))
def test_only_lower_case_identifiers_are_setting_names(name: str) -> None:
    import re

    env = {
        "AIRFLOW_CONN_C": json.dumps(
            {"conn_type": "clickhouse", "host": "h", "extra": {"session_settings": {name: 1}}}
        )
    }
    admitted = re.fullmatch(r"[a-z][a-z0-9_]{0,99}", name) is not None
    if admitted:
        endpoint = resolve_endpoint("c", role="sink", manifest_dir=Path("/tmp"), env=env)
        assert endpoint.session_settings == {name: 1}
    else:
        with pytest.raises(DponeError) as caught:
            resolve_endpoint("c", role="sink", manifest_dir=Path("/tmp"), env=env)
        assert caught.value.code is ErrorCode.CONNECTION_INVALID
        assert "session_settings" in caught.value.render()


def test_the_descriptor_itself_refuses_a_bad_setting_name_and_tds_version() -> None:
    from pydantic import ValidationError

    from airflow_provider_dpone.contracts.endpoints import EndpointKind

    with pytest.raises(ValidationError):
        EndpointDescriptor(name="c", kind=EndpointKind.CLICKHOUSE, session_settings={"a b": 1})
    with pytest.raises(ValidationError):
        EndpointDescriptor(name="c", kind=EndpointKind.MSSQL, tds_version="8.0")
