"""`dpone guard resolve|inspect|rebaseline`: the on-call operator's deliberate repair of a blocked route."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

from airflow_provider_dpone.cli.audit import operator_identity
from airflow_provider_dpone.cli.output import cell_text, fail, print_table
from airflow_provider_dpone.contracts.errors import DponeError

if TYPE_CHECKING:
    from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
    from airflow_provider_dpone.runtime.route_identity import AdoptionResult


@click.group("guard")
def guard_group() -> None:
    """Inspect and resolve partitions blocked by the target commit guard."""


@guard_group.command("resolve")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--partition", "partitions", multiple=True, help="Blocked partition ID (repeatable).")
@click.option("--all-blocked", is_flag=True, help="Resolve every blocked partition of the route.")
@click.option(
    "--as",
    "resolve_as",
    required=True,
    type=click.Choice(["committed", "not-applied"]),
    help="committed: the target holds the rows; not-applied: it does not (the partition will run again).",
)
@click.option("--reason", required=True, help="Why: what you checked (kept in the audit record).")
@click.option(
    "--force",
    is_flag=True,
    help="Resolve although a count check refuses: not-applied while the target holds rows within the bounds, "
    "committed over a partition the target does not hold whole or on a replacing route (see the runbook).",
)
@click.option("--json", "as_json", is_flag=True)
def resolve_command(
    manifest: str,
    partitions: tuple[str, ...],
    all_blocked: bool,
    resolve_as: str,
    reason: str,
    force: bool,
    as_json: bool,
) -> None:
    """Append an audited resolution for blocked partitions. Never touches the target."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.contracts.errors import ErrorCode
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.guard.resolution import ResolutionRequest, ResolveAs

    try:
        if bool(partitions) == all_blocked:
            raise DponeError(ErrorCode.USAGE, "give either --partition ID (repeatable) or --all-blocked")
        loaded = load_manifest(manifest)
        request = ResolutionRequest(
            partition_ids=None if all_blocked else tuple(partitions),
            resolve_as=ResolveAs(resolve_as),
            reason=reason,
            actor=operator_identity(),
            force=force,
        )
        with open_runtime(loaded, manifest_ref=manifest, existing_store=True) as runtime:
            records = runtime.resolve_guards(request)
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        click.echo(json.dumps({"resolved": [r.model_dump(mode="json") for r in records]}, sort_keys=True))
        return
    for record in records:
        audit = record.diagnostics.get("resolution")
        counts = audit if isinstance(audit, dict) else {}
        target_rows, attempt_rows = counts.get("target_rows"), counts.get("attempt_rows")
        click.echo(
            f"resolved {record.bounds.label}  id={record.partition_id}  as {resolve_as} -> {record.status.value}"
            f"  target_rows={cell_text(target_rows)} attempt_rows={cell_text(attempt_rows)}"
        )
        others = counts.get("other_routes_rows")
        own = (
            target_rows - others if isinstance(target_rows, int) and isinstance(others, int) else target_rows
        )
        if resolve_as == "committed" and attempt_rows is not None and own != attempt_rows:
            theirs = f" ({others} of them other routes' commits)" if others else ""
            click.echo(
                f"warning: {record.bounds.label}: the target holds {target_rows} row(s) within the bounds{theirs} "
                f"but the attempt exported {attempt_rows}; check the target before the next run",
                err=True,
            )
    fed = _views_fed_of(records)
    if fed:
        from airflow_provider_dpone.runtime.guard.resolution import views_fed_warning

        views, labels = fed
        click.echo(f"warning: {views_fed_warning(views, labels)}", err=True)
    click.echo(f"next: dpone run {shlex.quote(manifest)}   (or clear the Airflow task)")


def _views_fed_of(records: list[PartitionCheckpoint]) -> tuple[list[str], list[str]] | None:
    """The views a ``not-applied`` resolution recorded (``views_fed`` in its audit), and the bounds of the
    partitions recorded with them; None when none was."""
    views: list[str] = []
    labels: list[str] = []
    for record in records:
        audit = record.diagnostics.get("resolution")
        fed = audit.get("views_fed") if isinstance(audit, dict) else None
        if isinstance(fed, list) and fed:
            views = [str(v) for v in fed]
            labels.append(record.bounds.label)
    return (views, labels) if labels else None


