"""Turn a manifest's connection value into an endpoint descriptor, outside Airflow.

A value containing ``://`` is an inline, credential-free URI (see :mod:`.inline`); anything else is a
connection name looked up in ``AIRFLOW_CONN_<NAME>`` exactly as Airflow's environment-variable secrets
backend does, so one manifest serves both the CLI and Airflow. Resolving opens nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path

from airflow_provider_dpone.connections.airflow_form import (
    ConnectionFormError,
    descriptor_from_fields,
    names_a_file_per_place,
    parse_connection_value,
    resolve_path,
)
from airflow_provider_dpone.connections.inline import InlineUriError, is_inline, parse_inline
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

ENV_PREFIX = "AIRFLOW_CONN_"
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ConnectionRole(str, Enum):
    """Where a manifest uses a connection; each role admits only some endpoint kinds."""

    SOURCE = "source"
    SINK = "sink"
    CHECKPOINTS = "checkpoints"


ROLE_KINDS: Mapping[ConnectionRole, frozenset[EndpointKind]] = {
    ConnectionRole.SOURCE: frozenset({EndpointKind.MSSQL, EndpointKind.SQLITE}),
    ConnectionRole.SINK: frozenset({EndpointKind.CLICKHOUSE}),
    ConnectionRole.CHECKPOINTS: frozenset({EndpointKind.SQLITE, EndpointKind.POSTGRES}),
}


def env_var_name(connection_name: str) -> str:
    """The variable Airflow reads for a connection ID: ``AIRFLOW_CONN_`` + the ID upper-cased."""
    return ENV_PREFIX + connection_name.upper()


def setting_line(variable: str, value: str) -> str:
    """How to give ``dpone`` one ``AIRFLOW_CONN_*`` value in a shell: ``export`` where the variable is a shell
    name; otherwise (a connection ID with ``-`` or ``.``, which Airflow admits) ``env`` before each command,
    as bash refuses to export it. ``value`` is shell text already quoted by the caller."""
    if _SHELL_NAME.fullmatch(variable):
        return f"export {variable}={value}"
    return f"env {variable}={value} dpone ...   ({variable} is no shell variable name: export refuses it)"


def resolve_endpoint(
    name_or_uri: str,
    *,
    role: ConnectionRole | str,
    manifest_dir: Path | str,
    env: Mapping[str, str] | None = None,
) -> EndpointDescriptor:
    """Resolve one manifest connection value for ``role`` (``source``, ``sink`` or ``checkpoints``).

    Raises ``DponeError(CONNECTION_MISSING)`` naming the variable to set, or
    ``DponeError(CONNECTION_INVALID)`` with a safe reason (the value itself is never repeated).
    """
    role = ConnectionRole(role)
    base = Path(manifest_dir)
    environ: Mapping[str, str] = os.environ if env is None else env
    if is_inline(name_or_uri):
        endpoint = _inline_endpoint(name_or_uri, role=role, manifest_dir=base)
    else:
        endpoint = _env_endpoint(name_or_uri, role=role, manifest_dir=base, env=environ)
    _check_role(endpoint, role)
    return endpoint


def _inline_endpoint(uri: str, *, role: ConnectionRole, manifest_dir: Path) -> EndpointDescriptor:
    try:
        target = parse_inline(uri)
    except InlineUriError as exc:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"the inline {role.value} connection is not admitted: {exc.reason}",
            details={"role": role.value, "reason": exc.reason},
        ) from exc
    path = resolve_path(target.path, manifest_dir)
    per_place = names_a_file_per_place(target.path)
    if target.kind is EndpointKind.CLICKHOUSE:
        return EndpointDescriptor(
            name=uri,
            kind=EndpointKind.CLICKHOUSE,
            interface=ClickHouseInterface.CHDB,
            path=path,
            path_per_place=per_place,
        )
    return EndpointDescriptor(name=uri, kind=target.kind, path=path, path_per_place=per_place)


def _env_endpoint(
    name: str, *, role: ConnectionRole, manifest_dir: Path, env: Mapping[str, str]
) -> EndpointDescriptor:
    variable = env_var_name(name)
    details = {"role": role.value, "connection": name, "variable": variable}
    value = env.get(variable)
    if value is None or not value.strip():
        raise DponeError(
            ErrorCode.CONNECTION_MISSING,
            f"{role.value} connection {name!r} is not defined: set {variable} (URI or JSON form)",
            details=details,
            hint_lines=(
                "e.g. " + setting_line(variable, "'<type>://<user>:<password>@<host>:<port>/<database>'"),
            ),
        )
    try:
        fields = parse_connection_value(value)
        return descriptor_from_fields(name, fields, manifest_dir=manifest_dir)
    except ConnectionFormError as exc:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{role.value} connection {name!r} in {variable} is invalid: {exc.reason}",
            details={**details, "reason": exc.reason},
        ) from exc


def _check_role(endpoint: EndpointDescriptor, role: ConnectionRole) -> None:
    allowed = ROLE_KINDS[role]
    if endpoint.kind not in allowed:
        kinds = ", ".join(sorted(k.value for k in allowed))
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} cannot be used as the {role.value} connection (expected {kinds})",
            details={"role": role.value, "kind": endpoint.kind.value},
        )
