"""ClickHouse hook: describes the target endpoint and offers no way to change it.

Every write to the target must pass through the commit guard's permit, which only the runtime's sink
holds. So this hook has no insert or DDL helpers, and the ``DbApiHook`` entry points that would run
arbitrary SQL or hand out a client (``run``, ``insert_rows``, ``get_conn``, ``get_sqlalchemy_engine``,
bulk load/dump, and the record helpers built on them) refuse with ``target_mutation_unguarded``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointKind
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.hooks.endpoint_hook import DponeEndpointHook, ui_field_behaviour


class DponeClickHouseHook(DponeEndpointHook):
    """A ClickHouse server over HTTP (clickhouse-connect) or an embedded chDB directory.

    Embedded chDB: a connection whose extra is ``{"interface": "chdb", "path": "/data/chdb"}``.
    """

    conn_name_attr = "clickhouse_conn_id"
    default_conn_name = "clickhouse_default"
    conn_type = "dpone_clickhouse"
    hook_name = "dpone ClickHouse (HTTP or embedded chDB)"
    endpoint_kinds = frozenset({EndpointKind.CLICKHOUSE})

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 2 form hints; Airflow 3 reads the same ones from ``get_provider_info()``."""
        return ui_field_behaviour(cls.conn_type)

    def _refuse(self, what: str) -> NoReturn:
        raise DponeError(
            ErrorCode.TARGET_MUTATION_UNGUARDED,
            f"{type(self).__name__}.{what} is not available: the ClickHouse target is written only by "
            "NativeTransferOperator under the commit guard's permit",
            details={"connection": self.get_conn_id(), "method": what},
        )

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("run")

    def insert_rows(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("insert_rows")

    def bulk_load(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("bulk_load")

    def bulk_dump(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("bulk_dump")

    def get_conn(self) -> Any:
        self._refuse("get_conn")

    def get_cursor(self) -> Any:
        self._refuse("get_cursor")

    def get_sqlalchemy_engine(self, engine_kwargs: Any = None) -> Any:
        self._refuse("get_sqlalchemy_engine")

    def test_connection(self) -> tuple[bool, str]:  # type: ignore[override]
        """Describe the endpoint and, for an HTTP server, ping it (a read-only round trip).

        An embedded chDB directory is not opened here: one process at a time may hold it, and that
        must be the task, not the API server.
        """
        try:
            endpoint = self.get_endpoint()
        except DponeError as err:
            return False, err.render()
        if endpoint.interface is ClickHouseInterface.CHDB:
            return True, "embedded chDB connection is well-formed; it is opened only when a task runs"
        from airflow_provider_dpone.adapters.clickhouse.client import close_client, open_client

        try:
            client = open_client(endpoint)
        except DponeError as err:
            return False, err.render()
        try:
            ok = bool(client.ping())
        finally:
            close_client(client)
        return (ok, "ClickHouse server answered") if ok else (False, f"{endpoint.describe()}: no answer")
