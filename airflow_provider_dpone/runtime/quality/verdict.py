"""The quality verdict: the bound policy applied to exact metrics per scope.

Pure and deterministic, so a retry recomputes the same verdict from a capsule without re-measuring.
Scopes are compared where they hold the key (``moved`` holds only the row count). A required (``error``)
check never passes on missing evidence; a ``warn`` check facing an explicitly unavailable target yields
``unavailable`` with an empty metric set, and nothing else does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from airflow_provider_dpone.contracts.capsule import CheckKind, CheckSeverity, PolicyCheck, QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.report import COMPARED_NOTHING, QualityCheckOutcome
from airflow_provider_dpone.contracts.target_observation import ObservationMetric
from airflow_provider_dpone.runtime.quality.evidence import ScopeMetrics, key_label
from airflow_provider_dpone.runtime.quality.policy import MetricKey

log = logging.getLogger(__name__)

ROWS = ObservationMetric.ROW_COUNT
NULLS = ObservationMetric.NULL_COUNT
DISTINCT = ObservationMetric.DISTINCT_COUNT


class CheckStatus(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class CheckResult:
    check: PolicyCheck
    status: CheckStatus
    reason: str | None = None
    values: dict[str, int] = field(default_factory=dict)

    @property
    def required(self) -> bool:
        return self.check.severity is CheckSeverity.ERROR

    def outcome(self) -> QualityCheckOutcome:
        return QualityCheckOutcome(
            check=self.check.check.value,
            columns=self.check.columns,
            severity=self.check.severity.value,
            status=self.status.value,
            reason=self.reason,
            values=dict(self.values),
        )


@dataclass(frozen=True)
class Verdict:
    results: tuple[CheckResult, ...]

    @property
    def failed_required(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.required and r.status is not CheckStatus.PASSED)

    @property
    def warnings(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.required and r.status is not CheckStatus.PASSED)

    @property
    def passed(self) -> bool:
        return not self.failed_required

    @property
    def label(self) -> str:
        if not self.results:
            return "not_checked"
        if not self.passed:
            return "failed"
        return "warned" if self.warnings else "passed"

    def log_warnings(self, route: str) -> None:
        """Warn-only results that did not pass, one log line each (codes and counts only)."""
        for warning in self.warnings:
            log.warning(
                "quality check %s%s (warn) %s on route %s: %s %s",
                warning.check.check.value,
                f" ({', '.join(warning.check.columns)})" if warning.check.columns else "",
                warning.status.value,
                route,
                warning.reason,
                warning.values,
            )

    def outcomes(self) -> tuple[QualityCheckOutcome, ...]:
        return tuple(r.outcome() for r in self.results)

    def require_passed(
        self, route: str, *, published: bool, hints: tuple[str, ...] = (), final: bool = False
    ) -> None:
        """Raise ``quality_check_failed`` naming each failed required check (codes and counts only);
        ``final`` when no retry can measure it again (``DponeError.retry_can_help``)."""
        if self.passed:
            return
        failed = self.failed_required
        where = "after publication" if published else "before publication; nothing was published"
        lines = [
            f"check {r.check.check.value}"
            + (f" ({', '.join(r.check.columns)})" if r.check.columns else "")
            + f": {r.reason or r.status.value}"
            for r in failed
        ]
        raise DponeError(
            ErrorCode.QUALITY_CHECK_FAILED,
            f"{len(failed)} required quality check(s) failed {where} on route {route}",
            details={
                "route": route,
                "published": published,
                "checks": [r.outcome().model_dump() for r in failed],
            },
            hint_lines=(*lines, *hints),
            final=final,
        )


def _needed(check: PolicyCheck) -> list[MetricKey]:
    if check.check is CheckKind.ROW_COUNT:
        return [(ROWS, None)]
    if check.check in (CheckKind.NULL_COUNT, CheckKind.NOT_NULL):
        return [(NULLS, c) for c in check.columns]
    if check.check is CheckKind.DISTINCT_COUNT:
        return [(DISTINCT, c) for c in check.columns]
    return [(ROWS, None), *((m, c) for c in check.columns for m in (NULLS, DISTINCT))]


def evaluate_check(check: PolicyCheck, scopes: Sequence[ScopeMetrics]) -> CheckResult:
    needed = _needed(check)
    unavailable = [s for s in scopes if s.values is None]
    if unavailable:
        if check.severity is CheckSeverity.WARN:
            return CheckResult(check, CheckStatus.UNAVAILABLE, "target metrics unavailable", {})
        return CheckResult(check, CheckStatus.FAILED, "required target metrics are missing", {})
    present = [s for s in scopes if s.values is not None]
    values: dict[str, int] = {}
    for scope in present:
        assert scope.values is not None
        for key in needed:
            if key in scope.values:
                values[key_label(scope.scope, key)] = scope.values[key]
    if check.check in (CheckKind.ROW_COUNT, CheckKind.NULL_COUNT, CheckKind.DISTINCT_COUNT):
        measured_once = False
        for key in needed:
            measured = [s.values[key] for s in present if s.values is not None and key in s.values]
            if len(set(measured)) > 1:
                return CheckResult(
                    check, CheckStatus.FAILED, f"{key[0].value} disagrees between scopes", values
                )
            measured_once = measured_once or len(measured) < 2
        # ``load: direct`` without durable replay counts only the moved rows besides the source: a NULL or
        # distinct count there compares nothing, and must not read as a comparison that held
        return CheckResult(check, CheckStatus.PASSED, COMPARED_NOTHING if measured_once else None, values)
    for scope in present:
        assert scope.values is not None
        for column in check.columns:
            nulls = scope.values.get((NULLS, column))
            if check.check is CheckKind.NOT_NULL:
                if nulls is not None and nulls > 0:
                    return CheckResult(
                        check, CheckStatus.FAILED, f"NULL values in the {scope.scope} scope", values
                    )
                continue
            rows = scope.values.get((ROWS, None))
            distinct = scope.values.get((DISTINCT, column))
            if rows is None or nulls is None or distinct is None:
                continue  # a scope that measures only rows (``moved``) cannot show duplicates
            if distinct != rows - nulls:
                return CheckResult(
                    check, CheckStatus.FAILED, f"repeated values in the {scope.scope} scope", values
                )
    return CheckResult(check, CheckStatus.PASSED, None, values)


def evaluate(policy: QualityPolicy, scopes: Sequence[ScopeMetrics]) -> Verdict:
    return Verdict(tuple(evaluate_check(check, scopes) for check in policy.checks))
