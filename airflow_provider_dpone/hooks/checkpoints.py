"""Checkpoint-store hook: where the append-only checkpoint table lives (SQLite or PostgreSQL).

Accepts standard ``sqlite`` and ``postgres`` connections and dpone's own ``dpone_checkpoints`` type
(extra ``backend``: ``sqlite`` with a ``path``, or ``postgres``). Its DB-API connection is handy for
read-only inspection; the runtime writes checkpoints through its own store adapter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.contracts.endpoints import EndpointKind
from airflow_provider_dpone.hooks.endpoint_hook import DponeEndpointHook, ui_field_behaviour

if TYPE_CHECKING:
    from airflow_provider_dpone.hooks.route_status import RouteStatus


class DponeCheckpointStoreHook(DponeEndpointHook):
    """The checkpoint store's endpoint (``dpone_partition_checkpoints`` lives there)."""

    conn_name_attr = "checkpoints_conn_id"
    default_conn_name = "dpone_state"
    conn_type = "dpone_checkpoints"
    hook_name = "dpone checkpoint store (SQLite or PostgreSQL)"
    endpoint_kinds = frozenset({EndpointKind.SQLITE, EndpointKind.POSTGRES})

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 2 form hints; Airflow 3 reads the same ones from ``get_provider_info()``."""
        return ui_field_behaviour(cls.conn_type)

    def get_conn(self) -> Any:
        """A new DB-API connection to the store (caller closes it), at the store adapter's own URL."""
        from airflow_provider_dpone.adapters.checkpoint_sql.from_endpoint import dbapi_connection

        return dbapi_connection(self.get_endpoint())

    @property
    def sqlalchemy_url(self) -> Any:
        from airflow_provider_dpone.adapters.checkpoint_sql.from_endpoint import store_url_for

        return store_url_for(self.get_endpoint())

    def get_uri(self) -> str:
        return str(self.sqlalchemy_url.render_as_string(hide_password=False))

    def route_status(
        self,
        manifest: str | os.PathLike[str] | Mapping[str, Any],
        *,
        manifest_dir: str | None = None,
        run_id: str | None = None,
        source_conn_id: str | None = None,
        sink_conn_id: str | None = None,
    ) -> RouteStatus:
        """The status of ``manifest``'s route in this store, as ``RouteClearSensor`` and the transfer find
        it: clear, or what blocks it (partitions with their guard phase and batch, operations with
        unresolved durable quality evidence, a source or target connection leading elsewhere than the
        route's newest commit went), or busy (another run holds the target's lease: its host, pid and
        since). Relative paths (a SQLite store, a chDB folder) hang off the manifest's folder, as in a run.
        ``source_conn_id`` and ``sink_conn_id`` replace the manifest's connections, as the transfer's own
        arguments do: give the same ones. With ``run_id``, that run's own operation does not block while a
        retry of the run decides it: pass it only from the DAG whose transfer runs this route (another
        DAG's run of the same logical date has the same run ID). Read-only (the lease is looked at, not
        taken); opens neither the source nor the target."""
        from airflow_provider_dpone.hooks.route_status_in_airflow import route_status_in_airflow
        from airflow_provider_dpone.manifests.loader import load_manifest, load_manifest_dict

        base = Path(manifest_dir) if manifest_dir else Path.cwd()
        if isinstance(manifest, Mapping):
            loaded = load_manifest_dict(dict(manifest), "<manifest>", manifest_dir=base)
        else:
            path = Path(manifest)
            loaded = load_manifest(path if path.is_absolute() else base / path)
        return route_status_in_airflow(
            loaded,
            source_conn_id=source_conn_id,
            sink_conn_id=sink_conn_id,
            checkpoints_conn_id=self.get_conn_id(),
            run_id=run_id,
        )
