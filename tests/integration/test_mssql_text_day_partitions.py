"""A SQL Server text column partitioned by day or month holds ISO dates, or the run stops before anything.

SQL Server selected a day's rows by converting the text to a date (``2024-1-5`` and ``20240105`` are
2024-01-05 to it), while the target, whose column is ``String``, compared the text with the ISO bounds: a
``replace_partition`` run read such a row into one day and deleted it from another, so every run doubled
one row and lost another, exit 0, and ``checkpoints --verify`` saw no drift. Text that does not start with
a zero-padded ISO date is counted as a row no partition selects (``source_read_failed`` before planning,
nothing written); ISO text, with or without a time of day, moves and replaces exactly. Real pymssql over
the TDS emulator's ``dbo.text_days``, chDB target.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from tests.integration.route_rig import chdb_query, checkpoint_rows, dpone

pytestmark = pytest.mark.service


def manifest(
    tds: EndpointDescriptor, base: Path, monkeypatch: pytest.MonkeyPatch, ids: str, kind: str
) -> Path:
    password = tds.password.get_secret_value() if tds.password else ""
    monkeypatch.setenv(
        "AIRFLOW_CONN_TDS_TEXT_DAYS", f"mssql://{tds.user}:{password}@{tds.host}:{tds.port}/{tds.database}"
    )
    path = base / "text_days.yaml"
    path.write_text(
        f"""
kind: native_transfer
name: text_days
source:
  type: mssql
  connection: tds_text_days
  table: dbo.text_days_query
  query: "SELECT id, at FROM dbo.text_days WHERE id IN ({ids})"
  partitioning: {{kind: {kind}, column: at, lookback: 2}}
sink: {{type: clickhouse, connection: "chdb:///clickhouse", table: demo.text_days, strategy: replace_partition, order_by: [id]}}
checkpoints: {{connection: "sqlite:///state.sqlite"}}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("kind", ["day", "month"])
@pytest.mark.parametrize("ids", ["1, 2", "1, 3"], ids=["not-padded", "yyyymmdd"])
def test_text_a_day_compared_as_text_would_not_select_stops_before_planning(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, ids: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = dpone("run", str(manifest(tds_emulator, tmp_path, monkeypatch, ids, kind)), "--json")
    assert result.exit_code == 1, result.output
    assert '"error": "source_read_failed"' in result.stdout and '"unplaceable_rows": 1' in result.stdout
    assert checkpoint_rows(tmp_path) == []


@pytest.mark.parametrize("kind", ["day", "month"])
def test_iso_text_moves_and_replaces_exactly_on_every_run(
    tds_emulator: EndpointDescriptor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = manifest(tds_emulator, tmp_path, monkeypatch, "1, 4, 5", kind)
    for attempt in range(2):
        result = dpone("run", str(path), "--run-id", f"r{attempt}")
        assert result.exit_code == 0, result.output
        rows = chdb_query(tmp_path, "SELECT id, at FROM demo.text_days ORDER BY id")
        assert rows == [(1, "2024-01-09"), (4, "2024-01-05 10:00:00"), (5, "2024-01-05")]
