"""Who is acting, for the audit records that resolutions append."""

from __future__ import annotations

import getpass
import socket


def operator_identity() -> str:
    """``user@host`` of the person running the command (``unknown@host`` in containers without a user)."""
    try:
        user = getpass.getuser()
    except Exception:  # getuser raises when no user name can be found
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
