"""Guard-aware helpers for DAG authors (issue 13, point 3): the checkpoint hook's route status and
``RouteClearSensor`` (reschedule mode), on a real route: SQLite source, chDB target, SQLite checkpoint store.

The route is loaded by a real ``dpone run``; an attempt that armed a batch and died is left in the store (as
a crash leaves it); the sensor waits; on-call resolves it with ``dpone guard resolve``; the sensor is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from airflow import DAG

from airflow_provider_dpone.adapters.checkpoint_sql import SqlCheckpointStore
from airflow_provider_dpone.adapters.sources.demo_data import create_demo_source
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus
from airflow_provider_dpone.contracts.guard import GUARD_KEY, GuardPhase, TargetCommitGuard
from airflow_provider_dpone.contracts.partition import sha256_tag
from airflow_provider_dpone.hooks.checkpoints import DponeCheckpointStoreHook
from airflow_provider_dpone.manifests.loader import load_manifest
from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator
from airflow_provider_dpone.sensors.route_clear import RouteClearSensor

DPONE = Path(sys.executable).parent / "dpone"
MANIFEST = """\
kind: native_transfer
name: sensor_orders
source:
  type: sqlite
  connection: sqlite:///source.sqlite
  table: orders
  partitioning: {kind: day, column: order_date}
sink:
  type: clickhouse
  connection: chdb:///clickhouse
  table: demo.orders
  strategy: incremental_append
  order_by: [order_date, id]
checkpoints:
  connection: sensor_state
"""


def _new_route(base: Path, monkeypatch: pytest.MonkeyPatch, rows: int, days: int) -> tuple[Path, Path]:
    """The demo route's manifest and its SQLite store's path (connection ``sensor_state``), nothing run."""
    create_demo_source(base / "source.sqlite", rows, days=days)
    manifest = base / "orders.yaml"
    manifest.write_text(MANIFEST)
    state = base / "state.sqlite"
    conn = json.dumps({"conn_type": "dpone_checkpoints", "extra": {"backend": "sqlite", "path": str(state)}})
    monkeypatch.setenv("AIRFLOW_CONN_SENSOR_STATE", conn)
    return manifest, state


@pytest.fixture
def route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    manifest, state = _new_route(tmp_path, monkeypatch, 90, 3)
    ran = subprocess.run(
        [str(DPONE), "run", str(manifest)], env=dict(os.environ), capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    return {"manifest": manifest, "state": state, "dir": tmp_path}


def crash_after_arming(manifest: Path, state: Path) -> dict[str, str]:
    """What an attempt that armed one partition and died inside the target call leaves behind."""
    loaded = load_manifest(manifest)
    store = SqlCheckpointStore(f"sqlite:///{state}")
    try:
        victim = sorted(store.list_latest(loaded.route), key=lambda c: c.bounds.label)[0]
        batch = sha256_tag("crashed" + victim.partition_id)
        store.write_batch(
            [
                victim.model_copy(
                    update={
                        "run_id": "crashed",
                        "status": CheckpointStatus.EXPORTED,
                        "started_at": datetime.now(timezone.utc),
                        "completed_at": None,
                        "diagnostics": {
                            GUARD_KEY: TargetCommitGuard.for_phase(GuardPhase.ARMED, batch).to_json()
                        },
                    }
                )
            ]
        )
    finally:
        store.close()
    return {"partition_id": victim.partition_id, "label": victim.bounds.label, "batch": batch}


def test_route_status_and_the_sensor_wait_for_on_call_then_let_the_dag_go_on(
    route: dict[str, object],
) -> None:
    manifest, state = Path(str(route["manifest"])), Path(str(route["state"]))
    hook = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state")
    sensor = RouteClearSensor(task_id="wait_for_route", manifest=str(manifest))
    assert sensor.mode == "reschedule", "waiting must not hold a worker slot"

    assert hook.route_status(manifest).state == "clear"
    assert sensor.poke({}) is True

    crashed = crash_after_arming(manifest, state)
    status = hook.route_status(manifest)
    assert status.state == "blocked"
    assert [(b.partition_id, b.label, b.phase, b.checkpoint_batch_id) for b in status.blocked] == [
        (crashed["partition_id"], crashed["label"], "armed", crashed["batch"])
    ]
    assert json.loads(json.dumps(status.as_json()))["blocked"][0]["phase"] == "armed"
    assert sensor.poke({}) is False

    resolved = subprocess.run(
        [
            str(DPONE),
            "guard",
            "resolve",
            str(manifest),
            "--all-blocked",
            "--as",
            "committed",
            "--reason",
            "test",
        ],
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert hook.route_status(manifest).state == "clear"
    assert sensor.poke({}) is True


def test_the_hook_reads_a_relative_store_beside_the_manifest_whatever_the_workers_cwd(
    route: dict[str, object], monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Red before: with ``sqlite:///state.sqlite`` (a file beside the manifest, as a run reads it) the hook
    method looked in the worker's cwd, found no store and said "clear" (``store_missing``) for a route
    every run stopped on, while the sensor waited."""
    manifest, state = Path(str(route["manifest"])), Path(str(route["state"]))
    assert state.parent == manifest.parent
    monkeypatch.setenv("AIRFLOW_CONN_SENSOR_STATE", "sqlite:///state.sqlite")
    cwd = tmp_path_factory.mktemp("worker_cwd")
    monkeypatch.chdir(cwd)
    crashed = crash_after_arming(manifest, state)

    status = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state").route_status(str(manifest))

    assert (status.state, status.store_missing) == ("blocked", False)
    assert [b.partition_id for b in status.blocked] == [crashed["partition_id"]]
    assert RouteClearSensor(task_id="w", manifest=str(manifest)).poke({}) is False
    assert list(cwd.iterdir()) == []  # nothing looked for, or made, in the cwd


