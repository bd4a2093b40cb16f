"""The one SQL Server connect path: the source adapter and ``DponeMsSqlHook.get_conn`` both open here.

So the transfer and the hook see the same connection: the endpoint's ``tds_version`` (default
:data:`~airflow_provider_dpone.contracts.endpoints.DEFAULT_TDS_VERSION`), ``login_timeout_s`` (default
:data:`LOGIN_TIMEOUT_S`) and ``query_timeout_s`` (pymssql's ``timeout``; unset: no statement limit)
reach pymssql (the statement limit is process-wide, see :func:`connect`). pymssql's own exceptions pass through; callers wrap them with a safe error.
"""

from __future__ import annotations

from typing import Any

import pymssql
from sqlalchemy.engine import URL

from airflow_provider_dpone.contracts.endpoints import DEFAULT_TDS_VERSION, EndpointDescriptor

DEFAULT_PORT = 1433
#: Seconds pymssql waits for the login when the endpoint sets no ``login_timeout_s``.
LOGIN_TIMEOUT_S = 30
APP_NAME = "dpone"
#: DB-Library's severity of a conversion error (``EXCONVERSION``). Text FreeTDS cannot convert to UTF-8 (a
#: byte the varchar column's code page leaves undefined, an unpaired surrogate in an nvarchar) arrives as
#: ``?`` with a message of this severity (2403), which pymssql ignores below its ``min_error_severity``
#: (6): ``a\x81b`` under code page 1252 was moved as ``a?b``, exit 0.
CONVERSION_SEVERITY = 4


def connect_options(endpoint: EndpointDescriptor, *, login_timeout: int | None = None) -> dict[str, Any]:
    """The keyword arguments :func:`connect` passes to ``pymssql.connect`` (password included)."""
    options: dict[str, Any] = {
        "server": endpoint.host or "",
        "port": str(endpoint.port or DEFAULT_PORT),
        "user": endpoint.user,
        "password": endpoint.secret(),
        "database": endpoint.database or "",
        "login_timeout": login_timeout or endpoint.login_timeout_s or LOGIN_TIMEOUT_S,
        "appname": APP_NAME,
        "tds_version": endpoint.tds_version or DEFAULT_TDS_VERSION,
    }
    if endpoint.query_timeout_s is not None:
        options["timeout"] = endpoint.query_timeout_s
    return options


def connect(
    endpoint: EndpointDescriptor, *, autocommit: bool = True, login_timeout: int | None = None
) -> Any:
    """A new pymssql connection (caller closes it). ``login_timeout`` overrides the endpoint's.

    pymssql's statement timeout is process-wide (DB-Library's ``dbsettime``) and ``connect`` sets it only
    when non-zero, so a connection without ``query_timeout_s`` would inherit the limit of any connection
    opened before it in the process. Every connection therefore sets it, 0 (no limit) included: the last
    connection opened decides for all (one run uses one source endpoint, so its connections agree).
    """
    _raise_conversion_errors()
    connection = pymssql.connect(
        autocommit=autocommit, **connect_options(endpoint, login_timeout=login_timeout)
    )
    try:
        connection._conn.query_timeout = endpoint.query_timeout_s or 0
    except Exception:
        connection.close()
        raise
    return connection


def _raise_conversion_errors() -> None:
    """A lossy conversion raises instead of handing over ``?`` (process-wide, like the statement limit:
    pymssql keeps the threshold per process). Only lowered, never raised back."""
    from pymssql import _mssql

    if getattr(_mssql, "min_error_severity", 0) > CONVERSION_SEVERITY:
        _mssql.min_error_severity = CONVERSION_SEVERITY


def sqlalchemy_url(endpoint: EndpointDescriptor) -> URL:
    """The ``mssql+pymssql`` URL of the endpoint, built field by field (the password is never pasted)."""
    query: dict[str, str] = {"tds_version": endpoint.tds_version or DEFAULT_TDS_VERSION}
    if endpoint.login_timeout_s is not None:
        query["login_timeout"] = str(endpoint.login_timeout_s)
    if endpoint.query_timeout_s is not None:
        query["timeout"] = str(endpoint.query_timeout_s)
    return URL.create(
        "mssql+pymssql",
        username=endpoint.user,
        password=endpoint.secret(),
        host=endpoint.host,
        port=endpoint.port,
        database=endpoint.database,
        query=query,
    )
