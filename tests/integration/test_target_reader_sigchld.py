"""A parent that cannot reap its workers (an inherited ``SIGCHLD=SIG_IGN``) fails before extraction.

Under ``SIG_IGN`` the kernel reaps children itself: ``waitid`` raises ``ChildProcessError`` once the
worker exits. The preflight proves the exact wait path ``observe`` uses, and ``observe`` turns any wait
failure into a typed outcome. Run in this very process (the disposition is restored afterwards) and
through a real ``dpone run`` that inherits the disposition across ``exec``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
from airflow_provider_dpone.adapters.target_reader.supervisor import _Child, _Exchange, child_environment
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    ObservationMetric,
    ReaderOutcomeKind,
    ReaderReason,
    TargetReadRequest,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_WORKER = "tests.integration.target_reader_fake_worker"
DPONE = str(Path(sys.executable).with_name("dpone"))
ENDPOINT = EndpointDescriptor(
    name="t", kind=EndpointKind.CLICKHOUSE, interface=ClickHouseInterface.HTTP, host="127.0.0.1", port=9
)
PLAN = TargetReadRequest(
    target_table="fake.t",
    selector=GenerationSelector(load_id=LoadIdSelector(column="load_id", value="honest")),
    metrics=(ObservationMetric.ROW_COUNT,),
)


@pytest.fixture
def sigchld_ignored() -> Iterator[None]:
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGCHLD, previous)


@pytest.mark.usefixtures("sigchld_ignored")
def test_preflight_refuses_a_process_that_ignores_sigchld() -> None:
    with pytest.raises(DponeError) as raised:
        SupervisedTargetReader().prove_spawn_capability()
    assert raised.value.code is ErrorCode.TARGET_READER_UNSUPPORTED
    assert raised.value.details["reason"] in ("sigchld_ignored", "worker_wait_failed")


@pytest.mark.usefixtures("sigchld_ignored")
def test_observe_under_sigchld_ignored_is_a_typed_outcome_not_an_exception() -> None:
    reader = SupervisedTargetReader(worker_module=FAKE_WORKER, worker_path=(str(REPO_ROOT),))
    outcome = reader.observe(ENDPOINT, PLAN, 10.0)
    assert (outcome.kind, outcome.reason) == (ReaderOutcomeKind.WORKER_FAILED, ReaderReason.WAIT_FAILED)
    assert outcome.observation is None


@pytest.mark.usefixtures("sigchld_ignored")
def test_a_wait_that_fails_after_the_spawn_is_typed_and_never_verified() -> None:
    """The wait path itself, past the up-front check: the child is reaped behind the supervisor's back."""
    import time

    child = _Child((sys.executable, "-m", FAKE_WORKER), child_environment((str(REPO_ROOT),)))
    child.stdin.close()  # the fake reads EOF, fails and exits at once
    result = _Exchange()
    assert child.wait_exit(time.monotonic() + 10, result) is None
    assert result.reason is ReaderReason.WAIT_FAILED
    assert child.terminate(2.0) is False  # its lifecycle is unknown: never counted verified


def test_dpone_run_that_inherits_sigchld_ignored_fails_before_extraction(tmp_path: Path) -> None:
    create_demo_source(tmp_path / "source.sqlite", 60, days=3)
    (tmp_path / "chdb").mkdir()
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        "kind: native_transfer\nname: sigchld\n"
        "source: {type: sqlite, connection: 'sqlite:///source.sqlite', table: orders,"
        " partitioning: {kind: day, column: order_date}}\n"
        "sink: {type: clickhouse, connection: 'chdb:///chdb', table: demo.orders,"
        " strategy: incremental_append, order_by: [order_date, id],"
        " options: {durable_quality_replay: true}}\n"
        "checkpoints: {connection: 'sqlite:///state.sqlite'}\n"
        "quality: {checks: [{type: row_count}]}\n",
        encoding="utf-8",
    )
    launcher = (
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    ran = subprocess.run(
        [sys.executable, "-c", launcher, DPONE, "run", str(manifest), "--run-id", "r1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert "error: target_reader_unsupported:" in ran.stderr, ran.stderr
    assert ran.returncode != 0
    assert "Traceback" not in ran.stderr
    # nothing was extracted or published: no checkpoint was armed
    checkpoints = subprocess.run(
        [DPONE, "checkpoints", str(manifest), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert checkpoints.returncode == 0, checkpoints.stderr
    assert '"status": "committed"' not in checkpoints.stdout and "armed" not in checkpoints.stdout