def test_only_a_sensor_with_the_routes_transfer_behind_it_in_its_dag_runs_that_transfer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What decides whether an operation of the sensor's run ID is its own DAG run's: a transfer of the
    same route downstream of it, by the manifest as given (a template too) or by the manifest's identity."""
    manifest, _ = _new_route(tmp_path, monkeypatch, 30, 1)
    loaded = load_manifest(manifest)
    (tmp_path / "other.yaml").write_text(MANIFEST.replace("table: demo.orders", "table: demo.other"))
    templated = "{{ params.manifest }}"

    def shaped(transfer: str | None, *, downstream: bool = True, sensor_manifest: str | None = None) -> bool:
        with DAG("orders", schedule=None, start_date=datetime(2026, 1, 1)):
            sensor = RouteClearSensor(task_id="wait", manifest=sensor_manifest or str(manifest))
            if transfer is not None:
                task = NativeTransferOperator(task_id="transfer", manifest=transfer)
                if downstream:
                    sensor >> task
                else:
                    task >> sensor
        return sensor._runs_the_transfer(loaded, tmp_path)

    assert shaped(str(manifest)) is True
    assert shaped("orders.yaml") is True  # the same file, relative to the DAG folder: the same identity
    assert shaped(templated, sensor_manifest=templated) is True  # the same template, compared unrendered
    assert shaped(None) is False  # a consumer DAG, or a separate "wait for on-call" DAG
    assert shaped(str(manifest), downstream=False) is False  # no retry of it comes after the sensor
    assert shaped("other.yaml") is False  # another route's transfer
    assert shaped("missing.yaml") is False  # cannot be read here: not taken for the route's


