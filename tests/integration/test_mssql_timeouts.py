"""A SQL Server connection's ``query_timeout`` and ``login_timeout`` end a real wait, not only reach pymssql.

Against ``scripts/services/slow_tds_emulator.py`` (the TDS emulator with a ``dbo.slow_orders`` whose answers
are held back, or a port that never answers the login): with ``query_timeout=2`` a statement held back for
30 s fails after about 2 s as ``source_read_failed`` (retryable: the source may answer the next try), the
message names the table and the partition, never SQL; when the planning query is the slow one the run stops
before arming (no checkpoint, no target table); when one partition's read is the slow one the partitions
before it had streamed into the target, so the batch's outcome is unknown and the route blocks (the
guard), with the message naming the held-back partition.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import NON_RETRYABLE_CODES, DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.hooks.route_status import route_status
from airflow_provider_dpone.manifests.loader import load_manifest
from tests.conftest import SERVICES_DIR, tds_emulator_data

pytestmark = pytest.mark.service

HELD_BACK_S = 30
TIMEOUT_S = 2
TARGET = "demo.slow_orders"
#: the row read of the third day's partition (2026-11-28), not its COUNT nor the planning queries
THIRD_DAY_READ = r"^\s*SELECT \[id\], \[order_date\].*>= CAST\(N'2026-11-28'"
PLANNING = r"SELECT DISTINCT"


@pytest.fixture
def slow_tds(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """Start a slow emulator with the given arguments; returns its port. Stopped at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> int:
        port_file = tmp_path / f"slow-port-{len(procs)}"
        proc = subprocess.Popen(
            [
                sys.executable,
                str(SERVICES_DIR / "slow_tds_emulator.py"),
                "--port-file",
                str(port_file),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "slow emulator did not start"
            time.sleep(0.05)
        return int(port_file.read_text())

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def _endpoint(port: int, **timeouts: int) -> EndpointDescriptor:
    from pydantic import SecretStr

    return EndpointDescriptor(
        name="slow_source",
        kind=EndpointKind.MSSQL,
        host="127.0.0.1",
        port=port,
        user=tds_emulator_data.USER,
        password=SecretStr(tds_emulator_data.PASSWORD),
        database=tds_emulator_data.DATABASE,
        **timeouts,
    )


def _assert_safe(error: DponeError) -> None:
    text = error.render() + json.dumps(error.to_json(), default=str)
    for leak in ("SELECT", "FROM [", "DB-Lib", "timed out (", tds_emulator_data.PASSWORD):
        assert leak not in text


def test_a_held_back_read_fails_after_query_timeout_as_a_retryable_source_error(
    slow_tds: Callable[..., int],
) -> None:
    port = slow_tds("--delay", str(HELD_BACK_S))
    spec = SourceSpec(type=SourceType.MSSQL, connection="slow_source", table="dbo.slow_orders")
    source = MssqlSource(_endpoint(port, query_timeout_s=TIMEOUT_S), spec)
    try:
        started = time.monotonic()
        with pytest.raises(DponeError) as caught:
            list(source.read("p", PartitionBounds(kind=BoundsKind.ALL, label="all"), 1000))
        waited = time.monotonic() - started
    finally:
        source.close()
    # describe() is held back too: the first statement that waits longer than the limit ends the read
    assert TIMEOUT_S - 0.5 <= waited < TIMEOUT_S + 3, waited
    assert caught.value.code is ErrorCode.SOURCE_READ_FAILED
    assert caught.value.code not in NON_RETRYABLE_CODES
    assert caught.value.details["table"] == "dbo.slow_orders"
    _assert_safe(caught.value)


def test_without_query_timeout_the_same_read_waits_for_the_answer(slow_tds: Callable[..., int]) -> None:
    """The control: the limit, not the emulator, is what ends the wait above."""
    port = slow_tds("--delay", "4")
    spec = SourceSpec(type=SourceType.MSSQL, connection="slow_source", table="dbo.slow_orders")
    source = MssqlSource(_endpoint(port), spec)
    try:
        started = time.monotonic()
        chunks = list(source.read("p", PartitionBounds(kind=BoundsKind.ALL, label="all"), 1000))
        waited = time.monotonic() - started
    finally:
        source.close()
    assert sum(len(c.columns[0]) for c in chunks) == tds_emulator_data.ROWS
    assert waited >= 4


def test_login_timeout_ends_a_login_the_server_never_answers(slow_tds: Callable[..., int]) -> None:
    port = slow_tds("--silent-login")
    spec = SourceSpec(type=SourceType.MSSQL, connection="slow_source", table="dbo.slow_orders")
    source = MssqlSource(_endpoint(port, login_timeout_s=TIMEOUT_S), spec)
    try:
        started = time.monotonic()
        with pytest.raises(DponeError) as caught:
            source.describe()
        waited = time.monotonic() - started
    finally:
        source.close()
    assert TIMEOUT_S - 0.5 <= waited < TIMEOUT_S + 3, waited
    assert caught.value.code is ErrorCode.SOURCE_UNREACHABLE
    assert caught.value.code not in NON_RETRYABLE_CODES
    _assert_safe(caught.value)


# -- a real `dpone run` --------------------------------------------------------------------------------------


def _manifest(root: Path) -> Path:
    path = root / "slow.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: slow_orders
source:
  type: mssql
  connection: slow_source
  table: dbo.slow_orders
  partitioning: {{kind: day, column: order_date}}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: {TARGET}
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
""",
        encoding="utf-8",
    )
    return path


def _run(root: Path, monkeypatch: pytest.MonkeyPatch, port: int) -> tuple[Result, float]:
    user, password, database = tds_emulator_data.USER, tds_emulator_data.PASSWORD, tds_emulator_data.DATABASE
    monkeypatch.setenv(
        "AIRFLOW_CONN_SLOW_SOURCE",
        f"mssql://{user}:{password}@127.0.0.1:{port}/{database}?query_timeout={TIMEOUT_S}",
    )
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["run", "--json", str(_manifest(root))], catch_exceptions=False)
    return result, time.monotonic() - started


def _target_ids(root: Path) -> list[int] | None:
    client = open_client(
        EndpointDescriptor(
            name="t",
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=str(root / "clickhouse"),
        )
    )
    try:
        if not client.query("EXISTS TABLE " + TARGET).result_rows[0][0]:
            return None
        return sorted(r[0] for r in client.query(f"SELECT id FROM {TARGET}").result_rows)
    finally:
        client.close()


def test_a_slow_planning_query_stops_dpone_run_before_arming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_tds: Callable[..., int]
) -> None:
    port = slow_tds("--delay", str(HELD_BACK_S), "--slow-match", PLANNING)
    monkeypatch.chdir(tmp_path)

    result, waited = _run(tmp_path, monkeypatch, port)

    assert result.exit_code == 1, result.output
    assert waited < TIMEOUT_S + 10, waited  # the statement, not the 30 s hold-back, ended the wait
    out = json.loads(result.output)
    assert out["error"] == ErrorCode.SOURCE_READ_FAILED.value
    assert "SELECT" not in result.output and "DB-Lib" not in result.output
    assert _target_ids(tmp_path) is None  # nothing prepared in the target
    status = route_status(load_manifest(_manifest(tmp_path)), _store(tmp_path))
    assert status.clear and not status.blocked


def _store(root: Path) -> EndpointDescriptor:
    return EndpointDescriptor(name="s", kind=EndpointKind.SQLITE, path=str(root / "state.sqlite"))


def test_a_slow_partition_read_stops_mid_run_and_blocks_the_touched_batch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slow_tds: Callable[..., int],
    tds_orders: list[dict[str, Any]],
) -> None:
    port = slow_tds("--delay", str(HELD_BACK_S), "--slow-match", THIRD_DAY_READ)
    monkeypatch.chdir(tmp_path)

    result, waited = _run(tmp_path, monkeypatch, port)

    assert result.exit_code == 1, result.output
    assert waited < TIMEOUT_S + 15, waited
    out = json.loads(result.output)
    assert out["error"] == ErrorCode.SOURCE_READ_FAILED.value
    assert out["details"]["partition"] == "order_date=2026-11-28"
    assert "SELECT" not in result.output and "DB-Lib" not in result.output
    # one batch moves the run's partitions and the direct path had streamed rows into the target before
    # the held-back read: the outcome is unknown, so every partition of the batch blocks the route
    landed = _target_ids(tmp_path)
    third_day = {r["id"] for r in tds_orders if r["order_date"].isoformat() >= "2026-11-28"}
    assert landed and not third_day & set(landed)
    assert set(landed) <= {r["id"] for r in tds_orders}
    status = route_status(load_manifest(_manifest(tmp_path)), _store(tmp_path))
    assert not status.clear
    assert {b.phase for b in status.blocked} == {"target_outcome_unknown"}
    assert len({b.checkpoint_batch_id for b in status.blocked}) == 1
    assert len(status.blocked) == len({r["order_date"] for r in tds_orders})


def test_a_connection_without_query_timeout_does_not_inherit_an_earlier_connections_limit(
    slow_tds: Callable[..., int],
) -> None:
    """pymssql's statement limit is process-wide: the connect path resets it for a connection without one."""
    port = slow_tds("--delay", "4")
    limited = MssqlSource(
        _endpoint(port, query_timeout_s=TIMEOUT_S),
        SourceSpec(type=SourceType.MSSQL, connection="slow_source", table="dbo.orders"),
    )
    unlimited = MssqlSource(
        _endpoint(port), SourceSpec(type=SourceType.MSSQL, connection="slow_source", table="dbo.slow_orders")
    )
    try:
        assert limited.describe().names  # a connection with a 2 s limit is open in this process
        chunks = list(unlimited.read("p", PartitionBounds(kind=BoundsKind.ALL, label="all"), 1000))
    finally:
        limited.close()
        unlimited.close()
    assert sum(len(c.columns[0]) for c in chunks) == tds_emulator_data.ROWS
