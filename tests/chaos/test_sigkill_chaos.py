"""SIGKILL a real `dpone run` at random moments, then run again: the target never holds a duplicate.

Real components: a SQLite source, an embedded chDB target and a SQLite checkpoint store, each trial in
its own directory. Kill moments are spread over the whole run as measured on a calibration run, so they
land before arming, inside the target call, and just after it (during promotion). Every trial must end
complete (exit 0, target == source) or blocked (exit 3); a blocked route stays blocked without changing
the target until an operator resolves it with `dpone guard resolve`, after which it completes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.cli.demo_cmd import DEMO_MANIFEST
from tests.chaos.checkpoint_phases import guard_phases

pytestmark = pytest.mark.slow

DPONE = str(Path(sys.executable).with_name("dpone"))
ROWS = 20_000
TRIALS = int(os.environ.get("DPONE_CHAOS_TRIALS", "8"))
#: Stop starting new trials after this many seconds (CI stays bounded on a busy 2-core machine).
BUDGET_S = float(os.environ.get("DPONE_CHAOS_BUDGET_S", "150"))
MIN_TRIALS = 4
STAGED_TRIALS = int(os.environ.get("DPONE_CHAOS_STAGED_TRIALS", "5"))


def dpone(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DPONE, *args], capture_output=True, text=True, timeout=timeout, check=False)


def target_counts(chdb_path: Path) -> tuple[int, int]:
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path))
    try:
        if not client.command("EXISTS TABLE demo.orders"):
            return 0, 0
        count, unique = client.query("SELECT count(), uniqExact(id) FROM demo.orders").result_rows[0]
        return int(count), int(unique)
    finally:
        client.close()


def leftover_staging(chdb_path: Path) -> list[str]:
    """Staging tables still in the target's database (each attempt of a route reuses one name)."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path))
    try:
        rows = client.query(
            "SELECT name FROM system.tables WHERE database = 'demo' AND startsWith(name, '_dpone_stage_')"
        ).result_rows
        return [str(r[0]) for r in rows]
    finally:
        client.close()


def delete_partial_rows(chdb_path: Path, lower: str, upper: str) -> None:
    import clickhouse_connect

    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path))
    try:
        client.command(
            f"ALTER TABLE demo.orders DELETE WHERE order_date >= toDate('{lower}') AND order_date < toDate('{upper}')",
            settings={"mutations_sync": 2},
        )
    finally:
        client.close()


@pytest.fixture(scope="module")
def source_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("chaos-source") / "source.sqlite"
    create_demo_source(path, ROWS, days=40)
    return path


def make_trial(base: Path, source_file: Path, load: str = "direct") -> Path:
    base.mkdir(parents=True)
    shutil.copy(source_file, base / "source.sqlite")
    manifest = base / "manifest.yaml"
    text = DEMO_MANIFEST.replace("chunk_rows: 50000", "chunk_rows: 500").replace(
        "load: direct", f"load: {load}"
    )
    assert f"load: {load}" in text
    manifest.write_text(text, encoding="utf-8")
    return manifest


def operator_resolves(manifest: Path, chdb_path: Path) -> None:
    """What the runbook tells an on-call operator to do, driven by `dpone guard inspect`."""
    inspected = dpone("guard", "inspect", str(manifest), "--json")
    assert inspected.returncode == 0, inspected.stderr
    blocked = json.loads(inspected.stdout)["blocked"]
    assert blocked
    history = json.loads(dpone("checkpoints", str(manifest), "--json").stdout)
    bounds = {row["partition_id"]: row for row in history["partitions"]}
    verdicts: dict[str, list[str]] = {"committed": [], "not-applied": []}
    for row in blocked:
        if row["target_rows"] == row["source_rows"]:
            verdicts["committed"].append(row["partition_id"])
            continue
        if row["target_rows"]:
            b = bounds[row["partition_id"]]["bounds_detail"]
            delete_partial_rows(chdb_path, b["lower"], b["upper"])
        verdicts["not-applied"].append(row["partition_id"])
    for verdict, partition_ids in verdicts.items():
        if not partition_ids:
            continue
        flags = [arg for pid in partition_ids for arg in ("--partition", pid)]
        done = dpone(
            "guard", "resolve", str(manifest), *flags, "--as", verdict, "--reason", "chaos test: counted rows"
        )
        assert done.returncode == 0, done.stderr


