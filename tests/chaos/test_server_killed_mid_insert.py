"""A ClickHouse server (over HTTP) killed in the middle of the insert: the attempt records
``target_outcome_unknown`` and every retry exits 3 before any target I/O (the server may even stay down).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.chaos.checkpoint_phases import guard_phases
from tests.conftest import local_services

pytestmark = pytest.mark.slow

DPONE = str(Path(sys.executable).with_name("dpone"))

MANIFEST = """\
kind: native_transfer
name: http_orders
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {kind: day, column: order_date}
  chunk_rows: 2000
sink:
  type: clickhouse
  connection: private_clickhouse
  table: chaos.orders
  strategy: incremental_append
checkpoints:
  connection: sqlite:///state.sqlite
"""


def test_server_killed_mid_insert_records_unknown_outcome_and_the_retry_stops_before_target_io(
    tmp_path: Path,
) -> None:
    try:
        server = local_services.start_clickhouse(tmp_path / "server")
    except Exception as exc:  # the suite must fail, not skip, when the service cannot start
        pytest.fail(f"private clickhouse-server did not start: {type(exc).__name__}")
    try:
        create_demo_source(tmp_path / "source.sqlite", 300_000, days=30)
        manifest = tmp_path / "manifest.yaml"
        manifest.write_text(MANIFEST, encoding="utf-8")
        env = {
            **os.environ,
            "AIRFLOW_CONN_PRIVATE_CLICKHOUSE": f"clickhouse://default@127.0.0.1:{server.env['DPONE_TEST_CH_PORT']}/default",
        }
        proc = subprocess.Popen(
            [DPONE, "run", str(manifest), "--run-id", "r1", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while "armed" not in guard_phases(tmp_path / "state.sqlite") and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        # inside the target call: its insert of 300k rows takes ~0.4 s on a fast machine (0.3 s after
        # arming once landed after the commit), so the kill follows the armed batch at once
        time.sleep(0.05)
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 1, out
        assert json.loads(out)["error"] in ("target_load_failed", "target_unreachable")

        assert guard_phases(tmp_path / "state.sqlite") >= {"armed", "target_outcome_unknown"}
        listing = subprocess.run(
            [DPONE, "checkpoints", str(manifest), "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        phases = {p["guard_phase"] for p in json.loads(listing.stdout)["partitions"]}
        assert phases == {"target_outcome_unknown"}

        # the server is down: a retry that tried any target I/O would fail with exit 1, not 3
        retry = subprocess.run(
            [DPONE, "run", str(manifest), "--run-id", "r1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert retry.returncode == 3, retry.stderr
        assert "native_transfer_manual_reconciliation_required" in retry.stderr
        assert "target_outcome_unknown" in retry.stderr
        assert "dpone guard resolve" in retry.stderr
    finally:
        local_services.stop(server)