@guard_group.command("inspect")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--no-source", is_flag=True, help="Do not count source rows (when the source is unavailable).")
@click.option("--json", "as_json", is_flag=True)
def inspect_command(manifest: str, no_source: bool, as_json: bool) -> None:
    """Read-only: rows each blocked attempt recorded, beside what the source and the target hold now."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.guard.inspection import another_target_lines

    try:
        loaded = load_manifest(manifest)
        with open_runtime(loaded, manifest_ref=manifest, read_only=True) as runtime:
            rows = runtime.inspect(with_source=not no_source)
            busy = runtime.writes_in_flight() if rows else None
            views = runtime.views_fed_by_target() if rows else []
            with_source_counts = not no_source
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        found = {
            "blocked": [r.as_json() for r in rows],
            "in_flight": None if busy is None else busy.details,
            "views_fed": views,
        }
        click.echo(json.dumps(found, sort_keys=True, default=str))
        return
    if not rows:
        click.echo("no blocked partitions")
        return
    if busy is not None:  # before the counts: they are not final
        click.echo(f"warning: {busy.safe_message}", err=True)
        for line in busy.hint_lines:
            click.echo(f"  {line}", err=True)
    for n, line in enumerate(another_target_lines(rows)):  # before the counts: not the attempt's target
        click.echo(f"warning: {line}" if n == 0 else line, err=True)
    print_table(
        [
            "bounds",
            "partition_id",
            "phase",
            "attempt_rows",
            "source_rows",
            "target_rows",
            "other_routes_rows",
        ],
        [
            [
                r.label,
                r.partition_id,
                r.phase,
                r.attempt_rows,
                r.source_rows,
                r.target_rows,
                r.other_routes_rows,
            ]
            for r in rows
        ],
    )
    for route in sorted({r.route for r in rows if r.source_rows is None and r.route}):
        if with_source_counts:
            click.echo(
                f"partitions of route {route} (another route of this target): its source is not this "
                "manifest's; inspect them with that route's manifest"
            )
    if any(r.other_routes_rows for r in rows):
        click.echo(
            "other_routes_rows: rows other routes committed within the same bounds (several source tables "
            "in one target); they are in target_rows and are not the attempt's: never delete by bounds alone"
        )
    for r in rows:
        if r.other_routes_rows_lost_by:
            click.echo(
                f"warning: {r.label}: the target holds {r.target_rows} row(s) within the bounds, fewer than the "
                f"{r.other_routes_rows} that route(s) {', '.join(r.other_routes_rows_lost_by)} committed there: "
                "their rows were deleted (a delete by the bounds alone?) and no run of theirs loads them again; "
                "restore them before you resolve (`guard resolve` refuses until then)",
                err=True,
            )
    if views:
        click.echo(
            f"warning: the target feeds {len(views)} view(s) ({', '.join(views)}): every row an attempt inserted "
            "is in their tables too, and deleting it from the target does not remove it there; if you delete "
            "an attempt's rows, take the same rows out of each view's table (its TO table, or its inner table) "
            "before the next run, or it feeds them again",
            err=True,
        )
    click.echo("This compares counts only; decide after checking the target, then run `dpone guard resolve`.")


@guard_group.command("rebaseline")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--reason", required=True, help="What changed and what you checked (kept in the audit record).")
@click.option(
    "--adopt-target",
    is_flag=True,
    help="For a route the checkpoint store does not know: record the partitions whose target rows equal the "
    "source rows within their bounds (read-only counts on both sides).",
)
@click.option(
    "--release-partial",
    is_flag=True,
    help="Kept for scripts: refused while the target holds rows within a partly covered partition; once you "
    "deleted them, the next run moves the partition whole by itself, so nothing is left to release.",
)
@click.option(
    "--source-moved",
    is_flag=True,
    help="The route's table moved to this manifest's source connection (a renamed connection, a moved file): "
    "record it as the route's source. Never for another database holding a table of the same name.",
)
@click.option(
    "--target-moved",
    is_flag=True,
    help="The route's target is now reached where this manifest's sink connection leads (a new host name or "
    "port for the same server, a moved chDB folder): record it as the route's target. Never for another "
    "environment sharing this checkpoint store: give that one a store of its own.",
)
@click.option(
    "--schema-checked",
    is_flag=True,
    help="The schema changed and you checked that the target's rows already hold the new schema's values "
    "(only the order of columns changed; a target made by hand with columns or types of its own; an added "
    "column's target DEFAULT is what the source holds in every old row): record those partitions too. "
    "Without it they stay blocking: reload them. Refused while the target lacks a column the route writes.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --source-moved only: record the move although the connection holds other keys than the target "
    "in partitions of equal row counts (you checked it IS the moved table and those partitions changed at "
    "the source since their commit; reload them afterwards, see the runbook).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def rebaseline_command(
    manifest: str,
    reason: str,
    adopt_target: bool,
    release_partial: bool,
    source_moved: bool,
    target_moved: bool,
    schema_checked: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Record the new definition of a route over what its old one (or the target) already holds.

    After a manifest edit of an incremental_append route (source.columns, source.query, partitioning, or
    its strategy switched back) gave the partitions new IDs, the new partitions fully covered by partitions
    committed under the old definition, whose source rows under the new definition are the rows those
    committed, are recorded as committed, with an audit naming the old ones; the others are listed and
    stay blocking (exit 3). Never writes the target. A replacing route needs
    none (refused). With --source-moved: the route's table is now read through this manifest's source
    connection; one audited record names it, so runs from it are no longer stopped. It compares the keys
    of every committed partition on this connection with the target's first, and refuses where they differ
    behind equal counts (another database's table) unless --force. --target-moved does the same for the
    sink connection.
    """
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.contracts.errors import ErrorCode
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.route_identity import AdoptionResult, RebaselineRequest

    try:
        loaded = load_manifest(manifest)
        request = RebaselineRequest(reason=reason, actor=operator_identity(), schema_checked=schema_checked)
        # adopting a target may start a new store; every other rebaseline records over an existing history
        with open_runtime(loaded, manifest_ref=manifest, existing_store=not adopt_target) as runtime:
            if adopt_target + release_partial + source_moved + target_moved > 1:
                raise DponeError(
                    ErrorCode.USAGE,
                    "--adopt-target, --release-partial, --source-moved and --target-moved do not combine",
                )
            if force and not source_moved:
                raise DponeError(ErrorCode.USAGE, "--force applies to --source-moved only")
            if source_moved:
                moved = runtime.record_source_move(request, force=force)
            elif target_moved:
                moved = runtime.record_target_move(request)
            else:
                result = runtime.rebaseline(
                    request, adopt_target=adopt_target, release_partial=release_partial
                )
    except DponeError as err:
        fail(err, as_json)
        return
    if source_moved or target_moved:
        _print_move(moved, "source" if source_moved else "target", manifest, as_json)
        return
    if isinstance(result, AdoptionResult):
        _print_adoption(result, manifest, as_json)
        return
    if as_json:
        payload = {
            "recorded": [r.model_dump(mode="json") for r in result.recorded],
            "partially_covered": [o.as_json() for o in result.partial],
            "rows_differ": [d.as_json() for d in result.rows_differ],
            "schema_unchecked": list(result.schema_unchecked),
            "released": [r.model_dump(mode="json") for r in result.released],
            "notices": list(result.notices),
        }
        click.echo(json.dumps(payload, sort_keys=True))
        if result.partial:
            sys.exit(3)  # as the text output: partitions stay blocking
        return
    if not result.recorded and not result.partial and not result.released:
        click.echo(
            "nothing to rebaseline: no partition to move overlaps one committed under another definition"
        )
        return
    for record in result.recorded:
        audit = record.diagnostics.get("rebaseline")
        old = audit.get("old_partitions") if isinstance(audit, dict) else None
        click.echo(
            f"recorded {record.bounds.label}  id={record.partition_id}  as COMMITTED  "
            f"covered by {len(old) if isinstance(old, list) else '?'} old partition(s)  rows={record.rows}"
        )
    for record in result.released:
        click.echo(
            f"released old {record.bounds.label}  id={record.partition_id}  (not loaded; the new partition loads it)"
        )
    differ = {d.partition_id: d for d in result.rows_differ}
    unchecked = set(result.schema_unchecked)
    for overlap in result.partial:
        changed = differ.get(overlap.partition.partition_id)
        if overlap.partition.partition_id in unchecked:
            click.echo(
                f"still blocking {overlap.partition.bounds.label}  id={overlap.partition.partition_id}: the schema "
                "changed, and row counts cannot show whether the target's rows hold the new columns' values (a "
                "column added to the target gives every old row its default): reload it (delete this route's "
                "rows within it, then run), or, where you checked the values are right (only the order or "
                "the nullability of columns changed; a target made by hand with columns or types of its own; "
                "an added column whose DEFAULT is what the source holds), rebaseline with --schema-checked; "
                "see `dpone runbook guard`",
                err=True,
            )
            continue
        why = (
            f"only partly covered by {len(overlap.committed)} old partition(s)"
            if changed is None
            else f"the source holds {changed.source_rows} row(s) within it under the new definition, the old "
            f"partition(s) committed {'an unknown number' if changed.committed_rows is None else changed.committed_rows}"
            ": the target lacks rows or holds others"
        )
        click.echo(
            f"still blocking {overlap.partition.bounds.label}  id={overlap.partition.partition_id}: {why}: delete "
            "this route's rows within it (where other source tables append into the same table, theirs must "
            "stay: never delete by the bounds alone), then run (it loads whole); see `dpone runbook guard`",
            err=True,
        )
    for line in result.notices:
        click.echo(f"  note: {line}")
    if result.partial:
        sys.exit(3)
    click.echo(f"next: dpone run {shlex.quote(manifest)}   (only what is new is moved)")


