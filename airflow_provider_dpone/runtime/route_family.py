"""The checkpoints a run must see: its own route under every spelling, and every route of its target.

Two reads widen the route guard scan beyond one route key (issue: route safety, seed 000 step 1):

* **own** — the latest checkpoints of every stored route that names the same canonical route. Releases
  before canonical naming keyed rows by the manifest's raw spelling (``ORDERS``, ``[dbo].[orders]``); those
  rows are found, still block, and a COMMITTED one is still skipped. Nothing is migrated: stored payloads
  round-trip unchanged (seed case 11).
* **target_wide** — the latest checkpoints of every route that writes the same target table, whatever its
  source spelling or strategy. The guard scan runs over these: the target is what is at risk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.guard import GuardInvalid, GuardPhase, read_guard
from airflow_provider_dpone.contracts.partition import PlannedPartition, partition_id_for
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.route_naming import RouteNaming

#: Every record of one partition of a route, oldest first (``CheckpointStore.history``).
History = Callable[[RouteIdentity, str], Sequence[PartitionCheckpoint]]


@dataclass(frozen=True)
class RouteFamily:
    route: RouteIdentity
    own: tuple[PartitionCheckpoint, ...]
    target_wide: tuple[PartitionCheckpoint, ...]
    #: the part of ``own`` stored under the canonical route itself (None: derive it from ``own``)
    canonical: tuple[PartitionCheckpoint, ...] | None = None
    #: the stored spellings ``own`` was read from other than the canonical one (None: derive them)
    legacy: tuple[RouteIdentity, ...] | None = None

    def legacy_routes(self) -> list[RouteIdentity]:
        """Stored spellings of this route other than the canonical one."""
        if self.legacy is not None:
            return list(self.legacy)
        return list(dict.fromkeys(c.route for c in self.own if c.route != self.route))

    def canonical_checkpoints(self) -> tuple[PartitionCheckpoint, ...]:
        """The checkpoints of ``own`` stored under the canonical route."""
        if self.canonical is not None:
            return self.canonical
        return tuple(c for c in self.own if c.route == self.route)


def load_family(store: CheckpointStore, route: RouteIdentity, naming: RouteNaming) -> RouteFamily:
    """Read the latest checkpoints of every stored route writing ``route``'s target table.

    Which stored route each checkpoint came from is kept as it is read (one comparison per route, not
    one per checkpoint: a long history has tens of thousands). A checkpoint a store returns under a
    route it does not name is a broken store: it is refused, never silently filed under another route.
    """
    stored = store.list_routes(route.target_table)
    if route not in stored:
        stored.append(route)
    own: list[PartitionCheckpoint] = []
    canonical: list[PartitionCheckpoint] = []
    legacy: list[RouteIdentity] = []
    target_wide: list[PartitionCheckpoint] = []
    for candidate in stored:
        if candidate.target_table != route.target_table:
            continue
        latest = store.list_latest(candidate)
        _require_route(candidate, latest)
        target_wide.extend(latest)
        if candidate == route:
            own.extend(latest)
            canonical.extend(latest)
        elif naming.canonical(candidate) == route:
            own.extend(latest)
            if latest and candidate not in legacy:
                legacy.append(candidate)
    return RouteFamily(
        route=route,
        own=tuple(own),
        target_wide=tuple(target_wide),
        canonical=tuple(canonical),
        legacy=tuple(legacy),
    )


def _require_route(route: RouteIdentity, latest: Sequence[PartitionCheckpoint]) -> None:
    """Every checkpoint read for ``route`` names it (field by field: a fifth of the model's ``==``)."""
    expected = (route.source_table, route.target_table, route.strategy)
    for checkpoint in latest:
        stored = checkpoint.route
        if (stored.source_table, stored.target_table, stored.strategy) != expected:
            raise DponeError(
                ErrorCode.CHECKPOINT_STORE_FAILED,
                f"the checkpoint store returned a checkpoint of another route for {route.describe()}",
                details={"operation": "list_latest", "route": route.describe()},
            )


def latest_by_partition(
    family: RouteFamily, planned: Sequence[PlannedPartition], naming: RouteNaming
) -> dict[str, PartitionCheckpoint]:
    """The latest checkpoint of each planned partition, keyed by its current (canonical) partition ID.

    A checkpoint written under the canonical route is taken as is. Otherwise a checkpoint an older
    release wrote under another spelling matches when its partition ID is the one that release computed
    (raw route, raw-table query hash, same schema and bounds); a COMMITTED one wins over others. It is
    returned with the current partition ID and query hash so resume planning treats it like its own.
    """
    found = {c.partition_id: c for c in family.canonical_checkpoints()}
    legacy = family.legacy_routes()
    if not legacy:
        return found
    by_route_and_id = {(c.route, c.partition_id): c for c in family.own if c.route != family.route}
    for part in planned:
        if part.partition_id in found:
            continue
        matches: list[PartitionCheckpoint] = []
        for old_route, old_hash, old_id in _legacy_ids(part, legacy, naming):
            match = by_route_and_id.get((old_route, old_id))
            if match is not None and match.query_hash == old_hash:
                matches.append(match)
        if not matches:
            continue
        committed = [m for m in matches if m.status is CheckpointStatus.COMMITTED]
        chosen = (committed or sorted(matches, key=lambda m: m.started_at))[-1]
        found[part.partition_id] = chosen.model_copy(
            update={"partition_id": part.partition_id, "query_hash": part.query_hash}
        )
    return found


def _legacy_ids(
    part: PlannedPartition, legacy: Sequence[RouteIdentity], naming: RouteNaming
) -> list[tuple[RouteIdentity, str, str]]:
    """(old route, old query hash, old partition ID) under which an older release stored ``part``."""
    found = []
    for old_route in legacy:
        old_hash = naming.legacy_query_hash(old_route.source_table)
        found.append(
            (old_route, old_hash, partition_id_for(old_route, old_hash, part.schema_hash, part.bounds))
        )
    return found


def other_identity_committed(
    family: RouteFamily, planned: Sequence[PlannedPartition], naming: RouteNaming
) -> list[PartitionCheckpoint]:
    """COMMITTED checkpoints of the route that are none of the planned partitions under any spelling.

    They were committed under another query hash, schema hash or partitioning: their rows are in the
    target, but no planned partition ID will ever find them.
    """
    return [c for c in _other_identity(family, planned, naming) if c.status is CheckpointStatus.COMMITTED]


def other_identity_replacing(
    family: RouteFamily,
    planned: Sequence[PlannedPartition],
    naming: RouteNaming,
    history: History,
    near: Callable[[PartitionCheckpoint], bool],
) -> list[PartitionCheckpoint]:
    """The newest record of each of the route's partitions of another identity (none of ``planned``) whose
    attempt replaced (or may have replaced) rows in the target (:func:`replaced_the_target`): a commit of
    another definition, or its attempt that reached the target and was resolved ``not-applied`` (its delete
    ran), or one that cannot be read.

    The latest record alone hid such a record: an attempt that failed before the target became the
    partition's latest. Seen: definition B replaced a day definition A had committed; B's lookback retry
    failed a quality check; A, edited back, skipped the day as committed and the target kept only B's rows,
    exit 0. So under a latest record that replaced nothing (only those ``near`` says matter: one history
    read each) the newest record that did is taken. Not the commit :func:`other_identity_standing` finds:
    an attempt above it that reached the target and was resolved ``not-applied`` deleted rows there later."""
    found: list[PartitionCheckpoint] = []
    for checkpoint in _other_identity(family, planned, naming):
        if replaced_the_target(checkpoint):
            found.append(checkpoint)
        elif checkpoint.status is not CheckpointStatus.COMMITTED and near(checkpoint):
            records = history(checkpoint.route, checkpoint.partition_id)
            replacing = [record for record in records if replaced_the_target(record)]
            if replacing:
                found.append(max(replacing, key=checkpoint_moment))
    return found


def other_identity_standing(
    family: RouteFamily,
    planned: Sequence[PlannedPartition],
    naming: RouteNaming,
    history: History,
    near: Callable[[PartitionCheckpoint], bool],
) -> list[PartitionCheckpoint]:
    """The route's partitions of another identity (none of ``planned``) whose rows may stand in the target:
    each COMMITTED latest checkpoint, and under a later record that is not, the commit it stands over.

    The latest record alone hid a commit: an attempt of the earlier definition that failed before the
    target, or that reached it and was resolved ``not-applied``, became the partition's latest, and a
    replacing run of another definition deleted the commit's rows without comparing the two reads, exit 0.
    So under such a record (only those ``near`` says matter: one history read each) the commit below it is
    taken (:func:`_commit_below`). Where none stands there but an attempt of the partition reached the
    target (a partly rewritten partition resolved ``not-applied``, a record that cannot be read), the target
    may hold rows of that definition in any share: the latest record is taken as they are, so its
    definition is compared too (it never counts as a later commit that replaced another's rows)."""
    found: list[PartitionCheckpoint] = []
    for checkpoint in _other_identity(family, planned, naming):
        if checkpoint.status is CheckpointStatus.COMMITTED:
            found.append(checkpoint)
            continue
        if not near(checkpoint):
            continue
        records = history(checkpoint.route, checkpoint.partition_id)
        below = _commit_below(records)
        if below is not None:
            found.append(below)
        elif any(replaced_the_target(record) for record in (*records, checkpoint)):
            found.append(checkpoint)
    return found


def newest_commit(checkpoint: PartitionCheckpoint, history: History) -> PartitionCheckpoint | None:
    """``checkpoint`` where it is COMMITTED, else the newest COMMITTED record of its partition (None: never
    committed). Whatever was done there since, that commit deleted every row within the bounds it had, so
    it tells when another definition's rows there were replaced."""
    if checkpoint.status is CheckpointStatus.COMMITTED:
        return checkpoint
    committed = [
        record
        for record in history(checkpoint.route, checkpoint.partition_id)
        if record.status is CheckpointStatus.COMMITTED
    ]
    return max(committed, key=checkpoint_moment) if committed else None


def _other_identity(
    family: RouteFamily, planned: Sequence[PlannedPartition], naming: RouteNaming
) -> list[PartitionCheckpoint]:
    same: set[tuple[RouteIdentity, str]] = {(family.route, p.partition_id) for p in planned}
    legacy = family.legacy_routes()
    for part in planned:
        same.update((old_route, old_id) for old_route, _, old_id in _legacy_ids(part, legacy, naming))
    return [c for c in family.own if (c.route, c.partition_id) not in same]


#: Guard phases whose attempt began its target call (its deletes may have run).
_REACHED_TARGET = frozenset(
    {
        GuardPhase.ARMED.value,
        GuardPhase.TARGET_OUTCOME_UNKNOWN.value,
        GuardPhase.CHECKPOINT_INCOMPLETE.value,
        GuardPhase.CHECKPOINT_COMMITTED.value,
    }
)


def replaced_the_target(checkpoint: PartitionCheckpoint) -> bool:
    """A replacing route's checkpoint whose attempt deleted (or may have deleted) rows in the target: it
    committed, it was left in the target call, or an operator resolved such an attempt ``not-applied``."""
    if checkpoint.route.strategy is Strategy.INCREMENTAL_APPEND:
        return False
    try:
        guard = read_guard(checkpoint)
    except GuardInvalid:
        return True
    if guard is None:
        return checkpoint.status is CheckpointStatus.COMMITTED
    if guard.phase.value in _REACHED_TARGET:
        return True
    resolution = checkpoint.diagnostics.get("resolution")
    return isinstance(resolution, dict) and resolution.get("previous_phase") in _REACHED_TARGET


def by_source(
    checkpoints: Iterable[PartitionCheckpoint], source_table: str, naming: RouteNaming
) -> tuple[list[PartitionCheckpoint], list[PartitionCheckpoint]]:
    """``checkpoints`` split by the source table their route reads: ``source_table`` (canonical; any
    strategy or spelling) or another one (a fan-in). Each stored spelling is canonicalised once: a long
    route's tens of thousands of checkpoints cost one dictionary lookup each."""
    canonical: dict[str, str] = {}
    same: list[PartitionCheckpoint] = []
    other: list[PartitionCheckpoint] = []
    for checkpoint in checkpoints:
        stored = checkpoint.route.source_table
        name = canonical.get(stored)
        if name is None:
            name = canonical[stored] = naming.canonical(checkpoint.route).source_table
        (same if name == source_table else other).append(checkpoint)
    return same, other


def committed_by_source(
    target_wide: Sequence[PartitionCheckpoint], source_table: str, naming: RouteNaming
) -> tuple[list[PartitionCheckpoint], list[PartitionCheckpoint]]:
    """A target's COMMITTED checkpoints split by the source table their route reads (:func:`by_source`)."""
    committed = (c for c in target_wide if c.status is CheckpointStatus.COMMITTED)
    return by_source(committed, source_table, naming)


def sibling_committed(family: RouteFamily, naming: RouteNaming) -> list[PartitionCheckpoint]:
    """COMMITTED checkpoints of the same source table's routes under another strategy (its siblings).

    A route is (source, target, strategy), so switching a manifest between strategies starts another route
    over the same target. The rows a sibling committed are this source table's rows: an append route that
    plans their bounds as new would append them a second time. Seen: ``replace_partition`` committed a
    new day, the manifest went back to ``incremental_append``, whose next run appended the day again
    (333 duplicates, exit 0). Another source table's routes (a fan-in) are not siblings.
    """
    same, _ = committed_by_source(family.target_wide, family.route.source_table, naming)
    return [c for c in same if c.route.strategy is not family.route.strategy]


def capsule_scope(family: RouteFamily, naming: RouteNaming) -> tuple[PartitionCheckpoint, ...]:
    """The latest checkpoints whose durable quality references can block this route: its own (every
    stored spelling) and those of the same source table's routes under another strategy (any status).

    A strategy switch starts another route over the same target, whose runs go on over the rows the other
    one published: seen, an ``incremental_append`` run whose target evidence was owed blocked its route,
    the manifest went to ``replace_partition`` and the next run went on, exit 0, ``replay status`` saying
    nothing blocked. Another source table's routes (a fan-in) hold their own verdicts."""
    if len(family.target_wide) == len(family.own):
        return family.own  # every checkpoint of the target is the route's own: the common case
    # the route's own spellings are in ``own``; others of its strategy read other tables (a fan-in)
    others = (c for c in family.target_wide if c.route.strategy is not family.route.strategy)
    siblings, _ = by_source(others, family.route.source_table, naming)
    return (*family.own, *siblings)


def with_standing_commits(
    store: CheckpointStore,
    checkpoints: Sequence[PartitionCheckpoint],
    planned: Sequence[PlannedPartition],
) -> tuple[PartitionCheckpoint, ...]:
    """``checkpoints`` with each unplanned partition's latest record of an attempt that left the target
    holding this route's rows there replaced by the commit it stands over.

    An attempt that failed (or was killed) before the target changed nothing in it, but its record becomes
    the partition's latest. Seen: a ``replace_partition`` route with ``lookback`` ran a day the source had
    emptied, beside the lookback; the run failed before the target (a failed quality check), and its retry
    stopped with ``unrecorded_rows_in_lookback`` ("the store may have been restored from an older backup")
    over rows the same store had committed, every Airflow retry failing the same way. The same after an
    attempt killed in the target and resolved ``not-applied`` by an operator: whatever it left there is this
    route's too (its commit's rows or its own). One history read per such partition: planned ones are run
    again anyway, so they are left as they are."""
    planned_ids = {p.partition_id for p in planned}
    standing: list[PartitionCheckpoint] = []
    for checkpoint in checkpoints:
        if (
            checkpoint.status is not CheckpointStatus.COMMITTED  # the most of a long history: no guard read
            and checkpoint.partition_id not in planned_ids
            and (never_reached_target(checkpoint) or _resolved_not_applied(checkpoint))
        ):
            below = _commit_below(store.history(checkpoint.route, checkpoint.partition_id))
            if below is not None:
                checkpoint = below
        standing.append(checkpoint)
    return tuple(standing)


#: Statuses an attempt records before arming, without a guard (its progress).
_BEFORE_ARMING = frozenset({CheckpointStatus.PLANNED, CheckpointStatus.EXPORTED, CheckpointStatus.LOADED})

#: Guard phases of an attempt that reached the target (its call began, or its commit was not recorded whole).
_IN_THE_TARGET = frozenset(
    {GuardPhase.ARMED, GuardPhase.TARGET_OUTCOME_UNKNOWN, GuardPhase.CHECKPOINT_INCOMPLETE}
)


def never_reached_target(checkpoint: PartitionCheckpoint) -> bool:
    """A record an attempt wrote before arming: its progress, or its own ``failed_before_target`` (not an
    operator's resolution, which speaks of an attempt that did reach the target)."""
    try:
        guard = read_guard(checkpoint)
    except GuardInvalid:
        return False
    if guard is None:
        return checkpoint.status in _BEFORE_ARMING
    return guard.phase is GuardPhase.FAILED_BEFORE_TARGET and "resolution" not in checkpoint.diagnostics


def _resolved_not_applied(checkpoint: PartitionCheckpoint) -> bool:
    """An operator's ``guard resolve --as not-applied``, ``--force``d or not, where the resolution counted no
    other route's rows within the bounds for certain: a replacing route owns the bounds it plans, and the
    runbook forces it over the route's own earlier commit too (seen: a day kept for good after the source
    deleted it, exit 0, no word). Rows of another route's commit there (a fan-in), or a share that could not
    be told (another partitioning), are never taken for this route's."""
    resolution = checkpoint.diagnostics.get("resolution")
    if not isinstance(resolution, dict) or checkpoint.status is not CheckpointStatus.FAILED:
        return False
    return resolution.get("as") == "not-applied" and resolution.get("other_routes_rows") == 0


def _commit_below(history: Sequence[PartitionCheckpoint]) -> PartitionCheckpoint | None:
    """The newest COMMITTED record under nothing but attempts that never reached the target and attempts an
    operator resolved ``not-applied`` while the target held exactly the commit's rows there (None: anything
    else lies between, and the latest record decides).

    A resolution over a partly rewritten partition (a worker killed mid-insert: 260,000 of a committed
    300,000 rows) does not let the commit stand: taken for it, the day was kept as a whole commit "rolled
    out of a windowed source" once the source dropped it, 40,000 rows short for good."""
    held: list[object] = []  # what the target held within the bounds at each resolution passed
    for checkpoint in reversed(history):
        if never_reached_target(checkpoint):
            continue
        if _resolved_not_applied(checkpoint):
            resolution = checkpoint.diagnostics["resolution"]
            held.append(resolution.get("target_rows") if isinstance(resolution, dict) else None)
            continue  # the attempt it speaks of lies below
        try:
            guard = read_guard(checkpoint)
        except GuardInvalid:
            return None
        if held and guard is not None and guard.phase in _IN_THE_TARGET:
            continue
        if checkpoint.status is not CheckpointStatus.COMMITTED:
            return None
        if guard is not None and guard.phase is not GuardPhase.CHECKPOINT_COMMITTED:
            return None
        return checkpoint if all(rows == checkpoint.rows for rows in held) else None
    return None
