"""Daily SQL Server -> ClickHouse incremental append of dbo.orders, one partition per order day.

Parsing this file opens no connection, reads no manifest and starts no process: the operator only
stores its arguments. Connections used by the manifest: ``orders_mssql``, ``analytics_clickhouse``,
``dpone_state``.

Retries are safe: if an attempt fails after the target was touched, the commit guard blocks every
retry before any target I/O until an operator resolves it (see docs/guide/airflow.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

with DAG(
    dag_id="dpone_orders_incremental",
    description="dbo.orders -> analytics.orders (incremental_append), daily once the day has settled",
    # 03:00 UTC: yesterday has settled by then (the manifest's `settle: 2h`), so each run moves it
    schedule="0 3 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,  # one writer per route: the guard does not exclude concurrent workers
    default_args={"retries": 3, "retry_delay": timedelta(minutes=5)},
    tags=["dpone", "example"],
) as dag:
    NativeTransferOperator(
        task_id="transfer_orders",
        manifest="manifests/orders_incremental.yaml",  # relative to this file's folder
        # downstream DAGs schedule on the target table: schedule=[Asset("clickhouse://.../analytics/orders")]
        outlets=[Asset(name="analytics.orders", uri="clickhouse://analytics-clickhouse/analytics/orders")],
    )
