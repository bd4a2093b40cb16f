"""The example DAGs parse with no import errors, and parsing them opens nothing and starts nothing."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from airflow_provider_dpone.manifests.loader import load_manifest
from tests.airflow.conftest import DAGS_EXAMPLES, airflow_env, last_json_line, run_airflow

PROBE = Path(__file__).with_name("parse_probe.py")
DAG_FILES = sorted(DAGS_EXAMPLES.glob("*_dag.py"))
EXPECTED_DAG_IDS = {
    "dpone_orders_incremental",
    "dpone_customers_full_refresh",
    "dpone_order_lines_quality_replay",
    "dpone_many_routes",
}


def start_probe(dag_file: Path) -> subprocess.Popen[str]:
    """One fresh interpreter per DAG file, started at once so the probes run side by side."""
    home = Path(tempfile.mkdtemp(prefix="dpone-parse-probe-"))
    return subprocess.Popen(
        [sys.executable, str(PROBE), str(dag_file)],
        env=airflow_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_probe(dag_file: Path, process: subprocess.Popen[str]) -> dict[str, object]:
    try:
        stdout, stderr = process.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 0, f"{dag_file.name} failed to import:\n{stdout[-2000:]}\n{stderr[-3000:]}"
    answer: dict[str, object] = last_json_line(stdout)
    return answer


@pytest.fixture(scope="module")
def probes() -> dict[str, dict[str, object]]:
    started = {dag_file: start_probe(dag_file) for dag_file in DAG_FILES}
    return {dag_file.name: finish_probe(dag_file, process) for dag_file, process in started.items()}


def test_example_dags_have_no_import_errors(migrated_airflow_home: Path) -> None:
    env = airflow_env(migrated_airflow_home, AIRFLOW__CORE__DAGS_FOLDER=str(DAGS_EXAMPLES))
    errors = run_airflow(["dags", "list-import-errors", "--local", "-o", "json"], env)
    assert errors.returncode == 0, errors.stderr[-3000:]
    assert last_json_line(errors.stdout) == []


def test_example_dag_files_define_the_expected_dags(probes: dict[str, dict[str, object]]) -> None:
    defined = {dag_id for answer in probes.values() for dag_id in answer["dag_ids"]}  # type: ignore[attr-defined]
    assert defined == EXPECTED_DAG_IDS


def test_example_manifests_validate_strictly_and_one_opts_into_durable_quality_replay() -> None:
    loaded = [load_manifest(path) for path in sorted((DAGS_EXAMPLES / "manifests").glob("*.yaml"))]
    strategies = {m.manifest.sink.strategy.value for m in loaded}
    assert {"incremental_append", "full_refresh"} <= strategies
    assert any(m.manifest.sink.options.durable_quality_replay for m in loaded)
    incremental = [m for m in loaded if m.manifest.sink.strategy.value == "incremental_append"]
    assert incremental and incremental[0].manifest.source.type.value == "mssql"
    connections = {
        (m.manifest.source.connection, m.manifest.sink.connection, m.manifest.checkpoints.connection)
        for m in loaded
    }
    assert connections == {("orders_mssql", "analytics_clickhouse", "dpone_state")}


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=[p.stem for p in DAG_FILES])
def test_importing_an_example_dag_opens_no_socket_process_or_manifest(
    dag_file: Path, probes: dict[str, dict[str, object]]
) -> None:
    answer = probes[dag_file.name]
    assert answer["events"] == [], f"{dag_file.name} did I/O at parse time: {answer['events']}"
    assert answer["vendor_modules"] == [], f"{dag_file.name} imported vendor SDKs at parse time"
    assert answer["dag_ids"], f"{dag_file.name} defined no DAG"


def test_parse_probe_catches_a_dag_that_reads_its_manifest_or_spawns(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: native_transfer\n")
    bad = tmp_path / "bad_dag.py"
    bad.write_text(
        "import socket, subprocess\n"
        f"open({str(manifest)!r}).read()\n"
        "subprocess.run(['true'])\n"
        "s = socket.socket()\n"
        "try:\n"
        "    s.connect(('127.0.0.1', 9))\n"
        "except OSError:\n"
        "    pass\n"
        "finally:\n"
        "    s.close()\n"
    )
    seen = {event["event"] for event in finish_probe(bad, start_probe(bad))["events"]}  # type: ignore[attr-defined]
    assert {"open", "subprocess.Popen", "socket.connect"} <= seen
