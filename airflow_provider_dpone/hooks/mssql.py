"""SQL Server hook over pymssql: the source side of a transfer.

Accepts connections of the standard ``mssql`` type and of dpone's own ``dpone_mssql`` type. The
transfer itself never uses this hook's DB-API connection: it receives :meth:`get_endpoint` and the
source adapter opens its own pymssql connection at execute time.
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
        """A new pymssql connection (caller closes it)."""
        import pymssql

        endpoint = self.get_endpoint()
        options: dict[str, Any] = {}
        if self._extra("tds_version"):
            options["tds_version"] = str(self._extra("tds_version"))
        if self._extra("login_timeout"):
            options["login_timeout"] = int(self._extra("login_timeout"))
        return pymssql.connect(
            server=endpoint.host or "",
            port=str(endpoint.port or 1433),
            user=endpoint.user,
            password=endpoint.secret(),
            database=endpoint.database or "",
            **options,
        )

    def set_autocommit(self, conn: Any, autocommit: bool) -> None:
        conn.autocommit(autocommit)

    def get_autocommit(self, conn: Any) -> bool:
        return bool(getattr(conn, "autocommit_state", False))

    @property
    def sqlalchemy_url(self) -> Any:
        from sqlalchemy.engine import URL

        endpoint = self.get_endpoint()
        return URL.create(
            "mssql+pymssql",
            username=endpoint.user,
            password=endpoint.secret(),
            host=endpoint.host,
            port=endpoint.port,
            database=endpoint.database,
        )

    def get_uri(self) -> str:
        return str(self.sqlalchemy_url.render_as_string(hide_password=False))
