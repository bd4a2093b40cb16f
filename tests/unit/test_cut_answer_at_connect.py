"""An answer cut to nothing where no rows could be read as a fact: the driver's start-up reads at connect, and
a direct load's after-pin read of ``system.tables`` (ADR 0094, addendum).

Behind an HTTP proxy that speaks HTTP/1.0 to the 18.16 server an answer cut right after its headers arrives as
a complete, empty one (``tests/http10_proxy.py``). clickhouse-connect's settings list at connect so cut opened
a client that knew no setting, and the run stopped on a non-retryable ``target_table_incompatible`` (or, with
``session_settings``, ``connection_invalid``); the load's after-pin read so cut said the table was dropped.
Measured against the server: ``tests/integration/test_cut_answer_to_a_read.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import clickhouse_connect
import pytest
from clickhouse_connect.driver.exceptions import OperationalError, ProgrammingError
from clickhouse_connect.driver.models import SettingDef
from pydantic import SecretStr

from airflow_provider_dpone.adapters.clickhouse import client as ch_client
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName
from airflow_provider_dpone.adapters.clickhouse.target_pin import TablePin, read_pin, what_changed
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

PASSWORD = "s3cret-pw"
#: what 18.16 lists (a few of its ~400 settings)
WHOLE = ("max_threads", "readonly", "result_overflow_mode", "read_overflow_mode", "insert_deduplicate")


def settings(*names: str) -> dict[str, SettingDef]:
    return {name: SettingDef(name=name, value="0", readonly=0) for name in names}


@dataclass
class Connected:
    """What ``get_client`` returned: the server version and settings list the driver read at connect."""

    server_settings: dict[str, SettingDef]
    server_version: str = "18.16.1"
    client_settings: dict[str, str] = field(default_factory=dict)
    closed: bool = False

    def set_client_setting(self, name: str, value: str) -> None:
        self.client_settings[name] = value

    def close(self) -> None:
        self.closed = True


def endpoint(**extra: Any) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="ch",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host="127.0.0.1",
        port=8123,
        password=SecretStr(PASSWORD),
        **extra,
    )


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[dict[str, Any]]]:
    """``connects(first, then...)``: each ``get_client`` call gives the next answer (a client, or raises)."""

    def install(*answers: Connected | Exception) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        queue = list(answers)

        def get_client(**kwargs: Any) -> Connected:
            calls.append(kwargs)
            answer = queue.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
        return calls

    return install


def _incomplete(caught: DponeError, read: str) -> None:
    assert caught.code is ErrorCode.TARGET_UNREACHABLE  # retryable: the next try reads the server anew
    assert caught.details["cause"] == "incomplete_answer_at_connect"
    assert caught.details["read"] == read
    rendered = caught.render()
    assert "incomplete" in rendered and "proxy" in rendered
    assert PASSWORD not in rendered and "QuerySummary" not in rendered


# -- the driver's reads at connect ------------------------------------------------------------------------


@pytest.mark.parametrize("readonly", [False, True])
def test_a_settings_list_cut_at_connect_fails_retryably_saying_the_answer_was_incomplete(
    connects: Any, readonly: bool
) -> None:
    """Before: a client that knew no setting (no overflow mode made to throw), then the run stopped on a
    non-retryable ``target_table_incompatible`` ("reports neither ... nor insert_deduplicate")."""
    cut = Connected(server_settings={})
    connects(cut)
    with pytest.raises(DponeError) as caught:
        ch_client.open_client(endpoint(), readonly=readonly)
    _incomplete(caught.value, "server_settings")
    assert cut.closed


def test_a_whole_settings_list_opens_the_client_with_its_overflow_modes_thrown(connects: Any) -> None:
    whole = Connected(server_settings=settings(*WHOLE))
    connects(whole)
    opened: object = ch_client.open_client(endpoint())
    assert opened is whole
    assert whole.client_settings == {"result_overflow_mode": "throw", "read_overflow_mode": "throw"}


def test_a_version_read_cut_at_connect_fails_retryably_saying_the_answer_was_incomplete(
    connects: Any,
) -> None:
    """Before: a plain "could not connect", with nothing to look at."""
    connects(OperationalError("Unexpected response to server version query: <QuerySummary object>"))
    with pytest.raises(DponeError) as caught:
        ch_client.open_client(endpoint())
    _incomplete(caught.value, "server_version")
    assert isinstance(caught.value.__cause__, OperationalError)


def test_session_settings_refused_over_a_cut_settings_list_fail_retryably(connects: Any) -> None:
    """Before: ``connection_invalid`` ("the server does not accept a name"), not retried, for a name the
    server knows. A second connect without them reads the list whole and finds it there."""
    calls = connects(ProgrammingError("Setting max_threads is unknown or readonly"), probe := _whole())
    with pytest.raises(DponeError) as caught:
        ch_client.open_client(endpoint(session_settings={"max_threads": 1}))
    _incomplete(caught.value, "server_settings")
    assert calls[0]["settings"] == {"max_threads": 1} and "settings" not in calls[1]
    assert probe.closed


def test_a_session_setting_the_server_does_not_know_is_still_connection_invalid(connects: Any) -> None:
    connects(ProgrammingError("Setting no_such_setting is unknown or readonly"), probe := _whole())
    with pytest.raises(DponeError) as caught:
        ch_client.open_client(endpoint(session_settings={"no_such_setting": 1}))
    assert caught.value.code is ErrorCode.CONNECTION_INVALID
    assert isinstance(caught.value.__cause__, ProgrammingError)
    assert probe.closed


def _whole() -> Connected:
    return Connected(server_settings=settings(*WHOLE))


# -- a direct load's pin -----------------------------------------------------------------------------------

TARGET = TableName.parse("demo.orders")


@dataclass
class PinAnswers:
    """A server answering the pin's ``system.tables`` read with ``listed`` (``None``: cut to nothing)."""

    listed: tuple[Any, ...] | None

    def query(self, sql: str, **_: object) -> Any:
        if "metadata_modification_time" in sql:
            rows = [] if self.listed is None else [self.listed]
        else:  # the counts of a MergeTree table
            rows = [(5, 5)]
        return type("Answer", (), {"result_rows": rows})()


def test_a_cut_answer_to_the_pin_is_could_not_be_read_never_a_dropped_table() -> None:
    """Before: read as "no such table", and the load's after-pin said the table was dropped (blocked with a
    message sending on-call to look for a rename or a drop)."""
    with pytest.raises(OperationalError, match=r"system\.tables answered 0 rows"):
        read_pin(PinAnswers(None), TARGET, None, uuids=False)  # type: ignore[arg-type]


def test_a_table_really_gone_still_reads_as_dropped() -> None:
    before = read_pin(PinAnswers((1, "MergeTree", "2026-12-07 10:00:00", "", [])), TARGET, None, uuids=False)  # type: ignore[arg-type]
    assert before == TablePin(
        identity="modified:2026-12-07 10:00:00", engine="MergeTree", rows_within=5, rows_total=5
    )
    gone = read_pin(PinAnswers((0, "", "1970-01-01 00:00:00", "", [])), TARGET, None, uuids=False)  # type: ignore[arg-type]
    assert gone == TablePin(identity=None)
    assert what_changed(before, gone, inserted=5, keeps_rows=False) == "table_dropped"
