"""Stable error codes and the one exception type that carries them.

Messages and details are *safe*: route identities, partition IDs, phases, batch IDs, file names the
user gave, counts. Never SQL, row values, credentials, connector responses or exception messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
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


#: Codes that mean "the route is blocked until an operator acts" (CLI exit code 3).
BLOCKING_CODES = frozenset(
    {
        ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
        ErrorCode.GUARD_INVALID,
        ErrorCode.QUALITY_REPLAY_UNRESOLVED,
        ErrorCode.TARGET_LOST_COMMITTED_ROWS,
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        ErrorCode.TARGET_NOT_EMPTY,
    }
)
#: Codes that mean "the input was wrong" (CLI exit code 2).
USAGE_CODES = frozenset(
    {
        ErrorCode.MANIFEST_INVALID,
        ErrorCode.CONNECTION_MISSING,
        ErrorCode.CONNECTION_INVALID,
        ErrorCode.EMBEDDED_EXTRA_MISSING,
        ErrorCode.USAGE,
    }
)


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
    ) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.safe_message = message
        self.details: dict[str, Any] = dict(details or {})
        self.hint_lines = hint_lines

    @property
    def blocks_route(self) -> bool:
        return self.code in BLOCKING_CODES

    def to_json(self) -> dict[str, Any]:
        return {"error": self.code.value, "message": self.safe_message, "details": self.details}

    def render(self) -> str:
        """The operator-facing text: one error line, then indented detail lines."""
        lines = [f"error: {self.code.value}: {self.safe_message}"]
        lines.extend(f"  {line}" for line in self.hint_lines)
        return "\n".join(lines)
