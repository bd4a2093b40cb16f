"""``RouteClearSensor``: wait (in reschedule mode) until a blocked route has been resolved by on-call.

A blocked route fails every try of its transfer task before the target, and no retry can unblock it.
Put this sensor upstream of the transfer (or in a separate "wait for on-call" DAG) so the DAG waits for
``dpone guard resolve`` instead: each poke reads the route's checkpoints (read-only, no source, no target,
no lease) and logs the blocked partitions, and between pokes the worker slot is free (``reschedule``).
A *busy* route (another run holds the target's lease, e.g. the previous DAG run's transfer still going)
keeps the sensor waiting too: the transfer behind it would stop with ``native_transfer_route_busy`` and
burn a retry. The log names the holder (host, pid, since) so on-call can find it if it never ends.
Parse-time safety as for the operator: ``__init__`` only stores its arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

try:  # Airflow 3 task SDK
    from airflow.sdk import BaseSensorOperator
except ImportError:  # Airflow 2.10
    from airflow.sensors.base import BaseSensorOperator  # type: ignore[no-redef]


class RouteClearSensor(BaseSensorOperator):
    """Succeeds once nothing blocks the manifest's route — no partition of its target table with an
    unresolved or invalid guard, no operation with unresolved durable quality evidence (but its own DAG
    run's, while a retry of that run decides it) — and no other run holds the target's lease (busy).

    :param manifest: path (relative to the DAG file's folder) or dict, as for ``NativeTransferOperator``.
    :param source_conn_id: replaces ``source.connection``, as the transfer's own argument does: a route
        whose source or target connection leads elsewhere than its newest commit went is blocked too.
    :param sink_conn_id: replaces ``sink.connection``.
    :param checkpoints_conn_id: replaces the manifest's ``checkpoints.connection``.

    Defaults: ``mode="reschedule"``, ``poke_interval`` 5 minutes.
    """

    template_fields: Sequence[str] = ("manifest", "source_conn_id", "sink_conn_id", "checkpoints_conn_id")
    ui_color = "#f7e9c5"

    def __init__(
        self,
        *,
        manifest: str | os.PathLike[str] | Mapping[str, Any],
        source_conn_id: str | None = None,
        sink_conn_id: str | None = None,
        checkpoints_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", timedelta(minutes=5))
        super().__init__(**kwargs)
        self.manifest: str | dict[str, Any] = (
            dict(manifest) if isinstance(manifest, Mapping) else os.fspath(manifest)
        )
        self.source_conn_id = source_conn_id
        self.sink_conn_id = sink_conn_id
        self.checkpoints_conn_id = checkpoints_conn_id

    def poke(self, context: Any) -> bool:
        from airflow_provider_dpone.compose import open_runtime
        from airflow_provider_dpone.hooks.endpoint_resolver import AirflowEndpointResolver
        from airflow_provider_dpone.hooks.route_status import route_status
        from airflow_provider_dpone.operators.native_transfer import _dag_folder

        loaded = self._load(_dag_folder(context, self))
        resolver = AirflowEndpointResolver(
            loaded.manifest_dir,
            overrides={
                "source": self.source_conn_id,
                "sink": self.sink_conn_id,
                "checkpoints": self.checkpoints_conn_id,
            },
        )
        run_id = context.get("run_id") if isinstance(context, Mapping) else None
        with open_runtime(loaded, resolve=resolver) as runtime:  # resolves connections, opens nothing
            binding = runtime.connection_binding()
        store = resolver(loaded.manifest.checkpoints.connection, "checkpoints")
        status = route_status(loaded, store, run_id, binding)
        if status.state == "clear":
            self.log.info("%s", status.describe())
            return True
        if status.state == "busy":
            self.log.info("%s\n  waiting for that run to end", status.describe())
        else:
            self.log.warning("%s\n  waiting for on-call: %s", status.describe(), status.runbook)
        return False

    def _load(self, dag_dir: Path) -> Any:
        from airflow_provider_dpone.manifests.loader import load_manifest, load_manifest_dict

        if isinstance(self.manifest, dict):
            return load_manifest_dict(
                self.manifest, f"<manifest of task {self.task_id}>", manifest_dir=dag_dir
            )
        path = Path(self.manifest).expanduser()
        return load_manifest(path if path.is_absolute() else dag_dir / path)
