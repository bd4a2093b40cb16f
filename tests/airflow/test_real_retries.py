"""Real Airflow retries, each in a fresh process, after a try that failed past the target mutation.

What it shows (issue 5, last "Shown by"): Airflow retries a ``NativeTransferOperator`` task whose first try
failed AFTER it had written the target; every retry runs in a new process, re-reads the durable guard and
stops before any target I/O with ``native_transfer_manual_reconciliation_required``; the target holds no
duplicate. The on-call repair then works end to end: ``dpone guard resolve --all-blocked --as committed``
(the CLI, reading the same ``AIRFLOW_CONN_*`` connections, of dpone's own types) and a new DAG run that
succeeds without writing the target again.

Set-up, all real and on loopback: ``airflow api-server --apps execution`` with a private ``AIRFLOW_HOME``
and SQLite metadata database, the LocalExecutor, and ``airflow dags test --use-executor``, which hands
every try to the executor, so each try is a fresh task process (the DAG's operator subclass records its
PID). The route: SQLite demo source -> embedded chDB target, SQLite checkpoint store
(``tests/airflow/retry_dags/``).

The fault belongs to this test alone: a SQLite trigger in the checkpoint database lets the first COMMITTED
row of a run through and aborts the next ones while its fault table holds a row. That is the seed's
partial checkpoint persistence after a successful target mutation; product code has no switch for it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.airflow import retry_rig
from tests.airflow.conftest import AIRFLOW_BIN, airflow_env
from tests.airflow.retry_rig import (
    COUNT_TARGET,
    DAG_RUN_FINISHED,
    DPONE_BIN,
    Finished,
    TaskLog,
    execution_api,
    json_answer,
    read_task_log,
    run_group,
    tail_file,
)

pytestmark = pytest.mark.slow

RETRY_DAGS = Path(__file__).with_name("retry_dags")
DAG_ID = "dpone_real_retries"  # as in retry_dags/dpone_real_retry_dag.py
TASK_ID = "transfer"
TRIES_FILE = "tries.jsonl"
LOGICAL_DATE = "2026-06-01"
ROWS, DAYS = 180, 3
SINK_LOGGER = "airflow_provider_dpone.adapters.clickhouse"
BLOCKED = "native_transfer_manual_reconciliation_required"
REASON = "test_real_retries: demo.orders holds every source row of the blocked days (count == uniqExact(id))"

DAG_TEST_TIMEOUT = 300.0
CLI_TIMEOUT = 120.0

FAULT_SQL = """
CREATE TABLE dpone_test_fault (armed INTEGER NOT NULL);
INSERT INTO dpone_test_fault VALUES (1);
CREATE TRIGGER dpone_test_fault_lose_commit
BEFORE INSERT ON dpone_partition_checkpoints
WHEN NEW.status = 'COMMITTED'
  AND EXISTS (SELECT 1 FROM dpone_test_fault)
  AND (SELECT count(*) FROM dpone_partition_checkpoints
       WHERE status = 'COMMITTED' AND run_id = NEW.run_id) >= 1
BEGIN
  SELECT RAISE(ABORT, 'test fault: the checkpoint write was lost');
