"""Stable error codes and the one exception type that carries them.

Messages and details are *safe*: route identities, partition IDs, phases, batch IDs, file names the
user gave, counts. Never SQL, row values, credentials, connector responses or exception messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any


class ErrorCode(str, Enum):
    """Codes printed as ``error: <code>: ...`` and carried by Airflow task failures."""

    MANUAL_RECONCILIATION_REQUIRED = "native_transfer_manual_reconciliation_required"
    GUARD_INVALID = "native_transfer_target_commit_guard_invalid"
    MANIFEST_INVALID = "manifest_invalid"
    CONNECTION_MISSING = "connection_missing"
    CONNECTION_INVALID = "connection_invalid"
    EMBEDDED_EXTRA_MISSING = "embedded_extra_missing"
    SOURCE_TABLE_MISSING = "source_table_missing"
    SOURCE_UNREACHABLE = "source_unreachable"
    SOURCE_READ_FAILED = "source_read_failed"
    UNSUPPORTED_COLUMN_TYPE = "unsupported_column_type"
    TARGET_UNREACHABLE = "target_unreachable"
    TARGET_INCOMPATIBLE = "target_table_incompatible"
    TARGET_LOAD_FAILED = "target_load_failed"
    TARGET_MUTATION_UNGUARDED = "target_mutation_unguarded"
    #: A read-only query of the ClickHouse hook was refused by the target (syntax, missing table, limits).
    TARGET_QUERY_FAILED = "target_query_failed"
    CHECKPOINT_STORE_FAILED = "checkpoint_store_failed"
    QUALITY_CHECK_FAILED = "quality_check_failed"
    ARTIFACT_INVALID = "artifact_invalid"
    USAGE = "usage_error"
    # Durable quality replay (ADR 0074): capsules, reader guards, the bounded target reader.
    CAPSULE_INVALID = "quality_capsule_invalid"
    CAPSULE_CONFLICT = "quality_capsule_conflict"
    CAPSULE_CAPACITY_EXCEEDED = "quality_capsule_capacity_exceeded"
    CAPSULE_STORE_FAILED = "quality_capsule_store_failed"
    READER_GUARD_HELD = "reader_guard_held"
    TARGET_READER_UNSUPPORTED = "target_reader_unsupported"
    #: A durable quality capsule of the route is unresolved (pending, retained reader guard, or a failed
    #: target verdict): later runs stop before any source or target I/O until it completes or is resolved.
    QUALITY_REPLAY_UNRESOLVED = "quality_replay_unresolved"
    #: every partition is committed, but the target table is gone or holds fewer rows than they loaded
    TARGET_LOST_COMMITTED_ROWS = "native_transfer_target_lost_committed_rows"
    #: an append route's query, schema or partitioning changed and a partition to move overlaps partitions
    #: committed under the old definition: appending it would duplicate rows (``dpone guard rebaseline``)
    ROUTE_IDENTITY_CHANGED = "native_transfer_route_identity_changed"
    #: an append route has no checkpoint at all but its target table holds rows (a lost or new checkpoint
    #: store, or an adopted table): appending the source would duplicate them (``--allow-nonempty-target``)
    TARGET_NOT_EMPTY = "native_transfer_target_not_empty"
    #: another run holds the target's lease: nothing was read or written; retry later (exit code 4)
    ROUTE_BUSY = "native_transfer_route_busy"
    #: the target table was replaced, emptied or had a written column's type changed while a direct load
    #: wrote it: the load stopped inside its target call, so its partitions are blocked for on-call (exit 3)
    TARGET_CHANGED_DURING_LOAD = "native_transfer_target_changed_during_load"


#: CLI exit codes (ARCHITECTURE.md section 5): scripts and black-box tests rely on them.
EXIT_OK = 0
EXIT_FAILED = 1  # the run failed (source, target, quality, stores)
EXIT_USAGE = 2  # the input was wrong (manifest, connection, command line)
EXIT_BLOCKED = 3  # the route is blocked until an operator acts
EXIT_BUSY = 4  # another run holds the target's lease


@dataclass(frozen=True)
class ErrorSpec:
    """What a code means to a caller: the CLI's exit code, and whether another try can succeed unaided.

    ``retry_can_help`` is False when the next try would meet the same input and fail the same way (a wrong
    manifest, a missing connection, a column type or target table that does not fit): Airflow fails those at
    once. Blocked routes stay retryable: an operator may resolve the route between tries.
    """

    exit_code: int
    retry_can_help: bool


_BLOCKED = ErrorSpec(EXIT_BLOCKED, retry_can_help=True)
_USER_INPUT = ErrorSpec(EXIT_USAGE, retry_can_help=False)
_TRANSIENT = ErrorSpec(EXIT_FAILED, retry_can_help=True)
_DETERMINISTIC = ErrorSpec(EXIT_FAILED, retry_can_help=False)

#: The one error table: every ErrorCode has exactly one row (a unit test holds it to that).
ERROR_TABLE: Mapping[ErrorCode, ErrorSpec] = MappingProxyType(
    {
        ErrorCode.MANUAL_RECONCILIATION_REQUIRED: _BLOCKED,
        ErrorCode.GUARD_INVALID: _BLOCKED,
        ErrorCode.QUALITY_REPLAY_UNRESOLVED: _BLOCKED,
        ErrorCode.TARGET_LOST_COMMITTED_ROWS: _BLOCKED,
        ErrorCode.ROUTE_IDENTITY_CHANGED: _BLOCKED,
        ErrorCode.TARGET_NOT_EMPTY: _BLOCKED,
        ErrorCode.TARGET_CHANGED_DURING_LOAD: _BLOCKED,
        ErrorCode.MANIFEST_INVALID: _USER_INPUT,
        ErrorCode.CONNECTION_MISSING: _USER_INPUT,
        ErrorCode.CONNECTION_INVALID: _USER_INPUT,
        ErrorCode.EMBEDDED_EXTRA_MISSING: _USER_INPUT,
        ErrorCode.USAGE: _USER_INPUT,
        ErrorCode.UNSUPPORTED_COLUMN_TYPE: _DETERMINISTIC,
        ErrorCode.TARGET_INCOMPATIBLE: _DETERMINISTIC,
        ErrorCode.TARGET_MUTATION_UNGUARDED: _DETERMINISTIC,
        ErrorCode.SOURCE_TABLE_MISSING: _TRANSIENT,  # an upstream job may create it before the next try
        ErrorCode.SOURCE_UNREACHABLE: _TRANSIENT,
        ErrorCode.SOURCE_READ_FAILED: _TRANSIENT,
        ErrorCode.TARGET_UNREACHABLE: _TRANSIENT,
        ErrorCode.TARGET_LOAD_FAILED: _TRANSIENT,
        ErrorCode.TARGET_QUERY_FAILED: _TRANSIENT,  # a table may appear or a limit clear by the next try
        ErrorCode.CHECKPOINT_STORE_FAILED: _TRANSIENT,
        ErrorCode.QUALITY_CHECK_FAILED: _TRANSIENT,  # the source may be mid-update; the batch was not published
        ErrorCode.ARTIFACT_INVALID: _TRANSIENT,
        ErrorCode.CAPSULE_INVALID: _TRANSIENT,
        ErrorCode.CAPSULE_CONFLICT: _TRANSIENT,
        ErrorCode.CAPSULE_CAPACITY_EXCEEDED: _TRANSIENT,
        ErrorCode.CAPSULE_STORE_FAILED: _TRANSIENT,
        ErrorCode.READER_GUARD_HELD: _TRANSIENT,
        ErrorCode.TARGET_READER_UNSUPPORTED: _TRANSIENT,
        ErrorCode.ROUTE_BUSY: ErrorSpec(EXIT_BUSY, retry_can_help=True),
    }
)


def spec_of(code: ErrorCode) -> ErrorSpec:
    """The code's row; a code added without one fails safe: exit 1, retryable."""
    return ERROR_TABLE.get(code, _TRANSIENT)


