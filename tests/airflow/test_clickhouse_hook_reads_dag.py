"""The check operators downstream of a transfer, in real ``dag.test()`` runs (task runner, task SDK
connections): SQLite source -> embedded chDB, then ``SQLColumnCheckOperator`` and ``SQLTableCheckOperator``
on the same ``dpone_clickhouse`` connection. The transfer task lets go of the chDB directory before the
checks open it read-only; good expectations pass, a wrong one fails its task and only its task.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.airflow.conftest import airflow_env, last_json_line

DRIVER = Path(__file__).with_name("dag_test_driver.py")
ROWS, DAYS = 120, 3

MANIFEST_YAML = """\
kind: native_transfer
name: checked_orders
source:
  type: sqlite
  connection: demo_source
  table: orders
  partitioning: {kind: day, column: order_date}
sink:
  type: clickhouse
  connection: demo_clickhouse
  table: demo.orders
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
"""

DAG_FILE = """\
from datetime import datetime

from airflow.providers.common.sql.operators.sql import SQLColumnCheckOperator, SQLTableCheckOperator
from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator


def checked(dag_id, expected_rows):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        transfer = NativeTransferOperator(task_id="transfer", manifest="manifests/orders.yaml")
        columns = SQLColumnCheckOperator(
            task_id="columns",
            conn_id="demo_clickhouse",
            table="demo.orders",
            column_mapping={
                "id": {"null_check": {"equal_to": 0}, "distinct_check": {"equal_to": ROWS}},
                "order_date": {"null_check": {"equal_to": 0}},
            },
        )
        rules = SQLTableCheckOperator(
            task_id="rules",
            conn_id="demo_clickhouse",
            table="demo.orders",
            checks={
                "row_count_check": {"check_statement": f"COUNT(*) = {expected_rows}"},
                "amount_not_negative": {"check_statement": "amount >= 0"},
            },
        )
        transfer >> [columns, rules]
    return dag


good = checked("dpone_checked_good", ROWS)
wrong = checked("dpone_checked_wrong", ROWS + 1)
"""


@pytest.fixture(scope="module")
def results(migrated_airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("checked")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    dags = root / "dags"
    (dags / "manifests").mkdir(parents=True)
    (dags / "manifests" / "orders.yaml").write_text(MANIFEST_YAML)
    (dags / "checked_dag.py").write_text(f"ROWS = {ROWS}\n" + DAG_FILE)
    data = root / "data"
    data.mkdir()
    create_demo_source(data / "source.sqlite", ROWS, days=DAYS)
    chdb_path = data / "clickhouse"

    def run(name: str, dag_id: str) -> dict[str, str]:
        return {"name": name, "action": "run", "dag_id": dag_id, "dag_file": str(dags / "checked_dag.py")}

    steps = [run("good", "dpone_checked_good"), run("wrong", "dpone_checked_wrong")]
    steps_file = root / "steps.json"
    steps_file.write_text(json.dumps(steps))
    env = airflow_env(
        home,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW_CONN_DEMO_SOURCE=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_DEMO_CLICKHOUSE=json.dumps(
            {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(chdb_path)}}
        ),
    )
    result = subprocess.run(
        [sys.executable, str(DRIVER), str(steps_file)],
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"driver failed:\n{result.stdout[-6000:]}"
    answer: dict[str, Any] = last_json_line(result.stdout)["results"]
    return answer


def _states(run: dict[str, Any]) -> dict[str, str]:
    return {task: outcome["state"] for task, outcome in run["tasks"].items()}


def test_checks_downstream_of_the_transfer_pass_on_the_loaded_table(results: dict[str, Any]) -> None:
    good = results["good"]
    assert _states(good) == {"transfer": "success", "columns": "success", "rules": "success"}
    assert good["state"] == "success"
    assert good["tasks"]["transfer"]["xcom"]["rows_committed"] == ROWS


def test_a_wrong_expectation_fails_its_check_task_only(results: dict[str, Any]) -> None:
    wrong = results["wrong"]
    # the route is already loaded: the transfer moves nothing and succeeds; the row count rule fails
    assert _states(wrong) == {"transfer": "success", "columns": "success", "rules": "failed"}
    assert wrong["state"] == "failed"
