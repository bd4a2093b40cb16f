"""Durable quality capsules and reader guards on SQLite or PostgreSQL (SQLAlchemy Core)."""

from airflow_provider_dpone.adapters.capsule_store.capsule_store import SqlCapsuleStore
from airflow_provider_dpone.adapters.capsule_store.reader_guards import SqlReaderGuardStore

__all__ = ["SqlCapsuleStore", "SqlReaderGuardStore"]
