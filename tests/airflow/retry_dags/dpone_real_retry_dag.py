"""The DAG of ``tests/airflow/test_real_retries.py``: one guarded transfer whose every try leaves a trace.

Test-only. The operator subclass appends one JSON line per try to ``tries.jsonl`` beside this file (process
ID, parent process ID, try number, run ID, whether chDB was already loaded), so the test can prove that
each try ran in a fresh process. It changes nothing else: the fault that fails the first try lives in the
test's checkpoint database, never here and never in product code.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

DAG_ID = "dpone_real_retries"
TRIES_FILE = Path(__file__).with_name("tries.jsonl")


class TryRecordingTransferOperator(NativeTransferOperator):
    """``NativeTransferOperator`` that records which process ran each try, then runs it unchanged."""

    def execute(self, context: Any) -> dict[str, Any]:
        record = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "try_number": int(context["ti"].try_number),
            "run_id": str(context["run_id"]),
            "chdb_loaded": "chdb" in sys.modules,
        }
        with TRIES_FILE.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        return super().execute(context)


with DAG(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=0)},
):
    TryRecordingTransferOperator(task_id="transfer", manifest="manifests/orders.yaml")
