"""ClickHouse hook: read-only SQL on the target, and no way to change it.

Every write to the target must pass through the commit guard's permit, which only the runtime's sink
holds. This hook serves reads, so common-sql's check operators (``SQLCheckOperator``,
``SQLValueCheckOperator``, ``SQLColumnCheckOperator``, ``SQLTableCheckOperator``) run against a
``dpone_clickhouse`` connection: ``get_conn`` gives a DB-API-shaped connection opened with ``readonly=1``
(on a server, every HTTP request carries it; an embedded chDB directory is opened only when no other
process holds it). A statement that is not one read is refused as ``target_mutation_unguarded`` before
anything is opened; ``readonly=1`` is the enforcement behind that message. ``insert_rows``,
``bulk_load``, ``bulk_dump`` and ``get_sqlalchemy_engine`` refuse outright.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
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
    supports_autocommit = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # common-sql logs each statement it runs; dpone's logs carry no SQL, so that is opt-in here
        kwargs.setdefault("log_sql", False)
        super().__init__(*args, **kwargs)

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

    def read_endpoint(self) -> EndpointDescriptor:
        """The endpoint the reads go to; an operator's ``database=`` (set as ``schema``) selects the database."""
        endpoint = self.get_endpoint()
        database = getattr(self, "schema", None) or getattr(self, "_DbApiHook__schema", None)
        if isinstance(database, str) and database:
            endpoint = endpoint.model_copy(update={"database": database})
        return endpoint

    def get_conn(self) -> Any:
        """A new read-only DB-API-shaped connection (caller closes it); see the module docstring."""
        from airflow_provider_dpone.adapters.clickhouse.read_connection import open_read_connection

        return open_read_connection(self.read_endpoint())

    def get_cursor(self) -> Any:
        """A cursor that closes its own read-only connection when it is closed."""
        return self.get_conn().cursor(owns_connection=True)

    def run(
        self,
        sql: str | Iterable[str],
        autocommit: bool = False,
        parameters: Iterable[Any] | Mapping[str, Any] | None = None,
        handler: Callable[[Any], Any] | None = None,
        split_statements: bool = False,
        return_last: bool = True,
    ) -> Any:
        """``DbApiHook.run`` for reads: every statement is checked before a connection is opened."""
        from airflow_provider_dpone.adapters.clickhouse.read_connection import refuse_unless_read

        statements = [sql] if isinstance(sql, str) else list(sql)
        if isinstance(sql, str) and split_statements:
            statements = self.split_sql_string(sql, strip_semicolon=self.strip_semicolon)
        for statement in statements:
            refuse_unless_read(statement, self.get_conn_id())
        return super().run(
            sql if isinstance(sql, str) else statements,
            autocommit=autocommit,
            parameters=parameters,
            handler=handler,
            split_statements=split_statements,
            return_last=return_last,
        )

    def set_autocommit(self, conn: Any, autocommit: bool) -> None:
        """Nothing to set: the connection never writes, so there is nothing to commit."""

    def get_autocommit(self, conn: Any) -> bool:
        return True

    def insert_rows(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("insert_rows")

    def bulk_load(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("bulk_load")

    def bulk_dump(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("bulk_dump")

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
