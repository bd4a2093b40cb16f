"""A route's commits hold one source connection's rows: a run from another connection must not skip them.

A route is (source table, target table, strategy), and a source table is named without its database. So two
databases whose tables share a name and feed one target (shards; an Airflow task mapped over source
connections with one manifest) are one route: the second connection's run found every partition
COMMITTED, skipped them all and exited 0 (seen: a second SQLite file of the demo's table into the demo's
target, 60 partitions skipped, its 20,000 rows never moved). A ``replace_partition`` route would instead
delete the first connection's rows within each day it replaced.

Every checkpoint a run writes records which source connection it read (``SOURCE_KEY``: the connection's
name, or a digest of an inline URI with its path resolved, a path that is not stored). A relative path
hangs off the manifest's folder, so ``sqlite:///source.sqlite`` in two folders names two files: the digest
of the text alone took two shards for one (seen: the second folder's run skipped every day, exit 0); a
named connection whose path is relative or under ``~`` is recorded by its file the same way. What earlier
releases recorded of such a connection is taken as it only where it names one file (an absolute inline
URI's digest as written); a bare name or a relative URI's text names none, so a history under it stops
once, until ``--source-moved`` proves the file (seen: a new folder's run took the bare name for its own
file and skipped every committed day, exit 0). Before anything is read from the source, the newest
COMMITTED checkpoint that records one decides, among the route's own and its siblings' (the same table
under another strategy: a second database's ``replace_partition`` manifest replaced every row an append
route had committed, seen on the demo): another connection stops the run
(``native_transfer_route_identity_changed``, ``changed == ["source"]``). A table that really moved (a
renamed connection, a moved file) is recorded deliberately with ``dpone guard rebaseline --source-moved``:
one audited COMMITTED record, a copy of that newest one naming this connection.

Only the name is compared, not the host or database it resolves to: a host move, a failover or a rotated
password keeps the connection's name, and is no change of source. Checkpoints written before this release
record no connection, so a route's first commit under it records the one it ran from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic import JsonValue

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY
from airflow_provider_dpone.runtime.route_identity import RebaselineRequest, checked_reason, committed_record

#: The diagnostics key of a checkpoint naming the source connection its run read.
SOURCE_KEY = "source_connection"
#: The diagnostics key of a checkpoint naming the target (sink) connection its run wrote through
#: (``runtime.target_binding``).
TARGET_KEY = "target_connection"
#: The diagnostics key of a checkpoint naming where that target connection led (a digest of its interface,
#: host, port and database, or its chDB folder): another connection name to the same place is no change.
TARGET_PLACE_KEY = "target_place"


def connection_reference(connection: str) -> str:
    """What a checkpoint records of a source or target connection: its name (a connection ID, which task
    logs print already), or for an inline URI (``://``, the manifest's textual rule) a digest: a path is
    not stored."""
    text = connection.strip()
    if "://" in text:
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text


source_reference = connection_reference


def names_its_file(written: str) -> bool:
    """Whether a connection as written names one file wherever it is used, so that a history recording it
    (an earlier release's form) tells which file its commits came from: an inline URI with an absolute path
    (``sqlite:////var/x.db``; the path is everything after ``scheme:///``). A bare connection name, and a
    relative path (a file per manifest folder) or a ``~`` one (a file per user), do not."""
    _, separator, path = written.strip().partition(":///")
    return bool(separator) and path.startswith("/")


def form_naming_no_file(as_written: str | None) -> str | None:
    """What earlier releases recorded of this connection where that names no file (a bare name, a relative or
    ``~`` URI's text: ``names_its_file``), or None: no earlier form, or one that names its file."""
    return None if as_written is None or names_its_file(as_written) else source_reference(as_written)


def _shown(reference: object) -> str:
    if isinstance(reference, str) and not reference.startswith("sha256:"):
        return f"source connection {reference!r}"
    return "a source file (an inline URI, or a connection's relative or ~ path)"


def recorded_source(
    canonical: Sequence[PartitionCheckpoint],
    siblings: Sequence[PartitionCheckpoint] = (),
    key: str = SOURCE_KEY,
) -> PartitionCheckpoint | None:
    """The newest COMMITTED checkpoint that records a source connection (``key``: or a target one; None:
    none does).

    ``canonical``: the route's own, in append order as ``CheckpointStore.list_latest`` returns them, so
    the walk from the end stops at the first one. ``siblings``: the COMMITTED checkpoints of the same
    source table's routes under another strategy (``route_family.sibling_committed``; a strategy switch
    writes the same target from the same table), compared by their commit time. Checkpoints of older
    releases record none and are passed over."""
    newest: PartitionCheckpoint | None = None
    for checkpoint in reversed(canonical):
        if checkpoint.status is CheckpointStatus.COMMITTED and isinstance(
            checkpoint.diagnostics.get(key), str
        ):
            newest = checkpoint
            break
    for checkpoint in siblings:
        if isinstance(checkpoint.diagnostics.get(key), str) and (
            newest is None or checkpoint_moment(checkpoint) > checkpoint_moment(newest)
        ):
            newest = checkpoint
    return newest


def require_same_source(
    route: RouteIdentity,
    canonical: Sequence[PartitionCheckpoint],
    reference: str,
    manifest_ref: str,
    siblings: Sequence[PartitionCheckpoint] = (),
    earlier_forms: Sequence[str] = (),
    earlier_forms_without_file: Sequence[str] = (),
) -> None:
    """Stop before the source is read when the newest commit of the route (or of a sibling route: the
    same table under another strategy) came from another connection than ``reference``.
    ``earlier_forms``: what earlier releases recorded of this same connection (an absolute inline URI's
    digest as written), also taken as it. ``earlier_forms_without_file``: what they recorded of it that
    names no file (a bare name, or the digest of a relative or ``~`` URI as written): every folder's or
    user's file was recorded alike (seen: a new folder's run skipped every committed day, exit 0), so a
    history under it stops (``history_names_no_file``) until ``--source-moved`` proves the file."""
    newest = recorded_source(canonical, siblings)
    recorded = newest.diagnostics.get(SOURCE_KEY) if newest is not None else None
    if newest is None or recorded == reference or recorded in earlier_forms:
        return
    if recorded in earlier_forms_without_file:
        raise history_names_no_file(route, newest, reference, manifest_ref)
    if _shown(reference) == _shown(recorded):  # two inline URIs: another file (or the same text elsewhere)
        change = (
            "this run reads another source file (an inline URI, or a connection's relative or ~ path) than "
            "the one the target's rows of this table were last committed from (a relative path hangs off the "
            "manifest's folder)"
        )
    else:
        change = (
            f"this run reads {_shown(reference)}, but the target's rows of this table were last committed "
            f"through {_shown(recorded)}"
        )
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the source of route {route.describe()} changed: {change}; this run would skip rows it never read, "
        "or replace that connection's rows with its own",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "recorded_source": recorded,
            "this_source": reference,
            "newest_commit": newest_commit_details(newest),
        },
        hint_lines=(
            "nothing was read from the source or written to the target",
            "a route is (source table, target table, strategy); the source table's database is not part of it,",
            "so two databases with a table of this name feeding one target are one route:",
            "  another database (shards, one manifest mapped over connections): give each its own "
            "sink.table and read them together through a ClickHouse view or Merge table",
            "  the same table under a new connection name or at a moved file: record the move deliberately:",
            f"  dpone guard rebaseline {manifest_ref} --source-moved --reason '<what moved and what you checked>'",
            "see `dpone runbook guard`, 'The route's source changed'",
        ),
    )


def refuse_unproven_file(
    route: RouteIdentity,
    canonical: Sequence[PartitionCheckpoint],
    siblings: Sequence[PartitionCheckpoint],
    as_written: str | None,
    unusable: str,
    manifest_ref: str,
) -> None:
    """``--source-moved`` over a history that names no file (``history_names_no_file``) where no key can be
    compared (``unusable``: the route has no integer key column): the counts-only check only warns, and a
    file of another folder was recorded so, every day then skipped (exit 0). Refused unless ``--force``."""
    newest = recorded_source(canonical, siblings)
    recorded = newest.diagnostics.get(SOURCE_KEY) if newest is not None else None
    fileless = form_naming_no_file(as_written)
    if fileless is None or recorded != fileless:
        return
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the source of route {route.describe()} cannot be proven by its keys ({unusable}): its commits "
        "recorded the connection, not its file, and counts alone cannot tell the file those rows came from "
        "from another folder's or user's; nothing was recorded",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "reason": "history_names_no_file",
            "keys_compared": False,
        },
        hint_lines=(
            "nothing was recorded; runs through this connection stay stopped",
            f"compare the counts per committed partition: dpone checkpoints {manifest_ref} --verify "
            "(every partition OK, none DRIFTED)",
            "only where they all match and this is the file those rows came from, record it with --force:",
            f"  dpone guard rebaseline {manifest_ref} --source-moved --force --reason '<what you checked>'",
            "a manifest reading another file gets a target table of its own (sink.table)",
            "see `dpone runbook guard`, 'The route's source changed'",
        ),
    )


