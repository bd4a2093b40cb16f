"""What a run checks before arming, from what the checkpoints say and what the target already holds.

Every check here runs after the route guard scan and planning, and before the first write to the target: a
check that fails stops the run with nothing written and no checkpoint recorded, so a user's mistake never
blocks the route (ADR 0078). The checks read the target only through the run's one sink (``target``), opened
at the first check that needs it; what a run goes on with but the operator must know is said through
``notice`` (the run report's ``notices``, a warning in the task log).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import Manifest, PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.read_definition import PARTITIONS_NAMED
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime import detached_parts, unrecorded
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex, fully_covered, may_overlap
from airflow_provider_dpone.runtime.guard.resolution import committed_rows_within, other_sources_rows
from airflow_provider_dpone.runtime.key_fingerprint import key_ranges, route_key_candidates
from airflow_provider_dpone.runtime.left_out_rows import (
    DefinitionComparison,
    DefinitionLookup,
    compare_with_earlier,
    still_standing,
)
from airflow_provider_dpone.runtime.lost_rows import deleting_ttl, lost_rows_hints
from airflow_provider_dpone.runtime.respelled_values import listed_text, new_values, vanished_values
from airflow_provider_dpone.runtime.resume_planner import (
    Action,
    Reason,
    ResumeDecision,
    is_settled,
    still_filling,
)
from airflow_provider_dpone.runtime.route_family import (
    History,
    RouteFamily,
    committed_by_source,
    newest_commit,
    other_identity_committed,
    other_identity_standing,
    replaced_the_target,
    sibling_committed,
)
from airflow_provider_dpone.runtime.route_identity import (
    IdentityOverlap,
    changed_summary,
    find_overlaps,
    raise_respelled,
    require_unchanged_identity,
)
from airflow_provider_dpone.runtime.rows_beyond_partitioning import by_another_column, rows_beyond_error
from airflow_provider_dpone.runtime.shared_target import other_sources_in_scope, within_partitions
from airflow_provider_dpone.runtime.target_counts import TargetCounts, rows_within_each
from airflow_provider_dpone.runtime.vanished import bounds_order

_log = logging.getLogger(__name__)
#: How many of the latest commits a short target counts, beyond the lookback's (``_emptied_late_commit``).
_LATE_COMMITS_COUNTED = 20


class PreArmChecks:
    """The pre-arm checks of one run of ``route`` (its canonical identity) as ``manifest`` defines it.

    ``target`` returns the run's one sink (the engine opens it at the first call and closes it when the run
    ends); ``notice`` records a fact about a run that goes on; ``definitions`` reads the route's kept read
    definitions by query hash (``left_out_rows``; None: none are kept); ``history`` reads every record of one
    partition (the commit under a later failed or resolved attempt; None: no record below the latest is
    known, and only what the latest records say is taken)."""

    def __init__(
        self,
        manifest: Manifest,
        route: RouteIdentity,
        *,
        naming: RouteNaming,
        clock: Clock,
        manifest_ref: str,
        allow_nonempty_target: bool,
        target: Callable[[], Sink],
        notice: Callable[[str], None],
        source: Callable[[], Source] | None = None,
        definitions: DefinitionLookup | None = None,
        history: History | None = None,
    ) -> None:
        self._manifest = manifest
        self._route = route
        self._naming = naming
        self._clock = clock
        self._manifest_ref = manifest_ref
        self._allow_nonempty_target = allow_nonempty_target
        self._target = target
        self._notice = notice
        self._source = source
        self._definitions = definitions
        self._history: History = history if history is not None else (lambda route, partition_id: ())

    def append_overlaps(
        self,
        family: RouteFamily,
        decisions: Sequence[ResumeDecision],
        elsewhere: list[PartitionCheckpoint] | None = None,
    ) -> list[IdentityOverlap]:
        """An append route's partitions to move that overlap rows committed elsewhere and whose bounds the
        target holds rows in.

        Elsewhere: the route's own partitions under another definition, and its siblings' (the same source
        table under another strategy: a manifest switched to ``replace_partition`` and back). A partition
        whose bounds hold no row in the target duplicates nothing when appended (counted read-only, before
        arming): an old partition wider than it (the whole table, a month) was committed before its rows
        arrived, and stopping it would block every new day for good. ``elsewhere``: those commits, where the
        caller read them already (:meth:`_elsewhere`)."""
        planned = [d.partition for d in decisions]
        active = [d.partition for d in decisions if d.action is Action.RUN]
        if not active:
            return []
        if elsewhere is None:
            elsewhere = self._elsewhere(family, planned)
        overlaps = find_overlaps(active, elsewhere, self._route.strategy)
        if not overlaps:
            return []
        table = self._manifest.sink.table
        sink = self._target()
        _require_partition_column(TargetCounts(sink, table), overlaps[0].partition.bounds, table, self._route)
        others = self._other_sources(family)
        held = [o for o in overlaps if self.own_rows(sink, o.partition.bounds, others) > 0]
        if len(held) < len(overlaps):
            kept = {id(o) for o in held}
            emptied = [o for o in overlaps if id(o) not in kept]
            fed_again, views = self._views_fed_again(sink, table, emptied)
            held.extend(fed_again)
            empty = [o.partition for o in emptied if not any(f.partition is o.partition for f in fed_again)]
            if empty:
                self._notice(
                    f"{len(empty)} partition(s) of route {self._route.describe()} ({some_labels(empty)}) lie "
                    f"within partitions committed under another definition or strategy, but the target table "
                    f"{table} holds no row within their bounds (rows that arrived after a wider partition was "
                    "committed, or that retention removed): they are moved as new"
                    + (
                        f"; the view(s) the table feeds ({', '.join(views[:3])}{' ...' if len(views) > 3 else ''}) "
                        "receive their rows again: take rows they already hold out of the views' tables (see "
                        "`dpone runbook guard`, 'The route's identity changed')"
                        if views
                        else ""
                    )
                )
        return held

    def _elsewhere(
        self, family: RouteFamily, planned: Sequence[PlannedPartition]
    ) -> list[PartitionCheckpoint]:
        """The commits of the route under another definition and of its siblings (another strategy): one
        pass over every latest checkpoint of the target, a tenth of a second at 50,000."""
        elsewhere = other_identity_committed(family, planned, self._naming)
        elsewhere.extend(sibling_committed(family, self._naming))
        return elsewhere

    def _require_rows_within_partitioning(
        self,
        family: RouteFamily,
        decisions: Sequence[ResumeDecision],
        elsewhere: list[PartitionCheckpoint] | None = None,
    ) -> None:
        """Where commits of another definition or strategy selected rows by another column (or the whole
        table), stop unless every row of the target lies within the planned partitions by this run's column,
        other source tables' rows known to lie outside them aside: the counts there decide what is new
        (``rows_beyond_partitioning``, ADR 0095). Only while such a commit is newer than every commit of this
        definition (the switch's first run; a switch back): later runs move new partitions, and a source that
        keeps less history than its target would stop each of them."""
        if self._route.strategy is Strategy.FULL_REFRESH or self._allow_nonempty_target:
            return
        planned = [d.partition for d in decisions]
        column = planned[0].bounds.column if planned else None
        if column is None or not any(d.action is Action.RUN for d in decisions):
            return
        if elsewhere is None:
            elsewhere = self._elsewhere(family, planned)
        old = by_another_column(elsewhere, column)
        if not old or not _switched_since(family, planned, old):
            return
        sink, table = self._target(), self._manifest.sink.table
        if TargetCounts(sink, table).lacks_column_of(planned[0].bounds):
            return  # no such column in the target: named before anything counts by it
        whole = sink.count_rows(table, None)
        if whole == 0:
            return
        inside = sum(rows_within_each(sink, table, [p.bounds for p in planned]))
        beyond = whole - inside - self._theirs_outside(sink, family, planned, column)
        if beyond > 0:
            raise rows_beyond_error(self._route, table, column, beyond, old, self._manifest_ref)

    def _theirs_outside(
        self, sink: Sink, family: RouteFamily, planned: Sequence[PlannedPartition], column: str
    ) -> int:
        """Rows of other source tables' commits (a fan-in) known to lie outside the planned partitions: those
        committed by ``column`` in bounds none of them overlaps, each at most what the target holds there
        now. Their rows within the planned partitions are counted inside them; a commit by another column
        could lie anywhere, and is not subtracted (the check errs toward the stop)."""
        others = self._other_sources(family)
        if not others:
            return 0
        index = OverlapIndex([p.bounds for p in planned])
        outside = [
            c
            for c in others
            if (c.bounds.column or "").casefold() == column.casefold()
            and c.bounds.kind is not BoundsKind.ALL
            and index.first(c.bounds) is None
        ]
        if not outside:
            return 0
        held = rows_within_each(sink, self._manifest.sink.table, [c.bounds for c in outside])
        return sum(min(c.rows or 0, now) for c, now in zip(outside, held, strict=True))

    def _views_fed_again(
        self, sink: Sink, table: str, emptied: Sequence[IdentityOverlap]
    ) -> tuple[list[IdentityOverlap], list[str]]:
        """Of the overlaps whose bounds hold no row in the target, when the target feeds views (the views'
        names second): those whose old partitions all lie inside them, committed rows, and hold exactly
        those rows in the source now, each of them. Retention emptied them in the table, but each view kept
        what it was given, so appending them again counted their rows twice in the views (exit 0); they are
        the same rows, so a rebaseline records them. Not when ``sink.options.allow_target_views`` says the
        views absorb repeated rows; not where a wider old partition covers one (its rows may have lain
        elsewhere: a day that arrived after it is new), nor where the rows changed (the runbook's "load it
        whole": an operator emptied it to reload; a stop there looped, since no rebaseline records it)."""
        listing = getattr(sink, "views_fed_by", None)
        if not emptied or self._manifest.sink.options.allow_target_views or not callable(listing):
            return [], []
        views = list(listing(table))
        inside = [
            o
            for o in emptied
            if any(c.rows for c in o.committed)
            and all(fully_covered(c.bounds, [o.partition.bounds]) for c in o.committed)
        ]
        if not views or not inside or self._source is None:
            return [], views
        asked = [b for o in inside for b in (o.partition.bounds, *(c.bounds for c in o.committed))]
        counts = iter(self._source().count_partitions(asked))
        same: list[IdentityOverlap] = []
        for o in inside:
            whole = next(counts)
            each = [(next(counts), c.rows or 0) for c in o.committed]
            if whole == sum(rows for _, rows in each) and all(now == rows for now, rows in each):
                same.append(dataclasses.replace(o, views_fed=tuple(views)))
        return same, views

    def _still_spelled(self, bounds: PartitionBounds) -> bool:
        """Whether the source delivers one of ``bounds``' listed values byte for byte (no: a source that
        cannot tell, which errs toward the stop)."""
        ask = getattr(self._source() if self._source is not None else None, "delivers_spelling", None)
        return bool(ask(bounds)) if callable(ask) else False

    def _other_sources(self, family: RouteFamily) -> list[PartitionCheckpoint]:
        """Committed checkpoints of other source tables' routes on the target (a fan-in)."""
        return committed_by_source(family.target_wide, self._route.source_table, self._naming)[1]

    def own_rows(self, sink: Sink, bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]) -> int:
        """The target's rows within ``bounds`` less those other source tables committed there (a fan-in;
        the whole count where their share is unknown)."""
        held, theirs = self.held_and_theirs(sink, bounds, others)
        return held if theirs is None or theirs > held else held - theirs

    def held_and_theirs(
        self, sink: Sink, bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]
    ) -> tuple[int, int | None]:
        """The target's rows within ``bounds`` and how many of them other source tables committed (None:
        unknown, see ``other_sources_rows``)."""
        held = sink.count_rows(self._manifest.sink.table, bounds)
        return held, other_sources_rows(self._route, bounds, others) if others and held else 0

    def unrecorded_rows_in_lookback(
        self,
        family: RouteFamily,
        canonical: Sequence[PartitionCheckpoint],
        planned: Sequence[PlannedPartition],
        floor: PartitionBounds,
        settled_before: datetime | None,
        budget: int,
    ) -> list[PartitionBounds]:
        """The units of the current partitioning, from ``floor`` (the oldest partition the lookback reaches)
        on, that hold rows of this route in the target although no planned partition and no recorded commit
        of this source table (nor a partition an operator resolved as another writer's, in ``canonical``)
        covers them (``unrecorded``); settled only, newest first.

        A ``replace_partition`` route with ``lookback`` whose checkpoint store lost its newest commits (restored
        from an older backup, copied to another worker) kept a day the source deleted since for good, exit 0.
        Such rows stop the run before arming (``native_transfer_target_not_empty``); with
        ``allow_nonempty_target`` (the operator says they are this route's) they are returned, to be emptied
        beside the lookback. Nothing on the route's first run (rows outside its partitions are not its
        business then: ``require_first_replacement_knows_the_rows``) unless it takes the table over
        (``allow_nonempty_target``: it empties them then, not one run later after exiting 0); a strategy
        switch of a source table that committed here is no first run. A commit of another shape (the whole
        table, a list, another column) covers nothing here: its rows within the window that the source no
        longer holds are deleted rows like any other (it used to switch the check off for good: a route that
        once ran as ``full_refresh`` kept a deleted day after a store restore, exit 0)."""
        if not planned:
            return []
        same_source, others = committed_by_source(family.target_wide, self._route.source_table, self._naming)
        if not (family.own or same_source or self._allow_nonempty_target):
            return []  # a first run: rows outside its partitions are not its business
        units = unrecorded.units_of(self._manifest.source.partitioning, planned[0].bounds)
        template = planned[0].bounds
        commits = [
            c.bounds
            for c in [*same_source, *(c for c in canonical if _committed_or_forced(c))]
            if unrecorded.comparable(c.bounds, template)
        ]
        if units is None or floor.lower is None:
            return []
        stretches = unrecorded.unrecorded_stretches(
            units, floor.lower, [*(p.bounds for p in planned), *commits]
        )
        sink = self._target()

        def own(bounds: PartitionBounds) -> int:
            """This source's rows within ``bounds``; where whose the rows are is unknown, none are counted."""
            held, theirs = self.held_and_theirs(sink, bounds, others)
            return 0 if theirs is None else max(held - theirs, 0)

        located = unrecorded.locate(units, stretches, own, budget)
        found = [(b, n) for b, n in located.units if is_settled(b, settled_before)]
        table = self._manifest.sink.table
        if located.incomplete:
            self._notice(
                f"route {self._route.describe()}: the lookback's reach was not counted whole for rows no "
                f"checkpoint records ({budget} counts, newest first, or rows past the calendar's end): rows the "
                f"source no longer holds in the rest, if any, stay in {table}; a smaller lookback is counted "
                "whole"
            )
        if not found:
            return []
        rows = sum(n for _, n in found)
        labels = ", ".join(b.label for b, _ in found[:5]) + (", ..." if len(found) > 5 else "")
        where = f"{rows} row(s) in {len(found)} partition(s) ({labels})"
        # whose they are this store cannot say: another source's commit it lost (a restore), or one kept in a
        # store of its own, looks the same, and emptying would delete that route's rows for good
        whose = (
            f" within the lookback of route {self._route.describe()}, which other source tables' routes write "
            "too (a fan-in: they may be theirs, a commit this store does not hold),"
            if others
            else f" within the lookback of route {self._route.describe()}"
        )
        if self._allow_nonempty_target:
            self._notice(
                f"route {self._route.describe()}: the target table {table} held {where} that the source no longer "
                "holds and no checkpoint of this store records; this run empties them (allow_nonempty_target)"
            )
            return [b for b, _ in found]
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"the target table {table} holds {where}{whose} that the source no longer "
            "holds and no checkpoint of this store records in this partitioning: the store may have been restored "
            "from an older backup or copied from another worker (its newest commits are lost), an earlier "
            "definition by the whole table or another column loaded them, or another writer did; the lookback "
            "would leave them in the target for good",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "problem": "unrecorded_rows_in_lookback",
                "partitions": [b.label for b, _ in found[:20]],
                "rows": rows,
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                "if a newer copy of the checkpoint store exists, point checkpoints.connection at it",
                "if another loader writes this table (another source table's route, through this store or one of "
                "its own; a backfill), they may be its rows: never empty them then, see the runbook below",
                f"if they are rows this route loaded (a restored or copied store): dpone run {self._manifest_ref} "
                "--allow-nonempty-target empties them in this run",
                f"if another writer loaded them: move them out of {table} (this route replaces its partitions)",
                "see `dpone runbook guard`, 'Rows of the lookback no checkpoint records'",
            ),
        )

    def require_unchanged_identity(self, family: RouteFamily, decisions: Sequence[ResumeDecision]) -> None:
        """An append route stops when a partition to move overlaps rows committed under another identity.

        ``replace_partition`` and ``full_refresh`` replace what they write, so they go on and say so; but a
        ``replace_partition`` run stops where an earlier definition's commit it replaces holds rows its own
        read leaves out, compared on the source (``left_out_rows``). Any but ``full_refresh`` stops where
        listed values were respelled (``respelled_values``)."""
        self._require_no_respelled_values(family, decisions)
        planned = [d.partition for d in decisions]
        active = [d.partition for d in decisions if d.action is Action.RUN]
        if self._route.strategy is Strategy.INCREMENTAL_APPEND:
            elsewhere = self._elsewhere(family, planned) if active else []  # read once for both checks
            self._require_rows_within_partitioning(family, decisions, elsewhere)
            require_unchanged_identity(
                self._route, self.append_overlaps(family, decisions, elsewhere), self._manifest_ref
            )
            return
        self._require_rows_within_partitioning(family, decisions)
        if not active:
            return

        active_index = OverlapIndex([p.bounds for p in active])  # ``may_overlap``, not asked of every pair

        def near(checkpoint: PartitionCheckpoint) -> bool:
            return active_index.first(checkpoint.bounds) is not None

        # the commits standing under a later failed or resolved attempt too: the latest record hid them
        standing = other_identity_standing(family, planned, self._naming, self._history, near)
        overlaps = find_overlaps(active, standing)
        if not overlaps:
            return
        if self._route.strategy is Strategy.REPLACE_PARTITION:
            latest = self._own_commits(family, overlaps)
            source = self._source() if self._source is not None else None
            comparison = compare_with_earlier(overlaps, latest, self._definitions, source)
            alike = source.describe().hashes_up_to_nullability() if source is not None else frozenset()
            if comparison.rows and not self._allow_nonempty_target:
                raise self._left_out(overlaps, comparison, alike)
            unreplaced = still_standing(overlaps, latest)  # said once, not again over days replaced since
            if unreplaced:
                self._notice(self._replaced_again(unreplaced, comparison, alike))
        else:
            self._notice(self._replaced_again(overlaps, None))
        column = self._manifest.source.partitioning.column
        unsplit = {
            c.bounds.column or c.bounds.kind.value
            for o in overlaps
            for c in o.committed
            if c.bounds.kind is not BoundsKind.RANGE
            or column is None
            or (c.bounds.column or "").casefold() != column.casefold()
        }
        if unsplit and self._manifest.source.partitioning.lookback is not None:
            self._notice(
                f"route {self._route.describe()}: partitions committed under the old partitioning (by "
                f"{', '.join(sorted(unsplit))}) are not split into this one's: rows of days the source has "
                "emptied since stop a run while they are within the lookback's reach (the runbook's 'Rows of "
                "the lookback no checkpoint records'); older ones stay in the target: compare the source's and "
                f"{self._manifest.sink.table}'s counts by the old partitioning and delete those by hand"
            )

    def _own_commits(
        self, family: RouteFamily, overlaps: Sequence[IdentityOverlap]
    ) -> dict[str, PartitionCheckpoint]:
        """The latest checkpoint of each partition of this definition, by ID, where an overlapping one's is not
        COMMITTED its newest commit (``route_family.newest_commit``): that commit replaced the rows of other
        definitions committed before it, whatever failed since (one history read each)."""
        latest = {c.partition_id: c for c in family.canonical_checkpoints()}
        for overlap in overlaps:
            own = latest.get(overlap.partition.partition_id)
            if own is not None and own.status is not CheckpointStatus.COMMITTED:
                commit = newest_commit(own, self._history)
                if commit is not None:
                    latest[own.partition_id] = commit
        return latest

    def _replaced_again(
        self,
        overlaps: Sequence[IdentityOverlap],
        comparison: DefinitionComparison | None,
        alike: frozenset[str] = frozenset(),
    ) -> str:
        """The notice of a replacing run over partitions an earlier definition committed: what becomes of the
        rows it loaded there, as far as the source could be compared (None: not compared, ``full_refresh``).
        ``alike``: the planned schema's hashes up to nullability (``changed_summary``)."""
        head = (
            f"the {changed_summary(overlaps, alike)} of route {self._route.describe()} changed: {len(overlaps)} "
            f"partition(s) overlap partitions committed under the old definition; "
            f"{self._route.strategy.value} replaces what it writes, so they are moved again"
        )
        advice = (
            " (two manifests of one table with different filters cannot share a target: give each its own, or "
            "move all filters with one manifest partitioned by the filter column)"
        )
        if comparison is None:
            return f"{head}: the rows the other definition loaded within their bounds are deleted{advice}"
        if comparison.rows:
            return (
                f"{head}: the rows the other definition loaded within their bounds are deleted, "
                f"{comparison.rows:,} of them in {_left_out_where(overlaps, comparison)} not returned by this "
                f"definition's read, or returned with other values, so not loaded again as they were "
                f"(allow_nonempty_target){advice}"
            )
        if comparison.not_compared:
            parts = [p for p, _ in comparison.not_compared]
            reasons = "; ".join(reason.phrase for reason in comparison.reasons())
            return (
                f"{head}: the rows the other definition loaded within their bounds are deleted, and whether this "
                f"definition's read returns them all could not be compared on the source for {len(parts)} "
                f"partition(s) ({some_labels(parts)}): {reasons}{advice}"
            )
        return (
            f"{head}: compared on the source, this definition's read returns every row the other one loaded "
            "within their bounds"
        )

    def _left_out(
        self,
        overlaps: Sequence[IdentityOverlap],
        comparison: DefinitionComparison,
        alike: frozenset[str] = frozenset(),
    ) -> DponeError:
        """``target_not_empty``: rows an earlier definition committed within partitions this run replaces that
        its own read leaves out would be deleted and never loaded again (``left_out_rows``)."""
        table = self._manifest.sink.table
        parts = [p for p, _ in comparison.left_out]
        partitioning = self._manifest.source.partitioning
        window = "render its window in whole partitions of source.partitioning"
        if partitioning.kind is PartitionKind.DAY:
            day = '.in_timezone("UTC").strftime("%Y-%m-%d") }}'
            window = (
                f"render its window in whole UTC days (in Airflow: {partitioning.column} >= "
                f"'{{{{ data_interval_start{day}' AND {partitioning.column} < '{{{{ data_interval_end{day}', "
                "with a schedule of whole days in UTC)"
            )
        return DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"the {changed_summary(overlaps, alike)} of route {self._route.describe()} changed: within "
            f"{_left_out_where(overlaps, comparison)} of {table}, the earlier definition's read returns "
            f"{comparison.rows:,} row(s) that this definition's read does not return, or returns with other "
            "values (compared on the source, read-only, over the columns both return): "
            f"{self._route.strategy.value} would delete them and load only what this read returns",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "problem": "rows_left_out_by_new_definition",
                "changed": changed_summary(overlaps, alike).split(", "),
                "partitions": [p.bounds.label for p in parts[:PARTITIONS_NAMED]],
                "rows": comparison.rows,
                **({} if comparison.complete else {"more_partitions": True}),
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store; the route is not blocked",
                f"a source.query templated per run must select whole partitions: {window}",
                "a column whose value depends on the rows a read selects (ROW_NUMBER() OVER the window, "
                "random(), NEWID()) returns every row with other values on every run, and every run stops: "
                "compute it from the row alone, or in the target, or drop the window from source.query and let "
                "source.partitioning.lookback choose the partitions (one definition, never compared)",
                "if this definition is meant to drop or change those rows in the target (a narrower filter, an "
                f"expression changed on purpose): dpone run {self._manifest_ref} --allow-nonempty-target, in "
                "Airflow allow_nonempty_target=True or, for one DAG run only, a template rendered from its conf "
                "(see the Airflow guide); it replaces them with what it reads",
                "see `dpone runbook guard`, 'Rows a new definition leaves out'",
            ),
        )

    def _require_no_respelled_values(self, family: RouteFamily, decisions: Sequence[ResumeDecision]) -> None:
        """Stop before arming where this run moves listed values no definition committed while the target
        holds rows of old values, committed under another query, that the source no longer delivers byte
        for byte (``respelled_values``): those rows would be in the target twice, once under each spelling.
        ``--allow-nonempty-target``: the old value's rows left the source and the new value is new."""
        if self._route.strategy is Strategy.FULL_REFRESH or self._allow_nonempty_target:
            return
        active = [
            d.partition for d in decisions if d.action is Action.RUN and listed_text(d.partition.bounds)
        ]
        if not active:  # the common case, a day or range route: nothing listed, nothing to scan
            return
        committed, others = committed_by_source(family.target_wide, self._route.source_table, self._naming)
        moving = new_values(active, committed)
        vanished = vanished_values([d.partition for d in decisions], committed) if moving else []
        if not vanished:
            return
        sink = self._target()
        held = [
            old for old in vanished if self.own_rows(sink, old, others) > 0 and not self._still_spelled(old)
        ]
        if held:
            raise_respelled(self._route, self._manifest.sink.table, moving, held, self._manifest_ref)

    def require_no_rows_where_appending(
        self,
        family: RouteFamily,
        decisions: Sequence[ResumeDecision],
        target_rows: int | None,
        matched: Mapping[str, PartitionCheckpoint],
    ) -> None:
        """Before any target I/O: an append partition that was never committed finds no rows in its bounds.

        A route whose store lacks its newest checkpoints (restored from an older backup, pointed at a copy,
        an asynchronous failover) plans the partitions committed since as new and appends them again. Seen:
        the demo's store restored from before a day was committed: the next run appended the day's 333 rows a
        second time (exit 0). The lost suffix most often leaves an older record of the day behind (its
        PLANNED or LOADED row, a failure before the target): those partitions are counted too (seen: a
        restored store whose day had failed a quality check before the target, exit 0 and the day twice). A
        partition an operator resolved ``not-applied --force`` (its rows are another writer's) is not.
        Rows another source table's route committed within the same bounds (a fan-in) are subtracted (each
        source's newest commit of each bounds, ``other_sources_rows``); where their share is unknown (another
        partitioning) the partition is not counted. The route's first run is
        ``require_target_empty_for_new_route``'s (it counts the whole table). ``target_rows``: the
        table's rows if this run already counted them (``require_target_holds_committed``)."""
        if self._route.strategy is not Strategy.INCREMENTAL_APPEND or not family.own:
            return
        fresh = [
            d.partition
            for d in decisions
            if d.action is Action.RUN
            and d.reason in _NEVER_COMMITTED
            and not _forced_not_applied(matched.get(d.partition.partition_id))
        ]
        if not fresh:
            return
        # other source tables' commits (a fan-in): their rows within a partition are subtracted from the
        # target's count; where their share is unknown (another partitioning) a wider region is counted
        own, others = committed_by_source(family.target_wide, family.route.source_table, self._naming)
        index = _RangeIndex(others)
        theirs: dict[str, int] = {}
        for part in fresh:
            share = other_sources_rows(self._route, part.bounds, index.overlapping(part.bounds))
            if share is not None:
                theirs[part.partition_id] = share
        if target_rows == 0:
            return  # an empty or missing table holds nothing to duplicate
        table = self._manifest.sink.table
        sink = self._target()
        if target_rows is None and sink.count_rows(table, None) == 0:
            return
        # rows no commit explains, per partition; and partitions holding rows while other sources' commits
        # there are partly gone (retention, deletes): whose the rows are cannot be told, and a deficit of
        # theirs would hide as many of this route's own (seen: a restored store appended a day again)
        held: list[tuple[PlannedPartition, int]] = []
        unclear: list[tuple[PlannedPartition, int]] = []
        unknown: dict[str, tuple[PlannedPartition, int]] = {}
        for p in fresh:
            inside = sink.count_rows(table, p.bounds)
            if inside == 0:
                continue  # nothing within its bounds: appending it duplicates nothing
            share = theirs.get(p.partition_id)
            if share is None:
                unknown[p.partition_id] = (p, inside)
            elif inside > share:
                held.append((p, inside - share))
            elif inside < share:
                unclear.append((p, inside))
        counted = list(held)  # this source's rows within each partition's own bounds, known exactly
        around, short = self._unexplained_rows(sink, [p for p, _ in unknown.values()], own, others, index)
        held.extend(around)
        unclear.extend(unknown[p.partition_id] for p in short)
        if not held and not unclear:
            return
        if not held:
            self._stop_unclear(table, unclear)
            return
        labels = some_labels([p for p, _ in held])
        rows = sum(n for _, n in held)
        if self._allow_nonempty_target:
            self._require_not_own_rows(counted, first_run=False, fan_in=bool(others))
            self._notice(
                f"the target table {table} already held {rows} row(s) within {len(held)} partition(s) of "
                f"route {self._route.describe()} that have no commit ({labels}); appending anyway "
                "(allow_nonempty_target)"
            )
            return
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"route {self._route.describe()} has no commit of {len(held)} partition(s) ({labels}) in its "
            f"checkpoint store, but the target table {table} already holds {rows} row(s) within their bounds"
            + (" or around them" if around else "")
            + ": appending them would duplicate what it holds",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "target_rows": rows,
                "partitions": [p.bounds.label for p, _ in held[:20]],
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                *(
                    (
                        "other source tables write this table in another partitioning (a fan-in): "
                        f"{some_labels([p for p, _ in around])} counted the rows of the wider region around "
                        "them (another source's partition, or the whole table) that no commit of this store "
                        "explains",
                    )
                    if around
                    else ()
                ),
                "was the checkpoint store restored from an older backup, or replaced by a copy? point the "
                "manifest at the store that holds the route's newest checkpoints (not --allow-nonempty-target: "
                "it is for another writer's rows, and stops where the rows count exactly as the source's)",
                *(
                    (
                        "if they are gone for good: other source tables' routes write this table through this "
                        "store (a fan-in), and a new store would hide this route from them (they would take its "
                        f"rows for theirs); instead delete this source's rows of those partitions from {table} "
                        "(by this source's own key, never by the bounds alone) and run again: they are appended "
                        "once",
                    )
                    if others
                    else (
                        "if they are gone for good: point checkpoints.connection at a new, empty store, then "
                        f"dpone guard rebaseline {self._manifest_ref} --adopt-target --reason '<what you "
                        "checked>'",
                    )
                ),
                "if the rows are another writer's and appending beside them is right: "
                f"dpone run {self._manifest_ref} --allow-nonempty-target",
                "see `dpone runbook guard`, 'An empty checkpoint store in front of a non-empty target'",
            ),
        )

    def drop_leftover_staging(self) -> None:
        """Drop the staging tables a killed staged attempt of the route left, where no staging of this run
        will: a run with nothing to move, or a direct load once it committed (a manifest switched from
        ``staged`` to ``direct`` kept a killed attempt's 966,667 staged rows for good, seen), under any
        strategy of the route's source and target.

        An attempt that stages drops the route's leftovers itself (``begin_staging``); an attempt whose
        partitions an operator resolved as committed has nothing to stage, and would leave them for good.
        The guard scan has passed and the route's lease is held, so no attempt of the route is inside its
        publish."""
        try:
            sink = self._target()
        except DponeError:
            _log.warning(
                "could not open the target to drop a leftover staging table; the next staged run does"
            )
            return
        drop = getattr(sink, "drop_leftover_staging", None)
        if callable(drop):  # under every strategy: a manifest switched after a killed attempt kept its table
            # for good (255,000 staged rows, seen); the lease is the target's. Never raises.
            keys = [self._route.model_copy(update={"strategy": strategy}).key() for strategy in Strategy]
            drop(self._manifest.sink.table, *keys)

    def require_lists_stored_as_listed(self, source: Source, bounds: Sequence[PartitionBounds]) -> None:
        """A ``list`` value that selects source rows stored under another spelling stops the run
        (``manifest_invalid``): the target keeps those rows as stored, outside the partition that moved them,
        so ``replace_partition`` would append them again on every run and two values that differ only in
        case or trailing spaces would move the same rows twice. Before that: a text list column without TEXT
        affinity that holds numbers or bytes, whose values the read compares by that affinity (0 rows moved,
        or 1 and 01 moving the same rows)."""
        non_text = getattr(source, "lists_holding_non_text", None)
        held_otherwise: list[PartitionBounds] = non_text(bounds) if callable(non_text) else []
        if held_otherwise:
            column = held_otherwise[0].column
            raise DponeError(
                ErrorCode.MANIFEST_INVALID,
                f"list column {column!r} holds numbers or bytes, and has no TEXT affinity (no declared type, "
                "a BLOB, TIME or UUID declaration, or an expression of source.query): its listed values "
                "compare by that affinity, not as the text the target keeps, so a value selects none of its "
                "rows or several spellings at once (1 and 01). Write CAST("
                f"{column} AS TEXT) AS {column} in source.query and list the values as that text; nothing "
                "was written",
                details={
                    "column": column,
                    "problem": "list_column_holds_non_text",
                    "partitions": [b.label for b in held_otherwise],
                },
            )
        find = getattr(source, "lists_stored_otherwise", None)
        if not callable(find):
            return
        found: list[PartitionBounds] = find(bounds)
        if not found:
            return
        column = found[0].column
        labels = some_bounds_labels(found)
        raise DponeError(
            ErrorCode.MANIFEST_INVALID,
            f"{len(found)} value(s) of source.partitioning.values ({labels}) select rows of column "
            f"{column!r} that the source stores under another spelling: its collation ignores case, accents or "
            "trailing spaces, or a fixed-width char column pads the text. The target keeps each row as stored "
            "and compares exactly, so those rows would sit outside the partition that moved them: a "
            "replace_partition run would never delete them, and values that differ only so move the same rows "
            "twice. Normalise the column in source.query (UPPER, RTRIM) and list the normalised values; "
            "listing each spelling as its own value helps only where the source compares them apart (under "
            "a collation that ignores case, each of them still selects every spelling); nothing was written",
            details={
                "column": column,
                "problem": "list_value_spelled_otherwise",
                "partitions": [b.label for b in found],
            },
        )

    def require_table_not_emptied(self, sink: Sink, held: int) -> None:
        """Right before arming: a table that held the route's committed rows when the run began still
        holds rows. A table dropped or truncated while the run read the source was created anew by the
        target's preparation and would have taken this run's rows alone, exit 0, the history gone (the
        check at the start had passed, and the next run took the shrunk table for retention)."""
        table = self._manifest.sink.table
        if sink.count_rows(table, None) > 0:
            return
        raise DponeError(
            ErrorCode.TARGET_LOST_COMMITTED_ROWS,
            f"target table {table} held {held:,} rows when this run of route {self._route.describe()} "
            "began and holds none now: it was dropped or truncated while the run read the source",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "problem": "emptied_during_run",
                "rows_at_start": held,
            },
            hint_lines=(
                "nothing was written to the target: the run stopped before arming, the route is not blocked",
                "restore the table, or reload deliberately: see `dpone runbook guard`, "
                "'The target lost committed rows'",
            ),
        )

    def say_what_may_still_fill(self, decisions: Sequence[ResumeDecision]) -> None:
        """A notice for partitions this run commits while rows may still arrive in them (``still_filling``)."""
        line = self.what_may_still_fill(decisions)
        if line is not None:
            self._notice(line)

    def what_may_still_fill(
        self, decisions: Sequence[ResumeDecision], verb: str = "this run commits"
    ) -> str | None:
        """The notice :meth:`say_what_may_still_fill` gives (also for a rebaseline's records), or None."""
        partitioning = self._manifest.source.partitioning
        filling = still_filling(decisions, self._route.strategy, partitioning, self._clock.now())
        if not filling:
            return None
        labels = some_labels(filling)
        if partitioning.kind in (PartitionKind.DAY, PartitionKind.MONTH):
            remedy = "set source.partitioning.settle to hold a day back until it is complete"
        elif partitioning.kind is PartitionKind.NONE:
            remedy = (
                "without source.partitioning the whole table is one partition, moved once; partition the route "
                "(day, month, integer_range) so new rows land in new partitions, or use full_refresh"
            )
        elif partitioning.kind is PartitionKind.LIST and partitioning.lookback:
            remedy = (
                f"the lookback moves only the last {partitioning.lookback} value(s) again: unless the table is "
                f"static, raise source.partitioning.lookback to the number of values ({len(decisions)})"
            )
        elif partitioning.kind is PartitionKind.LIST:
            remedy = (
                "unless the table is static, use replace_partition with a lookback of the number of values, "
                "which moves every value again each run"
            )
        else:
            remedy = "for a table whose ids keep growing use replace_partition with lookback: 1"
        return (
            f"{len(filling)} partition(s) {verb} may still be filling ({labels}): rows that reach "
            f"the source later within their bounds will not be moved by {self._route.strategy.value}; "
            f"{remedy} (`dpone checkpoints {self._manifest_ref} --verify` shows what a partition missed)"
        )

    def say_the_whole_table_moved_once(self, decisions: Sequence[ResumeDecision]) -> None:
        """A route without partitioning committed its one partition: every later run has nothing to do,
        whatever reached the source since. Each such run says so, not only the one that committed it."""
        if self._manifest.source.partitioning.kind is not PartitionKind.NONE or self._route.strategy not in (
            Strategy.INCREMENTAL_APPEND,
            Strategy.REPLACE_PARTITION,
        ):
            return
        if not any(d.reason is Reason.COMMITTED for d in decisions):
            return
        self._notice(
            f"route {self._route.describe()} has no source.partitioning: its whole table is one partition, "
            f"committed once; {self._route.strategy.value} never moves rows that reached the source since. "
            "Partition the route (day, month, integer_range) or use full_refresh "
            f"(`dpone checkpoints {self._manifest_ref} --verify` shows what the target missed)"
        )

    def require_replay_measures_this_route_alone(
        self, family: RouteFamily, active: Sequence[PlannedPartition]
    ) -> None:
        """Durable quality replay measures the target within each partition's bounds: where routes of other
        source tables committed rows within them (a fan-in), its target counts hold theirs too, and its
        checks fail after publishing on correct data, blocking the route (seen: source 30 rows, target 60,
        ``row_count`` failed, every later run exit 3). Stop before arming instead."""
        if not self._manifest.sink.options.durable_quality_replay or not active:
            return
        hits = within_partitions(self._other_sources(family), active)
        if not hits:
            return
        table = self._manifest.sink.table
        raise DponeError(
            ErrorCode.MANIFEST_INVALID,
            f"sink.options.durable_quality_replay cannot measure route {self._route.describe()}: routes of "
            f"other source tables committed rows into {table} within the partitions this run moves, and "
            "the replay measures the target by partition bounds, so its counts would include theirs and "
            "its checks would fail after publishing",
            details=self._other_routes_details(hits),
            hint_lines=(
                "nothing was written to the target or the checkpoint store; the route is not blocked",
                "for a table that several source tables write (a fan-in), turn sink.options."
                "durable_quality_replay off, or give this source a table of its own and read them "
                "together through a ClickHouse view",
            ),
        )

    def _other_routes_details(self, hits: Sequence[PartitionCheckpoint]) -> dict[str, object]:
        """The details of a stop over other routes' committed partitions (``hits``) in this run's scope."""
        return {
            "route": self._route.describe(),
            "target_table": self._manifest.sink.table,
            "other_routes": sorted({c.route.describe() for c in hits}),
            "other_committed_partitions": len(hits),
        }

    def require_scope_spares_other_sources(
        self, family: RouteFamily, active: Sequence[PlannedPartition]
    ) -> None:
        """``full_refresh`` / ``replace_partition`` stop before any target I/O when their scope would
        delete rows another source table's route committed into the target (``shared_target``), or rows
        the same source table's route under another strategy committed through another query: this run
        would not read them back (seen: an EU manifest appending and a US manifest replacing the same
        table, each filtered by region: every US run deleted the EU rows of its days, exit 0, and the EU
        route skipped them for good)."""
        hits = other_sources_in_scope(self._route, active, family.target_wide, self._naming)
        hits.extend(self._siblings_of_another_query_in_scope(family, active))
        if not hits:
            return
        table = self._manifest.sink.table
        routes = sorted({c.route.describe() for c in hits})
        strategy = self._route.strategy.value
        if self._allow_nonempty_target:
            self._notice(
                f"{strategy} deletes rows in {table} that {len(hits)} committed partition(s) of "
                f"{len(routes)} other route(s) loaded ({'; '.join(routes)}); going on (allow_nonempty_target): "
                "those routes' checkpoints still say COMMITTED and they will not load the rows again"
            )
            return
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"{strategy} on route {self._route.describe()} would delete rows of the target table {table} "
            f"that {len(hits)} committed partition(s) of {len(routes)} route(s) of other source tables (or of "
            "this source table under another strategy, read through another source.query or source.columns) "
            "loaded; their checkpoints would still say COMMITTED, so those rows would never be loaded again",
            details=self._other_routes_details(hits),
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                *(f"committed into the same target: {r}" for r in routes[:5]),
                "give each source table (or each filter of one table) its own target table, or use "
                "incremental_append (it deletes nothing)",
                "if the other source is retired and its rows are to be replaced, or this run reads the same "
                f"rows (a repair of those partitions): dpone run {self._manifest_ref} --allow-nonempty-target",
                "see `dpone runbook guard`, 'Another source's rows in the target'",
            ),
        )

    def _siblings_of_another_query_in_scope(
        self, family: RouteFamily, active: Sequence[PlannedPartition]
    ) -> list[PartitionCheckpoint]:
        """A replacing run's scope over COMMITTED partitions of its siblings (the same source table under
        another strategy) read through another definition (``source.query`` or ``source.columns``) and
        committed after this route last committed over them: rows this run would delete and not read back.
        The same definition reads them back (a replace that mirrors an append route's source deletes); what
        this route replaced since is its own (a manifest switched from append with a query added stops once,
        then its own commits cover the old route's)."""
        if self._route.strategy is Strategy.INCREMENTAL_APPEND or not active:
            return []
        queries = {p.query_hash for p in active}
        others = [c for c in sibling_committed(family, self._naming) if c.query_hash not in queries]
        if not others:
            return []
        others = (
            within_partitions(others, active)
            if self._route.strategy is Strategy.REPLACE_PARTITION
            else others
        )
        own = [c for c in family.own if c.status is CheckpointStatus.COMMITTED]
        if not own or not others:
            return others
        if self._route.strategy is Strategy.FULL_REFRESH:  # it replaced the whole table each time
            last = max(checkpoint_moment(c) for c in own)
            return [c for c in others if checkpoint_moment(c) > last]
        # own commits newest first: whether one newer than ``c`` overlaps it is one question of the index
        moments = sorted(checkpoint_moment(mine) for mine in own)
        index = OverlapIndex([mine.bounds for mine in sorted(own, key=checkpoint_moment, reverse=True)])

        def replaced_since(c: PartitionCheckpoint) -> bool:
            first = index.first(c.bounds)
            return first is not None and first < len(moments) - bisect_right(moments, checkpoint_moment(c))

        return [c for c in others if not replaced_since(c)]

    def require_first_replacement_knows_the_rows(
        self,
        family: RouteFamily,
        sink: Sink,
        active: Sequence[PlannedPartition],
        *,
        before_reading_target: Callable[[], None] | None = None,
    ) -> None:
        """A ``full_refresh`` / ``replace_partition`` route of a source table that never wrote the target
        through this checkpoint store stops in front of rows within its scope (``native_transfer_target_not_empty``).

        Its run would delete them, and nothing this store knows wrote them: another tool, a route kept in
        another store, or a ``sink.table`` that names the wrong table. ``incremental_append`` has the same stop
        (``require_target_empty_for_new_route``); rows of another source table's route in this store are
        ``require_scope_spares_other_sources``'s. Once the route has any checkpoint (an earlier run of it passed
        this check, or was let through; a failed attempt may have left rows of its own, resolved or not), or
        a sibling of the same source table committed, the rows are its history.
        ``before_reading_target``: what the sink refuses read-only (a user mistake found before the target is
        opened stays found so), run only when the rows must be counted."""
        if self._route.strategy is Strategy.INCREMENTAL_APPEND or not active:
            return
        same_source, _ = committed_by_source(family.target_wide, self._route.source_table, self._naming)
        if same_source or family.own:
            return
        if before_reading_target is not None:
            before_reading_target()
        table = self._manifest.sink.table
        held = sink.count_rows(table, None)  # read-only; 0 also when the table does not exist yet
        if held == 0:
            return
        if self._route.strategy is Strategy.FULL_REFRESH:
            where = f"all {held} row(s) (full_refresh truncates the table)"
        else:
            first = next((p for p in active if sink.count_rows(table, p.bounds) > 0), None)
            if first is None:
                return
            where = f"rows within the partitions it replaces (first: {first.bounds.label})"
        strategy = self._route.strategy.value
        if self._allow_nonempty_target:
            self._notice(
                f"the first run of route {self._route.describe()} deletes {where} in the target table {table}, "
                f"which no route of this checkpoint store loaded; {strategy} replaces them (allow_nonempty_target)"
            )
            return
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"the first run of route {self._route.describe()} would delete {where} in the target table {table}, "
            "which no route of this checkpoint store loaded (another tool, a route kept in another checkpoint "
            "store, or a sink.table naming the wrong table)",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "problem": "unknown_rows_in_scope",
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                f"check sink.table in {self._manifest_ref} names the table this route is meant to own",
                f"if {strategy} is to take the table over (a migration from another loader): "
                f"dpone run {self._manifest_ref} --allow-nonempty-target",
                "see `dpone runbook guard`, 'An empty checkpoint store in front of a non-empty target'",
            ),
        )

    def require_no_detached_parts_in_scope(
        self,
        family: RouteFamily,
        sink: Sink,
        active: Sequence[PlannedPartition],
        *,
        before_reading_target: Callable[[], None] | None = None,
    ) -> None:
        """A part detached from the target where this run writes stops it (``detached_parts``, ADR 0093):
        attached back after the run, its rows would be there twice. Read-only; where the target cannot list
        detached parts (18.16), a replacing run's committed partitions found empty stand in for them.
        ``before_reading_target``: what the sink refuses read-only, so a user mistake is found before the
        target is opened (as in ``require_first_replacement_knows_the_rows``)."""
        table = self._manifest.sink.table
        listing = getattr(sink, "detached_parts", None)
        if not active or not callable(listing):
            return
        if before_reading_target is not None:
            before_reading_target()
        parts = listing(table)
        if parts is None:
            count = functools.partial(sink.count_rows, table)
            emptied = detached_parts.emptied_commits(
                self._route.strategy,
                family.own,
                active,
                count,
                history=lambda latest: self._history(latest.route, latest.partition_id),
                count_each=functools.partial(rows_within_each, sink, table),
            )
            if not emptied:
                return
            if self._allow_nonempty_target or deleting_ttl(sink, table):
                why = "allow_nonempty_target" if self._allow_nonempty_target else "its TTL deletes rows"
                self._notice(f"{detached_parts.emptied_text(self._route, table, emptied)}; loaded ({why})")
                return
            raise detached_parts.emptied_error(self._route, table, emptied, self._manifest_ref)
        found = detached_parts.in_scope(parts, detached_parts.scope_of(self._route.strategy, active))
        if found:
            raise detached_parts.detached_in_scope_error(self._route, table, found, self._manifest_ref)

    def require_target_empty_for_new_route(
        self, family: RouteFamily, sink: Sink, moving: Sequence[PlannedPartition]
    ) -> None:
        """An append route with no checkpoint at all must not append into a table that already holds rows.

        A lost checkpoint store, a new store in front of an existing table, or an adopted table all look
        like this; appending the whole source would duplicate what the table holds. With
        ``allow_nonempty_target`` it appends, unless a partition of ``moving`` holds this route's own rows
        by their count (``_require_not_own_rows``: one target count per partition, only with the flag)."""
        if self._route.strategy is not Strategy.INCREMENTAL_APPEND or family.own:
            return
        table = self._manifest.sink.table
        target_rows = sink.count_rows(table, None)  # read-only, before the target is prepared
        if target_rows == 0:
            return
        if self._allow_nonempty_target:
            fan_in = self._other_sources(family)
            self._require_not_own_rows(
                self._source_rows_held(sink, moving, fan_in), first_run=True, fan_in=bool(fan_in)
            )
            self._notice(
                f"the target table {table} already held {target_rows} row(s) and route "
                f"{self._route.describe()} had no checkpoint; appending anyway (allow_nonempty_target)"
            )
            return
        routes = {c.route for c in family.target_wide}
        others = sorted(r.describe() for r in routes)
        other_sources = all(
            self._naming.canonical(r).source_table != self._route.source_table for r in routes
        )
        why: tuple[str, ...]
        if others and other_sources:
            # the store knows who wrote the table, and they read other tables: most likely a fan-in
            why = (
                f"{len(others)} other route(s) of this checkpoint store write this table: "
                + ", ".join(others[:3])
                + (", ..." if len(others) > 3 else ""),
                "another source table feeding it (a fan-in) whose rows are not in it yet: appending is right, "
                f"once: dpone run {self._manifest_ref} --allow-nonempty-target",
                "but if this route reads the same rows under another name (a view or a copy of that table), "
                "appending would duplicate them: do not",
            )
        else:
            why = (
                *(
                    (f"other route(s) of this checkpoint store write this table: {', '.join(others[:3])}",)
                    if others
                    else ()
                ),
                "was the checkpoint store lost or replaced? point the manifest at the store that holds the route "
                "(not --allow-nonempty-target: it stops where the rows count exactly as the source's)",
                "if the rows are not this route's (another writer) and appending is right: "
                f"dpone run {self._manifest_ref} --allow-nonempty-target",
            )
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"route {self._route.describe()} has no checkpoint, but the target table {table} already holds "
            f"{target_rows} row(s): appending the source would duplicate any of them it already holds",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "target_rows": target_rows,
                "other_routes_writing_target": len(others),
                "other_routes": others,
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                *why,
                "to adopt the table deliberately, record what it holds: "
                f"dpone guard rebaseline {self._manifest_ref} --adopt-target --reason '<what you checked>'",
                "see `dpone runbook guard`, 'An empty checkpoint store in front of a non-empty target'",
            ),
        )

    def _source_rows_held(
        self, sink: Sink, moving: Sequence[PlannedPartition], others: Sequence[PartitionCheckpoint]
    ) -> list[tuple[PlannedPartition, int]]:
        """(partition, rows of this source the target holds within its bounds) of each of ``moving`` that
        holds some: other source tables' commits there subtracted; where their share is unknown (another
        partitioning, or more than the bounds hold now) the partition is left out, as nobody's to judge."""
        found: list[tuple[PlannedPartition, int]] = []
        for part in moving:
            held, theirs = self.held_and_theirs(sink, part.bounds, others)
            if theirs is not None and held > theirs:
                found.append((part, held - theirs))
        return found

    def _require_not_own_rows(
        self, counted: Sequence[tuple[PlannedPartition, int]], *, first_run: bool, fan_in: bool
    ) -> None:
        """With ``allow_nonempty_target``, before arming: stop where a partition to append holds, in the
        target, exactly as many rows of this source as the source holds within its bounds now (``counted``:
        the target's side, other source tables' commits subtracted). That is the signature of this route's
        own rows whose commits the store lost (restored from an older backup, a copy, a lost store), not of
        another writer's: appending them again held every row twice, exit 0. No aggregate both sides compute
        alike tells two sets of rows of one size apart, and a stop writes nothing (ADR 0092). Where the
        counts differ (rows that reached or left the source since the lost commit: seen, a restored store
        whose newest day was still filling when committed appended it again, exit 0) the route's own rows
        look like another writer's; where the route has an integer key column they stop too (fail closed),
        counts alone decide where it has none. Not stopped: a partition the source holds no row of now
        (nothing is appended), nor one where the target's values of an integer key column lie outside the
        range of the source's there (``key_ranges``: none of its rows is one of the source's; seen, the
        other shard of one generator, as many rows a day with other ids, was refused for every day)."""
        counted = [(p, n) for p, n in counted if n > 0]
        if not counted or self._source is None:
            return
        bounds = [p.bounds for p, _ in counted]
        source = self._source()
        count_partitions = getattr(source, "count_partitions", None)
        now = (
            list(count_partitions(bounds))
            if callable(count_partitions)
            else [source.count(b) for b in bounds]
        )
        # a partition the source holds no row of now appends nothing, and duplicates nothing
        judged = [(p, n, rows) for (p, n), rows in zip(counted, now, strict=True) if rows > 0]
        if not judged:
            return
        table = self._manifest.sink.table
        candidates = route_key_candidates(self._manifest)
        keys = key_ranges([p.bounds for p, _, _ in judged], source, self._target(), table, candidates)
        same = [(p, n) for p, n, rows in judged if n == rows and p.bounds not in keys.apart]
        # counts differ (rows arrived or left since a lost commit, or another writer's): unless the key
        # ranges are apart, the target's rows may be this source's: stop (no integer key: counts alone)
        changed = [
            (p, n) for p, n, rows in judged if n != rows and keys.columns and p.bounds not in keys.apart
        ]
        if same or changed:
            raise self._own_rows_again(
                same, changed, keys.columns, len(counted), first_run=first_run, fan_in=fan_in
            )
        unjudged = sum(1 for _, n, rows in judged if n != rows and not keys.columns)
        if unjudged:
            self._notice(
                f"{unjudged} partition(s) of route {self._route.describe()} hold in {table} another number of "
                "this source's rows than the source holds there now, and their keys could not tell whether "
                f"they are its own ({keys.unusable}): appended beside them (allow_nonempty_target); if the "
                "checkpoint store was restored, copied or lost they may be its own, now held twice: see `dpone "
                "runbook guard`, '--allow-nonempty-target over this route's own rows'"
            )

    def _own_rows_again(
        self,
        same: Sequence[tuple[PlannedPartition, int]],
        changed: Sequence[tuple[PlannedPartition, int]],
        columns: Sequence[str],
        counted: int,
        *,
        first_run: bool,
        fan_in: bool,
    ) -> DponeError:
        """``target_not_empty``, ``problem: own_rows_under_allow_flag``: the flag given over partitions whose
        target rows count exactly as the source's (``same``), or otherwise with key values within the
        source's range (``changed``, over ``columns``; ``_require_not_own_rows``)."""
        table = self._manifest.sink.table
        rows = sum(n for _, n in [*same, *changed])
        adopt = f"dpone guard rebaseline {self._manifest_ref} --adopt-target --reason '<what you checked>'"
        keys = ", ".join(columns)
        differ = some_labels([p for p, _ in changed])
        by_key = f"from {table} by this source's own key (never by the bounds alone)"
        lost = (
            "a lost or new checkpoint store"
            if first_run
            else "a checkpoint store restored from an older backup, a copy, or a failover that lost its newest "
            "commits"
        )
        found: list[str] = []
        if same:
            found.append(
                f"within {len(same)} of the {counted} partition(s) it would append beside rows "
                f"({some_labels([p for p, _ in same])}), the target table {table} already holds exactly as many "
                f"of this source's rows as the source holds there now: the signature of this route's own rows "
                f"whose checkpoints are missing ({lost}), not of another writer's"
            )
        if changed:
            found.append(
                f"within {len(changed)} {'more' if same else f'of the {counted} partition(s) it would append'} "
                f"beside rows ({differ}), the target table {table} holds another number of this source's rows "
                f"than the source holds there now, with values of {keys} within the source's range there: what "
                f"this route's own rows look like when their checkpoints are missing ({lost}) and rows reached "
                "or left the source since their commit (a day still filling when it was committed); only values "
                "apart from the source's prove them another writer's"
            )
        if first_run:
            way: tuple[str, ...] = (
                "if they are this route's rows (its checkpoint store is lost): "
                + (
                    f"first delete this source's rows of the partitions whose count differs ({differ}) {by_key}: "
                    "adoption records a partition only where the target holds exactly the source's rows or "
                    "none; then "
                    if changed
                    else ""
                )
                + f"record them as committed: {adopt} (partitions holding exactly the source's rows are recorded; "
                "the run then appends the rest)",
            )
        elif fan_in or (changed and not same):
            way = (
                "if a newer copy of the checkpoint store exists, point checkpoints.connection at it and run",
                "if it is gone for good: "
                + (
                    "other source tables' routes write this table through this store (a fan-in), so keep it: "
                    if fan_in
                    else ""
                )
                + f"delete this source's rows of those partitions {by_key} and run again without the flag: "
                "they are appended once",
            )
        else:
            way = (
                "if a newer copy of the checkpoint store exists, point checkpoints.connection at it and run",
                "if it is gone for good: "
                + (
                    f"delete this source's rows of the partitions whose count differs ({differ}) {by_key}; "
                    if changed
                    else ""
                )
                + "point checkpoints.connection at a new, empty store (keep the old one for audit), then record "
                f"what the target holds: {adopt}; then run without the flag",
            )
        return DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"--allow-nonempty-target (allow_nonempty_target) refused for route {self._route.describe()}: "
            + "; ".join(found)
            + f"; appending would hold each of this route's own rows twice ({rows:,} row(s) in all there)",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "problem": "own_rows_under_allow_flag",
                "partitions": [p.bounds.label for p, _ in [*same, *changed][:PARTITIONS_NAMED]],
                "target_rows": rows,
                "partitions_counted": counted,
                **(
                    {
                        "partitions_counts_differ": [p.bounds.label for p, _ in changed[:PARTITIONS_NAMED]],
                        "key_columns": list(columns),
                    }
                    if changed
                    else {}
                ),
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store; the route is not blocked",
                "--allow-nonempty-target appends beside another writer's rows; do not use it after a "
                "checkpoint store was restored, copied or lost",
                *way,
                "only if they really are another writer's rows, "
                + (
                    f"their {keys} values among the source's (one sequence, or numbered alike) or "
                    if changed
                    else ""
                )
                + "as many as this source's by chance (tell them apart by a column that names their writer): "
                f"move them out of {table} for one run and back after it, or give this route a table of its own",
                "see `dpone runbook guard`, '--allow-nonempty-target over this route's own rows'",
            ),
        )

    def _stop_unclear(self, table: str, unclear: Sequence[tuple[PlannedPartition, int]]) -> None:
        """``target_not_empty`` for never-committed partitions holding rows nobody can attribute (or a
        notice with ``allow_nonempty_target``)."""
        labels = some_labels([p for p, _ in unclear])
        rows = sum(n for _, n in unclear)
        text = (
            f"the target table {table} holds {rows} row(s) within (or around) {len(unclear)} partition(s) of "
            f"route {self._route.describe()} that have no commit ({labels}), and other source tables' "
            "committed rows there are partly gone (retention, deletes): whose these rows are cannot be told"
        )
        if self._allow_nonempty_target:
            self._notice(f"{text}; appending anyway (allow_nonempty_target)")
            return
        raise DponeError(
            ErrorCode.TARGET_NOT_EMPTY,
            f"{text}; appending could duplicate them",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "target_rows": rows,
                "partitions": [p.bounds.label for p, _ in unclear[:20]],
                "problem": "owner_unknown",
            },
            hint_lines=(
                "nothing was written to the target or the checkpoint store",
                "count this source's rows in the target within those bounds (by a column that tells the "
                "sources apart): if none are there, appending is right: "
                f"dpone run {self._manifest_ref} --allow-nonempty-target",
                "if they are there (a checkpoint store restored from an older copy): point the manifest at the "
                "store that holds the route's newest checkpoints",
                "see `dpone runbook guard`, 'An empty checkpoint store in front of a non-empty target'",
            ),
        )

    def _unexplained_rows(
        self,
        sink: Sink,
        parts: Sequence[PlannedPartition],
        own: Sequence[PartitionCheckpoint],
        others: Sequence[PartitionCheckpoint],
        index: _RangeIndex,
    ) -> tuple[list[tuple[PlannedPartition, int]], list[PlannedPartition]]:
        """Never-committed append partitions within which other source tables' share is unknown (they
        committed in another partitioning: by month, or the whole table, over this route's days): the
        target's rows in a region where every commit is known (another source's commit covering the
        partition: its month, or the whole table of an unpartitioned source) less the rows every source
        committed there. More rows than that are nobody's
        commit: this route's lost commit or rows someone wrote by hand, which an append would duplicate
        (seen: a day copied into the target by hand beside a month-partitioned source, appended again,
        exit 0). One partition per region is named with that region's excess; where no region can be
        counted (no commit of theirs covers it: another partition column; a commit without a row count),
        the partition is not counted. Second: the partitions whose
        region holds fewer rows than its commits (retention, deletes there): a deficit hides as many of
        this route's own rows, so they cannot be told apart (the caller counted each partition's own bounds
        first: one without a row is never here)."""
        table = self._manifest.sink.table
        excess: dict[PartitionBounds, tuple[PlannedPartition, int]] = {}
        for part in parts:
            overlapping = [c for c in index.overlapping(part.bounds) if may_overlap(c.bounds, part.bounds)]
            for region in _regions(part.bounds, overlapping):
                if region in excess:
                    break
                known = [committed_rows_within(region, others), committed_rows_within(region, own)]
                if None in known:
                    continue
                whole = region.kind is BoundsKind.ALL
                rows = sink.count_rows(table, None if whole else region) - sum(n or 0 for n in known)
                excess[region] = (part, rows)
                break
        found = [(part, rows) for part, rows in excess.values() if rows > 0]
        short = [part for part, rows in excess.values() if rows < 0]
        return found, short

    def require_target_holds_committed(
        self,
        decisions: Sequence[ResumeDecision],
        matched: dict[str, PartitionCheckpoint],
        *,
        moving: bool,
        family: RouteFamily | None = None,
        count_source: Callable[[Sequence[PartitionBounds]], list[int]] | None = None,
        replayed: str | None = None,
    ) -> int | None:
        """Before any target I/O: the target must still hold the rows the skipped committed partitions
        loaded (``replayed``: the run ID a retry reports from its quality capsule, ``lost_rows``).

        A dropped target (or a manifest pointed at a new chDB directory or server) would otherwise be
        reported as "nothing to do" with no table at all, or, when partitions are due, be created anew and
        hold only them: the history is gone, the run says it succeeded. Rows only ever grow on this route's
        own runs, but a table may shrink by design (retention, a TTL, row deletes), and those remove rows
        from older partitions. So fewer rows than committed stop the run only when the newest committed
        partition holds none of its rows in the target: a dropped, truncated or new table, one restored
        from a backup older than that commit, or a checkpoint store shared with another target (a staging
        environment cloned with the production store committed a day into its own table; the production
        route then skipped it, exit 0). A shrunk table is said in a notice. Stop,
        never reload on a guess. Returns the table's rows when it counted them (None: no committed rows to
        check, nothing read)."""
        skipped: list[PartitionCheckpoint] = []
        for decision in decisions:
            checkpoint = matched.get(decision.partition.partition_id)
            committed = checkpoint is not None and checkpoint.status is CheckpointStatus.COMMITTED
            if decision.action is Action.SKIP and committed and checkpoint is not None and checkpoint.rows:
                skipped.append(checkpoint)
        committed_rows = sum(c.rows or 0 for c in skipped)
        if committed_rows == 0:
            return None
        table = self._manifest.sink.table
        sink = self._target()
        rewritten = [] if family is None else rewritten_since(family, skipped)
        short: list[tuple[PartitionCheckpoint, PartitionCheckpoint, int]] = []
        ask_source: list[tuple[PartitionCheckpoint, PartitionCheckpoint, int]] = []
        for own, other in rewritten:
            held = sink.count_rows(table, own.bounds)
            if held < _rows_expected(own, other):
                (ask_source if _source_decides(own, other) and count_source else short).append(
                    (own, other, held)
                )
        if ask_source and count_source is not None:  # one grouped read of the source, only where it decides
            now = count_source([own.bounds for own, _, _ in ask_source])
            short.extend(
                s for s, rows in zip(ask_source, now, strict=True) if s[2] < min(s[0].rows or 0, rows)
            )
        if short:
            raise self._rewritten_by_another_route(short)
        target_rows = sink.count_rows(table, None)  # 0 when the table does not exist
        # a fan-in: other source tables' committed rows are not this route's (their route refilling a
        # truncated table hid its loss: "nothing to do", exit 0, for good)
        others = [] if family is None else self._other_sources(family)
        theirs = committed_rows_within(_WHOLE_TABLE, others) if others else 0
        # rows this run replaces anyway (the lookback's partitions) are no committed partition's it skips: a
        # target restored from before a late day's commit held them and made up the count (exit 0, no note)
        replaced = sum(
            self.own_rows(sink, d.partition.bounds, others)
            for d in decisions
            if d.action is Action.RUN and d.reason is Reason.LOOKBACK and target_rows > 0
        )
        if theirs is not None and target_rows - theirs - replaced >= committed_rows:
            return target_rows  # the common case: no partition is ordered or counted
        newest = max(skipped, key=lambda c: (bounds_order(c.bounds), c.completed_at or c.started_at))
        late = None
        if target_rows > 0 and self.own_rows(sink, newest.bounds, others) > 0:
            late = self._emptied_late_commit(sink, skipped, newest, others)
            newest = late or newest
        if late is None and target_rows > 0 and self.own_rows(sink, newest.bounds, others) > 0:
            # said on every run, not only one with nothing to move: a daily route always has a new day
            self._notice(
                f"target table {table} holds {_held(target_rows, replaced)}{_others_share(theirs, target_rows)}"
                + f", fewer than the {committed_rows:,} the "
                f"committed partitions of route {self._route.describe()} loaded, while the newest of them "
                f"({newest.bounds.label}) still holds rows: rows were removed from the table (a retention "
                "job, a TTL, deletes); they are not reloaded"
            )
            return target_rows
        which = "the skipped partitions" if moving else "every partition"
        if theirs and target_rows > 0 and sink.count_rows(table, newest.bounds) > 0:
            # rows are there, but no more than other source tables committed: counts cannot tell whose
            raise self._fan_in_undecidable(which, target_rows, theirs, committed_rows, newest, moving)
        # named when it may have expired them: read-only, and a failure to read it never masks the stop
        ttl = deleting_ttl(sink, table)
        raise DponeError(
            ErrorCode.TARGET_LOST_COMMITTED_ROWS,
            f"{which} of route {self._route.describe()} {'are' if moving else 'is'} committed, but the "
            f"target table {table} holds {_held(target_rows, replaced)}{_others_share(theirs, target_rows)}"
            + f", fewer than the {committed_rows:,} its committed "
            f"partitions loaded, and none of "
            + (
                f"the newest of them ({newest.bounds.label}): dropped, truncated, "
                if late is None
                else f"{newest.bounds.label}, one of the latest commits, while older partitions still hold "
                "rows: restored from a backup taken before that commit, "
            )
            + "a new target, or that partition was committed into another target through this checkpoint store"
            + ("; the table has a TTL that deletes rows, which may have expired them" if ttl else ""),
            details={
                "route": self._route.describe(),
                "target_table": table,
                "target_rows": target_rows,
                "committed_rows": committed_rows,
                "newest_committed": {
                    "partition_id": newest.partition_id,
                    "bounds": newest.bounds.label,
                    "rows": newest.rows,
                    "run_id": newest.run_id,
                },
                **({"deleting_ttl": True} if ttl else {}),
                **({"replayed_run_id": replayed} if replayed is not None else {}),
            },
            hint_lines=lost_rows_hints(table, ttl=ttl, replayed=replayed),
        )

    def _emptied_late_commit(
        self,
        sink: Sink,
        skipped: Sequence[PartitionCheckpoint],
        newest: PartitionCheckpoint,
        others: Sequence[PartitionCheckpoint],
    ) -> PartitionCheckpoint | None:
        """One of the latest commits (at most ``_LATE_COMMITS_COUNTED``, newest commit first), newer than
        the oldest partition, that holds none of its rows while the nearest partition below it committed
        before it still holds some (``_older_rows_held``).

        A target restored from a backup taken before a late day (older than the newest) was committed lacks
        that day while the newest still holds rows: the run took it for retention and skipped the day for good
        (exit 0, 4 rows against 6). Retention removes the oldest days first, so an empty day newer than a day
        still held is no retention. A late day older than every other one, empty, cannot be told from one a
        retention job or a TTL removed (a late correction past the TTL is dropped on insert): it is left to
        the notice, as stopping there blocked a daily route for good. Latest by commit, not "after the
        newest": the lookback commits the newest day again on every run, after any late day; and the days
        leaving its window were committed again by the run before, one more each run, so a lookback of N
        counts N more (a target restored 21 runs after a late day under ``lookback: 30`` passed, exit 0).
        Older rows are those of the nearest partition below the empty one committed before it, not the oldest
        partition's: after ordinary retention the oldest is always empty, and a restore that lacked a late
        day passed (exit 0)."""
        oldest = min(skipped, key=lambda c: (bounds_order(c.bounds), checkpoint_moment(c)))
        late = sorted(
            (
                c
                for c in skipped
                if c.partition_id not in (newest.partition_id, oldest.partition_id)
                and bounds_order(c.bounds) > bounds_order(oldest.bounds)
            ),
            key=checkpoint_moment,
            reverse=True,
        )[: _LATE_COMMITS_COUNTED + (self._manifest.source.partitioning.lookback or 0)]
        return next(
            (
                c
                for c in late
                if self.own_rows(sink, c.bounds, others) == 0
                and self._older_rows_held(sink, skipped, c, others)
            ),
            None,  # nothing but the newest and the oldest, or every empty one is older than all rows: retention
        )

    def _older_rows_held(
        self,
        sink: Sink,
        skipped: Sequence[PartitionCheckpoint],
        empty: PartitionCheckpoint,
        others: Sequence[PartitionCheckpoint],
    ) -> bool:
        """Whether the target still holds rows of the nearest partition below ``empty`` committed before it:
        a backup taken before ``empty``'s commit held that one. Retention removes the oldest days first, so
        an empty day above one still held is no retention. Only a partition committed earlier counts: a late
        day committed after a retention pass lies below days the pass emptied (counting every row below the
        empty day stopped that route, and a fan-in's other source's late rows stopped this one)."""
        below = [
            c
            for c in skipped
            if bounds_order(c.bounds) < bounds_order(empty.bounds)
            and checkpoint_moment(c) < checkpoint_moment(empty)
        ]
        if not below:
            return False
        nearest = max(below, key=lambda c: (bounds_order(c.bounds), checkpoint_moment(c)))
        return self.own_rows(sink, nearest.bounds, others) > 0

    def _fan_in_undecidable(
        self,
        which: str,
        target_rows: int,
        theirs: int,
        committed_rows: int,
        newest: PartitionCheckpoint,
        moving: bool,
    ) -> DponeError:
        """A fan-in whose table holds no more rows, overall and in this route's newest committed partition,
        than other source tables committed: this route's rows were lost and another route refilled the
        table, or another route's rows were removed and this route's are all there. Counts cannot tell
        which, so the run stops, saying so (it said "fewer than" of equal counts)."""
        table = self._manifest.sink.table
        return DponeError(
            ErrorCode.TARGET_LOST_COMMITTED_ROWS,
            f"{which} of route {self._route.describe()} {'are' if moving else 'is'} committed, but target "
            f"table {table} holds {target_rows:,} rows while other source tables committed {theirs:,} of its "
            f"rows, so counts cannot show this route's {committed_rows:,}, not even within the newest of its "
            f"partitions ({newest.bounds.label}): either this route's rows were lost and another route "
            "refilled the table, or rows of another source table were removed and this route's are intact",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "target_rows": target_rows,
                "other_sources_rows": theirs,
                "committed_rows": committed_rows,
                "newest_committed": {"partition_id": newest.partition_id, "bounds": newest.bounds.label},
                "problem": "fan_in_undecidable",
            },
            hint_lines=(
                "nothing was read or written; the guard never reloads committed partitions on a guess",
                "tell the rows apart by a column that names their source; see `dpone runbook guard`, "
                "'Another route's rows removed from a shared table'",
            ),
        )

    def _rewritten_by_another_route(
        self, short: Sequence[tuple[PartitionCheckpoint, PartitionCheckpoint, int]]
    ) -> DponeError:
        table = self._manifest.sink.table
        partitions = [own.bounds for own, _, _ in short]
        others = sorted({other.route.describe() for _, other, _ in short})
        counts = ", ".join(f"{own.bounds.label}: {held} of {own.rows}" for own, _, held in short[:3])
        return DponeError(
            ErrorCode.TARGET_LOST_COMMITTED_ROWS,
            f"{len(short)} committed partition(s) of route {self._route.describe()} hold fewer rows in "
            f"target table {table} than they loaded ({counts}{', ...' if len(short) > 3 else ''}), and "
            f"another route of the table replaced (or began to replace) rows within them after they were "
            f"committed: {', '.join(others)}. This route never moves a committed partition again, so their "
            "missing rows would stay missing",
            details={
                "route": self._route.describe(),
                "target_table": table,
                "partitions": [b.label for b in partitions],
                "target_rows": [held for _, _, held in short],
                "committed_rows": [own.rows for own, _, _ in short],
                "other_routes": others,
                "problem": "rewritten_by_another_route",
            },
            hint_lines=(
                "nothing was written; the target's rows within these partitions were counted, read-only",
                "a replacing route (replace_partition, full_refresh) of this table deleted rows within these "
                "partitions: run it again to completion, or reload the partitions deliberately",
                "see `dpone runbook guard`, 'The target lost committed rows'",
            ),
        )


