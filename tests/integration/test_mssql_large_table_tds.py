"""MssqlSource over a larger emulator table: every value read equals the generator's row (issue 16).

The benchmark compares dpone's SQL Server read with a bare pymssql fetch of ``dbo.large_orders``; this
proves the rows it measures are the right ones, value by value, on the real pymssql/FreeTDS path: an
emulator of this module's own (``tds_emulator.py --large-rows``), several chunks and integer-range
partitions. The emulator carries DATE as a datetime (midnight) and DECIMAL as a float (its wire types).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.manifest import Partitioning, PartitionKind, SourceSpec, SourceType

pytestmark = pytest.mark.service

SERVICES = Path(__file__).resolve().parents[2] / "scripts" / "services"
ROWS = 12_345


@pytest.fixture(scope="module")
def emulator() -> Any:
    sys.path.insert(0, str(SERVICES))
    try:
        import tds_emulator
    finally:
        sys.path.remove(str(SERVICES))
    return tds_emulator


@pytest.fixture(scope="module")
def large_endpoint(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EndpointDescriptor]:
    port_file = tmp_path_factory.mktemp("tds_large") / "port"
    command = [sys.executable, str(SERVICES / "tds_emulator.py"), "--port-file", str(port_file)]
    proc = subprocess.Popen([*command, "--large-rows", str(ROWS)], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the emulator did not start"
            time.sleep(0.05)
        yield EndpointDescriptor(
            name="tds_large",
            kind=EndpointKind.MSSQL,
            host="127.0.0.1",
            port=int(port_file.read_text()),
            user=emulator.USER,
            password=SecretStr(emulator.PASSWORD),
            database=emulator.DATABASE,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _as_served(row: tuple[Any, ...]) -> tuple[object, ...]:
    i, day, customer, amount, moment = row
    return (i, datetime.combine(day, datetime.min.time()), customer, float(amount), moment)


def _read(source: MssqlSource, chunk_rows: int) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for bounds in source.plan_partitions():
        for chunk in source.read("pid", bounds, chunk_rows):
            assert chunk.row_count <= chunk_rows
            rows.extend(zip(*chunk.columns, strict=True))
    return rows


def _source(endpoint: EndpointDescriptor, **changes: object) -> MssqlSource:
    fields: dict[str, object] = {
        "type": SourceType.MSSQL,
        "connection": "tds_large",
        "table": "dbo.large_orders",
    }
    fields.update(changes)
    return MssqlSource(endpoint, SourceSpec(**fields))  # type: ignore[arg-type]


def test_every_value_of_the_large_table_equals_the_generator(
    large_endpoint: EndpointDescriptor, emulator: Any
) -> None:
    expected = [_as_served(emulator.large_order_row(i)) for i in range(1, ROWS + 1)]
    source = _source(large_endpoint)
    try:
        rows = _read(source, 1_000)
    finally:
        source.close()
    assert len(rows) == ROWS
    assert rows == expected
    assert all(
        type(v) is type(e)
        for row, want in zip(rows, expected, strict=True)
        for v, e in zip(row, want, strict=True)
        if e
    )
    assert sum(r[2] is None for r in rows) == ROWS // emulator.LARGE_NULL_EVERY


def test_integer_range_partitions_read_every_row_once(
    large_endpoint: EndpointDescriptor, emulator: Any
) -> None:
    partitioning = Partitioning(kind=PartitionKind.INTEGER_RANGE, column="id", size=5_000)
    source = _source(large_endpoint, partitioning=partitioning)
    try:
        rows = _read(source, 2_048)
    finally:
        source.close()
    assert rows == [_as_served(emulator.large_order_row(i)) for i in range(1, ROWS + 1)]
