"""What a run's scope on the target touches besides its own rows: other source tables, detached parts,
listed values stored under another spelling, leftover staging tables.
"""

from __future__ import annotations

import functools
import logging
from bisect import bisect_right
from collections.abc import Callable, Sequence

from airflow_provider_dpone.contracts.checkpoint import (
    CheckpointStatus,
    PartitionCheckpoint,
    checkpoint_moment,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime import detached_parts
from airflow_provider_dpone.runtime.bounds_coverage import OverlapIndex
from airflow_provider_dpone.runtime.lost_rows import deleting_ttl
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, some_bounds_labels
from airflow_provider_dpone.runtime.route_family import RouteFamily, committed_by_source, sibling_committed
from airflow_provider_dpone.runtime.shared_target import other_sources_in_scope, within_partitions
from airflow_provider_dpone.runtime.target_counts import rows_within_each

_log = logging.getLogger(__name__)


class ScopeChecks(CheckContext):
    """The checks of what a run's scope touches besides its own rows (see the module)."""

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