def refuse_other_count(
    route: RouteIdentity, moved: PartitionCheckpoint, unusable: str, manifest_ref: str
) -> None:
    """``--source-moved`` on a route with no key to compare (``unusable``) where the copied partition holds
    another count on this connection than was committed: the count is the only evidence there, and it says
    another file (seen: a bare-name history respelled as an inline URI, another folder's file recorded with
    a warning, every day then skipped, exit 0). Refused unless ``--force``."""
    audit = moved.diagnostics.get("rebaseline")
    now = audit.get("source_rows_now") if isinstance(audit, dict) else None
    if now is None or moved.rows is None or now == moved.rows:
        return
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the source of route {route.describe()} cannot be proven by its keys ({unusable}), and its newest "
        f"committed partition holds {now} row(s) on this connection where {moved.rows} were committed: "
        "counts alone cannot tell a moved table whose rows changed from another database's or folder's; "
        "nothing was recorded",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "keys_compared": False,
            "source_rows_now": now,
            "rows_committed": moved.rows,
        },
        hint_lines=(
            "nothing was recorded; runs through this connection stay stopped",
            f"compare every committed partition: dpone checkpoints {manifest_ref} --verify",
            "only if this IS the moved table (rows changed at the source since the commit), record it with "
            "--force, then reload the partitions that changed:",
            f"  dpone guard rebaseline {manifest_ref} --source-moved --force --reason '<what you checked>'",
            "see `dpone runbook guard`, 'The route's source changed'",
        ),
    )


