"""What a coarse description (a server that cannot describe a query's types: before SQL Server 2012, the
TDS emulator) leaves open is found before arming.

It names ``time``, ``datetime2`` and ``datetimeoffset`` only as pymssql's BINARY family: the column became
``String`` and each value its Python text, the seventh digit already cut by the driver
(``10:00:00.1234567`` arrived as ``10:00:00.123456``, exit 0). The scale that would say whether a digit was
cut is not known, so such a column stops the run, naming it (the emulator's ``dbo.clocks`` sends
``time(7)`` as a server does). It names every integer as a number (``Float64``): a ``bigint`` past 2**53
was refused only inside the target call, blocking the route; it is counted before arming now
(``dbo.big_numbers``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.sources.mssql_source import MssqlSource
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import SourceSpec, SourceType
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from tests.builders import chdb_endpoint
from tests.conftest import tds_emulator_data

pytestmark = pytest.mark.service

QUERY = f"SELECT id, clock FROM dbo.{tds_emulator_data.CLOCKS_TABLE}"


@pytest.fixture
def clocks_source(tds_emulator: EndpointDescriptor) -> Iterator[MssqlSource]:
    spec = SourceSpec(type=SourceType.MSSQL, connection="tds", table="dbo.clocks_query", query=QUERY)
    source = MssqlSource(tds_emulator, spec)
    yield source
    source.close()


def ids(lower: int, upper: int) -> PartitionBounds:
    return PartitionBounds(
        kind=BoundsKind.RANGE,
        column="id",
        lower=str(lower),
        upper=str(upper),
        value_type="integer",
        label="ids",
    )


def query_manifest(
    tds_emulator: EndpointDescriptor, folder: Path, monkeypatch: pytest.MonkeyPatch, query: str, export: str
) -> Path:
    password = tds_emulator.password.get_secret_value() if tds_emulator.password else ""
    monkeypatch.setenv(
        "AIRFLOW_CONN_TDS_COARSE",
        f"mssql://{tds_emulator.user}:{password}@{tds_emulator.host}:{tds_emulator.port}/{tds_emulator.database}",
    )
    manifest = folder / "coarse.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: coarse
source:
  type: mssql
  connection: tds_coarse
  table: dbo.coarse_query
  query: "{query}"
  partitioning: {{kind: none}}
  export: {export}
sink: {{type: clickhouse, connection: "chdb:///ch", table: demo.coarse, strategy: full_refresh, order_by: [id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    monkeypatch.chdir(folder)
    return manifest


def refused_before_arming(manifest: Path, column: str, reason: str) -> str:
    result = CliRunner().invoke(cli, ["run", "--json", str(manifest)], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["error"] == "manifest_invalid"
    assert (error["details"]["column"], error["details"]["reason"]) == (column, reason)
    again = CliRunner().invoke(cli, ["guard", "inspect", str(manifest)], catch_exceptions=False)
    assert "no blocked partitions" in again.output  # stopped before arming: the route is clear
    return result.output


@pytest.mark.parametrize("export", ["lazy_plan", "file_artifact"])
def test_a_time_column_of_a_coarse_description_stops_the_run_before_arming(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export: str
) -> None:
    manifest = query_manifest(tds_emulator, tmp_path, monkeypatch, QUERY, export)
    # red before: exit 0, "10:00:00.123456" in demo.coarse
    output = refused_before_arming(manifest, "clock", "date_time_of_unknown_precision")
    assert "10:00" not in output and "123456" not in output  # no value in the error


def test_a_bigint_past_2_53_of_a_coarse_description_stops_the_run_before_arming(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = f"SELECT id, big FROM dbo.{tds_emulator_data.BIG_NUMBERS_TABLE}"
    manifest = query_manifest(tds_emulator, tmp_path, monkeypatch, query, "lazy_plan")
    # red before: source_read_failed inside the target call, the route blocked
    output = refused_before_arming(manifest, "big", "integer_beyond_float64")
    assert str(2**53 + 1) not in output


def test_floats_and_integers_a_float64_holds_still_move_exactly(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = f"SELECT id, big, ratio FROM dbo.{tds_emulator_data.BIG_NUMBERS_TABLE} WHERE id <> 2"
    manifest = query_manifest(tds_emulator, tmp_path, monkeypatch, query, "lazy_plan")
    result = CliRunner().invoke(cli, ["run", str(manifest)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    client = open_client(chdb_endpoint(tmp_path / "ch"))
    try:
        got = client.query("SELECT id, big, ratio FROM demo.coarse ORDER BY id").result_rows
    finally:
        client.close()
    assert [tuple(row) for row in got] == [(1.0, 5.0, 0.5), (3.0, None, None)]


def test_the_probe_reads_only_the_run_s_partitions(clocks_source: MssqlSource) -> None:
    assert clocks_source.describe().column("clock").source_type == "tds:binary"
    clocks_source.audit_values([ids(4, 5)], None)  # row 4's clock is NULL: nothing to refuse there
    with pytest.raises(DponeError) as refused:
        clocks_source.audit_values([ids(4, 5), ids(2, 3)], None)
    assert refused.value.code is ErrorCode.MANIFEST_INVALID
    assert refused.value.details["reason"] == "date_time_of_unknown_precision"


def test_the_read_refuses_such_values_even_without_the_audit(clocks_source: MssqlSource) -> None:
    clocks_source.describe()
    with pytest.raises(DponeError) as refused:
        list(clocks_source.read("pid", ids(1, 2), 10))
    assert refused.value.code is ErrorCode.SOURCE_READ_FAILED
    assert refused.value.details["column"] == "clock"
    assert "10:00" not in refused.value.render()
