"""Best-effort cleanup that never replaces the error a run is failing with."""

from __future__ import annotations

import logging
from collections.abc import Callable

_log = logging.getLogger(__name__)


def cleanup(failing: bool, what: str, action: Callable[[], None]) -> None:
    """Run a cleanup step; while another exception propagates (``failing``), log its failure instead of
    raising it: the original exception object and traceback stay the run's own."""
    if not failing:
        action()
        return
    try:
        action()
    except Exception as exc:  # the propagating exception stays authoritative
        _log.warning(
            "%s failed while an earlier error propagated (%s); that error is reported",
            what,
            type(exc).__name__,
        )
