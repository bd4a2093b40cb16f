"""A task that Airflow stops actually stops (issue 13, point 1), under a real scheduler-less executor run.

What Airflow 3 does (``airflow/sdk/execution_time``): on "mark failed" the supervisor's heartbeat gets a
409 and sends the task process SIGTERM, then SIGKILL five seconds later; the task process's SIGTERM handler
calls ``on_kill()`` in its main thread and returns, so ``execute`` carries on unless the operator stops it.
This test sends that SIGTERM itself, to the task process of a real ``airflow dags test --use-executor``
run (LocalExecutor, a fresh task process per try), while the transfer runs:

- during extraction (``file_artifact``): the partitions become FAILED/failed_before_target, the route
  stays clear, the target holds no row;
- inside the target call (``lazy_plan`` direct load, after the batch was armed): the partitions become
  FAILED/target_outcome_unknown, the route is blocked, the target holds at most the rows of the blocked
  partitions and no duplicate, and the task log says so with the commands.

In both, the task process is gone within Airflow's five-second SIGKILL escalation and leaves no process
behind. Without ``on_kill`` the transfer runs to the end (every partition COMMITTED), which fails here.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.airflow.conftest import AIRFLOW_BIN, airflow_env
from tests.airflow.retry_rig import (
    COUNT_TARGET,
    DPONE_BIN,
    TaskLog,
    die_with_the_test,
    execution_api,
    json_answer,
    kill_group,
    read_task_log,
    run_group,
)

pytestmark = pytest.mark.slow

DAGS = Path(__file__).with_name("on_kill_dags")
ROWS, DAYS = 900_000, 3  # a few seconds of transfer even when the sink is fast
#: Airflow's supervisor escalates SIGTERM to SIGKILL after this long (``kill(escalation_delay=5.0)``).
ESCALATION_S = 5.0
RUN_TIMEOUT = 120.0


@dataclass
class Stopped:
    dag_id: str
    pid: int
    signalled_at_stage: str
    exit_seconds: float
    finished: Any
    log: TaskLog
    #: descendants the task process had while it was stopped that are still alive afterwards
    leftover: list[int]


def _state_rows(state: Path, run_id: str) -> list[tuple[str, str]]:
    """(status, guard phase) of every checkpoint row of ``run_id`` so far (read-only)."""
    if not state.exists():
        return []
    with closing(sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=1)) as conn:
        try:
            rows = conn.execute(
                "SELECT payload FROM dpone_partition_checkpoints WHERE run_id = ?", (run_id,)
            ).fetchall()
        except sqlite3.OperationalError:
            return []
    out = []
    for (payload,) in rows:
        data = json.loads(payload)
        guard = (data.get("diagnostics") or {}).get("target_commit_guard") or {}
        out.append((str(data["status"]), str(guard.get("phase"))))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie counts as gone: it runs nothing
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for_the_dag_run(process: subprocess.Popen[str], out_path: Path, deadline: float) -> None:
    """Wait for ``airflow dags test`` to exit. Seen here: after a run whose task was SIGTERMed, its
    LocalExecutor sometimes never finishes shutting down ("waiting for running tasks to finish") although
    the run and its task are over; 20 s after "DagRun Finished" the caller kills its process group."""
    finished_at: float | None = None
    while process.poll() is None and time.monotonic() < deadline:
        if finished_at is None and "DagRun Finished" in out_path.read_text(errors="replace"):
            finished_at = time.monotonic()
        if finished_at is not None and time.monotonic() - finished_at > 20:
            return
        time.sleep(0.2)


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` in the parent tree right now."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _stop_while_running(
    dag_id: str, when: str, env: Mapping[str, str], root: Path, dags: Path, home: Path, state: Path, date: str
) -> Stopped:
    """Start a DAG run, SIGTERM its task process once ``when`` is seen: "extracting" (an artifact file being
    written: the export runs before any checkpoint when its reads prove the values), or "armed" (durable)."""
    tries = dags / "tries.jsonl"
    before = len(tries.read_text().splitlines()) if tries.exists() else 0
    out_path = root / f"{dag_id}.out"
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [str(AIRFLOW_BIN), "dags", "test", dag_id, date, "--use-executor"],
            env=dict(env),
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_the_test,
        )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        record: dict[str, Any] | None = None
        while record is None and time.monotonic() < deadline and process.poll() is None:
            lines = tries.read_text().splitlines()[before:] if tries.exists() else []
            record = json.loads(lines[0]) if lines else None
            time.sleep(0.05)
        assert record is not None, "the task never started"
        pid, run_id = int(record["pid"]), str(record["run_id"])
        artifacts = Path(env["TMPDIR"])
        while time.monotonic() < deadline and process.poll() is None:
            statuses = {s for s, _ in _state_rows(state, run_id)}
            if when == "armed" and "EXPORTED" in statuses:
                break
            if when == "extracting" and any(artifacts.glob("dpone-artifacts-*/*.arrows*")):
                break
            time.sleep(0.02)
        statuses = {s for s, _ in _state_rows(state, run_id)}
        seen = (
            "EXPORTED" in statuses if when == "armed" else any(artifacts.glob("dpone-artifacts-*/*.arrows*"))
        )
        assert seen and "COMMITTED" not in statuses, f"too late to stop it: {statuses}"
        assert when == "armed" or "EXPORTED" not in statuses, f"extraction was over: {statuses}"
        time.sleep(0.3)  # well inside extraction / the target call
        descendants = _descendants(pid)
        signalled = time.monotonic()
        os.kill(pid, signal.SIGTERM)  # what the supervisor sends on "mark failed"
        while _alive(pid) and time.monotonic() < signalled + 30:
            descendants |= _descendants(pid)
            time.sleep(0.02)
        exit_seconds = time.monotonic() - signalled
        _wait_for_the_dag_run(process, out_path, deadline)
    finally:
        kill_group(process, grace=5.0)
    output = out_path.read_text(errors="replace")
    logs = [p for p in (home / "logs").rglob("attempt=1.log") if f"dag_id={dag_id}" in p.parts]
    assert len(logs) == 1, f"expected one task log of {dag_id}: {logs}\n{output[-3000:]}"
    leftover = sorted(p for p in descendants if _alive(p))
    return Stopped(dag_id, pid, when, exit_seconds, output, read_task_log(logs[0]), leftover)


@dataclass
class TimedOut:
    pid: int
    finished: Any
    log: TaskLog
    checkpoints: dict[str, Any]


def _time_out(env: Mapping[str, str], root: Path, dags: Path, home: Path, date: str) -> TimedOut:
    """Run the DAG whose task has a 3 s execution_timeout, to its end."""
    dag_id = "dpone_on_kill_timeout"
    tries = dags / "tries.jsonl"
    before = len(tries.read_text().splitlines()) if tries.exists() else 0
    out_path = root / f"{dag_id}.out"
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [str(AIRFLOW_BIN), "dags", "test", dag_id, date, "--use-executor"],
            env=dict(env),
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_the_test,
        )
    try:
        _wait_for_the_dag_run(process, out_path, time.monotonic() + RUN_TIMEOUT)
    finally:
        kill_group(process, grace=5.0)
    finished = out_path.read_text(errors="replace")
    record = json.loads(tries.read_text().splitlines()[before])
    logs = [p for p in (home / "logs").rglob("attempt=1.log") if f"dag_id={dag_id}" in p.parts]
    assert len(logs) == 1, finished[-3000:]
    return TimedOut(int(record["pid"]), finished, read_task_log(logs[0]), {})


@dataclass
class Scenario:
    timed_out: TimedOut
    before_target: Stopped
    checkpoints_after_extract: dict[str, Any]
    in_target: Stopped
    checkpoints_after_target: dict[str, Any]
    counts: dict[str, int]
    leftover: list[int]


@pytest.fixture(scope="module")
def scenario(migrated_airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("on_kill")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")
    dags = root / "dags"
    shutil.copytree(DAGS, dags, ignore=shutil.ignore_patterns("__pycache__", "tries.jsonl"))
    data = root / "data"
    data.mkdir()
    assert create_demo_source(data / "source.sqlite", ROWS, days=DAYS) == ROWS
    chdb_path, state = data / "clickhouse", data / "state.sqlite"
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    scratch = root / "tmp"  # the task's temporary files: the export's artifact directory shows up here
    scratch.mkdir()
    base_env = airflow_env(
        home,
        TMPDIR=str(scratch),
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_urlsafe(32),
        AIRFLOW_CONN_KILL_SOURCE=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_KILL_TARGET=json.dumps(
            {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(chdb_path)}}
        ),
        AIRFLOW_CONN_KILL_STATE=json.dumps(
            {"conn_type": "dpone_checkpoints", "extra": {"backend": "sqlite", "path": str(state)}}
        ),
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
    )
    manifest = dags / "manifests" / "lazy_direct.yaml"
    timeout_manifest = dags / "manifests" / "timeout_direct.yaml"

    def dpone(what: str, *args: str) -> dict[str, Any]:
        return json_answer(run_group(what, [str(DPONE_BIN), *args, "--json"], base_env, root, 120))

    with execution_api(base_env, root) as (env, _api_log):
        before = _stop_while_running(
            "dpone_on_kill_extract", "extracting", env, root, dags, home, state, "2026-06-01"
        )
        after_extract = dpone("dpone checkpoints", "checkpoints", str(manifest))
        timed_out = _time_out(env, root, dags, home, "2026-06-03")
        timed_out.checkpoints = dpone("dpone checkpoints", "checkpoints", str(timeout_manifest))
        in_target = _stop_while_running(
            "dpone_on_kill_target", "armed", env, root, dags, home, state, "2026-06-02"
        )
        leftover = in_target.leftover + before.leftover
    after_target = dpone("dpone checkpoints", "checkpoints", str(manifest))
    counts = json_answer(
        run_group("count target", [sys.executable, "-c", COUNT_TARGET, str(chdb_path)], base_env, root, 120)
    )
    yield Scenario(timed_out, before, after_extract, in_target, after_target, counts, leftover)


def _phases(listing: dict[str, Any]) -> set[tuple[str, str | None]]:
    return {(e["status"], e["guard_phase"]) for e in listing["partitions"]}


def test_a_stop_during_extraction_records_failed_before_target_and_leaves_the_route_clear(
    scenario: Scenario,
) -> None:
    listing = scenario.checkpoints_after_extract
    assert _phases(listing) == {("FAILED", "failed_before_target")}, listing
    assert listing["summary"]["blocked"] == 0, listing


def test_a_stop_inside_the_target_call_blocks_the_route_with_target_outcome_unknown(
    scenario: Scenario,
) -> None:
    listing = scenario.checkpoints_after_target
    assert _phases(listing) == {("FAILED", "target_outcome_unknown")}, listing
    assert listing["summary"]["blocked"] == DAYS, listing
    # at most what a resolve accounts for (the rows of the blocked partitions), never a duplicate
    rows, distinct = scenario.counts["rows"], scenario.counts["distinct_ids"]
    assert rows == distinct and rows < ROWS, scenario.counts


def test_the_task_process_is_gone_before_airflow_would_sigkill_it_and_leaves_nothing_behind(
    scenario: Scenario,
) -> None:
    for stopped in (scenario.before_target, scenario.in_target):
        assert not _alive(stopped.pid), stopped.dag_id
        assert stopped.exit_seconds < ESCALATION_S, (stopped.dag_id, stopped.exit_seconds, stopped.log.text())
    assert scenario.leftover == [], "a process of a stopped task outlived it"


def test_the_task_log_of_the_stopped_try_says_what_the_next_try_will_do(scenario: Scenario) -> None:
    events = scenario.in_target.log.events()
    text = "\n".join(events)
    assert "error: transfer_interrupted: the task was stopped" in text, scenario.in_target.log.text()
    batch = scenario.checkpoints_after_target["partitions"][0]["checkpoint_batch_id"]
    assert f"the target may hold rows of batch {batch}; the next try will stop before the target" in text
    assert "dpone guard resolve" in text and "dpone runbook guard" in text
    assert "airflow connections get kill_target -o json" in text
    before = "\n".join(scenario.before_target.log.events())
    assert "error: transfer_interrupted" in before
    assert "the target may hold rows" not in before, "extraction never touched the target"


def test_a_timeout_raised_inside_execute_first_then_on_kill_leaves_the_truth_in_the_guard(
    scenario: Scenario,
) -> None:
    """The other order: ``AirflowTaskTimeout`` leaves ``execute`` (from wherever it landed), then Airflow
    calls ``on_kill``. The lifecycle records where it landed; nothing is committed."""
    timed = scenario.timed_out
    text = timed.log.path.read_text(errors="replace")
    assert "AirflowTaskTimeout" in text, timed.log.text()
    phases = _phases(timed.checkpoints)
    touched = "the target may hold rows of batch" in text
    if touched:
        assert phases <= {("FAILED", "target_outcome_unknown"), ("EXPORTED", "armed")}, phases
        assert timed.checkpoints["summary"]["blocked"] == DAYS
    else:  # before the target call, or before the first checkpoint was written
        assert phases <= {("FAILED", "failed_before_target"), ("PLANNED", None)}, phases
        assert timed.checkpoints["summary"]["blocked"] == 0
    assert not _alive(timed.pid)
