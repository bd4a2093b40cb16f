"""The operator's endpoint resolver: manifest connection values -> descriptors, through Airflow.

A connection name is an Airflow connection ID, read the way every hook reads one (so every configured
secrets backend applies) and mapped like the hooks map it; an inline credential-free URI (``sqlite:///state.sqlite``) resolves exactly as
in the CLI, relative to the manifest's folder. An operator argument (``source_conn_id`` ...) replaces
the manifest's value for its role. Resolving opens nothing: it is called at execute time, by the
composition root, and only describes endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from airflow_provider_dpone.connections.inline import is_inline
from airflow_provider_dpone.connections.resolve import ConnectionRole, resolve_endpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection, require_role
from airflow_provider_dpone.hooks.endpoint_hook import DponeEndpointHook

try:  # Airflow 3.2+: the task SDK holds the exceptions
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # Airflow 3.1 (the tested floor): it still lives in airflow.exceptions
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef,attr-defined,unused-ignore]


class AirflowEndpointResolver:
    """``resolver(name_or_uri, role) -> EndpointDescriptor`` for :func:`compose.open_runtime`."""

    def __init__(self, manifest_dir: Path, overrides: Mapping[str, str | None] | None = None) -> None:
        self.manifest_dir = manifest_dir
        self.overrides = {ConnectionRole(role): value for role, value in (overrides or {}).items() if value}
        self.resolved: dict[ConnectionRole, str] = {}

    def __call__(self, name_or_uri: str, role: str) -> EndpointDescriptor:
        which = ConnectionRole(role)
        value = self.overrides.get(which, name_or_uri)
        if is_inline(value):
            endpoint = resolve_endpoint(value, role=which, manifest_dir=self.manifest_dir, env={})
        else:
            endpoint = require_role(self._from_airflow(value, which), which)
        self.resolved[which] = endpoint.describe()
        return endpoint

    def _from_airflow(self, conn_id: str, role: ConnectionRole) -> EndpointDescriptor:
        try:
            connection = DponeEndpointHook.get_connection(conn_id)
        except AirflowNotFoundException as exc:
            raise DponeError(
                ErrorCode.CONNECTION_MISSING,
                f"{role.value} connection {conn_id!r} is not defined in Airflow",
                details={"role": role.value, "connection": conn_id},
                hint_lines=(f"define it: airflow connections add {conn_id} --conn-uri '<type>://...'",),
            ) from exc
        return endpoint_from_connection(connection, name=conn_id, manifest_dir=self.manifest_dir)
