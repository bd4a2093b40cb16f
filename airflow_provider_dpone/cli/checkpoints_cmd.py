"""``dpone checkpoints``: the latest checkpoint of every partition of the manifest's route.

It lists the route under every stored spelling and every other route writing the same target table,
because the guard scan of a run covers all of them.

Read-only. A guard that fails validation is listed with phase ``INVALID`` (and blocks the route) rather
than aborting the listing: the operator needs to see it. A checkpoint store that does not exist is
refused ("no checkpoint store at ...", exit 2); the command never creates one.

``--verify`` puts the source's rows now within each committed partition of the route beside the rows the
commit recorded (one grouped source query per route, see ``adapters/sources/partition_counts``): late
rows, or rows deleted at the source, show as ``drifted``. Where both sides hold the committed count, it
also compares the partition's key fingerprint on the source with the target's (``runtime.key_fingerprint``,
read-only, one statement per side and batch of partitions): other keys behind equal counts (another
database's table behind the connection, a shard) are drifted too. A route without an integer key column, or
a target that cannot be read, is compared by counts alone, and the output says so.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from airflow_provider_dpone.cli.output import print_json, print_table, reporting_errors
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.key_fingerprint import KeyChecks, KeyVerdict

if TYPE_CHECKING:
    from airflow_provider_dpone.compose import Runtime
    from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
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
@click.option(
    "--verify",
    is_flag=True,
    help="Also count the source's rows now within each committed partition (one grouped query) and "
    "flag partitions whose count differs from the committed rows (late or deleted rows), or whose keys "
    "differ from the target's at equal counts (another database's table). Read-only.",
)
def checkpoints(manifest: str, as_json: bool, verify: bool) -> None:
    """List the latest checkpoint of every partition of MANIFEST's route, with its guard phase."""
    with reporting_errors(as_json):
        from airflow_provider_dpone.compose import open_runtime
        from airflow_provider_dpone.manifests.loader import load_manifest

        loaded = load_manifest(manifest)
        # read_only: a missing store is refused ("no checkpoint store at ..."), never created
        with open_runtime(loaded, manifest_ref=manifest, read_only=True) as runtime:
            family = runtime.family()
            entries = sorted((describe_checkpoint(c) for c in family.target_wide), key=_order)
            if verify:
                own = {c.partition_id: c for c in family.own}
                refreshed = loaded.route.strategy is Strategy.FULL_REFRESH
                keys = verify_against_source(runtime, entries, own, whole_table_refresh=refreshed)
    blocked = sum(1 for e in entries if e["blocked"])
    if as_json:
        summary: dict[str, Any] = {
            "partitions": len(entries),
            "blocked": blocked,
            "invalid_guards": sum(1 for e in entries if e["guard_phase"] == INVALID_PHASE),
        }
        if verify:
            summary["verified"] = sum(1 for e in entries if e["source_rows"] is not None)
            summary["drifted"] = sum(1 for e in entries if e["drifted"])
            summary["key_columns"] = list(keys.columns)
            summary["keys_compared"] = keys.compared
            summary["keys_differ"] = sum(1 for e in entries if e["keys"] == KeyVerdict.DIFFERS.value)
            summary["keys_not_compared"] = keys.unusable
        print_json(
            {
                "manifest": manifest,
                "identity": loaded.identity,
                "route": loaded.route.model_dump(mode="json"),
                "partitions": entries,
                "summary": summary,
            }
        )
        return
    _print_text(manifest, loaded, entries, blocked, keys=keys if verify else None)


