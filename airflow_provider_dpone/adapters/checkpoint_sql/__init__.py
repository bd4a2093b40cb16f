"""The SQL checkpoint store (SQLite embedded default, PostgreSQL in production)."""

from __future__ import annotations

from airflow_provider_dpone.adapters.checkpoint_sql.from_endpoint import store_from_endpoint, store_url_for
from airflow_provider_dpone.adapters.checkpoint_sql.store import SqlCheckpointStore
from airflow_provider_dpone.adapters.checkpoint_sql.tables import (
    CHECKPOINT_TABLE,
    DEFINITIONS_TABLE,
    SOURCE_STATE_TABLE,
)

__all__ = [
    "CHECKPOINT_TABLE",
    "DEFINITIONS_TABLE",
    "SOURCE_STATE_TABLE",
    "SqlCheckpointStore",
    "store_from_endpoint",
    "store_url_for",
]