def history_names_no_file(
    route: RouteIdentity, newest: PartitionCheckpoint, reference: str, manifest_ref: str
) -> DponeError:
    """The stop where the route's newest commit recorded this connection in a form that names no file:
    whether this run reads the file those rows came from is unknown. Expected once per such route after an
    upgrade; ``--source-moved`` compares the file's keys with the target's before it records the file."""
    recorded = newest.diagnostics.get(SOURCE_KEY)
    if isinstance(recorded, str) and not recorded.startswith("sha256:"):
        history = f"source connection {recorded!r}, and only its name was recorded"
    else:
        history = "an inline source URI, and only its text was recorded"
    return DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the source of route {route.describe()} cannot be told: the target's rows of this table were last "
        f"committed through {history}, not the file its path names (a relative path names one file per "
        "manifest folder, a ~ path one per user); this run reads the file that path names here, and if it "
        "is another one, this run would skip rows it never read, or replace that file's rows with its own",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "reason": "history_names_no_file",
            "recorded_source": recorded,
            "this_source": reference,
            "newest_commit": newest_commit_details(newest),
        },
        hint_lines=(
            "nothing was read from the source or written to the target",
            "expected once per such route after an upgrade to this release, or after a connection's absolute "
            "path was made relative: the route's commits recorded the connection, not the file",
            "if this manifest reads the file those rows came from, record it; the rebaseline compares the "
            "committed partitions' integer keys in this file with the target's and refuses a file whose keys "
            "differ (a route without an integer key column is refused too: compare the counts with "
            f"`dpone checkpoints {manifest_ref} --verify`, then add --force):",
            f"  dpone guard rebaseline {manifest_ref} --source-moved "
            "--reason '<the file this manifest reads and why it is the one>'",
            "  later runs go on, and a manifest reading another file (another folder, another user) stops",
            "if it reads another file (a new manifest folder, another user's home): do not rebaseline; give "
            "it a target table of its own (sink.table)",
            "see `dpone runbook guard`, 'The route's source changed'",
        ),
    )


