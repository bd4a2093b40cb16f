"""airflow-provider-dpone: SQL Server to ClickHouse partitioned transfers with a fail-closed commit guard."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _seconds(label: str, description: str) -> dict[str, Any]:
    return {
        "label": label,
        "schema": {"type": ["integer", "null"], "minimum": 1, "maximum": 86400},
        "description": description,
    }


def _switch(label: str, description: str) -> dict[str, Any]:
    return {"label": label, "schema": {"type": ["boolean", "null"]}, "description": description}


def _text(label: str, description: str, choices: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if choices:
        schema["enum"] = [*choices, None]
    return {"label": label, "schema": schema, "description": description}


#: Airflow 3's connection form fields (stored as the connection's extras of the same names; an empty
#: field is no extra). Every name is an extra ``connections/extras.py`` admits; see docs/guide/connections.md.
CONN_FIELDS: dict[str, dict[str, dict[str, Any]]] = {
    "dpone_mssql": {
        "tds_version": _text(
            "TDS version", "FreeTDS protocol version (default 7.4)", ["7.0", "7.1", "7.2", "7.3", "7.4"]
        ),
        "login_timeout": _seconds("Login timeout (s)", "seconds to wait for the login (default 30)"),
        "query_timeout": _seconds("Query timeout (s)", "seconds each statement may run (default: no limit)"),
    },
    "dpone_clickhouse": {
        "interface": _text(
            "Interface", "http: a ClickHouse server; chdb: an embedded chDB directory", ["http", "chdb"]
        ),
        "path": _text("chDB path", "the chDB data directory (interface chdb only)"),
        "secure": _switch("Secure (HTTPS)", "connect over TLS (server only)"),
        "verify": _switch("Verify TLS certificate", "check the server certificate when secure (default on)"),
        "connect_timeout": _seconds(
            "Connect timeout (s)", "seconds to wait for the TCP connect (default 10)"
        ),
        "send_receive_timeout": _seconds(
            "Send/receive timeout (s)", "seconds to wait for each answer (default 120)"
        ),
    },
    "dpone_checkpoints": {
        "backend": _text(
            "Backend", "sqlite (a file at path) or postgres (host, port, database)", ["sqlite", "postgres"]
        ),
        "path": _text("SQLite path", "the SQLite file (backend sqlite only)"),
        "secure": _switch("Require TLS", "PostgreSQL sslmode=require (backend postgres only)"),
    },
}


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's provider discovery (no imports of airflow here)."""
    return {
        "package-name": "airflow-provider-dpone",
        "name": "dpone",
        "description": "SQL Server to ClickHouse partitioned transfers with a fail-closed target commit guard.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": "dpone native transfer", "tags": ["software"]},
        ],
        "connection-types": [
            {
                "connection-type": "dpone_mssql",
                "conn-fields": CONN_FIELDS["dpone_mssql"],
                "hook-class-name": "airflow_provider_dpone.hooks.mssql.DponeMsSqlHook",
                "hook-name": "dpone SQL Server (pymssql)",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Database", "login": "User"},
                    "placeholders": {
                        "host": "sqlserver.example.internal",
                        "port": "1433",
                        "schema": "sales",
                        "extra": '{"tds_version": "7.4", "login_timeout": 30}',
                    },
                },
            },
            {
                "connection-type": "dpone_clickhouse",
                "conn-fields": CONN_FIELDS["dpone_clickhouse"],
                "hook-class-name": "airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook",
                "hook-name": "dpone ClickHouse (HTTP or embedded chDB)",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Database", "login": "User"},
                    "placeholders": {
                        "host": "clickhouse.example.internal (empty for embedded chDB)",
                        "port": "8123",
                        "schema": "default",
                        "extra": '{"secure": false}  or  {"interface": "chdb", "path": "/var/lib/dpone/chdb"}',
                    },
                },
            },
            {
                "connection-type": "dpone_checkpoints",
                "conn-fields": CONN_FIELDS["dpone_checkpoints"],
                "hook-class-name": "airflow_provider_dpone.hooks.checkpoints.DponeCheckpointStoreHook",
                "hook-name": "dpone checkpoint store (SQLite or PostgreSQL)",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Database", "login": "User"},
                    "placeholders": {
                        "host": "postgres.example.internal",
                        "port": "5432",
                        "schema": "dpone",
                        "extra": '{"backend": "postgres"}  or  {"backend": "sqlite", "path": "/var/lib/dpone/state.sqlite"}',
                    },
                },
            },
        ],
        "hooks": [
            {
                "integration-name": "dpone native transfer",
                "python-modules": [
                    "airflow_provider_dpone.hooks.mssql",
                    "airflow_provider_dpone.hooks.clickhouse",
                    "airflow_provider_dpone.hooks.checkpoints",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "dpone native transfer",
                "python-modules": ["airflow_provider_dpone.operators.native_transfer"],
            }
        ],
        "sensors": [
            {
                "integration-name": "dpone native transfer",
                "python-modules": ["airflow_provider_dpone.sensors.route_clear"],
            }
        ],
    }
