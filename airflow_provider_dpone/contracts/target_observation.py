"""What the bounded target reader is asked to measure, what it answers, and the guard over it.

The request is a structured plan (table, generation selector, columns, metrics), never SQL: only the
reader worker turns it into SELECTs, so no caller can smuggle a statement through it. Everything here is
plain data; the worker (``adapters.target_reader``) and the capsule (``contracts.capsule``) share it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from enum import Enum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds, canonical_json, sha256_tag

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

SHA256_PATTERN = r"^sha256:[0-9a-f]{64}$"
#: A plain ClickHouse identifier. Quoting is still applied, but nothing that needs escaping is admitted.
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}\.[A-Za-z_][A-Za-z0-9_]{0,127}$"
#: Metric values are ClickHouse UInt64 counts.
METRIC_VALUE_MAX = 2**64 - 1
#: Plan limits: they bound the worst-case size of the reader's answer and of the COMPLETE record.
MAX_PLAN_COLUMNS = 256
MAX_SELECTOR_PARTITIONS = 1024
MAX_BOUND_VALUE_CHARS = 256
#: The one observation budget (seconds): worker start-up, request write, result read and clean exit.
OBSERVATION_BUDGET_S = 60.0
#: Separate bound on killing and reaping the worker's process group once the budget is spent.
SHUTDOWN_BOUND_S = 5.0

_IDENT_RE = re.compile(IDENTIFIER_PATTERN)
_INTEGER_RE = re.compile(r"^-?[0-9]{1,19}$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATETIME_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}$")
_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() != timezone.utc.utcoffset(None):
        raise ValueError("timestamps must be timezone-aware UTC")
    return value


def format_timestamp(value: datetime) -> str:
    """Fixed-width UTC form (27 characters), so the worst-case size of a record is exact."""
    return _utc(value).strftime(_TIMESTAMP_FORMAT)


#: A UTC datetime stored as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
UtcTimestamp = Annotated[datetime, AfterValidator(_utc), PlainSerializer(format_timestamp, return_type=str)]


class ObservationMetric(str, Enum):
    """The exact metrics the reader computes: count(), countIf(isNull(c)), uniqExact(c)."""

    ROW_COUNT = "row_count"
    NULL_COUNT = "null_count"
    DISTINCT_COUNT = "distinct_count"


#: Metrics measured per column; ``row_count`` is measured once for the whole generation.
PER_COLUMN_METRICS = frozenset({ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT})


def check_bound_value(value: str, value_type: str) -> None:
    """Raise ``ValueError`` unless ``value`` is a canonical literal of ``value_type`` (no value echoed)."""
    if len(value) > MAX_BOUND_VALUE_CHARS:
        raise ValueError("bound value is too long")
    if value_type == "integer":
        if not _INTEGER_RE.fullmatch(value):
            raise ValueError("integer bound value is malformed")
    elif value_type == "date":
        if not _DATE_RE.fullmatch(value):
            raise ValueError("date bound value is malformed")
        date.fromisoformat(value)
    elif value_type == "datetime":
        if not _DATETIME_RE.fullmatch(value):
            raise ValueError("datetime bound value is malformed")
        datetime.fromisoformat(value.replace(" ", "T"))
    elif value_type == "string":
        if "\x00" in value:
            raise ValueError("string bound value contains NUL")
    else:
        raise ValueError("unsupported bound value type")


def _check_bounds(bounds: PartitionBounds) -> None:
    if bounds.kind is BoundsKind.ALL:
        if bounds.column is not None or bounds.lower is not None or bounds.upper is not None or bounds.values:
            raise ValueError("'all' bounds take no column or values")
        return
    if bounds.column is None or not _IDENT_RE.match(bounds.column):
        raise ValueError("partition bounds need a plain identifier column")
    if bounds.kind is BoundsKind.RANGE:
        if bounds.values is not None:
            raise ValueError("range bounds take no value list")
        if bounds.lower is None and bounds.upper is None:
            raise ValueError("range bounds need a lower or an upper value")
        for value in (bounds.lower, bounds.upper):
            if value is not None:
                check_bound_value(value, bounds.value_type)
    else:
        if not bounds.values or bounds.lower is not None or bounds.upper is not None:
            raise ValueError("value-list bounds need values and no range")
        if len(bounds.values) > MAX_SELECTOR_PARTITIONS:
            raise ValueError("value-list bounds have too many values")
        for value in bounds.values:
            check_bound_value(value, bounds.value_type)


class LoadIdSelector(BaseModel):
    """Rows tagged with the operation's load ID: ``column = value``."""

    model_config = _STRICT

    column: str = Field(pattern=IDENTIFIER_PATTERN)
    value: str = Field(min_length=1, max_length=MAX_BOUND_VALUE_CHARS)
    value_type: Literal["string", "integer"] = "string"

    @model_validator(mode="after")
    def _value_matches_type(self) -> LoadIdSelector:
        check_bound_value(self.value, self.value_type)
        return self