def wait_for_phase(state: Path, phase: str, proc: subprocess.Popen[bytes], limit: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit and proc.poll() is None:
        if phase in guard_phases(state):
            return time.monotonic()
        time.sleep(0.01)
    return time.monotonic()


def test_sigkill_at_random_moments_never_duplicates_and_ends_complete_or_blocked(
    tmp_path: Path, source_file: Path
) -> None:
    outcomes = kill_at_random_moments(tmp_path, source_file, "direct", TRIALS, BUDGET_S)
    assert "blocked-then-resolved" in outcomes, "no kill landed inside the guarded window; widen the delays"


def test_sigkill_around_a_staged_publish_never_duplicates_and_ends_complete_or_blocked(
    tmp_path: Path, source_file: Path
) -> None:
    """The staged publish attaches the staging table's parts (ADR 0076) in milliseconds: killed while
    staging, inside the publish or just after it, the target holds each row at most once, a retry ends
    complete or blocked, and a blocked route completes once resolved. (Eight trials here: four killed
    inside the publish and ended blocked, then resolved; three complete; one finished first.)"""
    outcomes = kill_at_random_moments(tmp_path, source_file, "staged", STAGED_TRIALS, BUDGET_S / 3)
    assert set(outcomes) & {"blocked-then-resolved", "complete"}, "no trial was killed"


def kill_at_random_moments(
    tmp_path: Path, source_file: Path, load: str, trials: int, budget_s: float
) -> list[str]:
    """Trials of one load path; returns each trial's outcome (asserting every invariant on the way)."""
    calibration = make_trial(tmp_path / "calibration", source_file, load)
    proc = subprocess.Popen(
        [DPONE, "run", str(calibration), "--run-id", "calibration"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    armed_at = wait_for_phase(calibration.parent / "state.sqlite", "armed", proc)
    committed_at = wait_for_phase(calibration.parent / "state.sqlite", "checkpoint_committed", proc)
    assert proc.wait(timeout=120) == 0
    measured_window = committed_at - armed_at
    # a direct load's target call takes most of a second; a staged publish attaches parts in milliseconds
    target_window = max(measured_window, 0.2 if load == "direct" else 0.005)
    assert target_counts(calibration.parent / "clickhouse") == (ROWS, ROWS)

    rng = random.Random(20261202)
    outcomes: list[str] = []
    budget_start = time.monotonic()
    for trial in range(trials):
        if trial >= MIN_TRIALS and time.monotonic() - budget_start > budget_s:
            break
        manifest = make_trial(tmp_path / f"trial-{trial}", source_file, load)
        chdb_path = manifest.parent / "clickhouse"
        proc = subprocess.Popen(
            [DPONE, "run", str(manifest), "--run-id", f"trial-{trial}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if trial % 4 == 0:
            time.sleep(rng.uniform(0.2, 2.0))  # anywhere: start-up, planning, before arming
        else:
            # from the moment the armed batch is durable: inside the target call and just after it
            wait_for_phase(manifest.parent / "state.sqlite", "armed", proc)
            time.sleep(rng.uniform(0.0, 1.3) * target_window)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)

        count, unique = target_counts(chdb_path)
        assert count == unique, f"trial {trial}: duplicate rows after the kill"

        # a new run ID, as a re-run from the command line or a new DAG run gets (an Airflow retry keeps it)
        again = dpone("run", str(manifest), "--run-id", f"trial-{trial}-again")
        assert again.returncode in (0, 3), f"trial {trial}: exit {again.returncode}: {again.stderr[-500:]}"
        count, unique = target_counts(chdb_path)
        assert count == unique, f"trial {trial}: duplicate rows after the re-run"
        if again.returncode == 0:
            assert count == ROWS
            assert leftover_staging(chdb_path) == [], (
                f"trial {trial}: a killed attempt's staging table is left"
            )
            outcomes.append("complete" if killed else "finished-before-kill")
            continue

        assert "native_transfer_manual_reconciliation_required" in again.stderr
        blocked_count = count
        still = dpone("run", str(manifest), "--run-id", f"trial-{trial}-retry")
        assert still.returncode == 3
        assert target_counts(chdb_path) == (blocked_count, blocked_count), (
            "a blocked retry changed the target"
        )

        operator_resolves(manifest, chdb_path)
        final = dpone("run", str(manifest))
        assert final.returncode == 0, final.stderr
        assert target_counts(chdb_path) == (ROWS, ROWS)
        assert leftover_staging(chdb_path) == [], f"trial {trial}: a killed attempt's staging table is left"
        outcomes.append("blocked-then-resolved")

    print(
        f"chaos outcomes ({load}):", {o: outcomes.count(o) for o in set(outcomes)}, "window", measured_window
    )
    return outcomes
