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

import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from tests.airflow.conftest import AIRFLOW_BIN, airflow_env

pytestmark = pytest.mark.slow

RETRY_DAGS = Path(__file__).with_name("retry_dags")
DAG_ID = "dpone_real_retries"  # as in retry_dags/dpone_real_retry_dag.py
TASK_ID = "transfer"
TRIES_FILE = "tries.jsonl"
LOGICAL_DATE = "2026-06-01"
ROWS, DAYS = 180, 3
DPONE_BIN = Path(sys.executable).parent / "dpone"
SINK_LOGGER = "airflow_provider_dpone.adapters.clickhouse"
BLOCKED = "native_transfer_manual_reconciliation_required"
DETAILS_PREFIX = "dpone error details: "
REASON = "test_real_retries: demo.orders holds every source row of the blocked days (count == uniqExact(id))"

API_START_TIMEOUT = 180.0
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

# Run in its own interpreter: one chDB path per process, and the pytest process may hold another.
COUNT_TARGET = """
import json, sys
import clickhouse_connect
client = clickhouse_connect.get_client(interface="chdb", path=sys.argv[1])
try:
    rows, ids = client.query("SELECT count(), uniqExact(id) FROM demo.orders").result_rows[0]
finally:
    client.close()
print(json.dumps({"rows": int(rows), "distinct_ids": int(ids)}))
"""


# -- processes -----------------------------------------------------------------------------------------


@dataclass
class Finished:
    what: str
    returncode: int
    output: str

    def tail(self, chars: int = 6000) -> str:
        return f"--- {self.what} (exit {self.returncode}), last output:\n{self.output[-chars:]}"


def _die_with_the_test() -> None:
    """Child pre-exec (Linux): SIGTERM this process if the test process dies before its teardown ran."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _kill_group(process: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """SIGTERM the process group, give it ``grace`` seconds, then SIGKILL whatever is left of the group.

    A group that is gone already is the goal, not an error.
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


#: ``airflow dags test`` prints this once the DAG run's state is final (``state=success`` / ``state=failed``).
DAG_RUN_FINISHED = re.compile(r"DagRun Finished: .*?\bstate=(success|failed)\b")
#: How long ``airflow dags test`` may take to exit after its DAG run finished before it counts as stalled.
SHUTDOWN_GRACE_S = 60.0


def run_group(what: str, args: list[str], env: Mapping[str, str], cwd: Path, timeout: float) -> Finished:
    """Run a command in its own process group; on timeout kill the whole group and fail with its output.

    One Airflow stall is tolerated, and only that one: after the DAG run finished (its final state
    printed), ``LocalExecutor.end()`` sometimes waits forever for an idle worker that never receives its
    shutdown message (seen on a loaded machine; every task had finished). Then the group is killed after
    ``SHUTDOWN_GRACE_S`` and the exit code is the one the printed state gives (0 success, 1 failed).
    """
    process = subprocess.Popen(
        args,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_die_with_the_test,
    )
    chunks: list[str] = []

    def pump(stream: Any) -> None:
        for line in stream:
            chunks.append(line)

    reader = threading.Thread(target=pump, args=(process.stdout,), daemon=True)
    reader.start()
    deadline, finished_at, state, scanned = time.monotonic() + timeout, None, None, 0
    try:
        while process.poll() is None:
            now = time.monotonic()
            while state is None and scanned < len(chunks):
                found = DAG_RUN_FINISHED.search(chunks[scanned])
                scanned += 1
                if found:
                    state, finished_at = found.group(1), now
            if finished_at is not None and now - finished_at > SHUTDOWN_GRACE_S:
                _kill_group(process, grace=5.0)
                reader.join(timeout=10)
                output = (
                    "".join(chunks) + f"\n[test] stalled in executor shutdown after state={state}; killed\n"
                )
                return Finished(what, 0 if state == "success" else 1, output)
            if now > deadline:
                _kill_group(process, grace=5.0)
                reader.join(timeout=10)
                pytest.fail(
                    f"{what} did not finish within {timeout:.0f}s\n{Finished(what, -1, ''.join(chunks)).tail()}"
                )
            time.sleep(0.2)
        reader.join(timeout=30)
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # nothing of its group may outlive it
    return Finished(what, process.returncode, "".join(chunks))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    try:
        with opener.open(url, timeout=3) as response:
            return response.status == 200 and json.loads(response.read()).get("status") == "healthy"
    except (OSError, ValueError):
        return False


