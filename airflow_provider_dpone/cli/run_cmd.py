"""`dpone run MANIFEST [--run-id ID] [--json]`: one guarded run of the manifest's route."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

import click

from airflow_provider_dpone.cli.output import (
    DEBUG_META_KEY,
    fail,
    notices_echoed,
    remember_debug,
    reporting_errors,
    require_run_id,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.report import COMPARED_NOTHING, RunReport

#: The first hint line of a route left blocked by an interrupted run (replaces "this attempt wrote nothing").
INTERRUPTED_LINE = (
    "the run was interrupted (SIGINT) after the target was invoked; the target may hold some or all "
    "of the batch, and the route stays blocked until an operator resolves it."
)


class Terminated(BaseException):
    """SIGTERM (systemd, Kubernetes) as an exception raised in the main thread, like Ctrl-C's
    ``KeyboardInterrupt``: every ``finally`` runs, so a reader worker is killed and reaped, its guard is
    released or kept by the rules, and the guard lifecycle records the phase the run reached."""


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, lambda *_: None)  # a second SIGTERM must not cut the cleanup short
    raise Terminated()


@contextmanager
def sigterm_as_exception() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def default_run_id() -> str:
    return "manual__" + datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def print_report(report: RunReport) -> None:
    held_open = sum(1 for p in report.partitions if p.reason == "open_partition")
    open_text = f", {held_open} held back (still open: source.partitioning.settle)" if held_open else ""
    click.echo(
        f"route {report.route}: {report.partitions_committed} partition(s) committed, "
        f"{report.partitions_skipped - held_open} skipped (already committed){open_text}, "
        f"{report.rows_committed:,} rows in {report.seconds:.2f}s"
    )
    click.echo(f"  path: {report.export} + {report.load}   run: {report.run_id}")
    if report.checkpoint_batch_id:
        click.echo(f"  checkpoint batch: {report.checkpoint_batch_id}")
    idle = report.idle_reason()
    if idle is not None:
        click.echo(f"  {idle}")
    # report.notices were printed as the run made them (output.notices_echoed)
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
                line += "  (replayed from durable evidence; source untouched, target only counted)"
        click.echo(line)
        for check in failed:
            columns = ",".join(check.columns) or "-"
            click.echo(f"    failed: {check.check} [{columns}] severity={check.severity}")
        for check in quality.checks:
            if check.status == "passed" and check.reason == COMPARED_NOTHING:
                columns = ",".join(check.columns) or "-"
                click.echo(
                    f"    not compared: {check.check} [{columns}]: only the source was counted; on load: direct "
                    "it needs sink.options.durable_quality_replay: true (or load: staged) to compare anything"
                )
        if quality.unverified_partitions:
            click.echo(
                f"  quality: {quality.unverified_partitions} committed partition(s) REQUIRED/UNVERIFIED "
                "(committed without original durable proof; no later run certifies them; "
                "inspect: dpone replay status)"
            )


def execute_run(
    manifest_path: str, run_id: str | None, as_json: bool, *, allow_nonempty_target: bool = False
) -> RunReport:
    from airflow_provider_dpone.cli.progress_display import progress_for
    from airflow_provider_dpone.compose import open_runtime
    from airflow_provider_dpone.manifests.loader import load_manifest

    loaded = load_manifest(manifest_path)
    with (
        notices_echoed(as_json),
        progress_for(as_json) as progress,
        open_runtime(loaded, manifest_ref=manifest_path, progress=progress) as runtime,
    ):
        return runtime.run(run_id or default_run_id(), allow_nonempty_target=allow_nonempty_target)


def blocked_after_interrupt(manifest_path: str, signal_name: str = "SIGINT") -> DponeError | None:
    """The route's blocked error as the next run would meet it, or None when the route is clear.

    Read after an interrupt inside a run: the guard records the run left (armed, or target_outcome_unknown)
    are what an operator must now resolve, so they are shown as a target failure's would be.
    """
    from airflow_provider_dpone.cli.checkpoints_cmd import read_latest
    from airflow_provider_dpone.manifests.loader import load_manifest
    from airflow_provider_dpone.runtime.guard.route_guard import require_clear_route

    loaded = load_manifest(manifest_path)
    latest = read_latest(loaded, manifest_path)
    try:
        require_clear_route(loaded.route, latest, shlex.quote(manifest_path))  # printed to be pasted
    except DponeError as blocked:
        hints = list(blocked.hint_lines)
        line = INTERRUPTED_LINE.replace("(SIGINT)", f"({signal_name})")
        if hints and "this attempt wrote nothing" in hints[0]:
            hints[0] = line
        else:
            hints.insert(0, line)
        return DponeError(
            blocked.code,
            f"{blocked.safe_message} (the run was interrupted)",
            details={**blocked.details, "interrupted": True},
            hint_lines=tuple(hints),
        )
    return None


#: Failures of a call that may have begun writing the target (the guard then records the outcome unknown).
_TARGET_FAILURES = frozenset(
    {ErrorCode.TARGET_LOAD_FAILED, ErrorCode.TARGET_UNREACHABLE, ErrorCode.TARGET_QUERY_FAILED}
)


def _say_the_route_is_blocked(failed: DponeError, manifest: str) -> None:
    """After a target or checkpoint-store failure that left the route blocked, its error says so and what
    to do next (the same object, so its traceback and code are kept); best effort: a store that cannot be
    read says nothing. A store failure that left the route clear (before arming) adds nothing."""
    try:
        blocked = blocked_after_interrupt(manifest, "target failure")
    except Exception:  # never mask the failure being reported
        return
    if blocked is None:
        return
    lines = [line for line in blocked.hint_lines if "interrupted" not in line]
    why = (
        "the route is now blocked: the checkpoint store failed while this attempt was armed or committing, so "
        "the target may hold its rows (all of them, if its target call had succeeded)"
        if failed.code is ErrorCode.CHECKPOINT_STORE_FAILED
        else "the route is now blocked: the target may hold part of this attempt's rows, and the server may "
        "still be running its statement (guard resolve waits for it)"
    )
    failed.hint_lines = (*failed.hint_lines, why, *lines)
    # --json prints details, not hints: a script learns the blocked state there (the code stays the failure's)
    failed.details["route_blocked"] = True
    failed.details["blocked_partitions"] = blocked.details.get("partitions", [])


def _report_interrupt(manifest: str, as_json: bool, signal_name: str = "SIGINT") -> None:
    """After Ctrl-C or SIGTERM: the blocked-route text when the run left the route blocked, else
    click's ``Aborted!`` (exit 1; 143 after SIGTERM)."""
    try:
        blocked = blocked_after_interrupt(manifest, signal_name)
    except Exception:  # the store cannot be read now: say where to look instead
        click.echo(
            "Aborted!\n  the route may be blocked; inspect: dpone checkpoints " + shlex.quote(manifest),
            err=True,
        )
        sys.exit(1)
    if blocked is None:
        if signal_name == "SIGTERM":
            click.echo("Terminated.", err=True)
            sys.exit(143)
        raise click.exceptions.Abort()
    fail(blocked, as_json)


