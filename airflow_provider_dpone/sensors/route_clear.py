"""``RouteClearSensor``: wait (in reschedule mode) until a blocked route has been resolved by on-call.

A blocked route fails every try of its transfer task before the target, and no retry can unblock it.
Put this sensor upstream of the transfer (or in a separate "wait for on-call" DAG) so the DAG waits for
``dpone guard resolve`` instead: each poke reads the route's checkpoints (read-only, no source, no target,
no lease) and logs the blocked partitions, and between pokes the worker slot is free (``reschedule``).
A *busy* route (another run holds the target's lease, e.g. the previous DAG run's transfer still going)
keeps the sensor waiting too: the transfer behind it would stop with ``native_transfer_route_busy`` and
burn a retry. The log names the holder (host, pid, since) so on-call can find it if it never ends.
In another DAG than the transfer's, every pending operation keeps it waiting, the transfer DAG's run of
the same logical date too (its run ID is the same). Parse-time safety as for the operator: ``__init__``
only stores its arguments.
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
    run's, while a retry of that run decides it: only where a transfer of the route is downstream of this
    sensor in its DAG) — and no other run holds the target's lease (busy).

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
        #: the manifest before Airflow renders it, to find the same route's transfer (``_runs_the_transfer``)
        self._manifest_as_given = self.manifest
        self.source_conn_id = source_conn_id
        self.sink_conn_id = sink_conn_id
        self.checkpoints_conn_id = checkpoints_conn_id

    def poke(self, context: Any) -> bool:
        from airflow_provider_dpone.hooks.route_status_in_airflow import route_status_in_airflow
        from airflow_provider_dpone.operators.native_transfer import _dag_folder

        dag_dir = _dag_folder(context, self)
        loaded = self._load(dag_dir)
        run_id = context.get("run_id") if isinstance(context, Mapping) else None
        status = route_status_in_airflow(
            loaded,
            source_conn_id=self.source_conn_id,
            sink_conn_id=self.sink_conn_id,
            checkpoints_conn_id=self.checkpoints_conn_id,
            run_id=run_id if run_id is not None and self._runs_the_transfer(loaded, dag_dir) else None,
        )
        if status.state == "clear":
            self.log.info("%s", status.describe())
            return True
        if status.state == "busy":
            self.log.info("%s\n  waiting for that run to end", status.describe())
        else:
            self.log.warning("%s\n  waiting for on-call: %s", status.describe(), status.runbook)
        return False

    def _runs_the_transfer(self, loaded: Any, dag_dir: Path) -> bool:
        """Whether a transfer of this route waits behind this sensor in its DAG: only then is an operation
        of this run ID the DAG run's own, which that transfer's retry decides. An operation records its run
        ID alone, and scheduled runs of different DAGs on one logical date share it: a consumer DAG's sensor
        (or a separate "wait for on-call" DAG's) took the transfer DAG's pending operation for its own.
        The same route: the manifest as given to this sensor (a template, compared unrendered), or one of
        the same identity; a manifest that cannot be read here does not count (the sensor then waits)."""
        from airflow_provider_dpone.contracts.errors import DponeError
        from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

        for task in self.get_flat_relatives(upstream=False):
            if not isinstance(task, NativeTransferOperator):
                continue
            if task.manifest == self._manifest_as_given:
                return True
            try:
                theirs, _ = task._load(dag_dir)
            except (DponeError, OSError, ValueError):
                continue
            if theirs.identity == loaded.identity:
                return True
        return False

    def _load(self, dag_dir: Path) -> Any:
        from airflow_provider_dpone.manifests.loader import load_manifest, load_manifest_dict

        if isinstance(self.manifest, dict):
            return load_manifest_dict(
                self.manifest, f"<manifest of task {self.task_id}>", manifest_dir=dag_dir
            )
        path = Path(self.manifest).expanduser()
        return load_manifest(path if path.is_absolute() else dag_dir / path)
