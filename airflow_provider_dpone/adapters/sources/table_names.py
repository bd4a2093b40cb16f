"""Canonical source table names: one spelling per table, so a respelled manifest keeps its route.

``orders``, ``ORDERS``, ``main.orders`` and ``"orders"`` are one SQLite table; ``orders``, ``dbo.orders``
and ``[dbo].[orders]`` are one SQL Server table. The route key, the partition IDs and the query hash are
built from the canonical form, so none of these respellings can make committed or guarded partitions
invisible. Rules:

* quotes and brackets are removed, the default schema is filled in (``main`` for SQLite, ``dbo`` for SQL
  Server: the login's default schema is assumed to be ``dbo``);
* names are case-folded: SQLite compares ASCII letters case-insensitively, and SQL Server's default
  collations are case-insensitive (a case-sensitive database that really holds ``Orders`` and ``orders``
  as two tables cannot be told apart by this key: give such routes distinct target tables);
* a part that holds a dot, a quote or bracket, or edge whitespace is re-quoted, so the canonical form parses back to itself.

A three-part SQL Server name (``db.dbo.orders``) keeps its catalog: it may name another database than the
connection's. The target-wide guard scan still blocks on its guards, whatever the spelling.
"""

from __future__ import annotations

from airflow_provider_dpone.adapters.sources import mssql_sql, sqlite_sql
from airflow_provider_dpone.adapters.sources.sql_names import SqlBuildError
from airflow_provider_dpone.contracts.manifest import SourceType

SQLITE_DEFAULT_SCHEMA = "main"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _part(name: str) -> str:
    plain = name == name.strip() and not any(ch in name for ch in '."[`')
    return name if plain else '"' + name.replace('"', '""') + '"'


def canonical_source_table(source_type: SourceType, table: str) -> str:
    """The canonical spelling of ``table`` for this source type; an unparsable name is kept as written
    (the source itself then refuses it, before anything is planned)."""
    try:
        if source_type is SourceType.SQLITE:
            ref = sqlite_sql.TableRef.parse(table)
            schema = (ref.schema or SQLITE_DEFAULT_SCHEMA).translate(_ASCII_LOWER)
            return f"{_part(schema)}.{_part(ref.name.translate(_ASCII_LOWER))}"
        mssql = mssql_sql.TableRef.parse(table)
    except SqlBuildError:
        return table.strip()
    parts = [mssql.catalog, mssql.schema, mssql.name]
    return ".".join(_part(p.casefold()) for p in parts if p is not None)
