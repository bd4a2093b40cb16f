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
            },
            {
                "connection-type": "dpone_clickhouse",
                "hook-class-name": "airflow_provider_dpone.hooks.clickhouse.DponeClickHouseHook",
            },
            {
                "connection-type": "dpone_checkpoints",
                "hook-class-name": "airflow_provider_dpone.hooks.checkpoints.DponeCheckpointStoreHook",
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
    }