def _tail_file(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"<cannot read {path}: {type(exc).__name__}>"


@contextmanager
def execution_api(base_env: Mapping[str, str], log_dir: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """Run ``airflow api-server --apps execution`` on a free loopback port; yield the env that points at
    it and the server's log.

    The server runs in its own process group, killed as a whole on exit whatever happened. A server that
    exits at start (a port lost to a race) is retried on another port.
    """
    failures: list[str] = []
    for attempt in range(1, 4):
        port = _free_port()
        url = f"http://127.0.0.1:{port}/execution/"
        env = {**base_env, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": url}
        log_path = log_dir / f"api-server-{attempt}.log"
        command = [str(AIRFLOW_BIN), "api-server", "--apps", "execution", "-w", "1"]
        command += ["--host", "127.0.0.1", "--port", str(port)]
        with log_path.open("w") as log:
            server = subprocess.Popen(
                command,
                env=env,
                cwd=log_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_the_test,
            )
        try:
            deadline = time.monotonic() + API_START_TIMEOUT
            while time.monotonic() < deadline and server.poll() is None and not _healthy(url + "health"):
                time.sleep(0.5)
            if server.poll() is None and _healthy(url + "health"):
                yield env, log_path
                return
            exited = server.poll() is not None
            state = "exited" if exited else f"not healthy after {API_START_TIMEOUT:.0f}s"
            failures.append(f"attempt {attempt} on port {port}: {state}\n{_tail_file(log_path)}")
        finally:
            _kill_group(server)
        if not exited:
            break  # a slow start is not a lost port race: another port would not help
    pytest.fail("airflow api-server (execution API) did not start:\n" + "\n".join(failures), pytrace=False)


# -- what a run leaves behind --------------------------------------------------------------------------


@dataclass
class TaskLog:
    path: Path
    records: list[dict[str, Any]]

    def events(self) -> list[str]:
        return [str(r.get("event", "")) for r in self.records]

    def text(self, chars: int = 5000) -> str:
        return f"--- task log {self.path}:\n" + _tail_file(self.path, chars)

    def error_details(self) -> dict[str, Any]:
        for event in self.events():
            if event.startswith(DETAILS_PREFIX):
                details: dict[str, Any] = json.loads(event[len(DETAILS_PREFIX) :])
                return details
        raise AssertionError(f"no '{DETAILS_PREFIX}' line\n{self.text()}")

    def from_logger(self, prefix: str) -> list[str]:
        return [str(r.get("event")) for r in self.records if str(r.get("logger", "")).startswith(prefix)]


def read_task_log(path: Path) -> TaskLog:
    records: list[dict[str, Any]] = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        records.append(record if isinstance(record, dict) else {"event": line})
    return TaskLog(path, records)


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
        api = f"--- api-server log {self.api_log}:\n{_tail_file(self.api_log, 2000)}"
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


def _json_answer(finished: Finished) -> dict[str, Any]:
    """The JSON object a command printed (possibly indented over many lines, after other output)."""
    assert finished.returncode == 0, finished.tail()
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^\{", finished.output, flags=re.MULTILINE):
        try:
            answer, _ = decoder.raw_decode(finished.output, match.start())
        except ValueError:
            continue
        if isinstance(answer, dict):
            return answer
    raise AssertionError(f"no JSON answer\n{finished.tail()}")


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
        return _json_answer(run_group(what, [str(DPONE_BIN), *args, "--json"], base_env, root, CLI_TIMEOUT))

    def count_target(what: str) -> dict[str, int]:
        answer = _json_answer(
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
    answer = _json_answer(run_group("the logged recipe", ["bash", "-c", script], env, tmp_path, 180))
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
    monkeypatch.setattr(sys.modules[__name__], "SHUTDOWN_GRACE_S", 0.5)
    stalled = "echo 'DagRun Finished: dag_id=d, state=failed, run_type=manual'; sleep 600"
    started = time.monotonic()

    finished = run_group("stalled", ["bash", "-c", stalled], dict(os.environ), tmp_path, 60)

    assert finished.returncode == 1 and "stalled in executor shutdown" in finished.output
    assert time.monotonic() - started < 20
    plain = run_group("plain", ["bash", "-c", "echo hello; exit 3"], dict(os.environ), tmp_path, 60)
    assert (plain.returncode, plain.output) == (3, "hello\n")
    with pytest.raises(pytest.fail.Exception, match="did not finish within 1s"):
        run_group("hung", ["bash", "-c", "echo no state; sleep 600"], dict(os.environ), tmp_path, 1)