class GenerationSelector(BaseModel):
    """The exact generation one operation published.

    Rows match when they fall in ANY of ``partitions`` (when given) AND carry the load ID (when given).
    At least one of the two must be present: an unbounded selector would measure other operations' rows.
    """

    model_config = _STRICT

    partitions: tuple[PartitionBounds, ...] = Field(default=(), max_length=MAX_SELECTOR_PARTITIONS)
    load_id: LoadIdSelector | None = None

    @model_validator(mode="after")
    def _bounded(self) -> GenerationSelector:
        if not self.partitions and self.load_id is None:
            raise ValueError("a generation selector needs partition bounds or a load id")
        for bounds in self.partitions:
            _check_bounds(bounds)
        if self.load_id is None and any(b.kind is BoundsKind.ALL for b in self.partitions):
            raise ValueError("'all' bounds select a generation only together with a load id")
        return self


class TargetReadRequest(BaseModel):
    """The reader's whole instruction. ``allow_unavailable`` is true only for warn-only target checks."""

    model_config = _STRICT

    schema_version: Literal["dpone.target_read_request.v1"] = "dpone.target_read_request.v1"
    target_table: str = Field(pattern=TABLE_PATTERN)
    selector: GenerationSelector
    columns: tuple[str, ...] = Field(default=(), max_length=MAX_PLAN_COLUMNS)
    metrics: tuple[ObservationMetric, ...] = Field(min_length=1, max_length=len(ObservationMetric))
    allow_unavailable: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> TargetReadRequest:
        for column in self.columns:
            if not _IDENT_RE.match(column):
                raise ValueError("plan columns must be plain identifiers")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError("plan columns must be unique")
        if len(set(self.metrics)) != len(self.metrics):
            raise ValueError("plan metrics must be unique")
        per_column = any(m in PER_COLUMN_METRICS for m in self.metrics)
        if per_column and not self.columns:
            raise ValueError("per-column metrics need columns")
        if self.columns and not per_column:
            raise ValueError("columns were given but no per-column metric")
        return self

    def sha256(self) -> str:
        return sha256_tag(canonical_json(self.model_dump(mode="json")))

    def generation_key(self) -> str:
        """Identity of the measured generation (table + selector), the key of its reader guard."""
        material = {"target_table": self.target_table, "selector": self.selector.model_dump(mode="json")}
        return sha256_tag(canonical_json(material))

    def expected_keys(self) -> tuple[tuple[ObservationMetric, str | None], ...]:
        """Every (metric, column) the answer must hold, in the canonical order of a complete observation."""
        keys: list[tuple[ObservationMetric, str | None]] = []
        if ObservationMetric.ROW_COUNT in self.metrics:
            keys.append((ObservationMetric.ROW_COUNT, None))
        for metric in self.metrics:
            if metric in PER_COLUMN_METRICS:
                keys.extend((metric, column) for column in self.columns)
        return tuple(sorted(keys, key=metric_sort_key))


def metric_sort_key(key: tuple[ObservationMetric, str | None]) -> tuple[str, str]:
    return (key[0].value, key[1] or "")


