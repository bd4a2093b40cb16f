"""`dpone run MANIFEST [--run-id ID] [--json]`: one guarded run of the manifest's route."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import click

from airflow_provider_dpone.cli.output import fail
from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.report import RunReport


def default_run_id() -> str:
    return "manual__" + datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def print_report(report: RunReport) -> None:
    moved = [p for p in report.partitions if p.decision == "run"]
    click.echo(
        f"route {report.route}: {report.partitions_committed} partition(s) committed, "
        f"{report.partitions_skipped} skipped (already committed), {report.rows_committed:,} rows "
        f"in {report.seconds:.2f}s"
    )
    click.echo(f"  path: {report.export} + {report.load}   run: {report.run_id}")
    if report.checkpoint_batch_id:
        click.echo(f"  checkpoint batch: {report.checkpoint_batch_id}")
    if not moved and not (report.quality and report.quality.replayed):
        click.echo("  nothing to do: every partition is already committed")
    quality = report.quality
    if quality is not None:
        failed = [c for c in quality.checks if c.status == "failed"]
        unavailable = [c for c in quality.checks if c.status == "unavailable"]
        line = f"  quality: {quality.verdict} ({len(quality.checks)} check(s)"
        if failed:
            line += f", {len(failed)} failed"
        if unavailable:
            line += f", {len(unavailable)} unavailable"
        line += ")"
        if quality.durable_replay:
            line += f"  capsule: {quality.capsule_state or '-'}"
            if quality.replayed:
                line += "  (replayed from durable evidence; source and target untouched)"
        click.echo(line)
        for check in failed:
            columns = ",".join(check.columns) or "-"
            click.echo(f"    failed: {check.check} [{columns}] severity={check.severity}")


def execute_run(manifest_path: str, run_id: str | None, as_json: bool) -> RunReport:
    from airflow_provider_dpone.cli.progress_display import TerminalProgress
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest

    loaded = load_manifest(manifest_path)
    progress = None if as_json or not sys.stderr.isatty() else TerminalProgress()
    with open_runtime(loaded, manifest_ref=manifest_path, progress=progress) as runtime:
        return runtime.run(run_id or default_run_id())


@click.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--run-id", help="Run identity; retries of one run must share it (default: a new manual run).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report instead of text.")
def run_command(manifest: str, run_id: str | None, as_json: bool) -> None:
    """Move the manifest's route from source to target, guarded and resumable."""
    try:
        report = execute_run(manifest, run_id, as_json)
    except DponeError as err:
        fail(err, as_json)
        return
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), sort_keys=True))
    else:
        print_report(report)