def _others_share(theirs: int | None, target_rows: int) -> str:
    """How many of the table's rows other source tables committed, said as the records allow."""
    if not theirs:
        return ""
    if theirs <= target_rows:
        return f" ({theirs:,} of them other source tables' commits)"
    return f" (other source tables committed {theirs:,} rows into it, some of them gone since)"


def _regions(bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]) -> list[PartitionBounds]:
    """Where a partition's rows can be told from other sources' when their commits use another
    partitioning: the bounds of each of their commits covering it (a month over a day; the whole table of
    an unpartitioned source). Not the whole table otherwise: any retention anywhere (its rows gone from
    commits that still count them) made every new day of a source partitioned on another column look
    short, and stopped it on every run (an attack, with an ``integer_range`` partner)."""
    covering = [c.bounds for c in others if fully_covered(bounds, [c.bounds]) and c.bounds != bounds]
    return list(dict.fromkeys(covering))


def _switched_since(
    family: RouteFamily, planned: Sequence[PlannedPartition], old: Sequence[PartitionCheckpoint]
) -> bool:
    """Whether a commit in ``old`` is newer than every commit of the planned definition (none: a switch's
    first run; an older one: the manifest switched back to this definition since)."""
    ids = {p.partition_id for p in planned}
    current = [
        checkpoint_moment(c)
        for c in family.canonical_checkpoints()
        if c.status is CheckpointStatus.COMMITTED and c.partition_id in ids
    ]
    return not current or max(checkpoint_moment(c) for c in old) > max(current)


