"""SQL Server hook over pymssql: the source side of a transfer.

Accepts connections of the standard ``mssql`` type and of dpone's own ``dpone_mssql`` type. The
transfer itself never uses this hook's DB-API connection: it receives :meth:`get_endpoint` and the
source adapter opens its own pymssql connection at execute time, through the same connect path
(``adapters/sources/mssql_connect``) this hook's :meth:`get_conn` uses.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dpone.contracts.endpoints import EndpointKind
from airflow_provider_dpone.hooks.endpoint_hook import DponeEndpointHook, ui_field_behaviour


class DponeMsSqlHook(DponeEndpointHook):
    """Interact with SQL Server through pymssql (read-side helpers of ``DbApiHook`` included)."""

    conn_name_attr = "mssql_conn_id"
    default_conn_name = "mssql_default"
    conn_type = "dpone_mssql"
    hook_name = "dpone SQL Server (pymssql)"
    supports_autocommit = True
    endpoint_kinds = frozenset({EndpointKind.MSSQL})

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 2 form hints; Airflow 3 reads the same ones from ``get_provider_info()``."""
        return ui_field_behaviour(cls.conn_type)

    def get_conn(self) -> Any:
        """A new pymssql connection (caller closes it), opened by the source adapter's connect path, so
        the extras ``tds_version``, ``login_timeout`` and ``query_timeout`` mean what the transfer reads."""
        from airflow_provider_dpone.adapters.sources.mssql_connect import connect

        return connect(self.get_endpoint(), autocommit=False)

    def set_autocommit(self, conn: Any, autocommit: bool) -> None:
        conn.autocommit(autocommit)

    def get_autocommit(self, conn: Any) -> bool:
        return bool(getattr(conn, "autocommit_state", False))

    @property
    def sqlalchemy_url(self) -> Any:
        from airflow_provider_dpone.adapters.sources.mssql_connect import sqlalchemy_url

        return sqlalchemy_url(self.get_endpoint())

    def get_uri(self) -> str:
        return str(self.sqlalchemy_url.render_as_string(hide_password=False))
