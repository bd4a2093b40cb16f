"""Durable quality replay through NativeTransferOperator, in real ``dag.test()`` runs on chDB.

Real components only: the demo SQLite source (an Airflow connection), an embedded chDB target (an Airflow
connection), a SQLite checkpoint/capsule database, the supervised reader worker. One driver process runs
the scenario in order (this module is the driver: ``python -m tests.airflow.test_operator_quality_replay``),
because Airflow's in-process execution API takes seconds to start. ``dag.test(logical_date=...)`` with a
date already used replaces that DAG run, so the task runs again under the SAME run ID, as an Airflow retry
or a cleared task would.

Two routes share the chDB path (one path per process): route A proves the COMPLETE capsule and the replay
with the source moved away (the target is only counted, read-only); route B has another writer alter the published target before
the reader observes it. That fault is injected by a test-only operator subclass below, which wraps the
runtime's reader port (the same wrapper the CLI e2e test uses); the product carries no switch for it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
from airflow_provider_dpone.contracts.capsule import CapsuleChain, TargetComplete
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.target_observation import (
    OBSERVATION_BUDGET_S,
    ReaderOutcome,
    TargetReadRequest,
)
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator
from airflow_provider_dpone.runtime.replay.ref import operation_id_for
from tests.airflow.conftest import REPO_ROOT, airflow_env, last_json_line
from tests.airflow.dag_test_driver import MARK, split_step_logs

if TYPE_CHECKING:
    from airflow_provider_dpone.compose import EndpointResolver, Runtime
    from airflow_provider_dpone.manifests.loader import LoadedManifest

ROWS, DAYS = 240, 4
INTRUDER_DAY = "2026-11-30"  # inside the generation: the demo's last day
FIRST_DATE = datetime(2026, 1, 5, tzinfo=timezone.utc)
LATER_DATE = datetime(2026, 1, 6, tzinfo=timezone.utc)

MANIFEST_YAML = """\
kind: native_transfer
name: {name}
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
  table: {table}
  strategy: incremental_append
  order_by: [order_date, id]
  options:
    durable_quality_replay: {durable}
checkpoints:
  connection: sqlite:///state.sqlite
quality:
  checks:
    - {{type: row_count}}
    - {{type: not_null, columns: [customer, amount]}}
    - {{type: unique, columns: [id]}}
    - {{type: distinct_count, columns: [customer], severity: warn}}
"""

DAGS = """\
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator
from tests.airflow.test_operator_quality_replay import AlteringTransferOperator

ARGS = {{"retries": 1, "retry_delay": timedelta(seconds=0)}}