@click.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--run-id",
    help="Run identity; retries of one run must share it, and a new run needs a new one: with durable "
    "quality replay a completed run ID is replayed, reading nothing (default: a new manual run).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report instead of text.")
@click.option(
    "--debug",
    is_flag=True,
    default=False,
    help="Print tracebacks of failures (same as dpone --debug run). Tracebacks may contain sensitive text.",
)
@click.option(
    "--allow-nonempty-target",
    is_flag=True,
    default=False,
    help="Write although the target table holds rows this route did not load: append when an "
    "incremental_append route has no checkpoint, or let full_refresh / replace_partition delete rows another "
    "source table's route committed, or rows no route loaded on their first run (see the runbook first). "
    "Never for the route's own rows after a restored or lost checkpoint store: an append stops where a "
    "partition holds exactly the source's count, or another count of integer keys not all outside the "
    "source's range (use dpone guard rebaseline --adopt-target).",
)
@click.pass_context
def run_command(
    ctx: click.Context,
    manifest: str,
    run_id: str | None,
    as_json: bool,
    debug: bool,
    allow_nonempty_target: bool,
) -> None:
    """Move the manifest's route from source to target, guarded and resumable."""
    if debug:
        ctx.find_root().meta[DEBUG_META_KEY] = True
        remember_debug(True)
    try:
        with (
            sigterm_as_exception(),
            reporting_errors(as_json),
        ):  # a DponeError exits with its code; anything else as unexpected
            try:
                report = execute_run(
                    manifest, require_run_id(run_id), as_json, allow_nonempty_target=allow_nonempty_target
                )
            except DponeError as failed:
                if failed.code in _TARGET_FAILURES or failed.code is ErrorCode.CHECKPOINT_STORE_FAILED:
                    _say_the_route_is_blocked(failed, manifest)
                raise
    except KeyboardInterrupt:
        _report_interrupt(manifest, as_json)
        return
    except Terminated:
        _report_interrupt(manifest, as_json, "SIGTERM")
        return
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), sort_keys=True))
    else:
        print_report(report)
