"""Nightly full refresh of dbo.customers through a staging table (``load: staged``).

The connection IDs in the manifest can be overridden per task, e.g. to point a staging copy of the
DAG at other connections without editing the manifest.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10
    from airflow import DAG  # type: ignore[no-redef,attr-defined]

with DAG(
    dag_id="dpone_customers_full_refresh",
    description="dbo.customers -> analytics.customers (full_refresh, staged)",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["dpone", "example"],
) as dag:
    NativeTransferOperator(
        task_id="refresh_customers",
        manifest="manifests/customers_full_refresh.yaml",
        sink_conn_id="analytics_clickhouse",
        checkpoints_conn_id="dpone_state",
    )
