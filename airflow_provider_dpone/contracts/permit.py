"""The target mutation permit: the only key to a sink's mutating calls.

The guard lifecycle opens a permit after the complete armed batch is durable and closes it when the
target call returns or raises. Sinks check it at the top of every mutating call, so a code path that
skipped arming has nothing to pass and fails before it touches the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity


@dataclass(eq=False)
class TargetPermit:
    """Scope of one guarded target mutation: the route, the batch and the exact armed partitions."""

    route: RouteIdentity
    checkpoint_batch_id: str
    partitions: tuple[tuple[str, PartitionBounds], ...]
    _open: bool = field(default=False, repr=False)
    _used: bool = field(default=False, repr=False)

    @property
    def partition_ids(self) -> tuple[str, ...]:
        return tuple(pid for pid, _ in self.partitions)

    @property
    def bounds(self) -> tuple[PartitionBounds, ...]:
        return tuple(b for _, b in self.partitions)

    def require_open(self, target_table: str) -> None:
        """Called by sinks before mutating; raises unless inside the guarded window for this route."""
        if not self._open or target_table != self.route.target_table:
            raise DponeError(
                ErrorCode.TARGET_MUTATION_UNGUARDED,
                "a target mutation was attempted without an open permit from the commit guard",
                details={"route": self.route.describe(), "checkpoint_batch_id": self.checkpoint_batch_id},
            )

    # The two transitions below are called only by runtime.guard.commit_lifecycle.
    def _open_window(self) -> None:
        if self._used:
            raise DponeError(
                ErrorCode.TARGET_MUTATION_UNGUARDED,
                "a target permit is single-use and was already spent",
                details={"checkpoint_batch_id": self.checkpoint_batch_id},
            )
        self._open = True
        self._used = True

    def _close_window(self) -> None:
        self._open = False