def _require_partition_column(
    counts: TargetCounts, bounds: PartitionBounds, table: str, route: RouteIdentity
) -> None:
    """Before counting the target by a partitioning column: the table has it. Counting by a column it
    lacks failed as ``target_load_failed`` ("could not count rows"), naming no column."""
    if counts.lacks_column_of(bounds):
        raise DponeError(
            ErrorCode.TARGET_INCOMPATIBLE,
            f"target table {table} has no column {bounds.column}, by which route {route.describe()} now "
            "partitions; nothing was written",
            details={"table": table, "column": bounds.column, "problem": "partition_column_missing"},
            hint_lines=(
                f"add it with the values the source holds (ALTER TABLE {table} ADD COLUMN ..., then fill every "
                "row already loaded from the source): the run tells new partitions from committed ones by the "
                "target's values of it, and rows holding NULL or a default there stop the run",
                "see `dpone runbook guard`, 'The route's identity changed'",
            ),
        )


#: The whole table, for counting other source tables' commits anywhere in it.
_WHOLE_TABLE = PartitionBounds(kind=BoundsKind.ALL, label="the whole table")

#: Why an append partition runs although it may have been committed before a lost store suffix: no record
#: at all, or only records of attempts that never committed (stopped before the target, failed, resolved
#: ``not-applied``).
_NEVER_COMMITTED = frozenset(
    {
        Reason.MISSING_CHECKPOINT,
        Reason.INTERRUPTED_BEFORE_TARGET,
        Reason.FAILED_BEFORE_TARGET,
        Reason.PREVIOUS_FAILURE,
    }
)


