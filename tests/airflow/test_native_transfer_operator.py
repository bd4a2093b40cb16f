"""NativeTransferOperator through real ``dag.test()`` runs on real components.

SQLite demo source, embedded chDB target and SQLite checkpoint store; connections are Airflow
connections from ``AIRFLOW_CONN_*`` variables, the checkpoint store an inline URI. One driver process
runs the whole scenario in order (first run, re-runs, a crashed attempt's armed guard, the blocked run,
an invalid manifest), because Airflow's in-process execution API takes seconds to start; each test below
asserts one behaviour of it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.airflow.conftest import airflow_env, last_json_line
from tests.airflow.dag_test_driver import split_step_logs

DRIVER = Path(__file__).with_name("dag_test_driver.py")
ROWS, DAYS = 240, 4
#: Rows of the third database (``demo_source_c``): other ids, and other counts a day than the first's.
OTHER_ROWS = 120

MANIFEST_YAML = """\
kind: native_transfer
name: demo_orders
source:
  type: sqlite
  connection: demo_source
  table: orders
  partitioning:
    kind: day
    column: order_date
sink:
  type: clickhouse
  connection: demo_clickhouse
  table: demo.orders
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sqlite:///state.sqlite
"""

DAG_HEADER = """\
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

ARGS = {"retries": 1, "retry_delay": timedelta(seconds=0)}
"""

TRANSFER_DAG = """\
with DAG("dpone_it_transfer", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator(task_id="transfer", manifest="manifests/orders.yaml")
"""

DICT_DAG = """\
MANIFEST = {
    "kind": "native_transfer",
    "name": "demo_orders",
    "source": {
        "type": "sqlite",
        "connection": "{{ params.source_conn }}",
        "table": "orders",
        "partitioning": {"kind": "day", "column": "order_date"},
    },
    "sink": {
        "type": "clickhouse",
        "connection": "demo_clickhouse",
        "table": "demo.orders",
        "strategy": "incremental_append",
        "order_by": ["order_date", "id"],
    },
    "checkpoints": {"connection": "sqlite:///manifests/state.sqlite"},
}

with DAG(
    "dpone_it_transfer_dict",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    default_args=ARGS,
    params={"source_conn": "demo_source"},
) as dag:
    NativeTransferOperator(task_id="transfer", manifest=MANIFEST)
"""

MISSING_CONNECTION_DAG = """\
with DAG("dpone_it_missing_conn", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator(
        task_id="transfer", manifest="manifests/orders.yaml", sink_conn_id="dpone_no_such_connection"
    )
"""

INVALID_DAG = """\
with DAG("dpone_it_invalid", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator(
        task_id="transfer",
        manifest={"kind": "native_transfer", "name": "broken", "sinc": {}},
    )
"""


FRESH_STORE_DAG = """\
MANIFEST = {
    "kind": "native_transfer",
    "name": "demo_orders",
    "source": {
        "type": "sqlite",
        "connection": "demo_source",
        "table": "orders",
        "partitioning": {"kind": "day", "column": "order_date"},
    },
    "sink": {
        "type": "clickhouse",
        "connection": "demo_clickhouse",
        "table": "demo.orders",
        "strategy": "incremental_append",
        "order_by": ["order_date", "id"],
    },
    "checkpoints": {"connection": "sqlite:///manifests/fresh_state.sqlite"},
}

with DAG("dpone_it_fresh_store", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator(task_id="transfer", manifest=MANIFEST)

with DAG("dpone_it_fresh_store_allowed", schedule=None, start_date=datetime(2026, 1, 1)) as allowed:
    NativeTransferOperator(task_id="transfer", manifest=MANIFEST, allow_nonempty_target=True)

# the same table of another database, into a store of its own: the target's rows are another writer's
OTHER = {
    **MANIFEST,
    "source": {**MANIFEST["source"], "connection": "demo_source_c"},
    "checkpoints": {"connection": "sqlite:///manifests/other_state.sqlite"},
}

with DAG("dpone_it_other_writer_allowed", schedule=None, start_date=datetime(2026, 1, 1)) as other:
    NativeTransferOperator(task_id="transfer", manifest=OTHER, allow_nonempty_target=True)
"""


MAPPED_DAG = """\
def manifest(target):
    return {
        "kind": "native_transfer",
        "name": "mapped_" + target.split(".")[1],
        "source": {
            "type": "sqlite",
            "connection": "demo_source",
            "table": "orders",
            "partitioning": {"kind": "day", "column": "order_date"},
        },
        "sink": {
            "type": "clickhouse",
            "connection": "demo_clickhouse",
            "table": target,
            "strategy": "incremental_append",
            "order_by": ["order_date", "id"],
        },
        "checkpoints": {"connection": "sqlite:///manifests/mapped_state.sqlite"},
    }


with DAG("dpone_it_mapped", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator.partial(task_id="transfer").expand(
        manifest=[manifest("demo.mapped_a"), manifest("demo.mapped_b")]
    )
"""


SHARDS_DAG = """\
with DAG("dpone_it_shards", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag:
    NativeTransferOperator.partial(task_id="transfer", manifest="manifests/shards.yaml").expand(
        source_conn_id=["demo_source_a", "demo_source_b"]
    )
"""
#: The demo route into a target and a store of its own, which the shards DAG maps over two connections.
SHARDS_YAML = MANIFEST_YAML.replace("demo.orders", "demo.shards").replace(
    "state.sqlite", "shards_state.sqlite"
)


class Scenario:
    def __init__(self, results: dict[str, Any], logs: dict[str, str]) -> None:
        self.results = results
        self.logs = logs

    def task(self, step: str) -> dict[str, Any]:
        outcome: dict[str, Any] = self.results[step]["tasks"]["transfer"]
        return outcome


@pytest.fixture(scope="module")
def scenario(migrated_airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("operator")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    dags = root / "dags"
    (dags / "manifests").mkdir(parents=True)
    (dags / "manifests" / "orders.yaml").write_text(MANIFEST_YAML)
    (dags / "transfer_dag.py").write_text(DAG_HEADER + TRANSFER_DAG)
    (dags / "transfer_dict_dag.py").write_text(DAG_HEADER + DICT_DAG)
    (dags / "invalid_dag.py").write_text(DAG_HEADER + INVALID_DAG)
    (dags / "missing_connection_dag.py").write_text(DAG_HEADER + MISSING_CONNECTION_DAG)
    (dags / "fresh_store_dag.py").write_text(DAG_HEADER + FRESH_STORE_DAG)
    (dags / "mapped_dag.py").write_text(DAG_HEADER + MAPPED_DAG)
    (dags / "shards_dag.py").write_text(DAG_HEADER + SHARDS_DAG)
    (dags / "manifests" / "shards.yaml").write_text(SHARDS_YAML)
    data = root / "data"
    data.mkdir()
    create_demo_source(data / "source.sqlite", ROWS, days=DAYS)
    create_demo_source(data / "source_b.sqlite", ROWS, days=DAYS)
    with sqlite3.connect(data / "source_b.sqlite") as shard_b:  # a second database: the same table, other ids
        shard_b.execute("UPDATE orders SET id = id + 1000000")
    create_demo_source(data / "source_c.sqlite", OTHER_ROWS, days=DAYS)
    with sqlite3.connect(data / "source_c.sqlite") as other:
        other.execute("UPDATE orders SET id = id + 2000000")
    chdb_path = data / "clickhouse"

    def run(name: str, dag_id: str, dag_file: str) -> dict[str, str]:
        return {"name": name, "action": "run", "dag_id": dag_id, "dag_file": str(dags / dag_file)}

    def count(name: str) -> dict[str, str]:
        return {"name": name, "action": "count_target", "chdb_path": str(chdb_path), "table": "demo.orders"}

    steps = [
        run("missing_connection", "dpone_it_missing_conn", "missing_connection_dag.py"),
        run("first", "dpone_it_transfer", "transfer_dag.py"),
        count("rows_after_first"),
        run("rerun", "dpone_it_transfer", "transfer_dag.py"),
        run("rerun_dict", "dpone_it_transfer_dict", "transfer_dict_dag.py"),
        count("rows_after_reruns"),
        {
            "name": "crash",
            "action": "arm_guard",
            "manifest": str(dags / "manifests" / "orders.yaml"),
            "state_path": str(dags / "manifests" / "state.sqlite"),
        },
        run("blocked", "dpone_it_transfer", "transfer_dag.py"),
        count("rows_after_blocked"),
        run("invalid", "dpone_it_invalid", "invalid_dag.py"),
        run("fresh_store", "dpone_it_fresh_store", "fresh_store_dag.py"),
        count("rows_after_fresh_store"),
        run("fresh_store_allowed", "dpone_it_fresh_store_allowed", "fresh_store_dag.py"),
        count("rows_after_allowed"),
        run("other_writer_allowed", "dpone_it_other_writer_allowed", "fresh_store_dag.py"),
        count("rows_after_other_writer"),
        run("mapped", "dpone_it_mapped", "mapped_dag.py"),
        {"name": "mapped_a", "action": "count_target", "chdb_path": str(chdb_path), "table": "demo.mapped_a"},
        {"name": "mapped_b", "action": "count_target", "chdb_path": str(chdb_path), "table": "demo.mapped_b"},
        run("shards", "dpone_it_shards", "shards_dag.py"),
        {
            "name": "shards_rows",
            "action": "count_target",
            "chdb_path": str(chdb_path),
            "table": "demo.shards",
        },
    ]
    steps_file = root / "steps.json"
    steps_file.write_text(json.dumps(steps))
    env = airflow_env(
        home,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW_CONN_DEMO_SOURCE=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_DEMO_SOURCE_A=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_DEMO_SOURCE_B=f"sqlite:///{data / 'source_b.sqlite'}",
        AIRFLOW_CONN_DEMO_SOURCE_C=f"sqlite:///{data / 'source_c.sqlite'}",
        AIRFLOW_CONN_DEMO_CLICKHOUSE=json.dumps(
            {"conn_type": "clickhouse", "extra": {"interface": "chdb", "path": str(chdb_path)}}
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
    return Scenario(last_json_line(result.stdout)["results"], split_step_logs(result.stdout))


def test_dag_run_moves_every_partition_and_pushes_a_small_summary(scenario: Scenario) -> None:
    first = scenario.results["first"]
    task = scenario.task("first")
    assert (first["state"], task["state"], task["try_number"]) == ("success", "success", 1)
    summary = task["xcom"]
    assert summary["run_id"] == first["run_id"], "the Airflow run ID is the dpone run ID"
    assert (summary["partitions_committed"], summary["partitions_skipped"]) == (DAYS, 0)
    assert summary["rows_committed"] == ROWS
    assert summary["checkpoint_batch_id"].startswith("sha256:")
    assert len(json.dumps(summary)) < 1000, "XCom carries a summary, never data"
    assert scenario.results["rows_after_first"] == {"rows": ROWS, "distinct_ids": ROWS}


def test_rerun_skips_committed_partitions_and_writes_nothing(scenario: Scenario) -> None:
    task = scenario.task("rerun")
    assert task["state"] == "success"
    assert scenario.results["rerun"]["run_id"] != scenario.results["first"]["run_id"]
    summary = task["xcom"]
    assert (summary["partitions_committed"], summary["partitions_skipped"], summary["rows_committed"]) == (
        0,
        DAYS,
        0,
    )
    assert scenario.results["rows_after_reruns"] == {"rows": ROWS, "distinct_ids": ROWS}


def test_dict_manifest_is_rendered_at_execute_time_and_resumes_the_same_route(scenario: Scenario) -> None:
    task = scenario.task("rerun_dict")
    assert task["state"] == "success", scenario.logs["rerun_dict"][-4000:]
    assert (task["xcom"]["partitions_committed"], task["xcom"]["partitions_skipped"]) == (0, DAYS)


def test_blocked_route_fails_every_try_before_target_io_with_the_stable_code(scenario: Scenario) -> None:
    task = scenario.task("blocked")
    assert scenario.results["blocked"]["state"] == "failed"
    # retries=1 and two tries: an ordinary, retryable failure, not AirflowFailException
    assert (task["state"], task["try_number"]) == ("failed", 2)
    assert scenario.results["rows_after_blocked"] == {"rows": ROWS, "distinct_ids": ROWS}
    log = scenario.logs["blocked"]
    crashed = scenario.results["crash"]
    assert log.count("error: native_transfer_manual_reconciliation_required") >= 2, log[-4000:]
    assert f"partition {crashed['label']}" in log
    assert "phase=armed" in log
    assert crashed["partition_id"] in log, "the full ID is logged with the error details"
    assert crashed["checkpoint_batch_id"] in log
    assert "dpone checkpoints" in log
    assert "dpone guard resolve" in log
    assert "retryable: false" not in log.lower()
    assert "AirflowFailException" not in log


def test_missing_airflow_connection_fails_at_once_with_its_code(scenario: Scenario) -> None:
    task = scenario.task("missing_connection")
    # retry_can_help is False in the error table: the next try would meet the same missing connection
    assert (task["state"], task["try_number"]) == ("failed", 1)
    log = scenario.logs["missing_connection"]
    assert (
        "error: connection_missing: sink connection 'dpone_no_such_connection' is not defined in Airflow"
        in log
    )
    # it ran before the first successful run: nothing may have been committed by it
    assert scenario.task("first")["xcom"]["partitions_committed"] == DAYS


def test_invalid_manifest_fails_at_once_without_retrying(scenario: Scenario) -> None:
    task = scenario.task("invalid")
    assert (task["state"], task["try_number"]) == ("failed", 1)
    log = scenario.logs["invalid"]
    assert "manifest_invalid" in log
    assert "sinc" in log, "the strict loader names the unknown key"


def test_a_new_checkpoint_store_in_front_of_a_loaded_target_stops_before_appending(
    scenario: Scenario,
) -> None:
    task = scenario.task("fresh_store")
    assert task["state"] == "failed", scenario.logs["fresh_store"][-4000:]
    log = scenario.logs["fresh_store"]
    assert "error: native_transfer_target_not_empty" in log
    assert "dpone guard rebaseline" in log and "--adopt-target" in log
    assert scenario.results["rows_after_fresh_store"] == {"rows": ROWS, "distinct_ids": ROWS}


def test_allow_nonempty_target_over_the_routes_own_rows_fails_the_task_naming_the_adoption(
    scenario: Scenario,
) -> None:
    """A new store in front of the route's own rows: the flag appended every row a second time (this test
    asserted 2 * ROWS rows of ROWS ids); it now fails the task before arming, nothing written."""
    task = scenario.task("fresh_store_allowed")
    assert task["state"] == "failed", scenario.logs["fresh_store_allowed"][-4000:]
    log = scenario.logs["fresh_store_allowed"]
    assert (
        "error: native_transfer_target_not_empty: --allow-nonempty-target (allow_nonempty_target) refused"
        in log
    )
    assert "dpone guard rebaseline" in log and "--adopt-target" in log
    assert scenario.results["rows_after_allowed"] == {"rows": ROWS, "distinct_ids": ROWS}


def test_allow_nonempty_target_appends_beside_another_writers_rows_and_the_task_log_says_so(
    scenario: Scenario,
) -> None:
    task = scenario.task("other_writer_allowed")
    assert task["state"] == "success", scenario.logs["other_writer_allowed"][-4000:]
    log = scenario.logs["other_writer_allowed"]
    # once: the run logs each notice as it makes it, and the operator does not repeat the report's
    assert "note: the target table demo.orders already held" in log
    assert log.count("the target table demo.orders already held") == 1, log[-4000:]
    both = ROWS + OTHER_ROWS
    assert scenario.results["rows_after_other_writer"] == {"rows": both, "distinct_ids": both}


def test_invalid_manifest_lists_every_problem_in_the_task_log(scenario: Scenario) -> None:
    from airflow_provider_dpone.contracts.errors import DponeError
    from airflow_provider_dpone.manifests.loader import load_manifest_dict

    try:
        load_manifest_dict(
            {"kind": "native_transfer", "name": "broken", "sinc": {}}, "x", manifest_dir=Path(".")
        )
    except DponeError as err:
        problems = err.hint_lines
    else:
        raise AssertionError("the manifest of INVALID_DAG must be invalid")
    assert len(problems) > 1, "the DAG's manifest has several problems"
    log = scenario.logs["invalid"]
    assert [p for p in problems if p not in log] == [], log[-4000:]


def test_a_run_with_nothing_to_move_says_so_instead_of_batch_none(scenario: Scenario) -> None:
    log = scenario.logs["rerun"]
    assert "0 row(s) committed (nothing to move)" in log, log[-3000:]
    assert "(batch None)" not in log
    # and why, as the CLI says it: "already loaded" and "the source holds no rows" must not look alike
    assert "nothing to do: every partition is already committed" in log, log[-3000:]


def test_a_mapped_task_runs_one_route_per_manifest(scenario: Scenario) -> None:
    """``NativeTransferOperator.partial(...).expand(manifest=[...])``: each mapped instance is its own route."""
    tasks = scenario.results["mapped"]["tasks"]
    assert sorted(tasks) == ["transfer[0]", "transfer[1]"], tasks
    for instance in tasks.values():
        assert instance["state"] == "success", scenario.logs["mapped"][-4000:]
        assert (instance["xcom"]["partitions_committed"], instance["xcom"]["rows_committed"]) == (DAYS, ROWS)
    assert {instance["xcom"]["route"] for instance in tasks.values()} == {
        "main.orders -> demo.mapped_a (incremental_append)",
        "main.orders -> demo.mapped_b (incremental_append)",
    }
    assert (
        scenario.results["mapped_a"] == scenario.results["mapped_b"] == {"rows": ROWS, "distinct_ids": ROWS}
    )


def test_a_task_mapped_over_source_connections_of_one_route_moves_one_and_stops_the_other(
    scenario: Scenario,
) -> None:
    """``.expand(source_conn_id=[...])`` over one manifest: two databases with a table of the same name are
    one route. The first instance to run commits its rows; the other stops before it reads, never skipping
    rows it did not move as "already committed" (before: both succeeded, the second moving nothing)."""
    tasks = scenario.results["shards"]["tasks"]
    assert sorted(tasks) == ["transfer[0]", "transfer[1]"], tasks
    states = sorted(instance["state"] for instance in tasks.values())
    assert states == ["failed", "success"], scenario.logs["shards"][-4000:]
    moved = next(instance for instance in tasks.values() if instance["state"] == "success")
    assert moved["xcom"]["rows_committed"] == ROWS
    log = scenario.logs["shards"]
    assert "error: native_transfer_route_identity_changed: the source of route" in log, log[-4000:]
    assert "--source-moved" in log
    assert scenario.results["shards_rows"] == {"rows": ROWS, "distinct_ids": ROWS}
    # whichever ran second is stopped (the order is the executor's); both read an operator argument, so its
    # log says the dpone commands need a manifest naming that connection, not the manifest's own
    stopped = ["demo_source_a", "demo_source_b"][0 if tasks["transfer[0]"]["state"] == "failed" else 1]
    assert f"give dpone a copy of the manifest with source.connection: {stopped}" in log, log[-4000:]
