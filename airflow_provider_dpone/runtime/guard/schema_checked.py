"""``dpone guard rebaseline --schema-checked`` is the operator's word that the target's rows already hold
the new definition's values. It cannot be true of a column the target does not have: its values are made
only by the ``ADD COLUMN`` still to come, and an ``ADD COLUMN`` without the source's ``DEFAULT`` gives every
old row its type's zero value. Seen: the word was accepted before the column existed, the column was then
added as ``String``, and 30,000 committed rows read ``''`` where the source held ``'web'``, exit 0 (and
``checkpoints --verify`` saw nothing: counts cannot)."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity


def require_target_columns_for_schema_checked(
    route: RouteIdentity, table: str, missing: Sequence[str] | None
) -> None:
    """Refuse ``--schema-checked`` while ``table`` lacks a column the route's definition writes
    (``missing``), or where its columns could not be read (None). Names columns, never values."""
    if missing is not None and not missing:
        return
    named = ", ".join(repr(name) for name in missing) if missing else ""
    raise DponeError(
        ErrorCode.USAGE,
        (
            f"refusing --schema-checked: target table {table} lacks column(s) {named} that route "
            f"{route.describe()} writes, so no value of them in its rows can have been checked; nothing "
            "was recorded"
            if missing
            else f"refusing --schema-checked: the columns of target table {table} could not be read, so "
            "the new definition's columns in its rows cannot have been checked; nothing was recorded"
        ),
        details={"problem": "schema_checked_without_columns", "table": table, "columns": list(missing or ())},
        hint_lines=(
            "add each missing column to the target with the values the source holds: "
            f"ALTER TABLE {table} ADD COLUMN <column> <type> DEFAULT <the source column's DEFAULT>; a column "
            "added without it gives every row already loaded its type's zero value ('' or 0), which no "
            "count shows",
            "where old source rows hold other values than that DEFAULT (rows updated since), backfill the "
            "rows already in the target from the source, or reload those partitions: delete this route's "
            "rows within them, then run",
            "then compare a sample of the column's values with the source's and rebaseline again with "
            "--schema-checked",
            "runbook:  dpone runbook guard",
        ),
    )
