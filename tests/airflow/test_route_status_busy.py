"""Route status "busy" (issue 13.3): another process holds the target's lease for real (a SQLite ``flock``
or a PostgreSQL advisory lock, taken by ``SqlCheckpointStore.lease`` in a child process).

``route_status`` reports busy with the holder's host, pid and since (nothing else: no store URL, no
password), without taking the lease (the holder keeps it, and a run started afterwards still stops as
busy); ``RouteClearSensor`` keeps waiting while busy; once the holder is SIGKILLed the route is clear
and the sensor lets the DAG go on.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

from airflow_provider_dpone.hooks.checkpoints import DponeCheckpointStoreHook
from airflow_provider_dpone.sensors.route_clear import RouteClearSensor
from tests.integration.route_rig import (  # noqa: F401 - base and store_url are fixtures
    base,
    dpone,
    hold_lease,
    store_url,
    write_manifest,
)


def test_a_held_lease_is_busy_with_its_holder_and_the_sensor_waits_until_it_ends(
    base: Path,  # noqa: F811
    store_url: str,  # noqa: F811
) -> None:
    manifest = write_manifest(base, "orders", store_url)
    assert dpone("run", str(manifest)).exit_code == 0  # a loaded route: committed checkpoints, clear
    hook = DponeCheckpointStoreHook(checkpoints_conn_id="spelling_state")
    sensor = RouteClearSensor(task_id="wait_for_route", manifest=str(manifest))
    assert hook.route_status(manifest).state == "clear"

    holder = hold_lease(store_url)
    try:
        status = hook.route_status(manifest)
        assert status.state == "busy" and status.busy and status.clear  # nothing blocks; a run writes
        assert status.holder is not None
        assert (status.holder.host, status.holder.pid) == (socket.gethostname(), holder.pid)
        assert status.holder.since and status.holder.since.endswith("Z")
        shown = json.dumps(status.as_json()) + status.describe()
        assert f"pid {holder.pid}" in status.describe()
        password = store_url.split("@")[0].rsplit(":", 1)[-1] if "@" in store_url else "-no-password-"
        assert password not in shown and "postgresql" not in shown and "sqlite:" not in shown
        assert sensor.poke({}) is False
        # looking did not take the lease: a run now still stops as busy (exit 4)
        assert dpone("run", str(manifest)).exit_code == 4
        assert hook.route_status(manifest).state == "busy"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)

    assert hook.route_status(manifest).state == "clear"
    assert hook.route_status(manifest).holder is None
    assert sensor.poke({}) is True
