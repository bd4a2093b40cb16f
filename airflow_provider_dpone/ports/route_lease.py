"""An exclusive lease on a target table for the length of one run (two runs never both write)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class RouteLease(Protocol):
    def lease(self, key: str) -> AbstractContextManager[None]:
        """Hold the lease named ``key`` until the block ends, or raise ``native_transfer_route_busy`` at
        once when another process holds it. The lease must end with its holder's process, however it dies."""
