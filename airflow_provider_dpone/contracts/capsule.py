"""The durable quality capsule of one operation, and its canonical JSON.

* **v1** — source/staged evidence only, one document. Its canonical bytes never change (a golden file
  pins them): old operations stay readable and verifiable byte for byte.
* **v2** — a hash chain of records: version 1 is the immutable **sealed core** (policy, identity binding,
  run/operation and load IDs, source/staged probes, the target plan), version 2 is **TARGET_PENDING**,
  version 3 is one terminal record, **COMPLETE** (the target observation) or **FAILED**. Each record
  carries ``prev_sha256``, the SHA-256 of the previous record's canonical bytes, so no later record can
  alter the core or an earlier record without breaking the chain.

Canonical JSON is the project's one form (sorted keys, compact, no NaN) plus, on parse: UTF-8 only,
duplicate keys rejected, no floats, a fixed maximum size, and the bytes must already be canonical.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_provider_dpone.contracts.partition import canonical_json
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.target_observation import (
    IDENTIFIER_PATTERN,
    METRIC_VALUE_MAX,
    SHA256_PATTERN,
    MetricValue,
    ObservationStatus,
    ReaderOutcomeKind,
    ReaderResponseFrame,
    TargetObservation,
    TargetReadRequest,
    UnavailableReason,
    UtcTimestamp,
    WorkerErrorCode,
)

_STRICT = ConfigDict(strict=True, frozen=True, extra="forbid")

CAPSULE_V1_SCHEMA = "dpone.quality_capsule.v1"
CAPSULE_V2_SCHEMA = "dpone.quality_capsule.v2"
#: Largest canonical record (v1 document or one v2 record) the store accepts.
CAPSULE_RECORD_MAX_BYTES = 131_072
#: Largest response frame (newline included) a reader worker may send.
RESPONSE_FRAME_MAX_BYTES = 65_536
#: ``prev_sha256`` of the sealed core: the chain's fixed genesis.
GENESIS_SHA256 = "sha256:" + "0" * 64
OPERATION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,200}$"
FAILURE_CODE_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"

_Model = TypeVar("_Model", bound=BaseModel)


class CapsuleInvalid(ValueError):
    """A capsule document or chain that is not exactly well-formed. Reasons are fixed phrases."""


class CapsuleCapacityExceeded(ValueError):
    """The worst case of a record or frame this plan could produce exceeds a fixed limit."""

    def __init__(self, reason: str, *, worst_case_bytes: int, limit_bytes: int) -> None:
        super().__init__(reason)
        self.worst_case_bytes = worst_case_bytes
        self.limit_bytes = limit_bytes


# --- canonical JSON ---------------------------------------------------------------------------------


def canonical_bytes(model: BaseModel) -> bytes:
    return canonical_json(model.model_dump(mode="json")).encode("utf-8")


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise CapsuleInvalid("duplicate JSON key")
        result[key] = value
    return result


def _reject_constant(_name: str) -> object:
    raise CapsuleInvalid("NaN or Infinity in JSON")


def _reject_float(_text: str) -> object:
    raise CapsuleInvalid("floating-point number in JSON")


def parse_canonical(data: bytes, *, max_bytes: int) -> object:
    """Parse strict canonical JSON: size-capped, UTF-8, no duplicates/NaN/floats, and already canonical."""
    if len(data) > max_bytes:
        raise CapsuleInvalid("JSON document exceeds its size limit")
    try:
        text = data.decode("utf-8")
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_reject_float,
        )
    except CapsuleInvalid:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CapsuleInvalid("not valid JSON") from None
    if canonical_json(value) != text:
        raise CapsuleInvalid("JSON is not in canonical form")
    return value


def parse_model(model: type[_Model], data: bytes, *, max_bytes: int) -> _Model:
    """Strict canonical parse into ``model``; the model's own canonical bytes must equal ``data``."""
    parse_canonical(data, max_bytes=max_bytes)
    try:
        parsed = model.model_validate_json(data, strict=True)
    except ValidationError:
        raise CapsuleInvalid("JSON does not match the record schema") from None
    if canonical_bytes(parsed) != data:
        raise CapsuleInvalid("record does not round-trip to the same canonical bytes")
    return parsed


# --- shared evidence records ------------------------------------------------------------------------


class CheckKind(str, Enum):
    ROW_COUNT = "row_count"
    NULL_COUNT = "null_count"
    DISTINCT_COUNT = "distinct_count"
    NOT_NULL = "not_null"
    UNIQUE = "unique"


