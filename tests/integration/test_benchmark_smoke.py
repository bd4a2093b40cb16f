"""The benchmark harness works end to end: ``benchmarks/run.py --quick`` against the suite's services.

A smoke check only (tiny sizes, one repetition, no timing assertion): every part of the harness runs —
dpone on both paths into chDB and the server, the raw pipe, the guard on SQLite and PostgreSQL stores, the
reader, peak RSS — and the last line of stdout is the JSON summary CI and docs/performance.md rely on.
The Airflow peers run only where the ``bench`` extra is installed; otherwise the harness says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor

pytestmark = pytest.mark.service

REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIRED_KEYS = {
    "dpone_rows_per_s",
    "raw_rows_per_s",
    "generic_transfer_rows_per_s",
    "hand_written_rows_per_s",
    "rows",
    "peak_rss_mb_100k",
    "peak_rss_mb_1m",
    "guard_ms_per_partition_sqlite",
    "guard_ms_per_partition_postgres",
    "reader_seconds",
}


@pytest.mark.timeout(300)
def test_quick_benchmark_ends_with_the_json_summary(
    tmp_path: Path, clickhouse_http: EndpointDescriptor, postgres_url: str
) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--workdir",
            str(tmp_path / "work"),
            "--results-dir",
            str(tmp_path / "results"),
            "--clickhouse-port",
            str(clickhouse_http.port),
            "--postgres-url",
            postgres_url,
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=REPO_ROOT,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])

    assert set(summary) >= REQUIRED_KEYS
    assert summary["quick"] is True and summary["failed_measurements"] == 0
    for key in ("dpone_rows_per_s", "raw_rows_per_s", "dpone_staged_rows_per_s", "dpone_http_rows_per_s"):
        assert summary[key] and summary[key] > 0, key
    assert summary["guard_ms_per_partition_sqlite"] > 0
    assert summary["guard_ms_per_partition_postgres"] > 0
    assert summary["reader_seconds"] > 0 and summary["peak_rss_mb_1m"] > 0
    results = list((tmp_path / "results").glob("bench-*.json"))
    assert len(results) == 1
    stored = json.loads(results[0].read_text())
    assert stored["summary"]["dpone_rows_per_s"] == summary["dpone_rows_per_s"]
    assert all(m["reps"] for m in stored["transfers"]), "every planned measurement ran"
    print(f"quick benchmark took {elapsed:.1f}s")  # visible with -s; a smoke check, not a timing test
