"""Many routes in one DAG: one mapped task instance per manifest (dynamic task mapping).

Each manifest is its own route with its own checkpoints and guard; a failed instance retries and blocks
alone. Two instances never write one target at once: the route lease makes the second stop with
``native_transfer_route_busy`` (a retryable failure) until the first has ended. Parsing opens nothing: the
manifest paths are plain strings, read by each instance in ``execute()``.

Shards (several databases holding a table of the same name) are mapped the same way, one manifest each,
each with a ``sink.table`` of its own: mapped over ``source_conn_id`` with one manifest they would be one
route, and every instance after the first stops (``changed: source``, see ``dpone runbook guard``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset

from airflow_provider_dpone.operators.native_transfer import NativeTransferOperator

MANIFESTS = [
    "manifests/orders_incremental.yaml",
    "manifests/customers_full_refresh.yaml",
]

with DAG(
    dag_id="dpone_many_routes",
    description="one mapped NativeTransferOperator instance per manifest",
    schedule="30 3 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 3, "retry_delay": timedelta(minutes=5)},
    tags=["dpone", "example"],
) as dag:
    NativeTransferOperator.partial(
        task_id="transfer",
        # downstream DAGs can schedule on the targets (schedule=[Asset(...)])
        outlets=[
            Asset(name="analytics.orders", uri="clickhouse://analytics-clickhouse/analytics/orders"),
            Asset(name="analytics.customers", uri="clickhouse://analytics-clickhouse/analytics/customers"),
        ],
    ).expand(manifest=MANIFESTS)
