"""An exclusive lease on a target table for the length of one run (two runs never both write)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class LeaseHold(Protocol):
    """A held lease. Where the lease lives outside the process (a database session), it can end while the
    run goes on: the run proves it is still held before arming, right after, and before each chunk reaches
    the target or staging; on-call commands before each record they write."""

    def require_held(self) -> None:
        """Return when the lease is still held; raise ``native_transfer_route_busy`` (``details.problem:
        lease_lost``) when it ended or cannot be proven held."""


class RouteLease(Protocol):
    def lease(self, key: str) -> AbstractContextManager[LeaseHold]:
        """Hold the lease named ``key`` until the block ends, or raise ``native_transfer_route_busy`` at
        once when another process holds it. The lease must end with its holder's process, however it dies."""
