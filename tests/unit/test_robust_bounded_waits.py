"""Bounded waits (issue 11, point 5) without services: connect arguments, timeout settings, the watchdog."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.adapters.checkpoint_sql import engine as store_engine
from airflow_provider_dpone.adapters.clickhouse import client as ch_client
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection


def test_postgres_connect_args_bound_statements_keepalives_and_unacknowledged_writes() -> None:
    args = store_engine.postgres_connect_args({}, 30.0)
    assert args["options"] == (
        "-c statement_timeout=30000 -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 "
        "-c tcp_keepalives_count=3"  # the server's side too: a vanished client's session (its lease) ends
    )
    assert args["keepalives"] == 1
    assert (args["keepalives_idle"], args["keepalives_interval"], args["keepalives_count"]) == (10, 5, 3)
    assert args["tcp_user_timeout"] == round((30.0 + store_engine.CLIENT_GRACE_S) * 1000)
    assert args["connect_timeout"] == store_engine.POSTGRES_CONNECT_TIMEOUT_S
    assert args["connection_factory"] is store_engine.bounded_connection_factory(
        30.0 + store_engine.CLIENT_GRACE_S
    )


def test_postgres_connect_args_keep_options_given_in_the_url_and_shorten_the_connect_timeout() -> None:
    args = store_engine.postgres_connect_args({"options": "-c search_path=dpone"}, 1.0)
    assert args["options"].startswith("-c search_path=dpone -c statement_timeout=1000 ")
    assert args["connect_timeout"] == 6  # never longer than the statement deadline (1 s + 5 s grace)


def test_the_statement_timeout_defaults_to_30_s_and_is_read_from_its_environment_variable() -> None:
    assert store_engine.statement_timeout_s({}) == 30.0
    assert store_engine.statement_timeout_s({store_engine.STATEMENT_TIMEOUT_ENV: " 2.5 "}) == 2.5


@pytest.mark.parametrize("raw", ["soon", "0", "-1", "nan", "inf", "1e9"])
def test_a_bad_statement_timeout_is_connection_invalid_naming_the_variable_not_the_value(raw: str) -> None:
    with pytest.raises(DponeError) as refused:
        store_engine.statement_timeout_s({store_engine.STATEMENT_TIMEOUT_ENV: raw})
    assert refused.value.code is ErrorCode.CONNECTION_INVALID
    assert refused.value.details == {"variable": store_engine.STATEMENT_TIMEOUT_ENV}
    assert refused.value.safe_message == (  # a fixed text: the value is never repeated
        f"{store_engine.STATEMENT_TIMEOUT_ENV} must be a number of seconds from 0.1 to 3600"
    )


def test_the_watchdog_cuts_off_a_call_blocked_on_a_silent_peer_and_reports_the_expiry() -> None:
    ours, peer = socket.socketpair()
    try:
        started = time.monotonic()
        with store_engine._WATCHDOG.bounded(ours.fileno(), 0.3) as expired:
            assert ours.recv(1) == b""  # blocks until the watchdog shuts the socket down
            assert expired()
        assert 0.25 <= time.monotonic() - started < 5
    finally:
        ours.close()
        peer.close()


def test_the_watchdog_leaves_a_call_that_ended_in_time_untouched() -> None:
    ours, peer = socket.socketpair()
    try:
        with store_engine._WATCHDOG.bounded(ours.fileno(), 0.2) as expired:
            peer.sendall(b"x")
            assert ours.recv(1) == b"x"
        time.sleep(0.4)  # past the deadline: a disarmed call must not be shut down afterwards
        assert not expired()
        peer.sendall(b"y")
        assert ours.recv(1) == b"y"
    finally:
        ours.close()
        peer.close()


def test_many_concurrent_bounded_calls_share_one_watchdog_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    for _ in range(50):
        with store_engine._WATCHDOG.bounded(0, 60):
            pass
    names = [t.name for t in threading.enumerate() if t.name == "dpone-checkpoint-deadline"]
    assert len(names) <= 1
    assert len({t.name for t in threading.enumerate()} - before) <= 1


# -- ClickHouse timeouts ---------------------------------------------------------------------------------


def server_endpoint(**fields: Any) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="ch", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.HTTP, host="h", **fields
    )


def test_clickhouse_timeouts_default_to_10_s_connect_and_120_s_receive() -> None:
    assert ch_client.http_timeouts(server_endpoint(), env={}) == (10, 120)


def test_clickhouse_timeouts_of_the_endpoint_win_over_the_environment() -> None:
    env = {ch_client.CONNECT_TIMEOUT_ENV: "7", ch_client.RECEIVE_TIMEOUT_ENV: "40"}
    assert ch_client.http_timeouts(server_endpoint(), env=env) == (7, 40)
    endpoint = server_endpoint(connect_timeout_s=3, receive_timeout_s=9)
    assert ch_client.http_timeouts(endpoint, env=env) == (3, 9)


def test_a_bad_clickhouse_timeout_variable_is_connection_invalid() -> None:
    with pytest.raises(DponeError) as refused:
        ch_client.http_timeouts(server_endpoint(), env={ch_client.RECEIVE_TIMEOUT_ENV: "2.5"})
    assert refused.value.code is ErrorCode.CONNECTION_INVALID
    assert refused.value.details == {"variable": ch_client.RECEIVE_TIMEOUT_ENV}


def test_open_client_passes_the_receive_and_connect_timeouts_to_clickhouse_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    class Connected:  # what open_client asks of a client after connecting: a whole start-up read
        server_version = "18.16.1"
        server_settings: dict[str, Any] = dict.fromkeys(("max_threads", "readonly", "result_overflow_mode"))

        def set_client_setting(self, name: str, value: str) -> None:
            pass

    def fake_get_client(**kwargs: Any) -> object:
        seen.update(kwargs)
        return Connected()

    monkeypatch.setattr(ch_client.clickhouse_connect, "get_client", fake_get_client)
    ch_client.open_client(server_endpoint(connect_timeout_s=4, receive_timeout_s=45))
    assert (seen["connect_timeout"], seen["send_receive_timeout"]) == (4, 45)


class Conn:
    """The fields of an Airflow Connection that the hooks read (no Airflow import needed)."""

    conn_id = "analytics"
    conn_type = "clickhouse"
    host = "ch.example"
    port = 8123
    schema = "analytics"
    login = "analyst"

    def __init__(self, extra: dict[str, Any]) -> None:
        self.extra_dejson = extra

    @property
    def password(self) -> str:
        return "s3cr3t-pw"


def test_an_airflow_clickhouse_connection_s_timeout_extras_become_the_endpoint_s_timeouts() -> None:
    endpoint = endpoint_from_connection(Conn({"send_receive_timeout": "45", "connect_timeout": 3}))
    assert (endpoint.connect_timeout_s, endpoint.receive_timeout_s) == (3, 45)
    assert endpoint.password == SecretStr("s3cr3t-pw")
    assert endpoint_from_connection(Conn({})).receive_timeout_s is None


@pytest.mark.parametrize("bad", ["soon", 0, -5, 1.5, True, 10**9])
def test_a_bad_timeout_extra_is_connection_invalid_without_the_password(bad: object) -> None:
    with pytest.raises(DponeError) as refused:
        endpoint_from_connection(Conn({"send_receive_timeout": bad}))
    assert refused.value.code is ErrorCode.CONNECTION_INVALID
    assert "send_receive_timeout" in refused.value.safe_message
    assert "s3cr3t-pw" not in str(refused.value) + repr(refused.value.details)
