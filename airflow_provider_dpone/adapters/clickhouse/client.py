"""Opening and closing clickhouse-connect clients from an endpoint descriptor.

Server notes (ClickHouse 18.16 over HTTP, clickhouse-connect 1.6.0): no lz4, so ``compress=False``; no
Arrow format and no DateTime64, so inserts are Native with explicit column types. The endpoint's database
is not made the session database: on a server a missing database fails the connection itself, and every
statement the sink sends is fully qualified (the database is created by ``prepare_target``).

chDB notes: one chDB path per process at a time; a second path opens only after every client of the
first is closed. :func:`close_client` therefore never raises, so a ``finally`` always releases the path.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

log = logging.getLogger(__name__)

EMBEDDED_EXTRA_HINT = "install the embedded extra: pip install 'airflow-provider-dpone[embedded]'"
#: Seconds to wait for a TCP connection to a server (not for query execution).
CONNECT_TIMEOUT_S = 10


def open_client(endpoint: EndpointDescriptor) -> Client:
    """A connected client, or ``target_unreachable`` / ``embedded_extra_missing`` (safe, chained)."""
    if endpoint.kind is not EndpointKind.CLICKHOUSE:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} is not a ClickHouse connection",
            details={"connection": endpoint.name},
        )
    if endpoint.interface is ClickHouseInterface.CHDB:
        return _open_chdb(endpoint)
    return _open_http(endpoint)


def _open_http(endpoint: EndpointDescriptor) -> Client:
    kwargs: dict[str, Any] = {
        "host": endpoint.host or "localhost",
        "username": endpoint.user or "default",
        "password": endpoint.secret() or "",
        "secure": endpoint.secure,
        "compress": False,
        "connect_timeout": CONNECT_TIMEOUT_S,
    }
    if endpoint.port is not None:
        kwargs["port"] = endpoint.port
    try:
        return clickhouse_connect.get_client(**kwargs)
    except Exception as exc:
        raise DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            f"could not connect to the ClickHouse server of {endpoint.describe()}",
            details=failure_details(endpoint, exc),
        ) from exc


def _open_chdb(endpoint: EndpointDescriptor) -> Client:
    try:
        importlib.import_module("chdb")
    except ImportError as exc:
        raise DponeError(
            ErrorCode.EMBEDDED_EXTRA_MISSING,
            EMBEDDED_EXTRA_HINT,
            details={"connection": endpoint.name},
        ) from exc
    if not endpoint.path:
        raise DponeError(
            ErrorCode.CONNECTION_INVALID,
            f"{endpoint.describe()} needs a path to the chDB data directory",
            details={"connection": endpoint.name},
        )
    try:
        return clickhouse_connect.get_client(interface="chdb", path=endpoint.path)
    except Exception as exc:
        message = f"could not open the embedded ClickHouse of {endpoint.describe()}"
        hints: tuple[str, ...] = ()
        if "already initialized" in str(exc):
            message += ": another chDB path is open in this process"
            hints = ("close every client of the other chDB path before opening this one",)
        raise DponeError(
            ErrorCode.TARGET_UNREACHABLE,
            message,
            details=failure_details(endpoint, exc),
            hint_lines=hints,
        ) from exc


def close_client(client: Client | None) -> None:
    """Close and never raise: releasing a chDB path must not be skipped by a failing close."""
    if client is None:
        return
    try:
        client.close()
    except Exception:  # a failing close must not mask the caller's own exception
        log.debug("closing a ClickHouse client failed", exc_info=True)


def failure_details(endpoint: EndpointDescriptor, exc: BaseException) -> dict[str, Any]:
    """Safe facts only: the connection name, the interface, the exception class and server code."""
    details: dict[str, Any] = {
        "connection": endpoint.name,
        "interface": (endpoint.interface or ClickHouseInterface.HTTP).value,
        "error_class": type(exc).__name__,
    }
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        details["server_code"] = code
    return details
