"""Run a list of steps against real Airflow ``dag.test()`` runs in ONE fresh process, and report as JSON.

``python dag_test_driver.py STEPS.json``. Airflow's in-process execution API costs seconds to start, so
one driver process runs every step of a scenario: DAG runs, a durable guard left behind by a "crashed"
attempt, target row counts. Before each step it prints ``### dpone-step NAME`` so the caller can cut the
task logs per step; the last line of stdout is ``{"results": {...}}``.

This file must not live in a DAG folder (``dag.test()`` parses the whole folder).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MARK = "### dpone-step "


def split_step_logs(stdout: str) -> dict[str, str]:
    """The driver's stdout cut into one log per step, at the ``MARK`` lines (before the first: "start")."""
    logs: dict[str, str] = {}
    name = "start"
    for line in stdout.splitlines():
        if line.startswith(MARK):
            name = line[len(MARK) :].strip()
            continue
        logs[name] = logs.get(name, "") + line + "\n"
    return logs


def load_dag(dag_file: str, dag_id: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"dpone_driver_{Path(dag_file).stem}", dag_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for value in vars(module).values():
        if getattr(value, "dag_id", None) == dag_id and hasattr(value, "test"):
            return value
    raise LookupError(f"{dag_id} not defined in {dag_file}")


def run_dag(step: dict[str, Any]) -> dict[str, Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dag = load_dag(step["dag_file"], step["dag_id"])
    dag_run = dag.test()
    tasks: dict[str, Any] = {}
    with create_session() as session:
        for ti in dag_run.get_task_instances(session=session):
            mapped = ti.map_index is not None and ti.map_index >= 0
            row = session.scalars(
                XComModel.get_many(
                    run_id=dag_run.run_id,
                    key="return_value",
                    dag_ids=ti.dag_id,
                    task_ids=ti.task_id,
                    map_indexes=ti.map_index if mapped else None,
                )
            ).first()
            # a mapped task's instances are keyed task_id[map_index]
            tasks[f"{ti.task_id}[{ti.map_index}]" if mapped else ti.task_id] = {
                "state": str(ti.state.value if hasattr(ti.state, "value") else ti.state),
                "try_number": ti.try_number,
                "xcom": XComModel.deserialize_value(row) if row is not None else None,
            }
    state = dag_run.state
    return {"run_id": dag_run.run_id, "state": str(getattr(state, "value", state)), "tasks": tasks}


def arm_guard(step: dict[str, Any]) -> dict[str, Any]:
    """Leave what an attempt that armed its batch and died inside the target call leaves behind."""
    from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
    from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
    from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
    from airflow_provider_dpone.contracts.partition import sha256_tag
    from airflow_provider_dpone.manifests.loader import load_manifest

    loaded = load_manifest(step["manifest"])
    store = SqlCheckpointStore(f"sqlite:///{step['state_path']}")
    try:
        latest = sorted(store.list_latest(loaded.route), key=lambda c: c.bounds.label)
        victim = next(c for c in latest if c.status is CheckpointStatus.COMMITTED)
        batch_id = sha256_tag("crashed-attempt" + victim.partition_id)
        guard = TargetCommitGuard.for_phase(GuardPhase.ARMED, batch_id)
        armed = victim.model_copy(
            update={
                "run_id": "crashed_attempt",
                "status": CheckpointStatus.EXPORTED,
                "started_at": datetime.now(timezone.utc),
                "completed_at": None,
                "diagnostics": {GUARD_KEY: guard.to_json()},
            }
        )
        store.write_batch([armed])
    finally:
        store.close()
    return {
        "partition_id": victim.partition_id,
        "label": victim.bounds.label,
        "checkpoint_batch_id": batch_id,
    }


def count_target(step: dict[str, Any]) -> dict[str, Any]:
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=step["chdb_path"])
    try:
        rows = client.query(f"SELECT count(), uniqExact(id) FROM {step['table']}").result_rows[0]
    finally:
        client.close()
    return {"rows": int(rows[0]), "distinct_ids": int(rows[1])}


ACTIONS = {"run": run_dag, "arm_guard": arm_guard, "count_target": count_target}


def main(steps_file: str) -> int:
    steps = json.loads(Path(steps_file).read_text())
    results: dict[str, Any] = {}
    for step in steps:
        print(MARK + step["name"], flush=True)
        sys.stderr.flush()
        results[step["name"]] = ACTIONS[step["action"]](step)
    print(MARK + "end", flush=True)
    print(json.dumps({"results": results}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