END;
"""
REMOVE_FAULT_SQL = "DROP TRIGGER dpone_test_fault_lose_commit; DROP TABLE dpone_test_fault;"


# -- what a run leaves behind --------------------------------------------------------------------------


def task_logs(home: Path, run_id: str) -> dict[int, TaskLog]:
    """``{try_number: log}`` of the task in one DAG run, from AIRFLOW_HOME/logs."""
    found: dict[int, TaskLog] = {}
    for path in (home / "logs").rglob("attempt=*.log"):
        if f"run_id={run_id}" in path.parts and f"task_id={TASK_ID}" in path.parts:
            found[int(path.stem.split("=", 1)[1])] = read_task_log(path)
    return found


def read_tries(dags: Path) -> list[dict[str, Any]]:
    path = dags / TRIES_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class DagRunOutcome:
    finished: Finished
    tries: list[dict[str, Any]]
    logs: dict[int, TaskLog]
    api_log: Path

    @property
    def run_id(self) -> str:
        return str(self.tries[-1]["run_id"])

    def explain(self) -> str:
        logs = "\n".join(log.text(3000) for _, log in sorted(self.logs.items()))
        api = f"--- api-server log {self.api_log}:\n{tail_file(self.api_log, 2000)}"
        return f"{self.finished.tail(3000)}\ntries: {self.tries}\n{logs}\n{api}"


@dataclass
class Scenario:
    root: Path
    manifest: Path
    blocked_run: DagRunOutcome
    counts_after_retries: dict[str, int]
    checkpoints_after_retries: dict[str, Any]
    resolved: dict[str, Any]
    rerun: DagRunOutcome
    counts_after_rerun: dict[str, int]
    checkpoints_after_rerun: dict[str, Any]


# -- the scenario --------------------------------------------------------------------------------------


def _install_fault(state: Path) -> None:
    store = SqlCheckpointStore(f"sqlite:///{state}")
    try:
        store.ensure_schema()  # the product's own tables, so the test's trigger can hang on them
    finally:
        store.close()
    with closing(sqlite3.connect(state)) as conn:
        conn.executescript(FAULT_SQL)


def _remove_fault(state: Path) -> None:
    with closing(sqlite3.connect(state)) as conn:
        conn.executescript(REMOVE_FAULT_SQL)


@pytest.fixture(scope="module")
def scenario(migrated_airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    assert DPONE_BIN.exists(), f"the dpone console script is not installed next to {sys.executable}"
    root = tmp_path_factory.mktemp("real_retries")
    home = root / "airflow_home"
    home.mkdir()
    shutil.copy(migrated_airflow_home / "airflow.db", home / "airflow.db")  # `airflow db migrate`d
    dags = root / "dags"
    shutil.copytree(RETRY_DAGS, dags, ignore=shutil.ignore_patterns("__pycache__", TRIES_FILE))
    manifest = dags / "manifests" / "orders.yaml"
    data = root / "data"
    data.mkdir()
    assert create_demo_source(data / "source.sqlite", ROWS, days=DAYS) == ROWS
    chdb_path = data / "clickhouse"
    state = data / "state.sqlite"
    _install_fault(state)

    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    base_env = airflow_env(
        home,
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_urlsafe(32),
        AIRFLOW_CONN_RETRY_SOURCE=f"sqlite:///{data / 'source.sqlite'}",
        AIRFLOW_CONN_RETRY_TARGET=json.dumps(
            {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(chdb_path)}}
        ),
        AIRFLOW_CONN_RETRY_STATE=json.dumps(
            {"conn_type": "dpone_checkpoints", "extra": {"backend": "sqlite", "path": str(state)}}
        ),
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
    )

    def dag_test(what: str, env: Mapping[str, str], api_log: Path) -> DagRunOutcome:
        before = len(read_tries(dags))
        finished = run_group(
            what,
            [str(AIRFLOW_BIN), "dags", "test", DAG_ID, LOGICAL_DATE, "--use-executor"],
            env,
            root,
            DAG_TEST_TIMEOUT,
        )
        tries = read_tries(dags)[before:]
        outcome = DagRunOutcome(finished, tries, {}, api_log)
        assert tries, f"{what}: the task never ran\n{outcome.explain()}"
        outcome.logs = task_logs(home, str(tries[-1]["run_id"]))
        assert sorted(outcome.logs) == [t["try_number"] for t in tries], (
            f"{what}: expected one task log per try\n{outcome.explain()}"
        )
        return outcome

    def dpone(what: str, *args: str) -> dict[str, Any]:
        return json_answer(run_group(what, [str(DPONE_BIN), *args, "--json"], base_env, root, CLI_TIMEOUT))

    def count_target(what: str) -> dict[str, int]:
        answer = json_answer(
            run_group(what, [sys.executable, "-c", COUNT_TARGET, str(chdb_path)], base_env, root, CLI_TIMEOUT)
        )
        return {"rows": int(answer["rows"]), "distinct_ids": int(answer["distinct_ids"])}

    with execution_api(base_env, root) as (env, api_log):
        blocked_run = dag_test("airflow dags test (fault armed)", env, api_log)
        # every airflow process of that run has exited: the chDB directory and the store are free
        counts_after_retries = count_target("count target after the retries")
        checkpoints_after_retries = dpone("dpone checkpoints", "checkpoints", str(manifest))
        _remove_fault(state)
        resolved = dpone(
            "dpone guard resolve",
            *("guard", "resolve", str(manifest), "--all-blocked", "--as", "committed", "--reason", REASON),
        )
        rerun = dag_test("airflow dags test (after the resolution)", env, api_log)
    counts_after_rerun = count_target("count target after the re-run")
    checkpoints_after_rerun = dpone("dpone checkpoints", "checkpoints", str(manifest))
    yield Scenario(
        root=root,
        manifest=manifest,
        blocked_run=blocked_run,
        counts_after_retries=counts_after_retries,
        checkpoints_after_retries=checkpoints_after_retries,
        resolved=resolved,
        rerun=rerun,
        counts_after_rerun=counts_after_rerun,
        checkpoints_after_rerun=checkpoints_after_rerun,
    )


# -- the behaviours ------------------------------------------------------------------------------------


def test_airflow_runs_every_try_in_a_fresh_process_of_the_same_dag_run(scenario: Scenario) -> None:
    run = scenario.blocked_run
    assert [t["try_number"] for t in run.tries] == [1, 2, 3], run.explain()
    pids = [t["pid"] for t in run.tries]
    assert len(set(pids)) == len(pids), f"tries shared a process: {run.tries}"
    assert os.getpid() not in pids
    assert not any(t["chdb_loaded"] for t in run.tries), f"a try inherited a loaded chDB: {run.tries}"
    assert {t["run_id"] for t in run.tries} == {run.run_id}, "retries share the DAG run's run_id"
    # the DAG run's own final line (printed too when the executor's shutdown stalls and the harness kills it)
    ended = DAG_RUN_FINISHED.search(run.finished.output)
    assert run.finished.returncode != 0 and ended and ended.group(1) == "failed", run.finished.tail()


def test_first_try_fails_after_the_target_mutation(scenario: Scenario) -> None:
    first = scenario.blocked_run.logs[1]
    events = first.events()
    sink_events = first.from_logger(SINK_LOGGER)
    assert sink_events, f"the first try never wrote the target\n{first.text()}"
    failure = next((i for i, e in enumerate(events) if e.startswith("error: checkpoint_store_failed")), None)
    assert failure is not None, f"the first try did not fail on the checkpoint write\n{first.text()}"
    last_sink = max(
        i for i, r in enumerate(first.records) if str(r.get("logger", "")).startswith(SINK_LOGGER)
    )
    assert last_sink < failure, f"the fault must come after the target mutation\n{first.text()}"
    assert first.error_details()["details"]["written"] >= 1, "one COMMITTED row got through, then the loss"


def test_every_retry_stops_before_target_io_with_manual_reconciliation_required(scenario: Scenario) -> None:
    run = scenario.blocked_run
    for try_number in (2, 3):
        log = run.logs[try_number]
        events = log.events()
        assert any(e.startswith(f"error: {BLOCKED}: ") for e in events), log.text()
        assert any("this attempt wrote nothing to the target" in e for e in events), log.text()
        assert log.from_logger(SINK_LOGGER) == [], f"try {try_number} touched the target\n{log.text()}"
        assert log.error_details()["error"] == BLOCKED
        assert not any("retryable: false" in e.lower() for e in events), log.text()


def test_target_holds_no_duplicate_after_the_retries(scenario: Scenario) -> None:
    # the first try loaded every row; had a retry loaded again, ids would repeat
    assert scenario.counts_after_retries == {"rows": ROWS, "distinct_ids": ROWS}


def test_unrecorded_partitions_are_failed_checkpoint_incomplete_and_named_in_the_retry_log(
    scenario: Scenario,
) -> None:
    listing = scenario.checkpoints_after_retries
    entries = listing["partitions"]
    assert len(entries) == DAYS, listing
    blocked = [e for e in entries if e["blocked"]]
    committed = [e for e in entries if not e["blocked"]]
    assert blocked and committed, f"expected a partial commit: {entries}"
    assert {(e["status"], e["guard_phase"]) for e in blocked} == {("FAILED", "checkpoint_incomplete")}
    assert {(e["status"], e["guard_phase"]) for e in committed} == {("COMMITTED", "checkpoint_committed")}
    assert len({e["checkpoint_batch_id"] for e in entries}) == 1, "one target mutation, one batch"
    logged = scenario.blocked_run.logs[3].error_details()["details"]["partitions"]
    assert {p["partition_id"] for p in logged} == {e["partition_id"] for e in blocked}
    assert {p["phase"] for p in logged} == {"checkpoint_incomplete"}


def test_resolution_as_committed_lets_a_new_run_succeed_without_writing_the_target(
    scenario: Scenario,
) -> None:
    blocked = {e["partition_id"] for e in scenario.checkpoints_after_retries["partitions"] if e["blocked"]}
    assert {r["partition_id"] for r in scenario.resolved["resolved"]} == blocked
    assert {r["status"] for r in scenario.resolved["resolved"]} == {"COMMITTED"}

    rerun = scenario.rerun
    assert rerun.finished.returncode == 0, rerun.explain()
    assert [t["try_number"] for t in rerun.tries] == [1], rerun.explain()
    summary = re.compile(rf"^dpone run \S+: 0 partition\(s\) committed, {DAYS} skipped, 0 row\(s\) committed")
    log = rerun.logs[1]
    assert any(summary.match(e) for e in log.events()), log.text()

    assert scenario.counts_after_rerun == {"rows": ROWS, "distinct_ids": ROWS}
    after = scenario.checkpoints_after_rerun
    assert after["summary"]["blocked"] == 0, after
    assert {e["status"] for e in after["partitions"]} == {"COMMITTED"}


# -- what the task logs say (issue 13, point 2) ----------------------------------------------------------

#: Text of the failed checkpoint INSERT that a chained driver error would carry into the traceback.
LEAKS = ("[SQL", "INSERT INTO", "[parameters", "dpone_partition_checkpoints (", "test fault", '"diagnostics"')


def test_no_task_log_shows_sql_bound_values_or_the_driver_message(scenario: Scenario) -> None:
    for try_number, log in scenario.blocked_run.logs.items():
        text = log.path.read_text(errors="replace")
        found = [leak for leak in LEAKS if leak in text]
        assert found == [], f"try {try_number} logs {found}\n{log.text()}"
    first = "\n".join(scenario.blocked_run.logs[1].events())
    assert "Task failed with exception" in first, "the failure itself is still logged"


def test_the_try_that_touched_the_target_says_so_with_the_commands(scenario: Scenario) -> None:
    first = "\n".join(scenario.blocked_run.logs[1].events())
    batch = scenario.checkpoints_after_retries["partitions"][0]["checkpoint_batch_id"]
    assert (
        f"the target may hold rows of batch {batch}; the next try will stop before the target until the "
        "route is resolved" in first
    ), first[-4000:]
    for command in (
        "dpone checkpoints ",
        "dpone guard inspect ",
        "dpone guard resolve ",
        "dpone runbook guard",
    ):
        assert command in first, command
    for later in (2, 3):  # stopped before the target: they never claim to have touched it
        assert "the target may hold rows" not in "\n".join(scenario.blocked_run.logs[later].events())


def test_the_logged_outside_airflow_recipe_works_with_connections_stored_in_airflow(
    scenario: Scenario, tmp_path: Path
) -> None:
    """Run the task log's own ``export AIRFLOW_CONN_*`` lines in a shell where the connections exist only in
    Airflow's metadata database, then a ``dpone`` command from the log: it reads the route's checkpoints."""
    events = scenario.blocked_run.logs[2].events()
    block = next((e for e in events if e.startswith("to run these dpone commands outside Airflow")), None)
    assert block is not None, scenario.blocked_run.logs[2].text()
    exports = [line.strip() for line in block.splitlines() if line.strip().startswith("export AIRFLOW_CONN_")]
    assert len(exports) == 3, block
    home = scenario.root / "airflow_home"
    connections = {
        name.split("AIRFLOW_CONN_", 1)[1].lower(): json.loads(value)
        for name, value in _scenario_connections(scenario).items()
    }
    stored = tmp_path / "connections.json"
    stored.write_text(json.dumps(connections))
    env = airflow_env(home)  # no AIRFLOW_CONN_* at all: only what is stored in the metadata database
    env["PATH"] = os.pathsep.join([str(AIRFLOW_BIN.parent), env.get("PATH", "")])  # `airflow`, as typed
    imported = run_group(
        "airflow connections import",
        [str(AIRFLOW_BIN), "connections", "import", str(stored)],
        env,
        tmp_path,
        120,
    )
    assert imported.returncode == 0, imported.tail()
    script = "set -e\n" + "\n".join(exports) + f"\n{DPONE_BIN} checkpoints {scenario.manifest} --json\n"
    answer = json_answer(run_group("the logged recipe", ["bash", "-c", script], env, tmp_path, 180))
    assert answer["partitions"] == scenario.checkpoints_after_rerun["partitions"]


def _scenario_connections(scenario: Scenario) -> dict[str, str]:
    """The AIRFLOW_CONN_* values the scenario's tasks read (rebuilt from its data folder)."""
    data = scenario.root / "data"
    return {
        "AIRFLOW_CONN_RETRY_SOURCE": json.dumps({"conn_type": "sqlite", "host": str(data / "source.sqlite")}),
        "AIRFLOW_CONN_RETRY_TARGET": json.dumps(
            {
                "conn_type": "dpone_clickhouse",
                "extra": {"interface": "chdb", "path": str(data / "clickhouse")},
            }
        ),
        "AIRFLOW_CONN_RETRY_STATE": json.dumps(
            {
                "conn_type": "dpone_checkpoints",
                "extra": {"backend": "sqlite", "path": str(data / "state.sqlite")},
            }
        ),
    }


def test_a_dags_test_stalled_after_its_dag_run_finished_counts_by_the_printed_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry_rig, "SHUTDOWN_GRACE_S", 0.5)
    stalled = "echo 'DagRun Finished: dag_id=d, state=failed, run_type=manual'; sleep 600"
    started = time.monotonic()

    finished = run_group("stalled", ["bash", "-c", stalled], dict(os.environ), tmp_path, 60)

    assert finished.returncode == 1 and "stalled in executor shutdown" in finished.output
    assert time.monotonic() - started < 20
    plain = run_group("plain", ["bash", "-c", "echo hello; exit 3"], dict(os.environ), tmp_path, 60)
    assert (plain.returncode, plain.output) == (3, "hello\n")
    with pytest.raises(pytest.fail.Exception, match="did not finish within 1s"):
        run_group("hung", ["bash", "-c", "echo no state; sleep 600"], dict(os.environ), tmp_path, 1)
