"""Monthly replace_partition load of dbo.order_lines with durable quality replay switched on.

``sink.options.durable_quality_replay: true`` in the manifest is read at execute time only, like the
rest of the manifest: parsing this DAG spawns no reader worker and opens nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10
    from airflow import DAG  # type: ignore[no-redef,attr-defined]

with DAG(
    dag_id="dpone_order_lines_quality_replay",
    description="dbo.order_lines -> analytics.order_lines (replace_partition, durable quality replay)",
    # the 2nd at 06:00 UTC: last month has settled by then (the manifest's `settle: 1d`)
    schedule="0 6 2 * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=15)},
    tags=["dpone", "example"],
) as dag:
    NativeTransferOperator(
        task_id="replace_order_lines",
        manifest="manifests/orders_quality_replay.yaml",
    )
