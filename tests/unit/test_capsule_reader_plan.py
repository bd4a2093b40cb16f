"""The reader's plan is structured data, never SQL; the worker's SELECT is generated from it alone."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from airflow_provider_dpone.adapters.clickhouse.predicates import predicate as sink_predicate
from airflow_provider_dpone.adapters.target_reader.protocol import EndpointFrame, WorkerRequestFrame
from airflow_provider_dpone.adapters.target_reader.select_builder import build_select, render_literal
from airflow_provider_dpone.contracts.endpoints import ClickHouseInterface, EndpointDescriptor, EndpointKind
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    MetricValue,
    ObservationInvalid,
    ObservationMetric,
    ObservationStatus,
    ReaderOutcome,
    ReaderOutcomeKind,
    ReaderReason,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
    UnavailableReason,
    WorkerErrorCode,
)
from tests.builders import day


def request(**overrides: object) -> TargetReadRequest:
    fields: dict[str, object] = {
        "target_table": "analytics.orders",
        "selector": GenerationSelector(partitions=(day("2026-11-30", "2026-12-01"),)),
        "columns": ("customer", "amount"),
        "metrics": (
            ObservationMetric.ROW_COUNT,
            ObservationMetric.NULL_COUNT,
            ObservationMetric.DISTINCT_COUNT,
        ),
    }
    fields.update(overrides)
    return TargetReadRequest(**fields)  # type: ignore[arg-type]


def test_select_uses_exact_functions_and_only_the_generation_predicate() -> None:
    sql, keys = build_select(
        request(
            selector=GenerationSelector(
                partitions=(day("2026-11-30", "2026-12-01"), day("2026-12-01", "2026-12-02")),
                load_id=LoadIdSelector(column="dpone_load_id", value="L-1"),
            )
        )
    )
    assert sql == (
        "SELECT ifNull(uniqExact(`amount`), 0) AS m0, ifNull(uniqExact(`customer`), 0) AS m1, "
        "countIf(isNull(`amount`)) AS m2, "
        "countIf(isNull(`customer`)) AS m3, count() AS m4 FROM `analytics`.`orders` WHERE "
        "((`order_date` >= toDate('2026-11-30') AND `order_date` < toDate('2026-12-01')) OR "
        "(`order_date` >= toDate('2026-12-01') AND `order_date` < toDate('2026-12-02'))) "
        "AND (`dpone_load_id` = 'L-1')"
    )
    assert keys[-1] == (ObservationMetric.ROW_COUNT, None)


@pytest.mark.parametrize(
    ("value", "value_type", "rendered"),
    [
        ("it's \\ odd", "string", "'it\\'s \\\\ odd'"),
        ("-42", "integer", "-42"),
        ("2026-11-30", "date", "toDate('2026-11-30')"),
        ("2026-11-30T08:00:00", "datetime", "toDateTime(1796025600)"),
    ],
)
def test_literals_are_rendered_by_type_and_escaped(value: str, value_type: str, rendered: str) -> None:
    assert render_literal(value, value_type) == rendered


@pytest.mark.parametrize("column_type", ["DateTime", "Nullable(DateTime)", "DateTime('UTC')"])
def test_day_bounds_on_a_datetime_column_are_utc_midnight_epochs_like_the_sinks(column_type: str) -> None:
    """18.16 compares a DateTime with toDate(...) numerically: the reader would count nothing."""
    bounds = day("2026-11-30", "2026-12-01")
    sql, _ = build_select(
        request(selector=GenerationSelector(partitions=(bounds,))), {"order_date": column_type}
    )
    assert "(`order_date` >= toDateTime(1795996800) AND `order_date` < toDateTime(1796083200))" in sql
    assert sink_predicate(bounds, {"order_date": column_type}) in sql


def test_reader_and_sink_select_the_same_instant_under_any_process_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        rendered = render_literal("2026-03-29T02:30:00", "datetime", "DateTime")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert rendered == "toDateTime(1774751400)"


@pytest.mark.parametrize(
    ("value", "value_type"),
    [
        ("1; DROP TABLE x", "integer"),
        ("2026-13-40", "date"),
        ("2026-11-30') OR (1", "date"),
        ("a\x00b", "string"),
    ],
)
def test_malformed_literals_are_refused(value: str, value_type: str) -> None:
    with pytest.raises(ValueError):
        render_literal(value, value_type)


@pytest.mark.parametrize(
    "overrides",
    [
        {"target_table": "orders"},
        {"target_table": "analytics.orders; DROP TABLE x"},
        {"columns": ("amount`) FROM system.users --",)},
        {"columns": ("a", "a")},
        {"columns": ()},
        {"metrics": ()},
        {"metrics": (ObservationMetric.ROW_COUNT, ObservationMetric.ROW_COUNT)},
        {"metrics": (ObservationMetric.ROW_COUNT,)},  # columns given but nothing measured on them
    ],
)
def test_plans_that_are_not_plain_bounded_measurements_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        request(**overrides)


@pytest.mark.parametrize(
    "bounds",
    [
        {"kind": BoundsKind.RANGE, "column": "d", "label": "x"},
        {"kind": BoundsKind.RANGE, "column": "d x", "lower": "1", "value_type": "integer", "label": "x"},
        {"kind": BoundsKind.RANGE, "column": "d", "lower": "1.5", "value_type": "integer", "label": "x"},
        {"kind": BoundsKind.VALUES, "column": "d", "values": (), "label": "x"},
        {"kind": BoundsKind.ALL, "column": "d", "label": "x"},
    ],
)
def test_selector_bounds_are_validated(bounds: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GenerationSelector(partitions=(PartitionBounds(**bounds),))  # type: ignore[arg-type]


def test_unbounded_selector_is_refused() -> None:
    with pytest.raises(ValidationError):
        GenerationSelector()
    with pytest.raises(ValidationError, match="only together with a load id"):
        GenerationSelector(partitions=(PartitionBounds(kind=BoundsKind.ALL, label="all"),))
    GenerationSelector(
        partitions=(PartitionBounds(kind=BoundsKind.ALL, label="all"),),
        load_id=LoadIdSelector(column="load_id", value="L1"),
    )


def test_generation_key_ignores_metrics_but_not_the_selector() -> None:
    base = request()
    assert (
        base.generation_key() == request(metrics=(ObservationMetric.ROW_COUNT,), columns=()).generation_key()
    )
    other = request(selector=GenerationSelector(partitions=(day("2026-12-01", "2026-12-02"),)))
    assert base.generation_key() != other.generation_key()
    assert base.sha256() != request(allow_unavailable=True).sha256()


def test_observation_must_answer_every_planned_metric_in_order() -> None:
    req = request(columns=("a",), metrics=(ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT))
    good = TargetObservation(
        request_sha256=req.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=(
            MetricValue(metric=ObservationMetric.NULL_COUNT, column="a", value=1),
            MetricValue(metric=ObservationMetric.ROW_COUNT, value=5),
        ),
    )
    good.check_answers(req)
    with pytest.raises(ValidationError):  # out of canonical order
        TargetObservation(
            request_sha256=req.sha256(), status=ObservationStatus.COMPLETE, metrics=good.metrics[::-1]
        )
    extra = good.model_copy(
        update={
            "metrics": (
                *good.metrics[:1],
                MetricValue(metric=ObservationMetric.NULL_COUNT, column="b", value=0),
                good.metrics[1],
            )
        }
    )
    with pytest.raises(ObservationInvalid):
        extra.check_answers(req)


def test_unavailable_has_an_empty_metric_set_and_a_reason() -> None:
    req = request(allow_unavailable=True)
    with pytest.raises(ValidationError):
        TargetObservation(request_sha256=req.sha256(), status=ObservationStatus.UNAVAILABLE)
    with pytest.raises(ValidationError):
        TargetObservation(
            request_sha256=req.sha256(),
            status=ObservationStatus.UNAVAILABLE,
            unavailable_reason=UnavailableReason.METRIC_NOT_COMPUTABLE,
            metrics=(MetricValue(metric=ObservationMetric.ROW_COUNT, value=1),),
        )
    with pytest.raises(ValidationError):
        TargetObservation(request_sha256=req.sha256(), status=ObservationStatus.COMPLETE)


def test_frames_and_outcomes_carry_exactly_one_payload() -> None:
    with pytest.raises(ValidationError):
        ReaderResponseFrame(nonce="a" * 64)
    with pytest.raises(ValidationError):
        ReaderResponseFrame(nonce="short", error=WorkerErrorCode.INTERNAL)
    with pytest.raises(ValidationError):
        ReaderOutcome(
            kind=ReaderOutcomeKind.COMPLETE,
            reason=ReaderReason.OBSERVED,
            termination_verified=True,
            elapsed_seconds=0,
        )


def test_request_frame_carries_the_password_but_never_shows_it() -> None:
    secret = "pw-" + "z" * 10
    endpoint = EndpointDescriptor(
        name="t",
        kind=EndpointKind.CLICKHOUSE,
        interface=ClickHouseInterface.HTTP,
        host="h",
        port=8123,
        user="u",
        password=secret,  # type: ignore[arg-type]
    )
    frame = WorkerRequestFrame(
        mode="observe",
        nonce="b" * 64,
        budget_ms=1000,
        endpoint=EndpointFrame.of(endpoint, resolved_path=None),
        request=request(),
    )
    assert secret.encode() in frame.encode()  # it must reach the worker ...
    assert secret not in repr(frame)  # ... and nothing that logs the frame object shows it
    decoded = WorkerRequestFrame.decode(frame.encode())
    assert decoded.endpoint is not None and decoded.endpoint.descriptor().secret() == secret