def _print_move(moved: PartitionCheckpoint, role: str, manifest: str, as_json: bool) -> None:
    """What ``--source-moved`` or ``--target-moved`` recorded, with a warning when the connection's rows
    within the copied partition are not the committed ones (it may name another table than the one that
    moved)."""
    if as_json:
        click.echo(json.dumps({"recorded": [moved.model_dump(mode="json")]}, sort_keys=True))
        return
    click.echo(
        f"recorded {moved.bounds.label}  id={moved.partition_id}  as COMMITTED through this {role} connection "
        "(a copy of the route's newest commit; nothing else changed)"
    )
    audit = moved.diagnostics.get("rebaseline")
    now = audit.get(f"{role}_rows_now") if isinstance(audit, dict) else None
    if now is not None and now != moved.rows:
        other = "reads another database's table" if role == "source" else "writes another table or server"
        click.echo(
            f"warning: this {role} connection holds {now} row(s) within {moved.bounds.label}, the commit "
            f"recorded {moved.rows}: if it {other}, this was no move; see `dpone runbook guard`, "
            f"'The route's {role} changed'",
            err=True,
        )
    if role == "source" and isinstance(audit, dict):
        _print_keys_of_move(audit)
    click.echo(
        f"next: dpone run {shlex.quote(manifest)}   (only what is new is moved, through this {role} connection)"
    )