def verify_against_source(
    runtime: Runtime,
    entries: list[dict[str, Any]],
    own: Mapping[str, PartitionCheckpoint],
    *,
    whole_table_refresh: bool = False,
) -> KeyChecks:
    """Add ``source_rows``, ``drifted``, ``superseded``, ``keys`` and ``keys_not_compared`` to every entry:
    counted for the route's own COMMITTED partitions (other entries get ``None``/``False``: nothing
    committed to compare, or another source); returns the key comparison.

    A committed partition drifted when the source now holds a different number of rows within its bounds
    than the commit recorded (or the commit recorded none), or the same number with other keys than the
    target holds there (``keys``: ``differs``). One grouped query per route does the counting; the keys
    take one statement per side and batch of partitions (``runtime.key_fingerprint``).
    ``whole_table_refresh``: a ``full_refresh`` route replaces the whole table on every run, so only the
    newest run's commits describe the target; an older run's (a day the source has emptied since, which no
    later refresh plans) is ``superseded``, not drifted (it was reported drifted for good, and the remedy the
    output named, another refresh, never cleared it).
    """
    # the route's own partitions under any stored spelling; other routes of the target read other sources
    checked = [e for e in entries if e["status"] == "COMMITTED" and e["partition_id"] in own]
    for entry in entries:
        entry["source_rows"] = None
        entry["drifted"] = False
        entry["superseded"] = False
        entry["keys"] = None
        entry["keys_not_compared"] = None
    if whole_table_refresh and checked:
        newest = max(checked, key=lambda e: e["completed_at"] or "")["run_id"]
        for entry in checked:
            entry["superseded"] = entry["run_id"] != newest
        checked = [e for e in checked if not e["superseded"]]
    if not checked:
        return KeyChecks()
    counts = runtime.count_source_partitions([own[e["partition_id"]].bounds for e in checked])
    for entry, rows in zip(checked, counts, strict=True):
        entry["source_rows"] = rows
        entry["drifted"] = entry["rows"] is None or rows != entry["rows"]
    keys = _key_checks(runtime, [own[e["partition_id"]] for e in checked])
    for entry in checked:
        check = keys.checks.get(entry["partition_id"])
        if check is None:
            continue
        entry["keys"] = check.verdict.value
        entry["keys_not_compared"] = check.why.value if check.why is not None else None
        entry["drifted"] = entry["drifted"] or check.verdict is KeyVerdict.DIFFERS
    return keys


#: What a target that cannot be read fails with: ``--verify`` then compares counts alone, and says why.
_TARGET_UNREADABLE = frozenset(
    {
        ErrorCode.TARGET_UNREACHABLE,
        ErrorCode.TARGET_LOAD_FAILED,
        ErrorCode.CONNECTION_MISSING,
        ErrorCode.CONNECTION_INVALID,
        ErrorCode.EMBEDDED_EXTRA_MISSING,
    }
)


