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
        "hook-class-names": [],
        "connection-types": [],
        "operators": [],
        "hooks": [],
    }
