"""Airflow ``Connection`` -> :class:`EndpointDescriptor`, through the same mapping the CLI uses.

The CLI parses ``AIRFLOW_CONN_*`` values into :class:`ConnectionFields` and maps them with
:func:`descriptor_from_fields`; here a live Airflow connection's fields are fed to that same function,
so one connection means the same endpoint in both places. dpone's own connection types
(``dpone_mssql``, ``dpone_clickhouse``, ``dpone_checkpoints``) are folded onto the standard ones first.
Errors name the connection ID and type only: never a host, a path, a login or a password.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import SecretStr

from airflow_provider_dpone.connections.airflow_form import (
    ConnectionFields,
    ConnectionFormError,
    descriptor_from_fields,
    normalize_conn_type,
)
from airflow_provider_dpone.connections.resolve import ROLE_KINDS, ConnectionRole
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

#: dpone's own connection types (registered with Airflow) and the standard type each one stands for.
DPONE_CONN_TYPES = {"dpone_mssql": "mssql", "dpone_clickhouse": "clickhouse"}
CHECKPOINTS_CONN_TYPE = "dpone_checkpoints"


class ConnectionLike(Protocol):
    """The fields of an Airflow ``Connection`` (2.x or 3.x) that the mapping reads."""

    conn_id: str | None
    conn_type: str | None
    host: str | None
    port: int | None
    schema: str | None
    login: str | None

    @property
    def password(self) -> str | None: ...

    @property
    def extra_dejson(self) -> dict[str, Any]: ...


def fields_from_connection(conn: ConnectionLike, label: str) -> ConnectionFields:
    """Copy an Airflow connection's fields, folding dpone's connection types onto standard ones."""
    try:
        extra = conn.extra_dejson
    except Exception as exc:  # a malformed extra JSON string
        raise _invalid(label, conn, "its extra is not valid JSON") from exc
    if not isinstance(extra, dict):
        raise _invalid(label, conn, "its extra is not a JSON object")
    conn_type = normalize_conn_type(conn.conn_type or "")
    if conn_type in DPONE_CONN_TYPES:
        conn_type = DPONE_CONN_TYPES[conn_type]
    elif conn_type == CHECKPOINTS_CONN_TYPE:
        backend = extra.get("backend") or ("sqlite" if extra.get("path") else "postgres")
        conn_type = normalize_conn_type(str(backend))
        if conn_type not in {"sqlite", "postgres"}:
            raise _invalid(label, conn, "extra 'backend' must be 'sqlite' or 'postgres'")
        extra = {k: v for k, v in extra.items() if k != "backend"}
    password = conn.password
    return ConnectionFields(
        conn_type=conn_type,
        host=conn.host or None,
        port=conn.port,
        schema=conn.schema or None,
        login=conn.login or None,
        password=SecretStr(password) if password else None,
        extra=extra,
        # Airflow parsed a URI's query into these extras itself: where a '?' in an unencoded password put part
        # of it, a key named in an error reached the task log (the secrets masker knew no such password)
        extra_from_uri_query=True,
    )


def endpoint_from_connection(
    conn: ConnectionLike, name: str | None = None, *, manifest_dir: Path | None = None
) -> EndpointDescriptor:
    """Describe the endpoint an Airflow connection points at (opens nothing).

    ``name`` defaults to the connection ID; relative file paths resolve against ``manifest_dir`` (or
    the working directory), as the CLI resolves them. A ClickHouse server connection's extras
    ``connect_timeout`` and ``send_receive_timeout`` (seconds) become the endpoint's timeouts.
    """
    label = name or conn.conn_id or "unnamed"
    fields = fields_from_connection(conn, label)
    try:
        return descriptor_from_fields(label, fields, manifest_dir=manifest_dir)
    except ConnectionFormError as exc:
        raise _invalid(label, conn, exc.reason) from exc


def require_role(endpoint: EndpointDescriptor, role: ConnectionRole | str) -> EndpointDescriptor:
    """Refuse an endpoint whose kind cannot play ``role`` (e.g. a PostgreSQL connection as the sink)."""
    role = ConnectionRole(role)
    allowed = ROLE_KINDS[role]
    if endpoint.kind not in allowed:
        kinds = ", ".join(sorted(k.value for k in allowed))
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} cannot be used as the {role.value} connection (expected {kinds})",
            details={"role": role.value, "connection": endpoint.name, "kind": endpoint.kind.value},
        )
    return endpoint


def _invalid(label: str, conn: ConnectionLike, reason: str) -> DponeError:
    conn_type = normalize_conn_type(conn.conn_type or "") or "none"
    return DponeError(
        ErrorCode.CONNECTION_INVALID,
        f"Airflow connection {label!r} (type {conn_type!r}) is invalid: {reason}",
        details={"connection": label, "conn_type": conn_type, "reason": reason},
    )
