"""Common base of dpone's hooks: an Airflow connection in, an :class:`EndpointDescriptor` out.

Hooks stay thin. The runtime never sees an Airflow connection or a hook: the operator hands it
descriptors, and the composition root builds the adapters from them, exactly as the CLI does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from airflow.providers.common.sql.hooks.sql import DbApiHook

from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.connection_endpoints import endpoint_from_connection


class DponeEndpointHook(DbApiHook):
    """A ``DbApiHook`` whose connection is described by :meth:`get_endpoint`.

    Subclasses set ``conn_name_attr``, ``default_conn_name``, ``conn_type``, ``hook_name`` and the
    endpoint kinds they accept; a connection of any other kind is refused with ``connection_invalid``.
    """

    endpoint_kinds: ClassVar[frozenset[EndpointKind]] = frozenset()

    def get_endpoint(self, manifest_dir: Path | None = None) -> EndpointDescriptor:
        """The endpoint this hook's connection points at (no network I/O).

        Relative file paths (SQLite file, chDB directory) resolve against ``manifest_dir`` when given.
        """
        conn_id = self.get_conn_id()
        try:
            connection = self.connection
        except Exception as exc:
            raise DponeError(
                ErrorCode.CONNECTION_MISSING,
                f"Airflow connection {conn_id!r} is not defined",
                details={"connection": conn_id},
            ) from exc
        endpoint = endpoint_from_connection(connection, name=conn_id, manifest_dir=manifest_dir)
        if endpoint.kind not in self.endpoint_kinds:
            kinds = ", ".join(sorted(k.value for k in self.endpoint_kinds))
            raise DponeError(
                ErrorCode.CONNECTION_INVALID,
                f"{type(self).__name__} cannot use {endpoint.describe()} (expected {kinds})",
                details={"connection": conn_id, "kind": endpoint.kind.value},
            )
        return endpoint

    def __repr__(self) -> str:
        # Never the connection object: an Airflow Connection's repr shows its password.
        return f"{type(self).__name__}({self.conn_name_attr}={self.get_conn_id()!r})"

    def _extra(self, key: str, default: Any = None) -> Any:
        return self.connection_extra_lower.get(key, default)


def ui_field_behaviour(conn_type: str) -> dict[str, Any]:
    """The connection form hints declared in ``get_provider_info()``, in the hook method's format."""
    from airflow_provider_dpone import get_provider_info

    for entry in get_provider_info()["connection-types"]:
        if entry["connection-type"] == conn_type:
            declared = entry.get("ui-field-behaviour", {})
            return {
                "hidden_fields": list(declared.get("hidden-fields", [])),
                "relabeling": dict(declared.get("relabeling", {})),
                "placeholders": dict(declared.get("placeholders", {})),
            }
    return {"hidden_fields": [], "relabeling": {}}
