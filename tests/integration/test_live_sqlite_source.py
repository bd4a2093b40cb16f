"""A SQLite source that an application keeps writing is read without blocking the route.

An application that owns the SQLite file commits while dpone reads it, and a commit holds the file's lock
for a moment. The Arrow reads' connections (ADBC) did not wait for it: the read failed at once with
"database is locked", inside the guarded target call on ``lazy_plan + direct``, and the route was blocked
with part of the rows in the target (seen: 4 runs in 5 beside a writer committing every 50 ms; 60
partitions ``target_outcome_unknown``, 3,334 of 200,000 rows loaded), and with the checkpoint store kept in
the source file itself. Every source connection now waits for a writer's lock (``BUSY_TIMEOUT_S``). Real
processes: a writer holding the file's lock for 20 ms in every 30 (a rollback-journal file: readers wait for
it), the run through the CLI on chDB, every target value compared with the source.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from airflow_provider_dpone.cli.main import cli
from tests.integration.route_rig import source_rows, target_rows

ROWS = 60_000
WRITER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
db.execute("CREATE TABLE IF NOT EXISTS app_log (t REAL)")
print("writing", flush=True)
while True:
    db.execute("BEGIN EXCLUSIVE")
    db.execute("INSERT INTO app_log VALUES (?)", (time.time(),))
    time.sleep(0.02)
    db.execute("COMMIT")
    time.sleep(0.01)
"""


def test_runs_beside_a_writer_committing_to_the_source_all_land_exactly(tmp_path: Path) -> None:
    """Red without the busy timeout: most runs stopped with source_read_failed after arming (exit 1, the
    route blocked)."""
    for attempt in range(3):
        base = tmp_path / f"run-{attempt}"
        base.mkdir()
        create_demo_source(base / "source.sqlite", ROWS, days=20)
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(base / "source.sqlite")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
            time.sleep(0.2)
            manifest = base / "manifest.yaml"
            manifest.write_text(
                DEMO_MANIFEST, encoding="utf-8"
            )  # the demo route: chDB target, checkpoints in their own file
            result = CliRunner().invoke(cli, ["run", str(manifest)], catch_exceptions=False)
        finally:
            writer.kill()
            writer.wait(timeout=30)
        assert result.exit_code == 0, result.output
        assert target_rows(base) == source_rows(base)
