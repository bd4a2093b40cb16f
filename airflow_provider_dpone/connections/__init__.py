"""Manifest connection values -> endpoint descriptors (env ``AIRFLOW_CONN_*`` or inline URIs). No Airflow."""

from __future__ import annotations

from airflow_provider_dpone.connections.airflow_form import (
    ConnectionFields,
    ConnectionFormError,
    descriptor_from_fields,
    parse_connection_value,
)
from airflow_provider_dpone.connections.inline import inline_problem, is_inline, parse_inline
from airflow_provider_dpone.connections.resolve import (
    ConnectionRole,
    env_var_name,
    resolve_endpoint,
    setting_line,
)

__all__ = [
    "ConnectionFields",
    "ConnectionFormError",
    "ConnectionRole",
    "descriptor_from_fields",
    "env_var_name",
    "inline_problem",
    "is_inline",
    "parse_connection_value",
    "parse_inline",
    "resolve_endpoint",
    "setting_line",
]
