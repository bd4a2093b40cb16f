"""A route's commits went to one target: a run into another one must not skip them.

The checkpoint store says which partitions are committed, not where. A sink connection chosen per run
(``sink_conn_id="{{ params.target }}"``: staging for one run, production otherwise) with one store let
the staging run commit a late day into staging; every later production run skipped it as committed, exit
0, the day never loaded there (33 rows, seen). The check that the target still holds the committed rows
looks at the newest committed partition only, so a late day committed elsewhere passed it.

Every checkpoint a run writes records which target connection it wrote through (``TARGET_KEY``: the
connection's name, or a digest of an inline URI with its folder resolved) and where it led
(``TARGET_PLACE_KEY``: a digest of the interface, host, port and database, or of the chDB folder), as it
records its source (``runtime.source_binding``, ADR 0079; this is ADR 0088). Before anything is read, the
newest COMMITTED checkpoint that records one decides, among the route's own and its siblings': another
place stops the run (``native_transfer_route_identity_changed``, ``changed == ["target"]``), whatever the
connection is called; another name for the same place (a connection with longer timeouts, another user) is
the same target. Unlike a source, the place is compared, not the name: environments share connection names
(staging's ``clickhouse_default`` is another server than production's), and a store shared between them
lost a day the same way. A target that really moved (a new host name, a moved chDB folder) is recorded
deliberately with ``dpone guard rebaseline --target-moved``.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.runtime.source_binding import (
    TARGET_KEY,
    TARGET_PLACE_KEY,
    newest_commit_details,
    recorded_source,
)


def _shown(reference: object) -> str:
    if isinstance(reference, str) and not reference.startswith("sha256:"):
        return f"target connection {reference!r}"
    return "an inline target URI"


def same_target(checkpoint: PartitionCheckpoint, reference: str, place: str | None) -> bool:
    """Whether ``checkpoint`` was committed into the target this connection leads to: by place where both
    record one, else by the connection's name."""
    recorded_place = checkpoint.diagnostics.get(TARGET_PLACE_KEY)
    if place is not None and isinstance(recorded_place, str):
        return recorded_place == place
    return checkpoint.diagnostics.get(TARGET_KEY) == reference


def written_elsewhere(checkpoint: PartitionCheckpoint, reference: str, place: str | None) -> bool:
    """Whether ``checkpoint``'s attempt wrote through a target other than the one this connection leads to
    (False where it records none: an older release's). What an on-call command counts must be the target
    the attempt wrote: counted in another environment's target behind the same connection name, a partly
    loaded day was resolved committed (seen: 149,000 rows missing for good, every later run exit 0)."""
    if TARGET_KEY not in checkpoint.diagnostics and TARGET_PLACE_KEY not in checkpoint.diagnostics:
        return False
    return not same_target(checkpoint, reference, place)


def require_same_target(
    route: RouteIdentity,
    canonical: Sequence[PartitionCheckpoint],
    reference: str,
    manifest_ref: str,
    siblings: Sequence[PartitionCheckpoint] = (),
    place: str | None = None,
) -> None:
    """Stop before anything is read when the newest commit of the route (or of a sibling route) went to
    another place than ``place`` (another server, database or chDB folder), whatever the connection's name:
    another name for the same place (one with longer timeouts) is the same target, and the same name led
    elsewhere (an environment's own URI behind a shared connection name) is not. Where either side records
    no place, the connection names are compared."""
    newest = recorded_source(canonical, siblings, TARGET_KEY)
    if newest is None or same_target(newest, reference, place):
        return
    recorded = newest.diagnostics.get(TARGET_KEY)
    if recorded == reference:
        change = (
            f"{_shown(reference)} now leads to another server, database or folder than the one the route's "
            "rows were last committed into"
        )
    elif _shown(reference) == _shown(recorded):  # two inline URIs: another chDB folder
        change = (
            "this run writes through an inline target URI naming another folder than the one the route's rows "
            "were last committed into (a relative path hangs off the manifest's folder)"
        )
    else:
        change = (
            f"this run writes through {_shown(reference)}, but the route's rows were last committed through "
            f"{_shown(recorded)}, which led elsewhere"
        )
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"the target of route {route.describe()} changed: {change}; the checkpoint store says which "
        "partitions are committed, not where, so this run would skip partitions that target never received",
        details={
            "route": route.describe(),
            "changed": ["target"],
            "recorded_target": recorded,
            "this_target": reference,
            "newest_commit": newest_commit_details(newest),
        },
        hint_lines=(
            "nothing was read from the source or written to the target",
            "  another environment or target (staging, a test copy): give it a checkpoint store of its own "
            "(checkpoints.connection or checkpoints_conn_id), never this one",
            "  the same target reached another way (another host name or port for the same server, a moved "
            "chDB folder): record the move deliberately:",
            f"  dpone guard rebaseline {manifest_ref} --target-moved --reason '<what moved and what you checked>'",
            "see `dpone runbook guard`, 'The route's target changed'",
        ),
    )
