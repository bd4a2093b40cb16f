"""Publishing a staging table: attach its parts when it is defined exactly as its target, else copy.

``INSERT INTO target SELECT ... FROM staging`` reads, sorts and writes every staged row again: about a
tenth of a staged 1M-row run, and a second full write of the data on a large load. dpone creates a
staging table exactly as it creates the target (``table_schema.create_staging_sql``). When the two
definitions are the same, ``ALTER TABLE target ATTACH PARTITION ID ... FROM staging`` adds the staging
table's parts to the target as they are (hard links; no row is read or written again). A table without a
partition key, as dpone creates them, has one partition, so the publish is one statement.

Parts are attached only when every one of these holds, else the rows are copied as before:

* both tables are plain ``MergeTree`` (not replicated, replacing or a view);
* their ``CREATE TABLE`` texts are the same but for the two tables' own names: columns, types, defaults,
  codecs, key, partitioning, TTL, indexes and settings (a target created by hand another way is converted
  by the copy, which attaching could not do);
* no materialized view reads from the target: an insert feeds such a view, attaching parts does not;
* the staging table's active parts hold, by ``system.parts``, exactly the rows it counts. An answer cut
  right after its headers arrives whole and empty through an HTTP/1.0 proxy (nginx's default): read as
  "no part", the publish attached nothing and reported the staged rows published (exit 0, target empty;
  ADR 0094, addendum). A list that does not add up is not used: the rows are copied.
"""

from __future__ import annotations

import logging

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_identifier, quote_string

log = logging.getLogger(__name__)


def attachable_partitions(
    client: Client, staging: TableName, target: TableName, *, rows: int
) -> list[str] | None:
    """The staging table's partition IDs to attach to ``target``, or ``None``: publish by copying.
    ``rows``: the staging table's ``count()``, which its parts' rows must add up to.

    A server that refuses these reads of its system tables (one without a column they name) is published
    into by copying, as before; a failure to reach it is raised (the copy could not run either)."""
    try:
        return _attachable(client, staging, target, rows)
    except OperationalError:
        raise
    except DatabaseError:
        return None


def _attachable(client: Client, staging: TableName, target: TableName, rows: int) -> list[str] | None:
    tables = client.query(
        "SELECT name, engine, create_table_query, dependencies_table FROM system.tables"
        f" WHERE database = {quote_string(target.database)}"
        f" AND name IN ({quote_string(staging.table)}, {quote_string(target.table)})"
    ).result_rows
    found = {str(row[0]): row for row in tables}
    staged, published = found.get(staging.table), found.get(target.table)
    if staging.database != target.database or staged is None or published is None:
        return None
    if staged[1] != "MergeTree" or published[1] != "MergeTree" or list(published[3]):
        return None
    if not same_definition(str(staged[2]), staging, str(published[2]), target):
        return None
    parts = client.query(
        "SELECT partition_id, sum(rows) FROM system.parts"
        f" WHERE database = {quote_string(staging.database)} AND table = {quote_string(staging.table)}"
        " AND active GROUP BY partition_id ORDER BY partition_id"
    ).result_rows
    listed = sum(int(row[1]) for row in parts)
    if listed != rows:  # an answer cut short (or empty) lists fewer: attaching it would publish fewer rows
        log.warning(
            "the parts listed of staging table %s hold %d of its %d rows; its rows are copied instead",
            staging,
            listed,
            rows,
        )
        return None
    return [str(row[0]) for row in parts]


def same_definition(staging_query: str, staging: TableName, target_query: str, target: TableName) -> bool:
    """Whether two ``CREATE TABLE`` texts of one database are the same but for the tables' own names.

    The staging table's name (``_dpone_stage_`` and hex) is never quoted, so its text splits exactly into
    ``CREATE TABLE <database>.`` + name + definition. The target's text must start with the same
    ``CREATE TABLE <database>.`` and its name as the server prints it (bare or back-quoted), and end with
    the same definition: nothing but the names is left out of the comparison, so a text the server prints
    any other way compares unequal and the rows are copied."""
    marker = "." + staging.table + " ("
    cut = staging_query.find(marker)
    if not staging_query.startswith("CREATE TABLE ") or cut < 0:
        return False
    prefix = staging_query[: cut + 1]
    definition = staging_query[cut + len(marker) - 2 :]
    if not target_query.startswith(prefix):
        return False
    named = target_query[len(prefix) :]
    return any(named == printed + definition for printed in (target.table, quote_identifier(target.table)))


def attach_statement(target: TableName, partition_id: str, staging: TableName) -> str:
    return f"ALTER TABLE {target.sql()} ATTACH PARTITION ID {quote_string(partition_id)} FROM {staging.sql()}"