class CheckSeverity(str, Enum):
    ERROR = "error"
    WARN = "warn"


class PolicyCheck(BaseModel):
    """One quality check as bound into the capsule (the capsule's own copy, not the manifest model)."""

    model_config = _STRICT

    check: CheckKind
    columns: tuple[Annotated[str, Field(pattern=IDENTIFIER_PATTERN)], ...] = ()
    severity: CheckSeverity


class QualityPolicy(BaseModel):
    model_config = _STRICT

    checks: tuple[PolicyCheck, ...] = ()


class ProbeScope(str, Enum):
    SOURCE = "source"
    STAGED = "staged"


class ProbeEvidence(BaseModel):
    """Exact metrics measured on the source or the staging table, for one partition or the whole batch."""

    model_config = _STRICT

    scope: ProbeScope
    partition_id: str | None = Field(default=None, min_length=1, max_length=200)
    metrics: tuple[MetricValue, ...]


# --- v1 ---------------------------------------------------------------------------------------------


class CapsuleV1(BaseModel):
    """Source/staged-only capsule. Frozen format: a change here breaks the v1 golden file on purpose."""

    model_config = _STRICT

    schema_version: Literal["dpone.quality_capsule.v1"] = "dpone.quality_capsule.v1"
    operation_id: str = Field(pattern=OPERATION_ID_PATTERN)
    run_id: str = Field(min_length=1, max_length=250)
    identity: str = Field(pattern=SHA256_PATTERN)
    route: RouteIdentity
    checkpoint_batch_id: str | None = Field(default=None, pattern=SHA256_PATTERN)
    policy: QualityPolicy
    probes: tuple[ProbeEvidence, ...]
    sealed_at: UtcTimestamp

    def to_canonical(self) -> bytes:
        data = canonical_bytes(self)
        if len(data) > CAPSULE_RECORD_MAX_BYTES:
            raise CapsuleCapacityExceeded(
                "v1 capsule exceeds the record size limit",
                worst_case_bytes=len(data),
                limit_bytes=CAPSULE_RECORD_MAX_BYTES,
            )
        return data

    @classmethod
    def from_canonical(cls, data: bytes) -> CapsuleV1:
        return parse_model(cls, data, max_bytes=CAPSULE_RECORD_MAX_BYTES)


# --- v2 ---------------------------------------------------------------------------------------------


class RecordKind(str, Enum):
    SEALED_CORE = "sealed_core"
    TARGET_PENDING = "target_pending"
    COMPLETE = "complete"
    FAILED = "failed"


class SealedCore(BaseModel):
    """Everything the original quality decision bound. Never changes once written."""

    model_config = _STRICT

    kind: Literal["sealed_core"] = "sealed_core"
    identity: str = Field(pattern=SHA256_PATTERN, description="the manifest's semantic identity")
    run_id: str = Field(min_length=1, max_length=250)
    route: RouteIdentity
    checkpoint_batch_id: str | None = Field(default=None, pattern=SHA256_PATTERN)
    load_ids: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...]
    policy: QualityPolicy
    probes: tuple[ProbeEvidence, ...]
    target_plan: TargetReadRequest
    sealed_at: UtcTimestamp


class TargetPending(BaseModel):
    """Written before the reader starts: the observation of this exact plan and generation is owed."""

    model_config = _STRICT

    kind: Literal["target_pending"] = "target_pending"
    core_sha256: str = Field(pattern=SHA256_PATTERN)
    request_sha256: str = Field(pattern=SHA256_PATTERN)
    generation_key: str = Field(pattern=SHA256_PATTERN)
    recorded_at: UtcTimestamp


class TargetComplete(BaseModel):
    model_config = _STRICT

    kind: Literal["complete"] = "complete"
    core_sha256: str = Field(pattern=SHA256_PATTERN)
    observation: TargetObservation
    recorded_at: UtcTimestamp


class TargetFailed(BaseModel):
    """Terminal failure. ``reason`` is a fixed safe code (e.g. a reader reason)."""

    model_config = _STRICT

    kind: Literal["failed"] = "failed"
    core_sha256: str = Field(pattern=SHA256_PATTERN)
    outcome: ReaderOutcomeKind
    reason: str = Field(pattern=FAILURE_CODE_PATTERN)
    termination_verified: bool
    recorded_at: UtcTimestamp


RecordBody = Annotated[
    SealedCore | TargetPending | TargetComplete | TargetFailed, Field(discriminator="kind")
]

