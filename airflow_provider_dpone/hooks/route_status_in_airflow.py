"""A route's status as its transfer task finds it: the one computation of the sensor and the hook method.

The transfer resolves its connections through Airflow, relative file paths against the manifest's folder,
and stops where a connection leads elsewhere than the route's newest commit went. ``RouteClearSensor`` and
``DponeCheckpointStoreHook.route_status`` both answer from here: the hook method resolved a relative
SQLite store path against the worker's cwd (no store there: "clear" for a route every run found blocked)
and never reported a moved connection, which the sensor did.
"""

from __future__ import annotations

from airflow_provider_dpone.hooks.route_status import RouteStatus, route_status
from airflow_provider_dpone.manifests.loader import LoadedManifest


def route_status_in_airflow(
    loaded: LoadedManifest,
    *,
    source_conn_id: str | None = None,
    sink_conn_id: str | None = None,
    checkpoints_conn_id: str | None = None,
    run_id: str | None = None,
) -> RouteStatus:
    """``route_status`` of ``loaded`` with the connections the transfer would use: the manifest's, or the
    given Airflow connection IDs in their place (as the operator's ``*_conn_id`` arguments), resolved
    without opening anything. ``run_id``: the run whose own operation a retry decides (see
    ``hooks.route_status``)."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.hooks.endpoint_resolver import AirflowEndpointResolver

    resolver = AirflowEndpointResolver(
        loaded.manifest_dir,
        overrides={"source": source_conn_id, "sink": sink_conn_id, "checkpoints": checkpoints_conn_id},
    )
    with open_runtime(loaded, resolve=resolver) as runtime:  # resolves connections, opens nothing
        binding = runtime.connection_binding()
    store = resolver(loaded.manifest.checkpoints.connection, "checkpoints")
    return route_status(loaded, store, run_id, binding)