def test_an_invalid_guard_blocks_too(route: dict[str, object]) -> None:
    manifest, state = Path(str(route["manifest"])), Path(str(route["state"]))
    loaded = load_manifest(manifest)
    store = SqlCheckpointStore(f"sqlite:///{state}")
    try:
        victim = store.list_latest(loaded.route)[0]
        store.write_batch([victim.model_copy(update={"diagnostics": {GUARD_KEY: {"phase": "armed"}}})])
    finally:
        store.close()
    status = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state").route_status(manifest)
    assert status.state == "blocked" and len(status.invalid) == 1
    assert RouteClearSensor(task_id="w", manifest=str(manifest)).poke({}) is False


def durable_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The route with durable quality replay (checks on the source and the target), not yet run."""
    create_demo_source(tmp_path / "source.sqlite", 90, days=3)
    manifest = tmp_path / "orders.yaml"
    durable = MANIFEST.replace(
        "  order_by: [order_date, id]\n",
        "  order_by: [order_date, id]\n  options:\n    durable_quality_replay: true\n",
    )
    manifest.write_text(durable + "quality:\n  checks:\n    - {type: row_count}\n")
    conn = json.dumps(
        {
            "conn_type": "dpone_checkpoints",
            "extra": {"backend": "sqlite", "path": str(tmp_path / "state.sqlite")},
        }
    )
    monkeypatch.setenv("AIRFLOW_CONN_SENSOR_STATE", conn)
    return manifest


def in_the_transfers_dag(manifest: Path) -> RouteClearSensor:
    """The guide's DAG: the sensor upstream of the route's transfer."""
    with DAG("orders", schedule=None, start_date=datetime(2026, 1, 1)):
        sensor = RouteClearSensor(task_id="wait_for_route", manifest=str(manifest))
        sensor >> NativeTransferOperator(task_id="transfer_orders", manifest=str(manifest))
    return sensor


def dpone_run(manifest: Path, run_id: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DPONE), "run", str(manifest), "--run-id", run_id],
        env={**os.environ, "TZ": "UTC", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_sensor_waits_on_an_operation_that_owes_its_target_evidence_but_not_in_its_own_dag_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = durable_route(tmp_path, monkeypatch)
    hook = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state")
    sensor = in_the_transfers_dag(manifest)
    # a consumer DAG (or a separate "wait for on-call" DAG) scheduled on the same logical date: same run ID
    with DAG("consumer", schedule=None, start_date=datetime(2026, 1, 1)):
        elsewhere = RouteClearSensor(task_id="wait_for_orders", manifest=str(manifest))
    # published, then its observation ran out of budget: the capsule stays pending and blocks the route
    first = dpone_run(manifest, "day_1", DPONE_REPLAY_OBSERVATION_BUDGET_S="0.001")
    assert first.returncode == 3 and "quality_replay_unresolved" in first.stderr, first.stderr
    assert dpone_run(manifest, "day_2").returncode == 3  # what the sensor must wait for

    status = hook.route_status(manifest)
    assert status.state == "blocked" and status.blocked == () and status.runbook == "dpone runbook replay"
    assert status.describe().splitlines()[0].endswith("is blocked: 1 durable quality operation(s)")
    [operation] = json.loads(json.dumps(status.as_json()))["operations"]
    assert (operation["run_id"], operation["state"]) == ("day_1", "target_pending")
    assert sensor.poke({"run_id": "day_2"}) is False
    # in day_1's own DAG run a retry of its transfer observes the target again: nothing to wait for
    assert hook.route_status(manifest, run_id="day_1").state == "clear"
    assert sensor.poke({"run_id": "day_1"}) is True
    # red before: another DAG's run of that logical date took the operation for its own and went on
    assert elsewhere.poke({"run_id": "day_1"}) is False
    assert RouteClearSensor(task_id="no_dag", manifest=str(manifest)).poke({"run_id": "day_1"}) is False

    assert dpone_run(manifest, "day_1").returncode == 0  # that retry completes the evidence
    assert hook.route_status(manifest).state == "clear"
    assert sensor.poke({"run_id": "day_2"}) is True
    assert dpone_run(manifest, "day_2").returncode == 0


@pytest.mark.parametrize("role", ["source", "sink"])
def test_a_connection_leading_elsewhere_than_the_newest_commit_blocks_the_sensor_as_it_stops_the_run(
    route: dict[str, object], monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    """Red before: the sensor said "clear" while every transfer behind it stopped with
    ``native_transfer_route_identity_changed`` (a renamed source connection, a target reached elsewhere)."""
    manifest, base = Path(str(route["manifest"])), Path(str(route["dir"]))
    if role == "source":  # another connection name for the route's source: the run stops (ADR 0079)
        monkeypatch.setenv("AIRFLOW_CONN_RENAMED", f"sqlite:///{base / 'source.sqlite'}")
    else:  # another chDB folder behind the target connection: the run stops (ADR 0088)
        other = {"conn_type": "dpone_clickhouse", "extra": {"interface": "chdb", "path": str(base / "other")}}
        monkeypatch.setenv("AIRFLOW_CONN_RENAMED", json.dumps(other))
    sensor = RouteClearSensor(
        task_id="wait_for_route", manifest=str(manifest), **{f"{role}_conn_id": "renamed"}
    )
    unchanged = RouteClearSensor(task_id="wait_for_route", manifest=str(manifest))

    assert sensor.poke({}) is False
    assert unchanged.poke({}) is True
    rewritten = manifest.with_name("renamed.yaml")
    spelled = "connection: sqlite:///source.sqlite" if role == "source" else "connection: chdb:///clickhouse"
    rewritten.write_text(manifest.read_text().replace(spelled, "connection: renamed"))
    ran = subprocess.run(
        [str(DPONE), "run", "--json", str(rewritten)], env=dict(os.environ), capture_output=True, text=True
    )
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["error"] == "native_transfer_route_identity_changed"
    # red before: the hook method said "clear" for both (it checked no connection)
    hook = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state")
    changed = ["source" if role == "source" else "target"]
    for status in (
        hook.route_status(rewritten),
        hook.route_status(manifest, **{f"{role}_conn_id": "renamed"}),
    ):
        assert (status.state, status.as_json()["connection_changed"]) == ("blocked", changed)
    assert hook.route_status(manifest).state == "clear"


def test_a_new_routes_store_that_does_not_exist_yet_is_clear_and_is_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red before: every poke failed with checkpoint_store_failed (no table yet), the transfer behind it
    was upstream_failed, and the run that creates the store never came; the poke left an empty file."""
    manifest, state = _new_route(tmp_path, monkeypatch, 30, 1)
    sensor = RouteClearSensor(task_id="wait_for_route", manifest=str(manifest))

    assert sensor.poke({}) is True
    status = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state").route_status(manifest)
    assert status.state == "clear" and status.store_missing
    assert not state.exists()
    ran = subprocess.run(
        [str(DPONE), "run", str(manifest)], env=dict(os.environ), capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert sensor.poke({}) is True
    assert (
        not DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state").route_status(manifest).store_missing
    )


def test_a_store_path_holding_something_unreadable_is_not_taken_for_a_new_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only nothing at all (or an empty file an earlier poke left) is a store that does not exist yet: a
    folder at the path was "clear" while every run behind the sensor failed."""
    from airflow_provider_dpone.contracts.errors import DponeError

    manifest, state = _new_route(tmp_path, monkeypatch, 30, 1)
    hook = DponeCheckpointStoreHook(checkpoints_conn_id="sensor_state")

    state.symlink_to(tmp_path / "elsewhere.sqlite")  # a link to nothing: nothing there, and nothing made
    assert hook.route_status(manifest).store_missing
    assert not (tmp_path / "elsewhere.sqlite").exists()
    state.unlink()
    state.write_bytes(b"")  # an empty file: nothing has run against it
    assert hook.route_status(manifest).store_missing
    state.unlink()
    state.mkdir()  # a folder where the store's file belongs
    with pytest.raises(DponeError):
        hook.route_status(manifest)