def newest_commit_details(newest: PartitionCheckpoint) -> dict[str, JsonValue]:
    """The commit a connection check compared with, as the error's details name it."""
    return {
        "route": newest.route.describe(),
        "partition_id": newest.partition_id,
        "bounds": newest.bounds.label,
    }


def record_source_move(
    route: RouteIdentity,
    canonical: Sequence[PartitionCheckpoint],
    reference: str,
    run_id: str,
    clock: Clock,
    request: RebaselineRequest,
    count_source: Callable[[PartitionBounds], int] | None = None,
    siblings: Sequence[PartitionCheckpoint] = (),
) -> PartitionCheckpoint:
    """``dpone guard rebaseline --source-moved``: an audited copy of the newest commit (the route's, or a
    sibling route's, under that route) naming this connection, so the next run reads from it. Refused
    when there is nothing to record.

    ``count_source``: the rows this connection holds now within the copied partition's bounds (read-only),
    kept in the audit as ``source_rows_now`` beside the committed ``rows``; a different count is evidence,
    for the operator, that the connection may read another table than the one that moved."""
    return record_move("source", route, canonical, reference, run_id, clock, request, count_source, siblings)


def record_move(
    role: Literal["source", "target"],
    route: RouteIdentity,
    canonical: Sequence[PartitionCheckpoint],
    reference: str,
    run_id: str,
    clock: Clock,
    request: RebaselineRequest,
    count: Callable[[PartitionBounds], int | None] | None = None,
    siblings: Sequence[PartitionCheckpoint] = (),
    also: Mapping[str, JsonValue] | None = None,
    unmoved: Callable[[PartitionCheckpoint], bool] | None = None,
) -> PartitionCheckpoint:
    """The audited copy of the newest commit recording ``reference`` as the route's ``role`` connection
    (``<role>_moved_from``, ``<role>_rows_now`` in the audit; ``also``: more facts of this connection to
    record); the other connection it records is kept. ``unmoved``: whether the newest commit already
    names this connection (default: the same reference; a target compares its place,
    ``target_binding.same_target``)."""
    key = SOURCE_KEY if role == "source" else TARGET_KEY
    reason = checked_reason(request)
    newest = recorded_source(canonical, siblings, key)
    if newest is None or (
        unmoved(newest) if unmoved is not None else newest.diagnostics.get(key) == reference
    ):
        raise DponeError(
            ErrorCode.USAGE,
            f"nothing to record for route {route.describe()}: "
            + (
                f"no committed partition records a {role} connection yet"
                if newest is None
                else "its newest commit already "
                + (
                    "came from this source connection"
                    if role == "source"
                    else "went through this target connection"
                )
            ),
            details={"route": route.describe()},
        )
    at = clock.now()
    batch = checkpoint_batch_id(run_id, [newest.partition_id])
    audit: dict[str, JsonValue] = {
        "reason": reason,
        "actor": request.actor,
        "at": at.isoformat(),
        f"{role}_moved_from": newest.diagnostics.get(key),
        "copied_from_run": newest.run_id,
    }
    if count is not None:
        audit[f"{role}_rows_now"] = count(newest.bounds)
    copied = PlannedPartition(
        partition_id=newest.partition_id,
        bounds=newest.bounds,
        query_hash=newest.query_hash,
        schema_hash=newest.schema_hash,
    )
    # the other connection's facts, and the capsule reference: the copy becomes its partition's latest
    # checkpoint, where the capsule scan finds the operation whose target evidence is owed or failed
    # (without it, a route blocked by a failed quality verdict ran on, exit 0, after a move)
    others = (TARGET_KEY, TARGET_PLACE_KEY) if role == "source" else (SOURCE_KEY,)
    kept = {k: newest.diagnostics[k] for k in (*others, CAPSULE_REF_KEY) if k in newest.diagnostics}
    return committed_record(
        copied,
        newest.route,
        run_id,
        at,
        batch,
        newest.rows,
        audit,
        size_bytes=newest.bytes,
        diagnostics={**kept, key: reference, **(also or {})},
    )
