"""What a run that goes on tells the operator: partitions that may still fill, a whole table moved once,
records timed ahead of this worker's clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from airflow_provider_dpone.contracts.checkpoint import checkpoint_moment
from airflow_provider_dpone.contracts.manifest import PartitionKind
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.runtime.causal_clock import CausalClock, worker_now
from airflow_provider_dpone.runtime.pre_arm.context import CheckContext, some_labels
from airflow_provider_dpone.runtime.resume_planner import Reason, ResumeDecision, still_filling
from airflow_provider_dpone.runtime.route_family import RouteFamily


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
        """A notice when the target's newest record is timed ahead of this worker's clock by more than the
        route's ``settle``: the worker that wrote it ran ahead, and may have committed days that were still
        filling (their late rows never move under ``incremental_append``). This run decides by its own clock
        (``causal_clock``); the other worker's clock is the one to fix."""
        settle = self._manifest.source.partitioning.settle_delta()
        if settle is None or not isinstance(self._clock, CausalClock):
            return
        ahead = self._clock.floor_lead()
        if ahead is None or ahead[1] <= settle:
            return
        newest, lead = ahead
        runs = sorted({c.run_id for c in family.target_wide if checkpoint_moment(c) == newest})
        shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
        by = f" by run(s) {shown}" if runs else ""
        self._notice(
            f"route {self._route.describe()}: the newest record of target table {self._manifest.sink.table} "
            f"was written{by} at {newest.isoformat(timespec='seconds')}, "
            f"{timedelta(seconds=round(lead.total_seconds()))} ahead of this worker's clock and more than "
            f"source.partitioning.settle ({self._manifest.source.partitioning.settle}): the worker that ran "
            "it has a clock running ahead, and may have committed days that were still filling. This run "
            "decides what has settled by its own clock; correct the clock of that worker (NTP), then compare "
            f"the source with the target (`dpone checkpoints {self._manifest_ref} --verify` shows what a "
            "partition missed)"
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