def _print_keys_of_move(audit: Mapping[str, object]) -> None:
    """What ``--source-moved`` compared of the keys (``runtime.key_fingerprint``), from its audit."""
    unusable = audit.get("keys_not_compared")
    if isinstance(unusable, str):
        click.echo(
            f"warning: keys not compared: {unusable}; only row counts were checked, and they cannot tell "
            "another database's table of equal counts (a shard) from the moved one: check this connection's "
            "keys against the target's yourself before the next run",
            err=True,
        )
        return
    columns = audit.get("key_columns")
    named = ", ".join(str(c) for c in columns) if isinstance(columns, list) else "?"
    differ = audit.get("keys_differ")
    if isinstance(differ, list) and differ:
        click.echo(
            f"warning: recorded with --force although keys ({named}) differ from the target's in "
            f"{len(differ)} partition(s) of equal counts ({', '.join(str(d) for d in differ[:10])}): reload "
            "them (see `dpone runbook guard`, 'Drifted partitions')",
            err=True,
        )
        return
    compared = audit.get("keys_compared")
    if not compared:
        click.echo(
            f"warning: recorded with --force although no committed partition's keys ({named}) could be "
            "compared (other counts on the source or in the target in each): compare this connection's ids "
            "with the target's yourself before the next run",
            err=True,
        )
        return
    click.echo(
        f"keys ({named}) match the target's in {compared} committed partition(s) of equal counts (ids only: "
        "a database numbering its rows alike, at the same pace, matches too; compare a few rows' values)"
    )


def _print_adoption(result: AdoptionResult, manifest: str, as_json: bool) -> None:
    if as_json:
        payload = {
            "recorded": [r.model_dump(mode="json") for r in result.recorded],
            "left_to_run": [
                {
                    "partition_id": c.partition.partition_id,
                    "bounds": c.partition.bounds.label,
                    "source_rows": c.source_rows,
                }
                for c in result.left_to_run
            ],
            "notices": list(result.notices),
        }
        click.echo(json.dumps(payload, sort_keys=True))
        return
    for record in result.recorded:
        click.echo(
            f"adopted {record.bounds.label}  id={record.partition_id}  rows={record.rows}  as COMMITTED"
        )
    for count in result.left_to_run:
        theirs = (
            f" ({count.others_rows} row(s) there were committed by other source tables' routes)"
            if count.others_rows
            else ""
        )
        click.echo(f"left to run {count.partition.bounds.label}: the target holds none of its rows{theirs}")
    for line in result.notices:
        click.echo(f"  note: {line}")
    if any(c.others_rows for c in result.left_to_run):
        click.echo(
            "warning: other routes of this target committed rows within these bounds; if one of them reads "
            "this very table spelled another way (a three-part name, another schema or database name), this "
            "route would move its rows a second time: spell the table as that route does instead "
            "(`dpone checkpoints` of its manifest names its source table)",
            err=True,
        )
    if not result.recorded:
        click.echo(
            "nothing adopted: the target holds none of the planned partitions' rows; if its rows are another "
            f"writer's, run once with: dpone run {shlex.quote(manifest)} --allow-nonempty-target"
        )
        return
    click.echo(
        f"next: dpone run {shlex.quote(manifest)}   (only partitions the target does not hold are moved)"
    )
