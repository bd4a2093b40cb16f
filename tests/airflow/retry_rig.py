"""Run Airflow and dpone in fresh process groups for the real-Airflow tests; read their tries' logs."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import AIRFLOW_BIN

DPONE_BIN = Path(sys.executable).parent / "dpone"
DETAILS_PREFIX = "dpone error details: "
API_START_TIMEOUT = 180.0

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


def die_with_the_test() -> None:
    """Child pre-exec (Linux): SIGTERM this process if the test process dies before its teardown ran."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def kill_group(process: subprocess.Popen[Any], grace: float = 15.0) -> None:
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
        preexec_fn=die_with_the_test,
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
                kill_group(process, grace=5.0)
                reader.join(timeout=10)
                output = (
                    "".join(chunks) + f"\n[test] stalled in executor shutdown after state={state}; killed\n"
                )
                return Finished(what, 0 if state == "success" else 1, output)
            if now > deadline:
                kill_group(process, grace=5.0)
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


def tail_file(path: Path, chars: int = 4000) -> str:
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
                preexec_fn=die_with_the_test,
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
            failures.append(f"attempt {attempt} on port {port}: {state}\n{tail_file(log_path)}")
        finally:
            kill_group(server)
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
        return f"--- task log {self.path}:\n" + tail_file(self.path, chars)

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


def json_answer(finished: Finished) -> dict[str, Any]:
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
