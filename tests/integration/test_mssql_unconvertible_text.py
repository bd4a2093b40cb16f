"""Text the driver cannot convert to UTF-8 stops the read instead of arriving with ``?`` in its place.

FreeTDS converts a varchar from its column's code page and an nvarchar from UTF-16. A byte the code page
leaves undefined (0x81 under code page 1252) or an unpaired surrogate (U+D800) cannot convert: FreeTDS puts
``?`` in its place and says so with a message pymssql ignored (severity 4, below its threshold of 6):
``a\\x81b`` was moved as ``a?b``, exit 0. The TDS emulator's ``dbo.legacy_texts`` sends both exactly as a
server does; dpone's own connection now raises on them, and a run says which problem it met.
"""

from __future__ import annotations

import json
from pathlib import Path

import pymssql
import pytest
from click.testing import CliRunner

from airflow_provider_dpone.adapters.sources.mssql_connect import connect
from airflow_provider_dpone.cli.main import cli
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.conftest import tds_emulator_data

pytestmark = pytest.mark.service


def read(endpoint: EndpointDescriptor, where: str = "") -> list[tuple[object, ...]]:
    connection = connect(endpoint)
    try:
        cursor = connection.cursor()
        cursor.execute(f"SELECT id, latin, wide FROM dbo.{tds_emulator_data.TEXTS_TABLE} {where} ORDER BY id")
        return list(cursor.fetchall())
    finally:
        connection.close()


def test_text_that_cannot_convert_raises_and_text_that_can_arrives_exactly(
    tds_emulator: EndpointDescriptor,
) -> None:
    assert read(tds_emulator, "WHERE id = 1") == [(1, "caf\u00e9", "caf\u00e9")]
    with pytest.raises(pymssql.OperationalError) as raised:  # red before: [(2, 'a?b', 'ok'), (3, ...)]
        read(tds_emulator)
    assert raised.value.args[0] == 2403


def test_a_run_over_such_text_stops_before_arming_and_says_why(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = tds_emulator.password.get_secret_value() if tds_emulator.password else ""
    monkeypatch.setenv(
        "AIRFLOW_CONN_TDS_TEXTS",
        f"mssql://{tds_emulator.user}:{password}@{tds_emulator.host}:{tds_emulator.port}/{tds_emulator.database}",
    )
    manifest = tmp_path / "texts.yaml"
    manifest.write_text(
        f"""
kind: native_transfer
name: texts
source:
  type: mssql
  connection: tds_texts
  table: dbo.{tds_emulator_data.TEXTS_TABLE}
  partitioning: {{kind: none}}
  export: file_artifact
sink: {{type: clickhouse, connection: "chdb:///ch", table: demo.texts, strategy: incremental_append, order_by: [id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )

    result = CliRunner().invoke(cli, ["run", "--json", str(manifest)], catch_exceptions=False)

    assert result.exit_code != 0, result.output
    error = json.loads(result.stdout)
    assert error["error"] == "source_read_failed"
    assert error["details"]["reason"] == "text_not_convertible"
    assert "\\x81" not in result.output and "a?b" not in result.output  # no value in the error
    again = CliRunner().invoke(cli, ["guard", "inspect", str(manifest)], catch_exceptions=False)
    assert "no blocked partitions" in again.output  # stopped before arming: the route is clear
