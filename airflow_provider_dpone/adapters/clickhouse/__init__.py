"""ClickHouse target over clickhouse-connect: a server over HTTP or embedded chDB."""

from __future__ import annotations

from airflow_provider_dpone.adapters.clickhouse.client import open_client
from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

__all__ = ["ClickHouseSink", "open_client"]
