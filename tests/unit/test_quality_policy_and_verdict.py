"""The bound quality policy, the metrics it needs, and the verdict over exact scope metrics."""

from __future__ import annotations

import json

import pytest

from airflow_provider_dpone.contracts.capsule import CheckKind, CheckSeverity, PolicyCheck, QualityPolicy
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import QualitySpec
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.target_observation import ObservationMetric as M
from airflow_provider_dpone.runtime.quality.evidence import ScopeMetrics, from_summary
from airflow_provider_dpone.runtime.quality.generation import target_plan
from airflow_provider_dpone.runtime.quality.policy import build_policy, metric_keys
from airflow_provider_dpone.runtime.quality.verdict import CheckStatus, evaluate

DAY = PartitionBounds(
    kind=BoundsKind.RANGE, column="d", lower="2026-01-01", upper="2026-01-02", value_type="date", label="d"
)


def spec(*checks: dict[str, object]) -> QualitySpec:
    return QualitySpec.model_validate_json(json.dumps({"checks": list(checks)}))


def check(kind: CheckKind, *columns: str, warn: bool = False) -> PolicyCheck:
    return PolicyCheck(
        check=kind, columns=columns, severity=CheckSeverity.WARN if warn else CheckSeverity.ERROR
    )


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ({"type": "row_count", "columns": ["a"]}, "takes no columns"),
        ({"type": "not_null"}, "needs at least one column"),
        ({"type": "unique", "columns": ["a", "a"]}, "same column twice"),
        ({"type": "null_count", "columns": ["a b"]}, "plain identifiers"),
    ],
)
def test_malformed_checks_are_refused_with_their_path(given: dict[str, object], fragment: str) -> None:
    with pytest.raises(DponeError) as caught:
        build_policy(spec({"type": "row_count"}, given), durable=False)
    assert caught.value.code is ErrorCode.MANIFEST_INVALID
    assert caught.value.details["path"] == "quality.checks[1]" and fragment in caught.value.safe_message


def test_durable_replay_without_checks_binds_one_required_row_count() -> None:
    assert build_policy(spec(), durable=False).checks == ()
    (only,) = build_policy(spec(), durable=True).checks
    assert only.check is CheckKind.ROW_COUNT and only.severity is CheckSeverity.ERROR


def test_metric_keys_are_exactly_what_a_reader_plan_expects() -> None:
    policy = build_policy(
        spec({"type": "unique", "columns": ["id"]}, {"type": "not_null", "columns": ["amount"]}), durable=True
    )
    plan = target_plan("db.t", [DAY], policy)
    assert metric_keys(policy) == plan.expected_keys()
    assert (M.DISTINCT_COUNT, "amount") in metric_keys(policy)  # every column gets every per-column metric
    assert plan.allow_unavailable is False


def test_warn_only_policy_lets_the_plan_accept_an_unavailable_answer() -> None:
    policy = build_policy(spec({"type": "row_count", "severity": "warn"}), durable=True)
    assert target_plan("db.t", [DAY], policy).allow_unavailable is True


def scopes(**named: dict[tuple[M, str | None], int] | None) -> list[ScopeMetrics]:
    return [ScopeMetrics(name, values) for name, values in named.items()]


def test_row_count_agreement_across_source_staged_moved_and_target() -> None:
    policy = QualityPolicy(checks=(check(CheckKind.ROW_COUNT),))
    same = {(M.ROW_COUNT, None): 10}
    ok = evaluate(policy, scopes(source=same, staged=same, moved=same, target=same))
    assert ok.passed and ok.results[0].values == {
        "source.row_count": 10,
        "staged.row_count": 10,
        "moved.row_count": 10,
        "target.row_count": 10,
    }
    bad = evaluate(policy, scopes(source=same, target={(M.ROW_COUNT, None): 11}))
    assert not bad.passed and bad.label == "failed"


def test_a_count_only_one_scope_measured_passes_saying_it_compared_nothing() -> None:
    """``load: direct`` without durable replay measures NULL and distinct counts in the source alone (the
    moved scope counts rows): such a check said ``passed`` as if the target had been compared (seen: two
    distinct source values, one in the target)."""
    policy = QualityPolicy(checks=(check(CheckKind.DISTINCT_COUNT, "a"), check(CheckKind.ROW_COUNT)))
    source = {(M.ROW_COUNT, None): 4, (M.NULL_COUNT, "a"): 0, (M.DISTINCT_COUNT, "a"): 2}

    alone = evaluate(policy, scopes(source=source, moved={(M.ROW_COUNT, None): 4}))
    compared = evaluate(policy, scopes(source=source, staged=source, moved={(M.ROW_COUNT, None): 4}))

    assert alone.passed and (alone.results[0].reason or "").startswith("compared nothing")
    assert alone.results[1].reason is None  # rows: source and moved were compared
    assert compared.passed and compared.results[0].reason is None


def test_not_null_and_unique_are_assertions_in_every_scope() -> None:
    policy = QualityPolicy(checks=(check(CheckKind.NOT_NULL, "a"), check(CheckKind.UNIQUE, "a")))
    source = {(M.ROW_COUNT, None): 4, (M.NULL_COUNT, "a"): 0, (M.DISTINCT_COUNT, "a"): 4}
    target = {(M.ROW_COUNT, None): 4, (M.NULL_COUNT, "a"): 1, (M.DISTINCT_COUNT, "a"): 2}
    verdict = evaluate(policy, scopes(source=source, target=target))
    assert [r.status for r in verdict.results] == [CheckStatus.FAILED, CheckStatus.FAILED]
    assert "target" in (verdict.results[0].reason or "") and "repeated" in (verdict.results[1].reason or "")
    assert evaluate(policy, scopes(source=source)).passed


def test_unavailable_is_only_ever_a_warn_result_with_an_empty_metric_set() -> None:
    policy = QualityPolicy(checks=(check(CheckKind.ROW_COUNT, warn=True), check(CheckKind.ROW_COUNT)))
    verdict = evaluate(policy, scopes(source={(M.ROW_COUNT, None): 3}, target=None))
    warn, required = verdict.results
    assert warn.status is CheckStatus.UNAVAILABLE and warn.values == {}
    assert required.status is CheckStatus.FAILED and not verdict.passed


def test_incomplete_or_malformed_metrics_are_never_read_as_unavailable() -> None:
    keys = ((M.ROW_COUNT, None), (M.NULL_COUNT, "a"))
    for summary in (
        {"rows": 3},
        {"rows": 3, "null_counts": {"a": -1}},
        {"rows": True, "null_counts": {"a": 0}},
    ):
        with pytest.raises(DponeError) as caught:
            from_summary(summary, keys, scope="source")
        assert caught.value.code is ErrorCode.QUALITY_CHECK_FAILED
