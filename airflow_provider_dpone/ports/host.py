"""The host a run executes on, injected so the runtime stays pure (no ``socket`` or ``secrets`` in it)."""

from __future__ import annotations

from typing import Protocol


class HostIdentity(Protocol):
    def hostname(self) -> str:
        """This machine's name, for operator-facing text (where a worker ran)."""

    def random_hex(self, nbytes: int) -> str:
        """``nbytes`` unguessable random bytes as hex (lease tokens)."""
