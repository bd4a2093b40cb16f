"""The target commit guard record kept in ``PartitionCheckpoint.diagnostics``.

Shape (seed 000, public contract)::

    "target_commit_guard": {
      "schema_version": "dpone.native_transfer.target_commit_guard.v1",
      "checkpoint_batch_id": "sha256:<64 hex>",
      "phase": "armed",
      "recovery": "manual_reconciliation_required"
    }

Only five (status, phase) pairs exist. Anything else — unknown schema version, extra or missing keys,
wrong types, a phase the status does not allow — is invalid and must fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint

GUARD_KEY = "target_commit_guard"
GUARD_SCHEMA_VERSION: Final = "dpone.native_transfer.target_commit_guard.v1"
BATCH_ID_PATTERN = r"^sha256:[0-9a-f]{64}$"


class GuardPhase(str, Enum):
    ARMED = "armed"
    FAILED_BEFORE_TARGET = "failed_before_target"
    CHECKPOINT_COMMITTED = "checkpoint_committed"
    CHECKPOINT_INCOMPLETE = "checkpoint_incomplete"
    TARGET_OUTCOME_UNKNOWN = "target_outcome_unknown"


class Recovery(str, Enum):
    MANUAL_RECONCILIATION_REQUIRED = "manual_reconciliation_required"
    RETRY_ALLOWED = "retry_allowed"
    NONE = "none"


class RetryMeaning(str, Enum):
    BLOCK = "block"
    RETRY = "retry"
    DONE = "done"


#: The seed's phase table: (status, phase) -> (recovery recorded, what a retry may do).
ALLOWED_PAIRS: Mapping[tuple[CheckpointStatus, GuardPhase], tuple[Recovery, RetryMeaning]] = {
    (CheckpointStatus.EXPORTED, GuardPhase.ARMED): (
        Recovery.MANUAL_RECONCILIATION_REQUIRED,
        RetryMeaning.BLOCK,
    ),
    (CheckpointStatus.FAILED, GuardPhase.FAILED_BEFORE_TARGET): (Recovery.RETRY_ALLOWED, RetryMeaning.RETRY),
    (CheckpointStatus.COMMITTED, GuardPhase.CHECKPOINT_COMMITTED): (Recovery.NONE, RetryMeaning.DONE),
    (CheckpointStatus.FAILED, GuardPhase.CHECKPOINT_INCOMPLETE): (
        Recovery.MANUAL_RECONCILIATION_REQUIRED,
        RetryMeaning.BLOCK,
    ),
    (CheckpointStatus.FAILED, GuardPhase.TARGET_OUTCOME_UNKNOWN): (
        Recovery.MANUAL_RECONCILIATION_REQUIRED,
        RetryMeaning.BLOCK,
    ),
}

PHASE_STATUS: Mapping[GuardPhase, CheckpointStatus] = {phase: status for status, phase in ALLOWED_PAIRS}


class TargetCommitGuard(BaseModel):
    """The guard object exactly as stored. Strict: no coercion, no extra keys."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    schema_version: Literal["dpone.native_transfer.target_commit_guard.v1"]
    checkpoint_batch_id: str = Field(pattern=BATCH_ID_PATTERN)
    phase: GuardPhase
    recovery: Recovery

    @classmethod
    def for_phase(cls, phase: GuardPhase, checkpoint_batch_id: str) -> TargetCommitGuard:
        recovery, _ = ALLOWED_PAIRS[(PHASE_STATUS[phase], phase)]
        return cls(
            schema_version=GUARD_SCHEMA_VERSION,
            checkpoint_batch_id=checkpoint_batch_id,
            phase=phase,
            recovery=recovery,
        )

    def to_json(self) -> dict[str, str]:
        return {
            "schema_version": self.schema_version,
            "checkpoint_batch_id": self.checkpoint_batch_id,
            "phase": self.phase.value,
            "recovery": self.recovery.value,
        }


#: Marks the stand-in the store returns for a stored row it cannot read (see ``unreadable.py``).
UNREADABLE_KEY = "unreadable_checkpoint"


class GuardInvalid(ValueError):
    """A guard that is present but not one of the allowed, well-formed records. Carries no raw values."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_EXPECTED_KEYS = frozenset({"schema_version", "checkpoint_batch_id", "phase", "recovery"})
_BATCH_RE = re.compile(BATCH_ID_PATTERN)


def read_guard(checkpoint: PartitionCheckpoint) -> TargetCommitGuard | None:
    """The checkpoint's guard, ``None`` for a legacy checkpoint, or :class:`GuardInvalid`.

    Reasons are fixed phrases (never the offending value) so they are safe to show to operators.
    """
    if UNREADABLE_KEY in checkpoint.diagnostics:
        raise GuardInvalid("stored checkpoint is unreadable")
    if GUARD_KEY not in checkpoint.diagnostics:
        return None
    raw = checkpoint.diagnostics[GUARD_KEY]
    if not isinstance(raw, dict):
        raise GuardInvalid("guard is not an object")
    keys = frozenset(raw)
    if keys != _EXPECTED_KEYS:
        raise GuardInvalid("guard keys are missing or unexpected")
    if raw.get("schema_version") != GUARD_SCHEMA_VERSION:
        raise GuardInvalid("unknown guard schema version")
    batch = raw.get("checkpoint_batch_id")
    if not isinstance(batch, str) or not _BATCH_RE.fullmatch(batch):
        raise GuardInvalid("malformed checkpoint batch id")
    try:
        guard = TargetCommitGuard.model_validate(
            {
                "schema_version": raw["schema_version"],
                "checkpoint_batch_id": batch,
                "phase": GuardPhase(raw["phase"]) if isinstance(raw["phase"], str) else raw["phase"],
                "recovery": Recovery(raw["recovery"])
                if isinstance(raw["recovery"], str)
                else raw["recovery"],
            }
        )
    except (ValueError, ValidationError, TypeError):
        raise GuardInvalid("unsupported phase or recovery value") from None
    expected = ALLOWED_PAIRS.get((checkpoint.status, guard.phase))
    if expected is None:
        raise GuardInvalid("checkpoint status does not allow this guard phase")
    if expected[0] is not guard.recovery:
        raise GuardInvalid("recovery does not match the guard phase")
    return guard
