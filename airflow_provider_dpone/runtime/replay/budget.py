"""The operator's knob for the observation budget: ``DPONE_REPLAY_OBSERVATION_BUDGET_S``.

ADR 0074 fixes one monotonic 60-second budget over worker start-up and result I/O. An operator may
lower it (a target that answers quickly, a tight task timeout; tests use it to force a timeout), never
raise it: a value above 60, zero, negative or not a number is refused before any I/O.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import OBSERVATION_BUDGET_S

BUDGET_VARIABLE = "DPONE_REPLAY_OBSERVATION_BUDGET_S"


def observation_budget(environ: Mapping[str, str] | None = None) -> float:
    """The budget in seconds: the variable when set (0 < value <= 60), else the ADR's 60 s."""
    raw = (os.environ if environ is None else environ).get(BUDGET_VARIABLE, "").strip()
    if not raw:
        return OBSERVATION_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 < value <= OBSERVATION_BUDGET_S):  # also refuses nan and inf
        raise DponeError(
            ErrorCode.USAGE,
            f"{BUDGET_VARIABLE} must be a number of seconds above 0 and at most "
            f"{OBSERVATION_BUDGET_S:g} (ADR 0074's observation budget)",
            details={"variable": BUDGET_VARIABLE},
        )
    return value
