"""``dpone checkpoints``: the latest checkpoint of every partition of the manifest's route.

It lists the route under every stored spelling and every other route writing the same target table,
because the guard scan of a run covers all of them.

Read-only. A guard that fails validation is listed with phase ``INVALID`` (and blocks the route) rather
than aborting the listing: the operator needs to see it. A SQLite store that does not exist yet is an
empty listing; the command never creates the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from airflow_provider_dpone.cli.output import print_json, print_table, reporting_errors

if TYPE_CHECKING:
    from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
    from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
    from airflow_provider_dpone.manifests.loader import LoadedManifest

INVALID_PHASE = "INVALID"
_HEADERS = (
    "partition_id",
    "status",
    "guard_phase",
    "checkpoint_batch_id",
    "bounds",
    "rows",
    "started_at",
    "completed_at",
)


@click.command("checkpoints")
@click.argument("manifest", metavar="MANIFEST", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (full partition IDs).")
def checkpoints(manifest: str, as_json: bool) -> None:
    """List the latest checkpoint of every partition of MANIFEST's route, with its guard phase."""
    with reporting_errors(as_json):
        from airflow_provider_dpone.connections import resolve_endpoint
        from airflow_provider_dpone.manifests.loader import load_manifest

        loaded = load_manifest(manifest)
        endpoint = resolve_endpoint(
            loaded.manifest.checkpoints.connection, role="checkpoints", manifest_dir=loaded.manifest_dir
        )
        latest = read_latest(endpoint, loaded)
        entries = sorted((describe_checkpoint(c) for c in latest), key=_order)
    blocked = sum(1 for e in entries if e["blocked"])
    if as_json:
        print_json(
            {
                "manifest": manifest,
                "identity": loaded.identity,
                "route": loaded.route.model_dump(mode="json"),
                "partitions": entries,
                "summary": {
                    "partitions": len(entries),
                    "blocked": blocked,
                    "invalid_guards": sum(1 for e in entries if e["guard_phase"] == INVALID_PHASE),
                },
            }
        )
        return
    _print_text(manifest, loaded, entries, blocked)


def describe_checkpoint(checkpoint: PartitionCheckpoint) -> dict[str, Any]:
    """One listing entry. An invalid guard becomes phase INVALID with its fixed reason (never a crash)."""
    from airflow_provider_dpone.contracts.guard import ALLOWED_PAIRS, GuardInvalid, RetryMeaning, read_guard

    phase: str | None = None
    batch: str | None = None
    reason: str | None = None
    blocked = False
    try:
        guard = read_guard(checkpoint)
    except GuardInvalid as exc:
        phase, reason, blocked = INVALID_PHASE, exc.reason, True
    else:
        if guard is not None:
            phase, batch = guard.phase.value, guard.checkpoint_batch_id
            blocked = ALLOWED_PAIRS[(checkpoint.status, guard.phase)][1] is RetryMeaning.BLOCK
    return {
        "partition_id": checkpoint.partition_id,
        "route": checkpoint.route.describe(),
        "status": checkpoint.status.value,
        "guard_phase": phase,
        "guard_invalid_reason": reason,
        "checkpoint_batch_id": batch,
        "blocked": blocked,
        "bounds": checkpoint.bounds.label,
        "bounds_detail": checkpoint.bounds.model_dump(mode="json"),
        "rows": checkpoint.rows,
        "run_id": checkpoint.run_id,
        "started_at": _iso(checkpoint.started_at),
        "completed_at": _iso(checkpoint.completed_at),
    }


def short_id(value: str | None, *, keep: int = 12) -> str | None:
    """``sha256:<64 hex>`` -> ``sha256:<first 12 hex>...`` for tables; other values unchanged."""
    if value is None:
        return None
    prefix, sep, digest = value.partition(":")
    if sep and len(digest) > keep + 3:
        return f"{prefix}:{digest[:keep]}..."
    return value


def read_latest(endpoint: EndpointDescriptor, loaded: LoadedManifest) -> list[PartitionCheckpoint]:
    """The latest checkpoint of every partition of every route writing the manifest's target table."""
    from airflow_provider_dpone.contracts.endpoints import EndpointKind

    if endpoint.kind is EndpointKind.SQLITE and endpoint.path and not Path(endpoint.path).exists():
        return []  # nothing was ever written; do not create the file from a read-only command
    from airflow_provider_dpone.adapters.checkpoint_sql import store_from_endpoint
    from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming
    from airflow_provider_dpone.runtime.route_family import load_family

    store = store_from_endpoint(endpoint, loaded.manifest_dir)
    try:
        # every route writing the target: any of their guards blocks this route's runs
        return list(load_family(store, loaded.route, SourceRouteNaming(loaded.manifest.source)).target_wide)
    finally:
        store.close()


def _print_text(
    manifest: str, loaded: LoadedManifest, entries: Sequence[dict[str, Any]], blocked: int
) -> None:
    route = loaded.route.describe()
    if not entries:
        click.echo(f"route {route}: no checkpoints yet")
        return
    count = len(entries)
    summary = f"route {route}: {count} partition{'s' if count != 1 else ''}"
    if blocked:
        summary += f", {blocked} blocked"
    click.echo(summary)
    rows = [
        (
            short_id(e["partition_id"]),
            e["status"],
            e["guard_phase"],
            short_id(e["checkpoint_batch_id"]),
            e["bounds"],
            e["rows"],
            _short_time(e["started_at"]),
            _short_time(e["completed_at"]),
        )
        for e in entries
    ]
    print_table(_HEADERS, rows)
    elsewhere = sorted({e["route"] for e in entries if e["route"] != route})
    for other in elsewhere:
        ids = ", ".join(str(short_id(e["partition_id"])) for e in entries if e["route"] == other)
        click.echo(f"stored under route {other} (same target; it blocks this route too): {ids}")
    click.echo(f"full partition IDs: dpone checkpoints {manifest} --json")
    if blocked:
        click.echo(f"inspect:  dpone guard inspect {manifest}")
        click.echo(
            f"resolve:  dpone guard resolve {manifest} --partition ID --as committed|not-applied --reason TEXT"
        )
        click.echo("runbook:  docs/runbook/manual-reconciliation.md")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _short_time(value: str | None) -> str | None:
    if value is None:
        return None
    text = value.replace("+00:00", "Z")
    return re.sub(r"\.\d+(?=Z$)", "", text)


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def _order(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (_natural(str(entry["bounds"])), entry["partition_id"])


def register(group: click.Group) -> None:
    group.add_command(checkpoints)