class MetricValue(BaseModel):
    """One exact measurement. ``column`` is null for ``row_count``."""

    model_config = _STRICT

    metric: ObservationMetric
    column: str | None = Field(default=None, pattern=IDENTIFIER_PATTERN)
    value: int = Field(ge=0, le=METRIC_VALUE_MAX)

    @model_validator(mode="after")
    def _column_matches_metric(self) -> MetricValue:
        if (self.metric in PER_COLUMN_METRICS) != (self.column is not None):
            raise ValueError("per-column metrics need a column; row_count takes none")
        return self

    def key(self) -> tuple[ObservationMetric, str | None]:
        return (self.metric, self.column)


class ObservationStatus(str, Enum):
    COMPLETE = "complete"
    UNAVAILABLE = "unavailable"


class UnavailableReason(str, Enum):
    """Why a permitted warn-only observation carries no metrics.

    The only reason is a classified server answer that the metric cannot be computed on the column (a
    type the exact function refuses). A cancelled query, a lost connection, a missing table or database
    and an access error are worker failures, never ``unavailable`` (ADR 0074: unavailable cannot stand
    in for missing evidence, identity failure or cancellation).
    """

    METRIC_NOT_COMPUTABLE = "metric_not_computable"


class ObservationInvalid(ValueError):
    """An observation that does not answer its request exactly. Carries fixed phrases only."""


class TargetObservation(BaseModel):
    """The reader's answer: exact metrics for every planned (metric, column), or an explicit
    ``unavailable`` with an empty metric set (valid only when the request allows it)."""

    model_config = _STRICT

    schema_version: Literal["dpone.target_observation.v1"] = "dpone.target_observation.v1"
    request_sha256: str = Field(pattern=SHA256_PATTERN)
    status: ObservationStatus
    metrics: tuple[MetricValue, ...] = Field(default=(), max_length=1 + 2 * MAX_PLAN_COLUMNS)
    unavailable_reason: UnavailableReason | None = None

    @model_validator(mode="after")
    def _shape(self) -> TargetObservation:
        if self.status is ObservationStatus.COMPLETE:
            if self.unavailable_reason is not None or not self.metrics:
                raise ValueError("a complete observation has metrics and no unavailable reason")
            keys = [metric_sort_key(m.key()) for m in self.metrics]
            if keys != sorted(set(keys)):
                raise ValueError("observation metrics must be unique and in canonical order")
        elif self.metrics or self.unavailable_reason is None:
            raise ValueError("an unavailable observation has an empty metric set and a reason")
        return self

    def check_answers(self, request: TargetReadRequest) -> None:
        """Raise :class:`ObservationInvalid` unless this is an acceptable answer to ``request``."""
        if self.request_sha256 != request.sha256():
            raise ObservationInvalid("observation answers a different request")
        if self.status is ObservationStatus.UNAVAILABLE:
            if not request.allow_unavailable:
                raise ObservationInvalid("observation is unavailable but the plan requires exact metrics")
            return
        if tuple(m.key() for m in self.metrics) != request.expected_keys():
            raise ObservationInvalid("observation metrics do not match the plan")

    def value_of(self, metric: ObservationMetric, column: str | None = None) -> int:
        for item in self.metrics:
            if item.metric is metric and item.column == column:
                return item.value
        raise KeyError((metric.value, column))


# --- the reader worker's answer frame and the parent's typed outcome --------------------------------


class WorkerErrorCode(str, Enum):
    """Fixed codes a worker may answer with instead of an observation."""

    REQUEST_INVALID = "request_invalid"
    CONNECT_FAILED = "connect_failed"
    READONLY_UNVERIFIED = "readonly_unverified"
    LIMITS_MAY_CUT_READS = "limits_may_cut_reads"
    QUERY_FAILED = "query_failed"
    QUERY_CANCELLED = "query_cancelled"
    CONNECTION_LOST = "connection_lost"
    TARGET_MISSING = "target_missing"
    ACCESS_DENIED = "access_denied"
    INTERNAL = "worker_internal"


