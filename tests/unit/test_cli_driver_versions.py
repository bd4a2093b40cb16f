"""Declared driver ranges are the tested ones, and a version mismatch says so (class, host:port, versions).

The measured failures themselves (clickhouse-connect 1.7+ against the 18.16 server, 1.5 against chDB,
chdb 3.x) need other driver releases than this venv's, so they are recorded in docs/guide/compatibility.md
and re-measured with scripts/newest_lane.sh; here the classification is fed the driver's own error
classes with the texts those releases produced.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from pydantic import SecretStr

from airflow_provider_dpone.adapters.clickhouse import driver_versions
from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.driver_versions import (
    CHDB_RANGE,
    CLICKHOUSE_CONNECT_RANGE,
    in_range,
    installed,
    spec,
    version_mismatch,
)
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

REPO = Path(__file__).resolve().parents[2]
#: What clickhouse-connect 1.12.0 raised from get_client() against the 18.16 server (measured).
READONLY_ERROR = (
    "HTTP driver received HTTP status 404, server response: Code: 47, e.displayText() = DB::Exception: "
    "Unknown identifier: readonly, e.what() = DB::Exception (for url http://10.1.2.3:8123)"
)

SERVER = EndpointDescriptor(
    name="warehouse",
    kind=EndpointKind.CLICKHOUSE,
    interface=ClickHouseInterface.HTTP,
    host="10.1.2.3",
    port=8123,
    user="default",
    password=SecretStr("s3cret-pw"),
)
EMBEDDED = EndpointDescriptor(
    name="embedded", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.CHDB, path="/x"
)


def declared() -> dict[str, str]:
    """The quoted requirements of the two drivers in pyproject.toml (tomllib is 3.11+, the floor is 3.10)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found = {}
    for name in ("clickhouse-connect", "chdb"):
        matches = re.findall(rf'"({re.escape(name)}[<>=!~][^"]*)"', text)
        assert len(matches) == 1, f"{name} declared {len(matches)} times"
        found[name] = matches[0].replace(" ", "")
    return found


def test_pyproject_declares_exactly_the_tested_ranges() -> None:
    ranges = declared()
    assert ranges["clickhouse-connect"] == spec(CLICKHOUSE_CONNECT_RANGE) == "clickhouse-connect>=1.6,<1.7"
    assert ranges["chdb"] == spec(CHDB_RANGE) == "chdb>=4,<5"


def test_this_environment_is_inside_the_declared_ranges() -> None:
    """In the pinned venv and in the newest lane alike: pip honoured the ranges."""
    assert in_range(installed("clickhouse-connect"), CLICKHOUSE_CONNECT_RANGE)
    assert in_range(installed("chdb"), CHDB_RANGE)


@pytest.mark.parametrize(
    ("version", "inside"),
    [
        ("1.6.0", True),
        ("1.6.9", True),
        ("1.5.0", False),
        ("1.7.0", False),
        ("1.12.0", False),
        ("1.6.0rc1", True),
    ],
)
def test_range_edges(version: str, inside: bool) -> None:
    assert in_range(version, CLICKHOUSE_CONNECT_RANGE) is inside


def test_server_refusing_the_drivers_setup_query_is_a_named_version_mismatch() -> None:
    err = version_mismatch(SERVER, DatabaseError(READONLY_ERROR))
    assert err is not None
    assert err.code is ErrorCode.TARGET_UNREACHABLE
    text = err.render()
    assert "10.1.2.3:8123" in text and "DatabaseError" in text and "version mismatch" in text
    assert f"clickhouse-connect {installed('clickhouse-connect')}" in text
    assert "clickhouse-connect>=1.6,<1.7" in text and "docs/guide/compatibility.md" in text
    assert err.details["endpoint"] == "10.1.2.3:8123" and err.details["server_code"] == 47
    assert "readonly" not in text and "Unknown identifier" not in text  # never the server's response
    assert "s3cret-pw" not in json.dumps(err.to_json())


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("connection refused"),
        DatabaseError("Code: 516, Authentication failed"),
        TimeoutError(),
    ],
    ids=["refused", "auth", "timeout"],
)
def test_other_connect_failures_are_not_called_a_version_mismatch(exc: Exception) -> None:
    assert version_mismatch(SERVER, exc) is None


def test_chdb_outside_its_tested_range_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = driver_versions.installed
    monkeypatch.setattr(driver_versions, "installed", lambda d: "3.7.2" if d == "chdb" else real(d))
    err = version_mismatch(EMBEDDED, DatabaseError("query() got an unexpected keyword argument 'params'"))
    assert err is not None
    text = err.render()
    assert "DatabaseError" in text and "chdb 3.7.2" in text and "chdb>=4,<5" in text
    assert "params" not in text


def test_chdb_inside_the_ranges_keeps_the_plain_error() -> None:
    assert version_mismatch(EMBEDDED, RuntimeError("EmbeddedServer already initialized")) is None


def test_a_refused_server_connect_through_the_cli_names_nothing_it_does_not_know(tmp_path: Path) -> None:
    """A real connect to a closed port: target_unreachable as before, no mismatch claimed."""
    endpoint = SERVER.model_copy(update={"host": "127.0.0.1", "port": 1, "connect_timeout_s": 2})
    with pytest.raises(DponeError) as refused:
        open_client(endpoint)
    assert refused.value.code is ErrorCode.TARGET_UNREACHABLE
    assert "cause" not in refused.value.details