#: The only order a v2 chain may take: version -> kinds allowed at that version.
_KINDS_AT_VERSION: dict[int, frozenset[RecordKind]] = {
    1: frozenset({RecordKind.SEALED_CORE}),
    2: frozenset({RecordKind.TARGET_PENDING}),
    3: frozenset({RecordKind.COMPLETE, RecordKind.FAILED}),
}
MAX_CHAIN_VERSION = max(_KINDS_AT_VERSION)


class CapsuleRecord(BaseModel):
    """One record of a v2 chain, stored as its canonical bytes under (operation_id, version)."""

    model_config = _STRICT

    schema_version: Literal["dpone.quality_capsule.v2"] = "dpone.quality_capsule.v2"
    operation_id: str = Field(pattern=OPERATION_ID_PATTERN)
    version: int = Field(ge=1, le=MAX_CHAIN_VERSION)
    prev_sha256: str = Field(pattern=SHA256_PATTERN)
    body: RecordBody

    @property
    def kind(self) -> RecordKind:
        return RecordKind(self.body.kind)

    def to_canonical(self) -> bytes:
        data = canonical_bytes(self)
        if len(data) > CAPSULE_RECORD_MAX_BYTES:
            raise CapsuleCapacityExceeded(
                "capsule record exceeds the record size limit",
                worst_case_bytes=len(data),
                limit_bytes=CAPSULE_RECORD_MAX_BYTES,
            )
        return data

    def sha256(self) -> str:
        return sha256_of(canonical_bytes(self))

    @classmethod
    def from_canonical(cls, data: bytes) -> CapsuleRecord:
        return parse_model(cls, data, max_bytes=CAPSULE_RECORD_MAX_BYTES)


@dataclass(frozen=True)
class CapsuleChain:
    """A validated v2 chain: the core and whatever followed it."""

    records: tuple[CapsuleRecord, ...]

    @property
    def operation_id(self) -> str:
        return self.records[0].operation_id

    @property
    def core(self) -> SealedCore:
        body = self.records[0].body
        assert isinstance(body, SealedCore)
        return body

    @property
    def version(self) -> int:
        return self.records[-1].version

    @property
    def head_sha256(self) -> str:
        return self.records[-1].sha256()

    @property
    def pending(self) -> TargetPending | None:
        if len(self.records) < 2:
            return None
        body = self.records[1].body
        assert isinstance(body, TargetPending)
        return body

    @property
    def terminal(self) -> TargetComplete | TargetFailed | None:
        if len(self.records) < 3:
            return None
        body = self.records[2].body
        assert isinstance(body, TargetComplete | TargetFailed)
        return body


def validate_chain(records: Sequence[CapsuleRecord]) -> CapsuleChain:
    """Check a whole v2 chain: genesis, versions 1..n, hash links, kind order, core binding, plan answer."""
    if not records:
        raise CapsuleInvalid("a capsule chain has at least its sealed core")
    first = records[0]
    operation_id = first.operation_id
    prev_hash = GENESIS_SHA256
    core_hash = ""
    core: SealedCore | None = None
    for expected_version, record in enumerate(records, start=1):
        if record.operation_id != operation_id:
            raise CapsuleInvalid("chain mixes operations")
        if record.version != expected_version:
            raise CapsuleInvalid("chain versions are not strictly consecutive from 1")
        if record.kind not in _KINDS_AT_VERSION.get(record.version, frozenset()):
            raise CapsuleInvalid("record kind is not allowed at this chain position")
        if record.prev_sha256 != prev_hash:
            raise CapsuleInvalid("record does not link to the previous record")
        data = record.to_canonical()
        body = record.body
        if isinstance(body, SealedCore):
            core, core_hash = body, sha256_of(data)
        else:
            assert core is not None  # version 1 is always the core (checked above)
            if body.core_sha256 != core_hash:
                raise CapsuleInvalid("record is bound to a different sealed core")
            if isinstance(body, TargetPending):
                if body.request_sha256 != core.target_plan.sha256():
                    raise CapsuleInvalid("pending record names a different target plan")
                if body.generation_key != core.target_plan.generation_key():
                    raise CapsuleInvalid("pending record names a different generation")
            elif isinstance(body, TargetComplete):
                try:
                    body.observation.check_answers(core.target_plan)
                except ValueError:
                    raise CapsuleInvalid("target observation does not answer the sealed plan") from None
            elif body.outcome is ReaderOutcomeKind.COMPLETE:
                raise CapsuleInvalid("a failed record cannot carry a complete outcome")
        prev_hash = sha256_of(data)
    return CapsuleChain(records=tuple(records))