def _held(target_rows: int, replaced: int) -> str:
    """The rows compared with the committed ones: the table's, less those within the partitions this run
    moves again (it read "holds 18 rows, fewer than the 15" when it said only the table's)."""
    if not replaced:
        return f"{target_rows:,} rows"
    return (
        f"{target_rows - replaced:,} rows outside the partitions this run moves again ({target_rows:,} in "
        "all)"
    )


def _committed_or_forced(checkpoint: PartitionCheckpoint) -> bool:
    """A commit (one a later attempt that never reached the target stands over included:
    ``route_family.with_standing_commits``), or rows an operator declared another writer's."""
    return checkpoint.status is CheckpointStatus.COMMITTED or _forced_not_applied(checkpoint)


def _forced_not_applied(checkpoint: PartitionCheckpoint | None) -> bool:
    """An operator's ``guard resolve --as not-applied --force``: they checked the rows in the bounds are
    another writer's (the resolution recorded the count)."""
    if checkpoint is None:
        return False
    resolution = checkpoint.diagnostics.get("resolution")
    return isinstance(resolution, dict) and resolution.get("forced") is True


def _source_decides(own: PartitionCheckpoint, other: PartitionCheckpoint) -> bool:
    """Whether the source's rows now, not ``own``'s count, bound what ``own``'s day should hold after
    ``other``: a replacing commit of other bounds or another query (``_rows_expected``)."""
    return other.status is CheckpointStatus.COMMITTED and not (
        other.bounds == own.bounds and other.query_hash == own.query_hash
    )


