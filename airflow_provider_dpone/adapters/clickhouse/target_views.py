"""Materialized views a replacing route would feed twice (ADR 0086).

A materialized view is an insert trigger: every block inserted into its source table is passed through the
view's query into the view's own table, and nothing else reaches it. Deleting, truncating or replacing the
source table's rows never removes what the view already received. A ``replace_partition`` or
``full_refresh`` route deletes the rows of every partition it moves and inserts them again, so each run adds
those rows to every view's table once more: seen on chDB, a ``SummingMergeTree`` of daily totals fed from
the target grew by the two lookback days on every run (exit 0) while the target itself stayed exact.

So before arming, a replacing route refuses a target that feeds views (``system.tables``:
``dependencies_database`` / ``dependencies_table`` of the target, the engines of those tables; the same
columns the staged publish reads, on chDB and the 18.16 server alike). A dependent that is a plain ``View``
reads the table when queried and is never fed; any other dependent (a materialized, live or window view, or
one that vanished between the two reads) is counted as fed. The manifest's
``sink.options.allow_target_views: true`` accepts them: every view's table then absorbs repeated rows by
design (a ``ReplacingMergeTree`` keyed by the row), its owner has said so.
"""

from __future__ import annotations

from collections.abc import Sequence

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy

#: A dependent that is read at query time and never receives inserted blocks.
_NOT_FED = "View"


def fed_views(client: Client, dependents: Sequence[tuple[str, str]]) -> list[str]:
    """``db.table`` of every dependent (``TableFacts.dependents``) that inserts reach, sorted."""
    if not dependents:
        return []
    databases = ", ".join(quote_string(database) for database in sorted({d for d, _ in dependents}))
    tables = ", ".join(quote_string(table) for table in sorted({t for _, t in dependents}))
    engines = {
        (str(database), str(table)): str(engine)
        for database, table, engine in client.query(
            f"SELECT database, name, engine FROM system.tables WHERE database IN ({databases})"
            f" AND name IN ({tables})"
        ).result_rows
    }
    return [
        f"{database}.{table}" for database, table in dependents if engines.get((database, table)) != _NOT_FED
    ]


def require_views_fed_once(
    client: Client, name: TableName, dependents: Sequence[tuple[str, str]], replacing: Strategy | None
) -> None:
    """Read-only, before arming: a route that replaces rows (``replacing``: its strategy; ``None`` when it
    only appends or the manifest allows views) refuses a target whose ``dependents`` include fed views."""
    if replacing is None:
        return
    views = fed_views(client, dependents)
    if not views:
        return
    raise DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {name} feeds {len(views)} materialized view(s) ({', '.join(views)}): a "
        f"{replacing.value} route deletes the rows of every partition it moves and inserts them again, and a "
        "view keeps every row it was ever given, so each run would add those rows to the views' tables once "
        "more. Use incremental_append for this target (each partition is inserted once), fill the views "
        "from a table no route replaces, or, when every view's table absorbs repeated rows by design (a "
        "ReplacingMergeTree keyed by the row), set sink.options.allow_target_views: true",
        details={
            "table": str(name),
            "step": "prepare",
            "problem": "target_feeds_views",
            "views": views,
            "strategy": replacing.value,
        },
    )