def _key_checks(runtime: Runtime, committed: Sequence[PartitionCheckpoint]) -> KeyChecks:
    """The key comparison, or none (saying why) when the target cannot be read: the counts need only the
    source, and stay a report of their own."""
    try:
        return runtime.key_checks(committed)
    except DponeError as err:
        if err.code not in _TARGET_UNREADABLE:
            raise
        return KeyChecks(unusable=f"the target could not be read ({err.code.value})")


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
    resolution = checkpoint.diagnostics.get("resolution")
    resolved_as = resolution.get("as") if isinstance(resolution, dict) else None
    return {
        "partition_id": checkpoint.partition_id,
        "route": checkpoint.route.describe(),
        "status": checkpoint.status.value,
        "guard_phase": phase,
        # an operator's `guard resolve`: a not-applied partition's phase reads failed_before_target, though
        # its attempt may have touched the target (the operator found its rows not there, or deleted them)
        "resolved_as": resolved_as if isinstance(resolved_as, str) else None,
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


def read_latest(loaded: LoadedManifest, manifest_ref: str) -> list[PartitionCheckpoint]:
    """The latest checkpoint of every partition of every route writing the manifest's target table
    (any of their guards blocks this route's runs). Read-only: a missing store is refused, never created."""
    from airflow_provider_dpone.compose import open_runtime

    with open_runtime(loaded, manifest_ref=manifest_ref, read_only=True) as runtime:
        return list(runtime.family().target_wide)


def _print_text(
    manifest: str,
    loaded: LoadedManifest,
    entries: Sequence[dict[str, Any]],
    blocked: int,
    *,
    keys: KeyChecks | None = None,
) -> None:
    """The listing; with ``keys`` (``--verify``), the source's counts and the key comparison too."""
    verify = keys is not None
    route = loaded.route.describe()
    if not entries:
        click.echo(f"route {route}: no checkpoints yet")
        if verify:
            click.echo("0 drifted partitions (0 committed partitions verified against the source)")
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
            e["guard_phase"]
            if e["resolved_as"] is None
            else f"{e['guard_phase']} (resolved {e['resolved_as']})",
            short_id(e["checkpoint_batch_id"]),
            e["bounds"],
            e["rows"],
            _short_time(e["started_at"]),
            _short_time(e["completed_at"]),
            *((e["source_rows"], _drift_mark(e)) if verify else ()),
        )
        for e in entries
    ]
    print_table(_HEADERS + (("source_rows", "drift") if verify else ()), rows)
    elsewhere = sorted({e["route"] for e in entries if e["route"] != route})
    for other in elsewhere:
        ids = ", ".join(str(short_id(e["partition_id"])) for e in entries if e["route"] == other)
        click.echo(f"stored under route {other} (same target; it blocks this route too): {ids}")
    click.echo(f"full partition IDs: dpone checkpoints {shlex.quote(manifest)} --json")
    if blocked:
        click.echo(f"inspect:  dpone guard inspect {shlex.quote(manifest)}")
        click.echo(
            f"resolve:  dpone guard resolve {shlex.quote(manifest)} --partition ID --as committed|not-applied --reason TEXT"
        )
        click.echo("runbook:  dpone runbook guard")
    if verify:
        verified = sum(1 for e in entries if e["source_rows"] is not None)
        drifted = sum(1 for e in entries if e["drifted"])
        if any(e.get("superseded") for e in entries):
            click.echo(
                "superseded: committed by an earlier full refresh, whose rows a later one replaced (the source "
                "holds no rows there any more, so no later refresh planned them): not compared"
            )
        assert keys is not None
        other_keys = sum(1 for e in entries if e["keys"] == KeyVerdict.DIFFERS.value)
        if drifted > other_keys:
            click.echo(f"drift:    late or deleted source rows; {_drift_remedy(loaded.route.strategy)}")
        if other_keys:
            click.echo(
                f"drift:    {other_keys} partition(s) hold as many rows as were committed, but other keys than "
                "the target: another database's table behind this connection (a shard; see `dpone runbook "
                "guard`, 'The route's source changed'), or rows replaced at the source ('Drifted partitions')"
            )
        if verified:
            click.echo(f"keys:     {keys.summary()}")
        plural = "partition" if drifted == 1 else "partitions"
        how = "row counts only" if keys.unusable is not None else f"row counts, keys in {keys.compared}"
        click.echo(
            f"{drifted} drifted {plural} ({verified} committed partitions verified against the source: {how})"
        )


def _drift_remedy(strategy: Strategy) -> str:
    """What moves a drifted partition again, for the route's own strategy."""
    if strategy is Strategy.FULL_REFRESH:
        return (
            "the next full refresh (a new run ID) replaces the whole table with what the source holds then "
            "(a source that holds no rows plans nothing and replaces nothing: see `dpone runbook guard`, "
            "'Drifted partitions')"
        )
    return (
        "replace_partition with source.partitioning.lookback reloads recent partitions: see "
        "`dpone runbook guard`, 'Drifted partitions'"
    )


def _drift_mark(entry: dict[str, Any]) -> str | None:
    if entry.get("superseded"):
        return "superseded"
    if entry["source_rows"] is None:
        return None
    if entry.get("keys") == KeyVerdict.DIFFERS.value and entry["rows"] == entry["source_rows"]:
        return "DRIFTED (keys)"
    return "DRIFTED" if entry["drifted"] else "ok"


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
