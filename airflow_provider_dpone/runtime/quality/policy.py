"""The manifest's quality checks, bound as the capsule's policy, and the exact metrics they need.

Each check names what it compares:

* ``row_count``       rows agree between every scope measured (source, staged, moved, target);
* ``null_count``      per column, NULL counts agree;
* ``distinct_count``  per column, exact distinct counts agree (NULL is not a value);
* ``not_null``        per column, no NULL in any scope;
* ``unique``          per column, no repeated non-NULL value in any scope (``distinct = rows - nulls``);
                      each listed column is unique on its own (composite keys are not checked).

Durable replay with no declared check binds one implicit ``row_count`` (error): the least a target
observation proves is that the published generation holds the rows that were read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_provider_dpone.contracts.capsule import CheckKind, CheckSeverity, PolicyCheck, QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import QualityCheckType, QualitySpec
from airflow_provider_dpone.contracts.target_observation import (
    IDENTIFIER_PATTERN,
    MAX_PLAN_COLUMNS,
    PER_COLUMN_METRICS,
    ObservationMetric,
    metric_sort_key,
)

_IDENT_RE = re.compile(IDENTIFIER_PATTERN)

IMPLICIT_ROW_COUNT = PolicyCheck(check=CheckKind.ROW_COUNT, columns=(), severity=CheckSeverity.ERROR)

#: What each check needs measured, per column (``row_count`` is measured once per scope).
METRICS_OF: dict[CheckKind, tuple[ObservationMetric, ...]] = {
    CheckKind.ROW_COUNT: (ObservationMetric.ROW_COUNT,),
    CheckKind.NULL_COUNT: (ObservationMetric.NULL_COUNT,),
    CheckKind.DISTINCT_COUNT: (ObservationMetric.DISTINCT_COUNT,),
    CheckKind.NOT_NULL: (ObservationMetric.NULL_COUNT,),
    CheckKind.UNIQUE: (
        ObservationMetric.ROW_COUNT,
        ObservationMetric.NULL_COUNT,
        ObservationMetric.DISTINCT_COUNT,
    ),
}


#: One problem of the quality section: (dotted path, safe message).
#: (path as keys, message); the path is ``("quality", "checks", 0)`` for ``quality.checks[0]``.
PolicyProblem = tuple[tuple[str | int, ...], str]


def dotted(path: tuple[str | int, ...]) -> str:
    """``("quality", "checks", 0)`` -> ``quality.checks[0]``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def policy_problems(spec: QualitySpec) -> list[PolicyProblem]:
    """Every problem of the manifest's checks at once (``dpone manifest validate`` lists them all)."""
    problems: list[PolicyProblem] = []
    columns: dict[str, None] = {}
    for index, check in enumerate(spec.checks):
        path: tuple[str | int, ...] = ("quality", "checks", index)
        if check.type is QualityCheckType.ROW_COUNT:
            if check.columns:
                problems.append((path, "row_count compares whole scopes and takes no columns"))
        elif not check.columns:
            problems.append((path, f"{check.type.value} needs at least one column"))
        if len(set(check.columns)) != len(check.columns):
            problems.append((path, "a check lists the same column twice"))
        if not all(_IDENT_RE.fullmatch(column) for column in check.columns):
            problems.append(
                (path, "quality check columns must be plain identifiers ([A-Za-z_][A-Za-z0-9_]*)")
            )
        if check.type is not QualityCheckType.ROW_COUNT:
            columns.update(dict.fromkeys(check.columns))
    if len(columns) > MAX_PLAN_COLUMNS:
        problems.append(
            (("quality", "checks"), f"quality checks may name at most {MAX_PLAN_COLUMNS} columns")
        )
    return problems


def build_policy(spec: QualitySpec, *, durable: bool) -> QualityPolicy:
    """Validate the manifest's checks and bind them; ``manifest_invalid`` lists every offending check."""
    problems = policy_problems(spec)
    if problems:
        raise _invalid(problems)
    checks = [
        PolicyCheck(
            check=CheckKind(check.type.value),
            columns=check.columns,
            severity=CheckSeverity(check.severity.value),
        )
        for check in spec.checks
    ]
    if durable and not checks:
        checks.append(IMPLICIT_ROW_COUNT)
    return QualityPolicy(checks=tuple(checks))


def plan_metrics(policy: QualityPolicy) -> tuple[ObservationMetric, ...]:
    """Every metric the policy needs, in the enum's canonical order."""
    wanted = {metric for check in policy.checks for metric in METRICS_OF[check.check]}
    return tuple(metric for metric in ObservationMetric if metric in wanted)


def plan_columns(policy: QualityPolicy) -> tuple[str, ...]:
    """Every column a per-column check names, in order of first mention."""
    return tuple(dict.fromkeys(column for check in policy.checks for column in check.columns))


MetricKey = tuple[ObservationMetric, str | None]


def metric_keys(policy: QualityPolicy) -> tuple[MetricKey, ...]:
    """Every (metric, column) a scope is measured for, in the canonical order of an observation.

    The same set a reader plan built from this policy expects (``TargetReadRequest.expected_keys``).
    """
    metrics = plan_metrics(policy)
    columns = plan_columns(policy)
    keys: list[MetricKey] = []
    if ObservationMetric.ROW_COUNT in metrics:
        keys.append((ObservationMetric.ROW_COUNT, None))
    for metric in metrics:
        if metric in PER_COLUMN_METRICS:
            keys.extend((metric, column) for column in columns)
    return tuple(sorted(keys, key=metric_sort_key))


def all_warn_only(checks: Sequence[PolicyCheck]) -> bool:
    """True when no check is required: only then may a target metric be explicitly unavailable."""
    return bool(checks) and all(check.severity is CheckSeverity.WARN for check in checks)


def _invalid(problems: Sequence[PolicyProblem]) -> DponeError:
    shown = [(dotted(path), message) for path, message in problems]
    (path, message), count = shown[0], len(shown)
    headline = f"{path}: {message}" if count == 1 else f"the quality checks have {count} problems"
    return DponeError(
        ErrorCode.MANIFEST_INVALID,
        headline,
        details={"path": path, "problems": [{"path": p, "message": m} for p, m in shown]},
        hint_lines=tuple(f"`{p}`: {m}" for p, m in shown) if count > 1 else (),
    )
