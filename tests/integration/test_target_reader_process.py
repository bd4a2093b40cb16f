"""The supervised reader on real processes: budget, frame rejection, group kill and reaping, secrets.

Misbehaving workers are a test-only module (``target_reader_fake_worker``) the supervisor is pointed at;
the black-hole and refused-port cases run the real worker against real loopback sockets.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.target_reader import WORKER_MODULE, SupervisedTargetReader
from airflow_provider_dpone.adapters.target_reader.supervisor import child_environment
from airflow_provider_dpone.contracts.capsule import RESPONSE_FRAME_MAX_BYTES
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import (
    SHUTDOWN_BOUND_S,
    GenerationSelector,
    LoadIdSelector,
    ObservationMetric,
    ReaderOutcome,
    ReaderOutcomeKind,
    ReaderReason,
    TargetReadRequest,
)
from tests.integration.target_reader_rig import assert_worker_gone, http_endpoint, plan_for

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_WORKER = "tests.integration.target_reader_fake_worker"
#: Slack for scheduling on a loaded 2-core CI machine, on top of budget + shutdown bound.
SLACK_S = 1.0


def fake_reader() -> SupervisedTargetReader:
    return SupervisedTargetReader(worker_module=FAKE_WORKER, worker_path=(str(REPO_ROOT),))


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_preflight_spawns_kills_and_reaps_a_real_worker() -> None:
    SupervisedTargetReader().prove_spawn_capability()


def test_preflight_fails_closed_when_the_worker_cannot_start() -> None:
    reader = SupervisedTargetReader(
        worker_module="tests.integration.no_such_worker", worker_path=(str(REPO_ROOT),)
    )
    with pytest.raises(DponeError) as raised:
        reader.prove_spawn_capability()
    assert raised.value.code is ErrorCode.TARGET_READER_UNSUPPORTED


def test_black_hole_endpoint_times_out_within_budget_and_the_group_is_gone(black_hole: int) -> None:
    budget = 2.0
    started = time.monotonic()
    outcome = SupervisedTargetReader().observe(http_endpoint(black_hole), plan_for("x", "db.t"), budget)
    took = time.monotonic() - started
    assert outcome.kind is ReaderOutcomeKind.TIMEOUT
    assert outcome.reason is ReaderReason.BUDGET_EXHAUSTED
    assert outcome.observation is None
    assert budget <= took < budget + SHUTDOWN_BOUND_S + SLACK_S
    assert took < budget + SLACK_S  # in practice the kill and reap take milliseconds
    assert_worker_gone(outcome)


def test_refused_connection_is_a_worker_failure_not_a_hang(closed_port: int) -> None:
    outcome = SupervisedTargetReader().observe(http_endpoint(closed_port), plan_for("x", "db.t"), 20.0)
    assert outcome.kind is ReaderOutcomeKind.WORKER_FAILED
    assert outcome.reason is ReaderReason.CONNECT_FAILED
    assert outcome.elapsed_seconds < 10
    assert_worker_gone(outcome)


def test_budget_covers_worker_start_up() -> None:
    outcome = fake_reader().observe(http_endpoint(9), plan_for("honest"), 0.05)
    assert outcome.kind is ReaderOutcomeKind.TIMEOUT
    assert outcome.elapsed_seconds < 0.05 + SLACK_S
    assert_worker_gone(outcome)


def test_honest_fake_worker_completes_with_its_observation() -> None:
    request = plan_for("honest")
    outcome = fake_reader().observe(http_endpoint(9), request, 20.0)
    assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
    assert outcome.observation is not None
    outcome.observation.check_answers(request)
    assert outcome.observation.value_of(ObservationMetric.NULL_COUNT, "b") == 7
    assert_worker_gone(outcome)


@pytest.mark.parametrize(
    ("behaviour", "kind", "reason"),
    [
        ("malformed", ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_MALFORMED),
        ("duplicate_key", ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_MALFORMED),
        ("doubled", ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_DOUBLED),
        ("trailing_byte", ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_DOUBLED),
        ("wrong_nonce", ReaderOutcomeKind.REJECTED, ReaderReason.NONCE_MISMATCH),
        ("plan_mismatch", ReaderOutcomeKind.REJECTED, ReaderReason.PLAN_MISMATCH),
        ("exit_nonzero", ReaderOutcomeKind.REJECTED, ReaderReason.UNCLEAN_EXIT),
        ("oversized", ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_OVERSIZED),
        ("silent_exit", ReaderOutcomeKind.WORKER_FAILED, ReaderReason.NO_FRAME),
    ],
)
def test_misbehaving_worker_frames_are_rejected(
    behaviour: str, kind: ReaderOutcomeKind, reason: ReaderReason
) -> None:
    outcome = fake_reader().observe(http_endpoint(9), plan_for(behaviour), 20.0)
    assert (outcome.kind, outcome.reason) == (kind, reason)
    assert outcome.observation is None
    assert outcome.elapsed_seconds < 10  # rejected on sight, not at the end of the budget
    assert_worker_gone(outcome)


@pytest.mark.parametrize("behaviour", ["late", "frame_then_hang"])
def test_late_or_unfinished_answers_time_out(behaviour: str) -> None:
    budget = 1.5
    outcome = fake_reader().observe(http_endpoint(9), plan_for(behaviour), budget)
    assert outcome.kind is ReaderOutcomeKind.TIMEOUT
    assert outcome.observation is None
    assert outcome.elapsed_seconds < budget + SHUTDOWN_BOUND_S + SLACK_S
    assert_worker_gone(outcome)


def test_timeout_kills_the_whole_process_group_including_grandchildren() -> None:
    budget = 1.5
    outcome = fake_reader().observe(http_endpoint(9), plan_for("hang_with_grandchild"), budget)
    assert outcome.kind is ReaderOutcomeKind.TIMEOUT
    assert outcome.elapsed_seconds < budget + SHUTDOWN_BOUND_S + SLACK_S
    assert_worker_gone(outcome)  # killpg(pgid, 0) fails only when the grandchild is gone too


def _escapees() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"dpone-setsid-escapee" in (entry / "cmdline").read_bytes():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_descendant_that_left_the_group_with_setsid_is_killed_before_termination_counts_verified() -> None:
    assert _escapees() == []
    try:
        outcome = fake_reader().observe(http_endpoint(9), plan_for("setsid_escapee"), 20.0)
        assert outcome.kind is ReaderOutcomeKind.COMPLETE, outcome.reason
        assert_worker_gone(outcome)
        deadline = time.monotonic() + 2
        while _escapees() and time.monotonic() < deadline:
            time.sleep(0.01)  # SIGKILLed by the supervisor; its new parent (init) reaps it
        assert _escapees() == [], "a setsid descendant outlived a termination counted as verified"
    finally:
        for pid in _escapees():
            os.kill(pid, 9)


def test_credentials_reach_the_worker_only_through_its_stdin(
    black_hole: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("DPONE_TEST_SECRET_TOKEN", secret)
    monkeypatch.setenv("AIRFLOW_CONN_TARGET", f"clickhouse://reader:{secret}@127.0.0.1:{black_hole}")
    monkeypatch.setenv("LC_DPONE_PROBE", "visible")
    outcome_box: list[ReaderOutcome] = []
    thread = threading.Thread(
        target=lambda: outcome_box.append(
            SupervisedTargetReader().observe(http_endpoint(black_hole, secret), plan_for("x", "db.t"), 3.0)
        )
    )
    thread.start()
    try:
        pid, cmdline, environ = _find_worker(timeout_s=2.5)
    finally:
        thread.join(10)
    assert WORKER_MODULE.encode() in cmdline
    assert b"LC_DPONE_PROBE=visible" in environ  # we really read the worker's environment
    for blob in (cmdline, environ):
        assert secret.encode() not in blob
        assert b"DPONE_TEST_SECRET_TOKEN" not in blob
        assert b"AIRFLOW_CONN_TARGET" not in blob
    assert outcome_box and outcome_box[0].worker_pid == pid
    assert_worker_gone(outcome_box[0])


def _find_worker(timeout_s: float) -> tuple[int, bytes, bytes]:
    """The child of this process running the worker module, with its cmdline and environ."""
    deadline = time.monotonic() + timeout_s
    me = os.getpid()
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid != me:
                    continue
                cmdline = (entry / "cmdline").read_bytes()
                if WORKER_MODULE.encode() not in cmdline:
                    continue
                return int(entry.name), cmdline, (entry / "environ").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.01)
    raise AssertionError("the worker process was not found")


def test_child_environment_is_an_allow_list_without_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "pw")
    monkeypatch.setenv("MY_API_KEY", "k")
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql://u:p@h/db")
    monkeypatch.setenv("RANDOM_APP_SETTING", "x")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("TMPDIR", "/tmp/with-secret-inside")
    env = child_environment(secrets=["secret-inside"])
    assert env["PATH"] == "/usr/bin:/bin"
    for name in (
        "PGPASSWORD",
        "MY_API_KEY",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
        "RANDOM_APP_SETTING",
        "TMPDIR",
    ):
        assert name not in env
    assert str(REPO_ROOT) in env["PYTHONPATH"].split(os.pathsep)


def test_non_clickhouse_endpoint_is_refused_before_any_process_starts() -> None:
    endpoint = EndpointDescriptor(name="pg", kind=EndpointKind.POSTGRES, host="127.0.0.1", port=5432)
    with pytest.raises(DponeError) as raised:
        SupervisedTargetReader(worker_module="tests.integration.no_such_worker").observe(
            endpoint, plan_for("honest"), 5.0
        )
    assert raised.value.code is ErrorCode.CONNECTION_INVALID


def test_plan_whose_worst_case_answer_exceeds_the_frame_limit_is_refused_before_spawning() -> None:
    columns = tuple(f"c{i:03d}_" + "x" * 120 for i in range(256))
    request = TargetReadRequest(
        target_table="db.t",
        selector=GenerationSelector(load_id=LoadIdSelector(column="load_id", value="honest")),
        columns=columns,
        metrics=(ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT),
    )
    with pytest.raises(DponeError) as raised:
        SupervisedTargetReader(worker_module="tests.integration.no_such_worker").observe(
            http_endpoint(9), request, 5.0
        )
    assert raised.value.code is ErrorCode.CAPSULE_CAPACITY_EXCEEDED
    assert raised.value.details["worst_case_bytes"] > RESPONSE_FRAME_MAX_BYTES


@pytest.fixture
def dripping_server() -> Iterator[int]:
    """A loopback HTTP 'server' that answers one byte every 0.5 s, forever: socket timeouts never fire."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 100_000:
                    if stop.is_set():
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(0.5)
            except OSError:
                return

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(2)
        server.close()


