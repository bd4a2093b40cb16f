"""A plain SIGTERM of ``dpone run`` (systemd, Kubernetes) during the target observation runs the cleanup.

Real components: the demo SQLite source, the ClickHouse 18.16 server (reached through a loopback proxy
that can stall the reader's measuring SELECT), SQLite checkpoints/capsules, a real ``dpone`` process and
its real reader worker. The proof that the cleanup ran (and not only the worker's parent-death signal)
is the reader guard: only the owner's verified kill-and-reap releases it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.target_reader import WORKER_MODULE
from airflow_provider_dpone.contracts.capsule import CapsuleChain
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.target_observation import ReaderGuardState
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.runtime.replay.ref import operation_id_for
from tests.loopback_proxy import LoopbackProxy

pytestmark = pytest.mark.service

DPONE = str(Path(sys.executable).with_name("dpone"))
ROWS, DAYS = 120, 3


class StallingProxy(LoopbackProxy):
    """Loopback TCP proxy to the server; while ``stall`` is set, a request carrying the reader's
    measuring SELECT is swallowed and its connection held open (a black hole for that query only)."""

    def __init__(self, host: str, port: int) -> None:
        self.stall = threading.Event()
        self.stalled = threading.Event()
        super().__init__(host, port, backlog=32)

    def client_chunk(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> bytes | None:
        if self.stall.is_set() and b"AS m0" in chunk:
            self.stalled.set()
            while not self._stop.is_set() and client.recv(65536):
                pass
            return None
        return chunk


@pytest.fixture
def route(tmp_path: Path, clickhouse_http: EndpointDescriptor) -> Iterator[tuple[Path, dict[str, str], Any]]:
    import clickhouse_connect

    assert clickhouse_http.host is not None and clickhouse_http.port is not None
    proxy = StallingProxy(clickhouse_http.host, clickhouse_http.port)
    database = f"dpone_sigterm_{uuid.uuid4().hex[:10]}"
    create_demo_source(tmp_path / "source.sqlite", ROWS, days=DAYS)
    (tmp_path / "manifest.yaml").write_text(
        "kind: native_transfer\nname: sigterm_orders\n"
        "source: {type: sqlite, connection: 'sqlite:///source.sqlite', table: orders,"
        " partitioning: {kind: day, column: order_date}}\n"
        f"sink: {{type: clickhouse, connection: sigterm_clickhouse, table: {database}.orders,"
        " strategy: incremental_append, order_by: [order_date, id],"
        " options: {durable_quality_replay: true}}\n"
        "checkpoints: {connection: 'sqlite:///state.sqlite'}\n"
        "quality: {checks: [{type: row_count}, {type: not_null, columns: [customer]}]}\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    env["AIRFLOW_CONN_SIGTERM_CLICKHOUSE"] = json.dumps(
        {
            "conn_type": "clickhouse",
            "host": "127.0.0.1",
            "port": proxy.port,
            "login": clickhouse_http.user,
            "password": clickhouse_http.secret() or "",
        }
    )
    admin = clickhouse_connect.get_client(
        host=clickhouse_http.host,
        port=clickhouse_http.port,
        username=clickhouse_http.user or "default",
        password=clickhouse_http.secret() or "",
        compress=False,
    )
    try:
        yield tmp_path, env, (proxy, admin, f"{database}.orders")
    finally:
        proxy.close()
        admin.command(f"DROP DATABASE IF EXISTS {database}")
        admin.close()


def _worker_of(parent: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent and WORKER_MODULE.encode() in cmdline and b"probe" not in cmdline:
                return int(entry.name)
        time.sleep(0.02)
    raise AssertionError("no reader worker appeared")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_sigterm_during_the_observation_kills_and_reaps_the_worker_and_releases_the_guard(
    route: tuple[Path, dict[str, str], Any],
) -> None:
    base, env, (proxy, admin, table) = route
    manifest = base / "manifest.yaml"
    proxy.stall.set()
    run = subprocess.Popen(
        [DPONE, "run", str(manifest), "--run-id", "r1"],
        cwd=base,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stalled.wait(60), "the measuring SELECT never reached the target"
        worker = _worker_of(run.pid, 10)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=20)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 143, stderr
    assert "Traceback" not in stderr and "Terminated." in stderr
    assert not _alive(worker)

    loaded = load_manifest(manifest)
    operation_id = operation_id_for(loaded.identity, "r1")
    url = f"sqlite:///{base / 'state.sqlite'}"
    capsules, guards = SqlCapsuleStore(url), SqlReaderGuardStore(url)
    try:
        chain = capsules.read(operation_id)
        assert isinstance(chain, CapsuleChain) and chain.version == 2  # TARGET_PENDING: no evidence yet
        guard = guards.read(operation_id, chain.core.target_plan.generation_key())
        assert guard is not None and guard.state is ReaderGuardState.RELEASED  # the cleanup ran
    finally:
        capsules.close()
        guards.close()

    blocked = subprocess.run(
        [DPONE, "run", str(manifest), "--run-id", "r2"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert blocked.returncode == 3 and "quality_replay_unresolved" in blocked.stderr

    proxy.stall.clear()
    retry = subprocess.run(
        [DPONE, "run", str(manifest), "--run-id", "r1", "--json"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert retry.returncode == 0, retry.stderr
    assert json.loads(retry.stdout)["quality"]["verdict"] == "passed"
    ids = sorted(r[0] for r in admin.query(f"SELECT id FROM {table}").result_rows)
    assert ids == list(range(1, ROWS + 1))  # every source row once: the SIGTERM duplicated nothing