with DAG("dpone_qr_a", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag_a:
    NativeTransferOperator(task_id="transfer", manifest="manifests/route_a.yaml")

with DAG("dpone_qr_b", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag_b:
    NativeTransferOperator(task_id="transfer", manifest="manifests/route_b.yaml")

with DAG("dpone_qr_c_legacy", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag_c0:
    NativeTransferOperator(task_id="transfer", manifest="manifests/route_c_legacy.yaml")

with DAG("dpone_qr_c", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag_c:
    NativeTransferOperator(task_id="transfer", manifest="manifests/route_c.yaml")

with DAG("dpone_qr_b_altered", schedule=None, start_date=datetime(2026, 1, 1), default_args=ARGS) as dag_b_altered:
    AlteringTransferOperator(
        task_id="transfer", manifest="manifests/route_b.yaml", chdb_path={chdb_path!r}, table="demo.orders_b"
    )
"""


# -- the test-only fault: another writer alters the published target before the reader observes it ----


class AlteringReader:
    """Wraps the real reader port: insert one intruder row into the generation, then observe for real."""

    def __init__(self, chdb_path: str, table: str) -> None:
        self.inner = SupervisedTargetReader()
        self.chdb_path = chdb_path
        self.table = table

    def prove_spawn_capability(self) -> None:
        self.inner.prove_spawn_capability()

    def observe(
        self, endpoint: EndpointDescriptor, request: TargetReadRequest, budget_s: float = OBSERVATION_BUDGET_S
    ) -> ReaderOutcome:
        import clickhouse_connect

        client = clickhouse_connect.get_client(interface="chdb", path=self.chdb_path)
        try:
            client.command(
                f"INSERT INTO {self.table} (id, order_date, customer, amount, updated_at) VALUES "
                f"(999999, toDate('{INTRUDER_DAY}'), 'intruder', 1.00, "
                f"toDateTime('{INTRUDER_DAY} 10:00:00'))"
            )
        finally:
            client.close()  # before the worker opens the same chDB path
        return self.inner.observe(endpoint, request, budget_s)


class AlteringTransferOperator(NativeTransferOperator):
    """Test-only: the product operator, composed with :class:`AlteringReader` as its reader port."""

    def __init__(self, *, chdb_path: str, table: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chdb_path = chdb_path
        self.table = table

    def _open_runtime(
        self, loaded: LoadedManifest, resolver: EndpointResolver, manifest_ref: str
    ) -> AbstractContextManager[Runtime]:
        from airflow_provider_dpone.compose import open_runtime

        reader = AlteringReader(self.chdb_path, self.table)
        return open_runtime(loaded, resolve=resolver, manifest_ref=manifest_ref, target_reader=reader)


# -- the driver (runs in a fresh process with its own AIRFLOW_HOME) --------------------------------------


def _run_dag_at(step: dict[str, Any]) -> dict[str, Any]:
    """``dag.test()`` at a fixed date: a manual run's ID is made from it, so the same date gives the same
    run ID again (``dag.test`` replaces the earlier DAG run of that date)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from tests.airflow.dag_test_driver import load_dag

    dag = load_dag(step["dag_file"], step["dag_id"])
    when = datetime.fromisoformat(step["logical_date"])
    dag_run = dag.test(run_after=when, logical_date=when)
    tasks: dict[str, Any] = {}
    with create_session() as session:
        for ti in dag_run.get_task_instances(session=session):
            row = session.scalars(
                XComModel.get_many(
                    run_id=dag_run.run_id, key="return_value", dag_ids=ti.dag_id, task_ids=ti.task_id
                )
            ).first()
            tasks[ti.task_id] = {
                "state": str(getattr(ti.state, "value", ti.state)),
                "try_number": ti.try_number,
                "xcom": XComModel.deserialize_value(row) if row is not None else None,
            }
    return {
        "run_id": dag_run.run_id,
        "state": str(getattr(dag_run.state, "value", dag_run.state)),
        "tasks": tasks,
    }


def _count(step: dict[str, Any]) -> dict[str, Any]:
    from tests.airflow.dag_test_driver import count_target

    return count_target(step)


def _rename(step: dict[str, Any]) -> dict[str, Any]:
    Path(step["src"]).rename(step["dst"])
    return {"renamed": step["src"]}


def _exists(step: dict[str, Any]) -> dict[str, Any]:
    return {"exists": Path(step["path"]).exists()}


ACTIONS = {"run": _run_dag_at, "count_target": _count, "rename": _rename, "exists": _exists}


def main(steps_file: str) -> int:
    results: dict[str, Any] = {}
    for step in json.loads(Path(steps_file).read_text()):
        print(MARK + step["name"], flush=True)
        sys.stderr.flush()
        results[step["name"]] = ACTIONS[step["action"]](step)
    print(MARK + "end", flush=True)
    print(json.dumps({"results": results}), flush=True)
    return 0


# -- the scenario --------------------------------------------------------------------------------------


class Scenario:
    def __init__(self, results: dict[str, Any], logs: dict[str, str], dags: Path) -> None:
        self.results = results
        self.logs = logs
        self.dags = dags

    def task(self, step: str) -> dict[str, Any]:
        outcome: dict[str, Any] = self.results[step]["tasks"]["transfer"]
        return outcome

    def chain(self, route: str, run_id: str) -> CapsuleChain:
        manifest = load_manifest(self.dags / "manifests" / f"{route}.yaml")
        store = SqlCapsuleStore(f"sqlite:///{self.dags / 'manifests' / 'state.sqlite'}")
        try:
            stored = store.read(operation_id_for(manifest.identity, run_id))
        finally:
            store.close()
        assert isinstance(stored, CapsuleChain)
        return stored


def _steps(dags: Path, data: Path) -> list[dict[str, Any]]:
    chdb_path, source = data / "clickhouse", data / "source.sqlite"

    def run(name: str, dag_id: str, when: datetime) -> dict[str, Any]:
        return {
            "name": name,
            "action": "run",
            "dag_id": dag_id,
            "dag_file": str(dags / "quality_replay_dags.py"),
            "logical_date": when.isoformat(),
        }

    def count(name: str, table: str) -> dict[str, Any]:
        return {"name": name, "action": "count_target", "chdb_path": str(chdb_path), "table": table}

    def rename(name: str, src: Path, dst: Path) -> dict[str, Any]:
        return {"name": name, "action": "rename", "src": str(src), "dst": str(dst)}

    return [
        # route A: a COMPLETE capsule, then the same run ID again with the source moved away (the replay
        # counts the target read-only: one that lost committed rows stops it, as any run)
        run("first", "dpone_qr_a", FIRST_DATE),
        count("rows_after_first", "demo.orders_a"),
        rename("source_away", source, data / "source.away"),
        run("replay", "dpone_qr_a", FIRST_DATE),
        {"name": "source_path_after_replay", "action": "exists", "path": str(source)},
        rename("source_back", data / "source.away", source),
        count("rows_after_replay", "demo.orders_a"),
        # route B: the target altered between publication and observation, then a later run of the route
        run("altered", "dpone_qr_b_altered", FIRST_DATE),
        count("rows_after_altered", "demo.orders_b"),
        run("blocked", "dpone_qr_b", LATER_DATE),
        count("rows_after_blocked", "demo.orders_b"),
        # route C: committed with the selector off (no capsule), then run with it on
        run("legacy_c", "dpone_qr_c_legacy", FIRST_DATE),
        run("unverified_c", "dpone_qr_c", LATER_DATE),
    ]


@pytest.fixture(scope="module")
def scenario(migrated_airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("operator_quality_replay")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    dags, data = root / "dags", root / "data"
    (dags / "manifests").mkdir(parents=True)
    data.mkdir()
    for route in ("a", "b", "c"):
        text = MANIFEST_YAML.format(
            name=f"replay_orders_{route}", table=f"demo.orders_{route}", durable="true"
        )
        (dags / "manifests" / f"route_{route}.yaml").write_text(text)
    legacy = MANIFEST_YAML.format(name="replay_orders_c", table="demo.orders_c", durable="false")
    (dags / "manifests" / "route_c_legacy.yaml").write_text(legacy)
    (dags / "quality_replay_dags.py").write_text(DAGS.format(chdb_path=str(data / "clickhouse")))
    create_demo_source(data / "source.sqlite", ROWS, days=DAYS)
    (root / "steps.json").write_text(json.dumps(_steps(dags, data)))
    env = airflow_env(
        home,
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW_CONN_DEMO_SOURCE=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_DEMO_CLICKHOUSE=json.dumps(
            {"conn_type": "clickhouse", "extra": {"interface": "chdb", "path": str(data / "clickhouse")}}
        ),
        PYTHONPATH=str(REPO_ROOT),  # the DAG file imports the test-only operator from this module
        TZ="UTC",
    )
    result = subprocess.run(
        [sys.executable, "-m", "tests.airflow.test_operator_quality_replay", str(root / "steps.json")],
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"driver failed:\n{result.stdout[-6000:]}"
    return Scenario(last_json_line(result.stdout)["results"], split_step_logs(result.stdout), dags)


QUALITY_KEYS = {
    "verdict",
    "durable_replay",
    "checks_passed",
    "checks_failed",
    "checks_unavailable",
    "replayed",
    "capsule_state",
    "operation_id",
    "unverified_partitions",
}


def test_durable_run_from_the_operator_ends_with_a_complete_v2_capsule(scenario: Scenario) -> None:
    first, task = scenario.results["first"], scenario.task("first")
    assert (first["state"], task["state"], task["try_number"]) == ("success", "success", 1)
    summary = task["xcom"]
    assert (summary["partitions_committed"], summary["rows_committed"]) == (DAYS, ROWS)
    quality = summary["quality"]
    assert set(quality) == QUALITY_KEYS, "states and counts only: no metric values in XCom"
    assert quality["verdict"] == "passed" and quality["capsule_state"] == "complete"
    assert (quality["checks_passed"], quality["checks_failed"], quality["checks_unavailable"]) == (4, 0, 0)
    assert quality["replayed"] is False and quality["durable_replay"] is True
    chain = scenario.chain("route_a", first["run_id"])
    assert quality["operation_id"] == chain.operation_id
    assert [r.kind.value for r in chain.records] == ["sealed_core", "target_pending", "complete"]
    assert isinstance(chain.terminal, TargetComplete)
    assert scenario.results["rows_after_first"] == {"rows": ROWS, "distinct_ids": ROWS}
    log = scenario.logs["first"]
    assert "dpone quality " + first["run_id"] + ": verdict passed, 4 check(s) passed, 0 failed" in log
    assert "capsule complete, replayed no" in log


def test_same_run_id_replays_from_the_capsule_without_the_source(scenario: Scenario) -> None:
    first, replay, task = scenario.results["first"], scenario.results["replay"], scenario.task("replay")
    assert replay["run_id"] == first["run_id"], "the same DAG run ID, run again"
    assert (replay["state"], task["state"], task["try_number"]) == ("success", "success", 1)
    summary = task["xcom"]
    assert summary["quality"]["replayed"] is True and summary["quality"]["verdict"] == "passed"
    assert (summary["rows_committed"], summary["partitions_committed"]) == (0, 0)
    assert summary["checkpoint_batch_id"] == scenario.task("first")["xcom"]["checkpoint_batch_id"]
    # the source file was moved away: it was not opened (nor created again)
    assert scenario.results["source_path_after_replay"] == {"exists": False}
    assert scenario.results["rows_after_replay"] == {"rows": ROWS, "distinct_ids": ROWS}
    chain = scenario.chain("route_a", first["run_id"])
    assert chain.version == 3, "nothing appended: no second observation"
    assert "capsule complete, replayed yes" in scenario.logs["replay"]


def test_target_altered_after_publication_fails_the_run_as_a_mismatch(scenario: Scenario) -> None:
    altered, task = scenario.results["altered"], scenario.task("altered")
    assert (altered["state"], task["state"]) == ("failed", "failed")
    assert task["try_number"] == 2, "retryable; the retry replays the failed capsule, never a success"
    assert task["xcom"] is None
    log = scenario.logs["altered"]
    assert log.count("error: quality_check_failed:") >= 2, log[-4000:]
    assert "after publication" in log and "check row_count" in log
    assert "intruder" not in log, "no data values in the task log"
    chain = scenario.chain("route_b", altered["run_id"])
    assert isinstance(chain.terminal, TargetComplete) and chain.version == 3
    assert scenario.results["rows_after_altered"] == {"rows": ROWS + 1, "distinct_ids": ROWS + 1}


def test_mismatch_blocks_later_runs_of_the_route_as_an_ordinary_retryable_failure(scenario: Scenario) -> None:
    blocked, task = scenario.results["blocked"], scenario.task("blocked")
    assert blocked["run_id"] != scenario.results["altered"]["run_id"]
    assert (blocked["state"], task["state"], task["try_number"]) == ("failed", "failed", 2)
    log = scenario.logs["blocked"]
    assert log.count("error: quality_replay_unresolved:") >= 2, log[-4000:]
    assert "AirflowFailException" not in log
    assert "retryable: false" not in log.lower()
    assert scenario.results["rows_after_blocked"] == {"rows": ROWS + 1, "distinct_ids": ROWS + 1}


def test_partitions_committed_without_original_proof_are_counted_in_the_task_log(scenario: Scenario) -> None:
    legacy, task = scenario.results["legacy_c"], scenario.task("unverified_c")
    assert legacy["state"] == "success"
    assert scenario.task("legacy_c")["xcom"]["quality"]["durable_replay"] is False
    assert task["state"] == "success"
    assert task["xcom"]["quality"]["unverified_partitions"] == DAYS
    log = scenario.logs["unverified_c"]
    assert f"{DAYS} committed partition(s) REQUIRED/UNVERIFIED" in log, log[-3000:]
    assert "dpone replay status" in log


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
