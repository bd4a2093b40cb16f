"""What a run that goes on tells the operator: partitions that may still fill, a whole table moved once,
records timed ahead of this worker's clock, partitions committed while still open by it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, checkpoint_moment
from airflow_provider_dpone.contracts.manifest import PartitionKind
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.causal_clock import records_ahead, worker_now
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, some_bounds_labels, some_labels
from airflow_provider_dpone.runtime.resume_planner import (
    Reason,
    ResumeDecision,
    settled_cutoff,
    still_filling,
    upper_instant,
)
from airflow_provider_dpone.runtime.route_family import RouteFamily

#: Partitions whose records ahead have their history read for the records a later run replaced (the first
#: ones ahead may be among them): one store read each, only on a run that finds records ahead.
_HISTORIES_READ = 50


def _some(runs: Sequence[str]) -> str:
    """The first three run IDs, for a message that names them (``, ...`` when there are more)."""
    return ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")


class RunNotices(CheckContext):
    """What a run that goes on says to the operator (see the module)."""

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
        # the worker's own time: a floor raised by a worker whose clock ran ahead says nothing of the source
        filling = still_filling(decisions, self._route.strategy, partitioning, worker_now(self._clock))
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

    def say_the_records_ran_ahead(self, family: RouteFamily) -> None:
        """On a route with ``settle``, what clocks that disagree left behind (``causal_clock``): records of the
        target timed more than ``settle`` ahead of this worker's clock, naming the runs whose workers wrote
        them (never one that only followed them), and partitions of the route committed while still open by
        this worker's clock, whose late rows may be missing. This run decides by its own clock."""
        settle = self._manifest.source.partitioning.settle_delta()
        if settle is None:
            return
        now = worker_now(self._clock)
        self._say_who_ran_ahead(family, now, settle)
        self._say_what_was_committed_open(family, now, settle)

    def _say_who_ran_ahead(self, family: RouteFamily, now: datetime, settle: timedelta) -> None:
        """Every record after the first one ahead is floored to it, so the newest is the last run's whatever
        its clock (seen: a correct worker's run was named as the one to fix): the runs named are those that
        wrote a time of their own ahead, read also from the records a later run replaced (``history``)."""
        ahead = sorted(
            (c for c in family.target_wide if checkpoint_moment(c) - now > settle), key=checkpoint_moment
        )
        if not ahead:
            return
        replaced = [r for c in ahead[:_HISTORIES_READ] for r in self._history(c.route, c.partition_id)]
        found = records_ahead(family.target_wide, replaced, now, settle)
        if found is None:
            return
        lead = timedelta(seconds=round(found.lead.total_seconds()))
        if found.ran_ahead:
            first = found.ran_ahead[0][1].isoformat(timespec="seconds")
            runs = _some([run for run, _ in found.ran_ahead])
            who = (
                f"run(s) {runs} wrote them first, from {first}: the worker(s) that ran them had a clock running "
                "ahead, and may have committed days that were still filling"
            )
            fix = f"correct the clock of the worker(s) that ran {runs} (NTP)"
        else:
            who = "each follows an earlier record, so no run among them is known to have timed its own"
            fix = "correct the clock of the worker that ran ahead (NTP)"
        if found.followed:
            who += (
                f"; later run(s) {_some(list(found.followed))} only timed their records just after those (a "
                "record is never timed before one its run read): their workers' clocks are not in question"
            )
        self._notice(
            f"route {self._route.describe()}: records of target table {self._manifest.sink.table} are timed up "
            f"to {lead} ahead of this worker's clock (the newest at {found.newest.isoformat(timespec='seconds')}), "
            f"more than source.partitioning.settle ({self._manifest.source.partitioning.settle}); {who}. This run "
            f"decides what has settled by its own clock; {fix}, then compare the source with the target "
            f"(`dpone checkpoints {self._manifest_ref} --verify` shows what a partition missed)"
        )

    def _say_what_was_committed_open(self, family: RouteFamily, now: datetime, settle: timedelta) -> None:
        """Partitions of the route committed while still open by this worker's clock: direct evidence of a
        clock ahead however small its lead (seen: 90 minutes ahead under ``settle: 2h`` committed a day
        still filling; its late row never moved, exit 0, and the records were never more than ``settle``
        ahead). Given while they are still open here; a commit time is no evidence (it may be floored)."""
        cutoff = settled_cutoff(now, settle)
        # ISO text first (a day's margin for any offset): parsing every upper bound of 50,000 took 0.1 s
        since = (cutoff - timedelta(days=1)).date().isoformat()
        early = sorted(
            (
                (upper, c)
                for c in family.own
                if c.status is CheckpointStatus.COMMITTED
                and (c.bounds.upper or "") >= since
                and (upper := upper_instant(c.bounds)) is not None
                and upper > cutoff
            ),
            key=lambda pair: pair[0],
        )
        if not early:
            return
        partitioning = self._manifest.source.partitioning
        if self._route.strategy is Strategy.INCREMENTAL_APPEND:
            repair = (
                "incremental_append never moves a committed partition again: once they have settled, copy the "
                "rows the target lacks by hand, by key"
            )
        elif partitioning.lookback:
            repair = (
                "the lookback replaces them once they have settled while they are among the "
                f"{partitioning.lookback} most recent committed partitions; a partition it no longer reaches "
                "needs one run whose source.partitioning.lookback reaches it"
            )
        else:
            repair = (
                "no run moves them again: once they have settled, reload them with one run whose "
                "source.partitioning.lookback reaches them, then remove the lookback"
            )
        commits = [c for _, c in early]
        self._notice(
            f"route {self._route.describe()}: {len(commits)} partition(s) were committed while still open by "
            f"this worker's clock ({some_bounds_labels([c.bounds for c in commits])}; by run(s) "
            f"{_some(sorted({c.run_id for c in commits}))}): rows that reached the source within their bounds "
            f"after that commit are not in target table {self._manifest.sink.table}. Either "
            f"source.partitioning.settle ({partitioning.settle}) was set or lengthened after that commit (a "
            "run without it, or a rebaseline, recorded the day), or the clock of the worker that committed "
            "them ran ahead of this worker's clock (then correct that clock: NTP). This run decides by its "
            f"own clock. {repair}; `dpone checkpoints {self._manifest_ref} --verify` shows such a partition "
            "DRIFTED once it has settled (`dpone runbook guard`, 'Drifted partitions')"
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
