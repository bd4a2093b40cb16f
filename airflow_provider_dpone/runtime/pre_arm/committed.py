"""The target still holds what the checkpoint store says was committed: a restored, emptied or
rewritten target stops the run before it skips or re-moves a partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, PlannedPartition
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.runtime import unrecorded
from airflow_provider_dpone.runtime.guard.resolution import committed_rows_within
from airflow_provider_dpone.runtime.lost_rows import deleting_ttl, lost_rows_hints
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, forced_not_applied
from airflow_provider_dpone.runtime.pre_arm.rewritten import rewritten_since
from airflow_provider_dpone.runtime.resume_planner import Action, Reason, ResumeDecision, is_settled
from airflow_provider_dpone.runtime.route_family import RouteFamily, committed_by_source
from airflow_provider_dpone.runtime.vanished import bounds_order

#: How many of the latest commits a short target counts, beyond the lookback's (``_emptied_late_commit``).
_LATE_COMMITS_COUNTED = 20
#: The whole table, for counting other source tables' commits anywhere in it.
_WHOLE_TABLE = PartitionBounds(kind=BoundsKind.ALL, label="the whole table")


class CommittedChecks(CheckContext):
    """The checks that the target still holds what was committed (see the module)."""

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


def _others_share(theirs: int | None, target_rows: int) -> str:
    """How many of the table's rows other source tables committed, said as the records allow."""
    if not theirs:
        return ""
    if theirs <= target_rows:
        return f" ({theirs:,} of them other source tables' commits)"
    return f" (other source tables committed {theirs:,} rows into it, some of them gone since)"


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
    return checkpoint.status is CheckpointStatus.COMMITTED or forced_not_applied(checkpoint)


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