def _rows_expected(own: PartitionCheckpoint, other: PartitionCheckpoint) -> int:
    """The rows the target should hold within ``own``'s bounds after ``other`` (the newest replacing
    attempt there), as far as ``other`` is concerned. After a replacing *commit* of these very bounds under
    this route's query: none (it put back the source's rows then; what a retention job or a delete removed
    since is the ordinary lost-rows check's, which allows for retention: seen, a day deleted by retention
    beside such a mirror stopped the append route for good). After a commit of other bounds or another
    query: no more than the source holds within the bounds now, read as this route reads it (rows deleted at
    the source since the append, which the commit mirrored, are no loss: seen, a route switched to
    ``replace_partition`` to mirror deletes and back to append stopped for good, naming rows missing that no
    source held; and a filtered commit's own count is not the source's). After an attempt that did not
    commit (its delete ran): what ``own`` loaded."""
    if other.status is CheckpointStatus.COMMITTED and not _source_decides(own, other):
        return 0
    return own.rows or 0  # where the source decides, the caller lowers it to the source's rows now


def rewritten_since(
    family: RouteFamily, committed: Sequence[PartitionCheckpoint]
) -> list[tuple[PartitionCheckpoint, PartitionCheckpoint]]:
    """(committed partition, other route's checkpoint) where another route of the target that replaces
    rows began an attempt within the partition's bounds after the partition was committed: its delete ran
    (or may have), and an append route skips its own committed partitions for ever. The run counts these
    partitions in the target (only these: a mix of strategies on one table is rare) and stops on one that
    holds fewer rows than it loaded; a replace that put every row back passes. Seen: a
    ``replace_partition`` run of one day failed after its delete, was resolved ``not-applied``, and the
    append route then reported "nothing to do", exit 0, with the day's rows missing (a notice blamed
    retention); a ``full_refresh`` with a filtering query did the same to every day it left out."""
    own = {family.route, *family.legacy_routes()}
    # the strategy first: an append route's tens of thousands of checkpoints cost one comparison each
    replacing = [
        c
        for c in family.target_wide
        if c.route.strategy is not Strategy.INCREMENTAL_APPEND
        and c.route not in own
        and replaced_the_target(c)
    ]
    if not replacing:
        return []
    # the newest replacing attempt per exact bounds (a sibling partitioned alike: one lookup per partition),
    # the newest full refresh, and the rest compared one by one (another partitioning: rare and few)
    newest_on: dict[PartitionBounds, PartitionCheckpoint] = {}
    refreshed_on: dict[PartitionBounds, PartitionCheckpoint] = {}
    refresh: PartitionCheckpoint | None = None
    for other in replacing:
        # a full refresh empties the whole table, whatever its bounds; its checkpoint of the same bounds
        # says what it loaded there (all of one run's share one start: the newest is not one of them)
        index = refreshed_on if other.route.strategy is Strategy.FULL_REFRESH else newest_on
        known = index.get(other.bounds)
        if known is None or other.started_at > known.started_at:
            index[other.bounds] = other
        if other.route.strategy is Strategy.FULL_REFRESH and (
            refresh is None or other.started_at > refresh.started_at
        ):
            refresh = other
    others = _RangeIndex(list(newest_on.values()))  # any of them may overlap bounds other than its own
    found: list[tuple[PartitionCheckpoint, PartitionCheckpoint]] = []
    for checkpoint in committed:
        since = checkpoint.completed_at or checkpoint.started_at
        same = newest_on.get(checkpoint.bounds)
        whole = refreshed_on.get(checkpoint.bounds)
        if whole is None or (refresh is not None and whole.started_at < refresh.started_at):
            whole = refresh
        hit = next(
            (
                c
                for c in (whole, same, *others.overlapping(checkpoint.bounds))
                if c is not None
                and c.started_at > since
                and (c is whole or c is same or may_overlap(checkpoint.bounds, c.bounds))
            ),
            None,
        )
        if hit is not None:
            found.append((checkpoint, hit))
    return found


