"""Daily SQL Server -> ClickHouse incremental append of dbo.orders, one partition per order day.

Parsing this file opens no connection, reads no manifest and starts no process: the operator only
stores its arguments. Connections used by the manifest: ``orders_mssql``, ``analytics_clickhouse``,
``dpone_state``.

Two read-only SQL checks run after the transfer, through the same ClickHouse connection: give it dpone's
type (``dpone-clickhouse://...``), which common-sql needs to find dpone's read-only hook for the checks.

Retries are safe: if an attempt fails after the target was touched, the commit guard blocks every
retry before any target I/O until an operator resolves it (see docs/guide/airflow.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.sql.operators.sql import SQLColumnCheckOperator, SQLTableCheckOperator
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
    transfer = NativeTransferOperator(
        task_id="transfer_orders",
        manifest="manifests/orders_incremental.yaml",  # relative to this file's folder
        # downstream DAGs schedule on the target table: schedule=[Asset("clickhouse://.../analytics/orders")]
        outlets=[Asset(name="analytics.orders", uri="clickhouse://analytics-clickhouse/analytics/orders")],
    )
    # Checks on the loaded table through the same connection: DponeClickHouseHook serves read-only SQL
    # (readonly=1 on every request; on chDB it opens the directory only once the transfer task let go).
    # ClickHouse must find one type for the UNION ALL of a column check's results: keep the checks of one
    # operator all counts (null_check, distinct_check), or all signed (unique_check), per operator.
    column_checks = SQLColumnCheckOperator(
        task_id="check_order_columns",
        conn_id="analytics_clickhouse",
        table="analytics.orders",
        column_mapping={
            "id": {"null_check": {"equal_to": 0}, "distinct_check": {"geq_to": 1}},
            "order_date": {"null_check": {"equal_to": 0}},
        },
    )
    table_checks = SQLTableCheckOperator(
        task_id="check_order_rules",
        conn_id="analytics_clickhouse",
        table="analytics.orders",
        checks={"amount_not_negative": {"check_statement": "amount >= 0"}},
    )
    transfer >> [column_checks, table_checks]
