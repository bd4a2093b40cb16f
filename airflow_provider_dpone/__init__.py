"""airflow-provider-dpone: SQL Server to ClickHouse partitioned transfers with a fail-closed commit guard."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


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
