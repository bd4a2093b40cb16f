"""A route whose definition changed (query, spelling, strategy, partitioning column) must neither move
rows twice nor leave rows behind (ADR 0090, 0095).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import PartitionKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.read_definition import PARTITIONS_NAMED
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex, fully_covered
from airflow_provider_dpone.runtime.left_out_rows import (
    DefinitionComparison,
    compare_with_earlier,
    still_standing,
)
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, some_labels
from airflow_provider_dpone.runtime.respelled_values import listed_text, new_values, vanished_values
from airflow_provider_dpone.runtime.resume_planner import Action, ResumeDecision
from airflow_provider_dpone.runtime.route_family import (
    RouteFamily,
    committed_by_source,
    newest_commit,
    other_identity_standing,
)
from airflow_provider_dpone.runtime.route_identity import (
    IdentityOverlap,
    changed_summary,
    find_overlaps,
    raise_respelled,
    require_unchanged_identity,
)
from airflow_provider_dpone.runtime.rows_beyond_partitioning import by_another_column, rows_beyond_error
from airflow_provider_dpone.runtime.target_counts import TargetCounts, rows_within_each


class IdentityChecks(CheckContext):
    """The checks for a changed route definition (see the module)."""

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


def _left_out_where(overlaps: Sequence[IdentityOverlap], comparison: DefinitionComparison) -> str:
    """Where a comparison found rows left out: the partitions it counted them in, and whether others may hold
    such rows too (counted one by one only until ``PARTITIONS_NAMED`` are found)."""
    parts = [p for p, _ in comparison.left_out]
    if not parts:  # the source changed between the statements: none was found alone
        every = [o.partition for o in overlaps]
        return f"some of {len(every)} partition(s) ({some_labels(every)})"
    where = f"{len(parts)} partition(s) ({some_labels(parts)})"
    return where if comparison.complete else f"{where} and maybe more (not counted one by one)"
