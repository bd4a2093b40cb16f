"""The DAGs of ``tests/airflow/test_on_kill.py``: one guarded transfer per export path, sized so that a
SIGTERM lands while it runs. Test-only: the operator subclass appends each try's process ID to
``tries.jsonl`` beside this file (the test signals that process) and changes nothing else."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

TRIES_FILE = Path(__file__).with_name("tries.jsonl")


class PidRecordingTransferOperator(NativeTransferOperator):
    def execute(self, context: Any) -> dict[str, Any]:
        record = {"pid": os.getpid(), "dag_id": self.dag_id, "run_id": str(context["run_id"])}
        with TRIES_FILE.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        return super().execute(context)


for dag_id, manifest, timeout in (
    ("dpone_on_kill_target", "manifests/lazy_direct.yaml", None),
    ("dpone_on_kill_extract", "manifests/artifact_direct.yaml", None),
    # the other order: AirflowTaskTimeout is raised inside execute first, on_kill is called after it
    ("dpone_on_kill_timeout", "manifests/timeout_direct.yaml", timedelta(seconds=2)),
):
    with DAG(
        dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, default_args={"retries": 0}
    ):
        PidRecordingTransferOperator(task_id="transfer", manifest=manifest, execution_timeout=timeout)
