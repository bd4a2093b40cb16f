"""Publishing a staging table: attach its parts when it is defined exactly as its target, else copy.

``INSERT INTO target SELECT ... FROM staging`` reads, sorts and writes every staged row again: about a
tenth of a staged 1M-row run, and a second full write of the data on a large load. dpone creates a
staging table exactly as it creates the target (``table_schema.create_staging_sql``). When the two
definitions are the same, ``ALTER TABLE target ATTACH PARTITION ID ... FROM staging`` adds the staging
table's parts to the target as they are (hard links; no row is read or written again). A table without a
partition key, as dpone creates them, has one partition, so the publish is one statement.

Parts are attached only when every one of these holds, else the rows are copied as before:

* both tables are plain ``MergeTree`` (not replicated, replacing or a view);
* their ``CREATE TABLE`` text is the same after the table's name: columns, types, defaults, codecs, key,
  partitioning, TTL, indexes and settings (a target created by hand another way is converted by the
  copy, which attaching could not do);
* no materialized view reads from the target: an insert feeds such a view, attaching parts does not.
"""

from __future__ import annotations

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string

_CREATE = "CREATE TABLE "


def attachable_partitions(client: Client, staging: TableName, target: TableName) -> list[str] | None:
    """The staging table's partition IDs to attach to ``target``, or ``None``: publish by copying."""
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
    definition = definition_of(str(staged[2]))
    if definition is None or definition != definition_of(str(published[2])):
        return None
    parts = client.query(
        "SELECT DISTINCT partition_id FROM system.parts"
        f" WHERE database = {quote_string(staging.database)} AND table = {quote_string(staging.table)}"
        " AND active ORDER BY partition_id"
    ).result_rows
    return [str(row[0]) for row in parts]


def definition_of(create_query: str) -> str | None:
    """A ``CREATE TABLE`` text from the first `` (`` after the name on (``None``: not such a text).

    A name holding `` (`` cuts it early, so the two texts differ and the rows are copied: the comparison
    can only err towards copying."""
    if not create_query.startswith(_CREATE):
        return None
    _name, opening, rest = create_query[len(_CREATE) :].partition(" (")
    return rest if opening else None


def attach_statement(target: TableName, partition_id: str, staging: TableName) -> str:
    return f"ALTER TABLE {target.sql()} ATTACH PARTITION ID {quote_string(partition_id)} FROM {staging.sql()}"
