"""`dpone replay status|resolve`: durable quality capsules and retained reader guards of a route."""

from __future__ import annotations

import json
import shlex

import click

from airflow_provider_dpone.cli.audit import operator_identity
from airflow_provider_dpone.cli.output import fail, print_table, require_run_id
from airflow_provider_dpone.contracts.errors import DponeError


@click.group("replay")
def replay_group() -> None:
    """Inspect and resolve durable quality replay (capsules, reader guards) of a route."""


@replay_group.command("status")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--run-id", help="Also show this run's operation, even when no checkpoint references it.")
@click.option("--json", "as_json", is_flag=True)
def status_command(manifest: str, run_id: str | None, as_json: bool) -> None:
    """Read-only: every operation's capsule state, reader guard and whether it blocks the route."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.replay.scan import ANOTHER_MANIFEST

    try:
        loaded = load_manifest(manifest)
        with open_runtime(loaded, manifest_ref=manifest, read_only=True) as runtime:
            status = runtime.replay_status(require_run_id(run_id))
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        click.echo(json.dumps(status.as_json(), sort_keys=True))
        return
    if status.operations:
        print_table(
            ["run_id", "operation_id", "state", "verdict", "reader_guard", "partitions", "blocking"],
            [
                [
                    r.run_id,
                    r.operation_id,
                    r.state.value + (" (closed by operator)" if r.closed_by_operator else ""),
                    r.verdict.label if r.verdict is not None else None,
                    r.reader_guard.state.value if r.reader_guard is not None else None,
                    len(r.partitions),
                    "yes" if r.blocking else "no",
                ]
                for r in status.operations
            ],
        )
        for r in status.operations:
            if r.blocking and r.operation_id in status.under_another_manifest:
                click.echo(f"run {r.run_id}: {ANOTHER_MANIFEST}")
    else:
        click.echo("no operation of this route has a durable quality capsule")
    if status.unverified:
        label = "REQUIRED/UNVERIFIED" if status.selector_on else "no capsule (durable replay is off)"
        click.echo(
            f"{len(status.unverified)} committed partition(s) have no original durable proof: {label}. "
            "No later scan can certify them."
        )
    for checkpoint in status.invalid_references:
        click.echo(
            f"partition {checkpoint.bounds.label} ({checkpoint.partition_id}): malformed capsule reference"
        )
    click.echo("route is BLOCKED" if status.blocked else "route is not blocked by durable quality replay")


@replay_group.command("resolve")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--run-id", required=True, help="Run ID of the operation to resolve.")
@click.option(
    "--as",
    "resolve_as",
    required=True,
    type=click.Choice(["retry", "failed"]),
    help="retry: release a retained reader guard (after verifying its worker is gone) so a retry can "
    "observe again; failed: close the operation as failed and unblock the route.",
)
@click.option("--reason", required=True, help="What you checked (kept in the audit record).")
@click.option("--json", "as_json", is_flag=True)
def resolve_command(manifest: str, run_id: str, resolve_as: str, reason: str, as_json: bool) -> None:
    """Audited operator resolution of a blocked operation. Never touches the source or the target."""
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.replay.resolution import (
        ReplayResolutionRequest,
        ReplayResolveAs,
    )
    from airflow_provider_dpone.runtime.replay.scan import ANOTHER_MANIFEST, recorded_under_another_manifest

    try:
        loaded = load_manifest(manifest)
        request = ReplayResolutionRequest(
            run_id=str(require_run_id(run_id)),
            resolve_as=ReplayResolveAs(resolve_as),
            reason=reason,
            actor=operator_identity(),
        )
        with open_runtime(loaded, manifest_ref=manifest, existing_store=True) as runtime:
            record, audit = runtime.resolve_replay(request)
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        click.echo(
            json.dumps({"operation": record.as_json(), "audited_partitions": len(audit)}, sort_keys=True)
        )
        return
    click.echo(
        f"resolved run {run_id} as {resolve_as}: state={record.state.value}  "
        f"blocking={'yes' if record.blocking else 'no'}  ({len(audit)} partition(s) audited)"
    )
    if resolve_as != "retry":
        return
    if recorded_under_another_manifest(record, loaded.identity):
        click.echo(f"note: run {run_id}: {ANOTHER_MANIFEST}")
        return
    click.echo(
        f"next: dpone run {shlex.quote(manifest)} --run-id {shlex.quote(run_id)}   (or clear the Airflow task)"
    )
