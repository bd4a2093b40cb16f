"""The real host: the machine's name and the operating system's random source."""

from __future__ import annotations

import secrets
import socket


class LocalHost:
    def hostname(self) -> str:
        return socket.gethostname()

    def random_hex(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)
