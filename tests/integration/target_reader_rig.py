"""Helpers and the ``black_hole`` fixture for tests of the supervised target reader on real processes."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    ObservationMetric,
    ReaderOutcome,
    TargetReadRequest,
)


def plan_for(behaviour: str, table: str = "fake.t") -> TargetReadRequest:
    return TargetReadRequest(
        target_table=table,
        selector=GenerationSelector(load_id=LoadIdSelector(column="load_id", value=behaviour)),
        columns=("a", "b"),
        metrics=(ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT),
    )


def http_endpoint(port: int, password: str | None = None) -> EndpointDescriptor:
    return EndpointDescriptor(
        name="target",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host="127.0.0.1",
        port=port,
        user="reader" if password else None,
        password=SecretStr(password) if password else None,
    )


def assert_worker_gone(outcome: ReaderOutcome) -> None:
    """Reaped (no zombie left to us) and its whole process group empty."""
    assert outcome.termination_verified is True
    pid = outcome.worker_pid
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not Path(f"/proc/{pid}").exists()


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A loopback TCP port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()
