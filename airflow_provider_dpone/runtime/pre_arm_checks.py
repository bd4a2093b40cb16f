"""What a run checks before arming, from what the checkpoints say and what the target already holds.

Every check here runs after the route guard scan and planning, and before the first write to the target: a
check that fails stops the run with nothing written and no checkpoint recorded, so a user's mistake never
blocks the route (ADR 0078). The checks read the target only through the run's one sink (``target``), opened
at the first check that needs it; what a run goes on with but the operator must know is said through
``notice`` (the run report's ``notices``, a warning in the task log).

Each family of checks lives in its own module of ``runtime/pre_arm``, over one ``CheckContext``:
``identity`` (a changed definition), ``appending`` (rows already where a run appends), ``committed`` (the
target still holds what was committed), ``scope`` (what else the run's scope touches), ``notices``.
"""

from __future__ import annotations

from airflow_provider_dpone.runtime.pre_arm.appending import AppendingChecks
from airflow_provider_dpone.runtime.pre_arm.committed import CommittedChecks
from airflow_provider_dpone.runtime.pre_arm.context import some_bounds_labels, some_labels
from airflow_provider_dpone.runtime.pre_arm.identity import IdentityChecks
from airflow_provider_dpone.runtime.pre_arm.notices import RunNotices
from airflow_provider_dpone.runtime.pre_arm.scope import ScopeChecks

__all__ = ["PreArmChecks", "some_bounds_labels", "some_labels"]


class PreArmChecks(IdentityChecks, AppendingChecks, CommittedChecks, ScopeChecks, RunNotices):
    """Every pre-arm check of one run (``CheckContext`` holds what they read)."""
