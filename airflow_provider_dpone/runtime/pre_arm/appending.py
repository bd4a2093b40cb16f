"""Rows already in the target where a run is about to append: a new route's target, a partition whose
commit a store restored from an older backup may have lost (ADR 0078, 0092).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.read_definition import PARTITIONS_NAMED
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.runtime.bounds_coverage import fully_covered, may_overlap
from airflow_provider_dpone.runtime.guard.resolution import committed_rows_within, other_sources_rows
from airflow_provider_dpone.runtime.key_fingerprint import key_ranges, route_key_candidates
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, forced_not_applied, some_labels
from airflow_provider_dpone.runtime.pre_arm.rewritten import RangeIndex
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision
from airflow_provider_dpone.runtime.route_family import RouteFamily, committed_by_source

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


class AppendingChecks(CheckContext):
    """The checks for rows already where a run appends (see the module)."""

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
            and not forced_not_applied(matched.get(d.partition.partition_id))
        ]
        if not fresh:
            return
        # other source tables' commits (a fan-in): their rows within a partition are subtracted from the
        # target's count; where their share is unknown (another partitioning) a wider region is counted
        own, others = committed_by_source(family.target_wide, family.route.source_table, self._naming)
        index = RangeIndex(others)
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
        index: RangeIndex,
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


def _regions(bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]) -> list[PartitionBounds]:
    """Where a partition's rows can be told from other sources' when their commits use another
    partitioning: the bounds of each of their commits covering it (a month over a day; the whole table of
    an unpartitioned source). Not the whole table otherwise: any retention anywhere (its rows gone from
    commits that still count them) made every new day of a source partitioned on another column look
    short, and stopped it on every run (an attack, with an ``integer_range`` partner)."""
    covering = [c.bounds for c in others if fully_covered(bounds, [c.bounds]) and c.bounds != bounds]
    return list(dict.fromkeys(covering))
