"""The real host: its clocks, its name and the operating system's random source (the runtime's ports)."""

from __future__ import annotations

import secrets
import socket
import time
from datetime import datetime, timezone


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()


class LocalHost:
    def hostname(self) -> str:
        return socket.gethostname()

    def random_hex(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)