def _request_bytes(port: int, budget_ms: int) -> bytes:
    from airflow_provider_dpone.adapters.target_reader.protocol import (
        EndpointFrame,
        WorkerRequestFrame,
        new_nonce,
    )

    return WorkerRequestFrame(
        mode="observe",
        nonce=new_nonce(),
        budget_ms=budget_ms,
        endpoint=EndpointFrame.of(http_endpoint(port), resolved_path=None),
        request=plan_for("x", "db.t"),
    ).encode()


def test_worker_ends_itself_at_its_own_deadline_against_a_dripping_server(dripping_server: int) -> None:
    """No supervisor kills it here: the worker's own setitimer deadline must end it."""
    import subprocess
    import sys

    worker = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_environment(),
        start_new_session=True,
    )
    try:
        assert worker.stdin is not None
        started = time.monotonic()
        worker.stdin.write(_request_bytes(dripping_server, 1500))
        worker.stdin.close()
        code = worker.wait(timeout=15)
        took = time.monotonic() - started
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, 9)
            worker.wait()
    assert code == 124  # EXIT_DEADLINE: it ended itself, it was not killed
    assert took < 1.5 + SLACK_S + 1.0  # interpreter start-up happens before its clock starts
    assert worker.stdout is not None and worker.stdout.read() == b""  # no frame after the deadline


def test_worker_dies_with_its_parent_even_with_budget_left(black_hole: int) -> None:
    """SIGKILL of the supervising process: the worker must not live out its budget (parent-death signal)."""
    import subprocess
    import sys

    parent_code = (
        "import sys\n"
        "from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader\n"
        "from tests.integration.test_target_reader_process import http_endpoint, plan_for\n"
        f"SupervisedTargetReader().observe(http_endpoint({black_hole}), plan_for('x', 'db.t'), 50.0)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=REPO_ROOT, env=child_environment())
    try:
        worker = _child_of(parent.pid, timeout_s=20)
        time.sleep(0.5)  # let it settle into the black-hole read
        assert Path(f"/proc/{worker}").exists()
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 3
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(worker), "the worker outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _child_of(parent: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == parent and WORKER_MODULE.encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.02)
    raise AssertionError("no worker process appeared")