NONCE_PATTERN = r"^[0-9a-f]{64}$"


class ReaderResponseFrame(BaseModel):
    """The one newline-terminated canonical JSON frame a worker writes to its stdout."""

    model_config = _STRICT

    schema_version: Literal["dpone.target_reader.response.v1"] = "dpone.target_reader.response.v1"
    nonce: str = Field(pattern=NONCE_PATTERN)
    observation: TargetObservation | None = None
    error: WorkerErrorCode | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> ReaderResponseFrame:
        if (self.observation is None) == (self.error is None):
            raise ValueError("a response frame carries exactly one of observation or error")
        return self


class ReaderOutcomeKind(str, Enum):
    COMPLETE = "complete"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    WORKER_FAILED = "worker_failed"


class ReaderReason(str, Enum):
    """Safe, fixed reason of a reader outcome."""

    OBSERVED = "observed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    FRAME_OVERSIZED = "frame_oversized"
    FRAME_MALFORMED = "frame_malformed"
    FRAME_DOUBLED = "frame_doubled"
    NONCE_MISMATCH = "nonce_mismatch"
    PLAN_MISMATCH = "observation_plan_mismatch"
    UNCLEAN_EXIT = "worker_exit_unclean"
    NO_FRAME = "worker_exited_without_frame"
    WAIT_FAILED = "worker_wait_failed"
    SPAWN_FAILED = "spawn_failed"
    REQUEST_INVALID = "request_invalid"
    CONNECT_FAILED = "connect_failed"
    READONLY_UNVERIFIED = "readonly_unverified"
    LIMITS_MAY_CUT_READS = "limits_may_cut_reads"
    QUERY_FAILED = "query_failed"
    QUERY_CANCELLED = "query_cancelled"
    CONNECTION_LOST = "connection_lost"
    TARGET_MISSING = "target_missing"
    ACCESS_DENIED = "access_denied"
    WORKER_INTERNAL = "worker_internal"


class ReaderOutcome(BaseModel):
    """What one bounded observation ended as.

    ``termination_verified`` is true only when the worker was reaped and its process group is gone: the
    precondition for releasing a reader guard after anything but a complete observation.
    """

    model_config = _STRICT

    kind: ReaderOutcomeKind
    reason: ReaderReason
    observation: TargetObservation | None = None
    termination_verified: bool
    elapsed_seconds: float = Field(ge=0)
    worker_pid: int | None = None

    @model_validator(mode="after")
    def _observation_iff_complete(self) -> ReaderOutcome:
        if (self.kind is ReaderOutcomeKind.COMPLETE) != (self.observation is not None):
            raise ValueError("only a complete outcome carries an observation")
        return self


class ObservationInterrupted(BaseException):
    """An interrupt (SIGINT, SIGTERM as an exception, a stop request) that arrived during an observation,
    after the reader killed and reaped its worker. Carries whether that termination was verified, so the
    runtime can release or keep the reader guard by the rules, then re-raise ``original`` itself."""

    def __init__(
        self, original: BaseException, *, termination_verified: bool, worker_pid: int | None
    ) -> None:
        super().__init__("the target observation was interrupted")
        self.original = original
        self.termination_verified = termination_verified
        self.worker_pid = worker_pid


# --- the reader guard -------------------------------------------------------------------------------


class ReaderGuardState(str, Enum):
    ACQUIRED = "acquired"
    RELEASED = "released"


class ReaderGuard(BaseModel):
    """One operation's durable claim that a bounded reader is observing one exact generation.

    Released only by its exact owner, after verified local termination of the worker (and revocation of
    its output). It never expires: a dead owner's guard stays held until an operator acts.
    """

    model_config = _STRICT

    operation_id: str = Field(min_length=1, max_length=200)
    generation_key: str = Field(pattern=SHA256_PATTERN)
    owner_token: str = Field(pattern=r"^[A-Za-z0-9_.:-]{16,128}$")
    state: ReaderGuardState
    acquired_at: UtcTimestamp
    released_at: UtcTimestamp | None = None