def parse_chain(payloads: Sequence[bytes]) -> CapsuleChain:
    return validate_chain([CapsuleRecord.from_canonical(p) for p in payloads])


# --- worst-case sizes, checked before any target I/O -------------------------------------------------


@dataclass(frozen=True)
class CapacityEstimate:
    """Exact worst-case sizes of what the plan can still produce (bytes)."""

    complete_record_bytes: int
    failed_record_bytes: int
    response_frame_bytes: int

    @property
    def terminal_record_bytes(self) -> int:
        return max(self.complete_record_bytes, self.failed_record_bytes)


def _worst_observation(plan: TargetReadRequest) -> TargetObservation:
    return TargetObservation(
        request_sha256="sha256:" + "f" * 64,
        status=ObservationStatus.COMPLETE,
        metrics=tuple(
            MetricValue(metric=metric, column=column, value=METRIC_VALUE_MAX)
            for metric, column in plan.expected_keys()
        ),
    )


def worst_case_frame_bytes(plan: TargetReadRequest) -> int:
    """Largest response frame (newline included) an honest worker can send for ``plan``."""
    hash_max = "sha256:" + "f" * 64
    nonce = "f" * 64
    frames = [
        ReaderResponseFrame(nonce=nonce, observation=_worst_observation(plan)),
        ReaderResponseFrame(
            nonce=nonce,
            observation=TargetObservation(
                request_sha256=hash_max,
                status=ObservationStatus.UNAVAILABLE,
                unavailable_reason=max(UnavailableReason, key=lambda r: len(r.value)),
            ),
        ),
        ReaderResponseFrame(nonce=nonce, error=max(WorkerErrorCode, key=lambda c: len(c.value))),
    ]
    return max(len(canonical_bytes(f)) for f in frames) + 1


def worst_case_sizes(operation_id: str, plan: TargetReadRequest) -> CapacityEstimate:
    """Build the largest COMPLETE/FAILED records and response frames ``plan`` allows and measure them.

    Every variable part is at its maximum (metric values at UInt64 max, fixed-width timestamps and
    hashes, the longest failure code), so the result is an exact upper bound, not an estimate.
    """
    stamp = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    hash_max = "sha256:" + "f" * 64
    observation = _worst_observation(plan)
    complete = CapsuleRecord(
        operation_id=operation_id,
        version=3,
        prev_sha256=hash_max,
        body=TargetComplete(core_sha256=hash_max, observation=observation, recorded_at=stamp),
    )
    failed = CapsuleRecord(
        operation_id=operation_id,
        version=3,
        prev_sha256=hash_max,
        body=TargetFailed(
            core_sha256=hash_max,
            outcome=ReaderOutcomeKind.WORKER_FAILED,
            reason="z" * 64,
            termination_verified=False,
            recorded_at=stamp,
        ),
    )
    return CapacityEstimate(
        complete_record_bytes=len(canonical_bytes(complete)),
        failed_record_bytes=len(canonical_bytes(failed)),
        response_frame_bytes=worst_case_frame_bytes(plan),
    )


def reserve_capacity(
    core_record: CapsuleRecord,
    *,
    record_limit: int = CAPSULE_RECORD_MAX_BYTES,
    frame_limit: int = RESPONSE_FRAME_MAX_BYTES,
) -> CapacityEstimate:
    """Refuse (before publication and before any target I/O) a core whose follow-ups could not be stored.

    Raises :class:`CapsuleCapacityExceeded` when the core itself, the worst-case terminal record, or the
    worst-case reader response frame exceeds its fixed limit (the limits are parameters only so tests can
    exercise the refusal with small plans).
    """
    if not isinstance(core_record.body, SealedCore):
        raise CapsuleInvalid("capacity is reserved for a sealed core record")
    core_size = len(canonical_bytes(core_record))
    if core_size > record_limit:
        raise CapsuleCapacityExceeded(
            "sealed core exceeds the record size limit", worst_case_bytes=core_size, limit_bytes=record_limit
        )
    estimate = worst_case_sizes(core_record.operation_id, core_record.body.target_plan)
    if estimate.terminal_record_bytes > record_limit:
        raise CapsuleCapacityExceeded(
            "worst-case terminal record exceeds the record size limit",
            worst_case_bytes=estimate.terminal_record_bytes,
            limit_bytes=record_limit,
        )
    if estimate.response_frame_bytes > frame_limit:
        raise CapsuleCapacityExceeded(
            "worst-case reader response frame exceeds the frame size limit",
            worst_case_bytes=estimate.response_frame_bytes,
            limit_bytes=frame_limit,
        )
    return estimate