#: Codes that mean "the route is blocked until an operator acts" (CLI exit code 3).
BLOCKING_CODES = frozenset(code for code in ErrorCode if spec_of(code).exit_code == EXIT_BLOCKED)
#: Codes that mean "the input was wrong" (CLI exit code 2).
USAGE_CODES = frozenset(code for code in ErrorCode if spec_of(code).exit_code == EXIT_USAGE)
#: Codes a retry cannot fix: the Airflow operator fails them without retrying.
NON_RETRYABLE_CODES = frozenset(code for code in ErrorCode if not spec_of(code).retry_can_help)


class DponeError(Exception):
    """A failure with a stable code and a message that is safe to log anywhere.

    ``details`` holds structured, safe facts (route, partitions, phases) for ``--json`` output and for
    operators' tooling; ``hint_lines`` are the next steps printed under the error line.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        hint_lines: tuple[str, ...] = (),
        final: bool = False,
    ) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.safe_message = message
        self.details: dict[str, Any] = dict(details or {})
        self.hint_lines = hint_lines
        #: the next try cannot tell what this one found, whatever the code's row says (``retry_can_help``)
        self.final = final

    @property
    def retry_can_help(self) -> bool:
        """Whether an automatic retry may end otherwise: the code's row, unless this failure is ``final``
        (a check failed after its batch was committed: the retry finds nothing to move and ends green)."""
        return spec_of(self.code).retry_can_help and not self.final

    def to_json(self) -> dict[str, Any]:
        return {"error": self.code.value, "message": self.safe_message, "details": self.details}

    def render(self) -> str:
        """The operator-facing text: one error line, then indented detail lines."""
        lines = [f"error: {self.code.value}: {self.safe_message}"]
        lines.extend(f"  {line}" for line in self.hint_lines)
        return "\n".join(lines)
