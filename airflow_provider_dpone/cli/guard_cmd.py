"""`dpone guard resolve|inspect`: the on-call operator's deliberate repair of a blocked route."""

from __future__ import annotations

import json

import click

from airflow_provider_dpone.cli.audit import operator_identity
from airflow_provider_dpone.cli.output import fail, print_table
from airflow_provider_dpone.contracts.errors import DponeError


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
    help="Resolve as not-applied although the target holds rows within the bounds (see the runbook).",
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
    from airflow_provider_dpone.runtime.guard_resolution import ResolutionRequest, ResolveAs

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
        with open_runtime(loaded, manifest_ref=manifest) as runtime:
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
            f"  target_rows={target_rows} attempt_rows={attempt_rows}"
        )
        if resolve_as == "committed" and attempt_rows is not None and target_rows != attempt_rows:
            click.echo(
                f"warning: {record.bounds.label}: the target holds {target_rows} row(s) within the bounds but the "
                f"attempt exported {attempt_rows}; check the target before the next run",
                err=True,
            )
    click.echo(f"next: dpone run {manifest}   (or clear the Airflow task)")


@guard_group.command("inspect")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--no-source", is_flag=True, help="Do not count source rows (when the source is unavailable).")
@click.option("--json", "as_json", is_flag=True)
def inspect_command(manifest: str, no_source: bool, as_json: bool) -> None:
    """Read-only: rows each blocked attempt recorded, beside what the source and the target hold now."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest

    try:
        loaded = load_manifest(manifest)
        with open_runtime(loaded, manifest_ref=manifest) as runtime:
            rows = runtime.inspect(with_source=not no_source)
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        click.echo(json.dumps({"blocked": [r.as_json() for r in rows]}, sort_keys=True, default=str))
        return
    if not rows:
        click.echo("no blocked partitions")
        return
    print_table(
        ["bounds", "partition_id", "phase", "attempt_rows", "source_rows", "target_rows"],
        [[r.label, r.partition_id, r.phase, r.attempt_rows, r.source_rows, r.target_rows] for r in rows],
    )
    click.echo("This compares counts only; decide after checking the target, then run `dpone guard resolve`.")
