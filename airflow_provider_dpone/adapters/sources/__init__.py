"""Relational sources (SQLite, SQL Server over pymssql) behind the ``Source`` port."""

from __future__ import annotations

from airflow_provider_dpone.adapters.sources.factory import open_source

__all__ = ["open_source"]