def _range_key(value: str | None, value_type: str) -> object | None:
    """A closed range bound as a value that orders as the target compares it (None: not indexable)."""
    if value is None:
        return None
    try:
        if value_type == "integer":
            return int(value)
        if value_type == "date":
            return date.fromisoformat(value[:10]) if len(value) == 10 else None
        if value_type == "datetime":
            moment = datetime.fromisoformat(value)
            return None if moment.tzinfo is not None else moment
    except ValueError:
        return None
    return None


class _RangeIndex:
    """Checkpoints whose bounds may overlap a given range, without comparing every pair: closed ranges
    of one column and value type sorted by their lower bound (a candidate starts below the range's upper
    bound and no earlier than its lower bound less the widest range); anything else is always a candidate.
    A strategy switched back and forth over years of days would otherwise compare millions of pairs."""

    def __init__(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        self._always: list[PartitionCheckpoint] = []
        grouped: dict[tuple[str | None, str], list[tuple[Any, Any, PartitionCheckpoint]]] = {}
        for c in checkpoints:
            low = _range_key(c.bounds.lower, c.bounds.value_type)
            high = _range_key(c.bounds.upper, c.bounds.value_type)
            if c.bounds.kind is not BoundsKind.RANGE or low is None or high is None:
                self._always.append(c)
                continue
            grouped.setdefault((c.bounds.column, c.bounds.value_type), []).append((low, high, c))
        self._groups: dict[tuple[str | None, str], tuple[list[Any], list[PartitionCheckpoint], Any]] = {}
        for key, items in grouped.items():
            items.sort(key=lambda item: item[0])
            widest = max(high - low for low, high, _ in items)
            self._groups[key] = ([low for low, _, _ in items], [c for _, _, c in items], widest)

    def overlapping(self, bounds: PartitionBounds) -> list[PartitionCheckpoint]:
        low = _range_key(bounds.lower, bounds.value_type)
        high = _range_key(bounds.upper, bounds.value_type)
        if bounds.kind is not BoundsKind.RANGE or low is None or high is None:
            return [*self._always, *(c for _, cs, _ in self._groups.values() for c in cs)]
        candidates = list(self._always)
        for (column, value_type), (lows, checkpoints, widest) in self._groups.items():
            if (column, value_type) != (bounds.column, bounds.value_type):
                candidates.extend(checkpoints)  # another column or type: may_overlap decides
                continue
            start = bisect_left(lows, low - widest)
            candidates.extend(checkpoints[start : bisect_left(lows, high)])
        return candidates


def _left_out_where(overlaps: Sequence[IdentityOverlap], comparison: DefinitionComparison) -> str:
    """Where a comparison found rows left out: the partitions it counted them in, and whether others may hold
    such rows too (counted one by one only until ``PARTITIONS_NAMED`` are found)."""
    parts = [p for p, _ in comparison.left_out]
    if not parts:  # the source changed between the statements: none was found alone
        every = [o.partition for o in overlaps]
        return f"some of {len(every)} partition(s) ({some_labels(every)})"
    where = f"{len(parts)} partition(s) ({some_labels(parts)})"
    return where if comparison.complete else f"{where} and maybe more (not counted one by one)"


def some_labels(partitions: Sequence[PlannedPartition]) -> str:
    """The first three partitions' labels, for a message that names them (``, ...`` when there are more)."""
    return some_bounds_labels([p.bounds for p in partitions])


def some_bounds_labels(bounds: Sequence[PartitionBounds]) -> str:
    """:func:`some_labels` of bare bounds."""
    return ", ".join(b.label for b in bounds[:3]) + (", ..." if len(bounds) > 3 else "")
