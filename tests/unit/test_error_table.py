"""One error table decides the CLI's exit code and whether Airflow retries, for every ErrorCode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_provider_dpone.cli.output import exit_code_for
from airflow_provider_dpone.contracts.errors import (
    BLOCKING_CODES,
    ERROR_TABLE,
    EXIT_BLOCKED,
    EXIT_BUSY,
    EXIT_FAILED,
    EXIT_USAGE,
    NON_RETRYABLE_CODES,
    USAGE_CODES,
    DponeError,
    ErrorCode,
)
from airflow_provider_dpone.operators import native_transfer


def test_every_error_code_has_exactly_one_row() -> None:
    assert set(ERROR_TABLE) == set(ErrorCode)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_the_cli_exit_code_is_the_tables(code: ErrorCode) -> None:
    assert exit_code_for(DponeError(code, "x")) == ERROR_TABLE[code].exit_code


def test_the_operator_fails_at_once_exactly_on_the_codes_a_retry_cannot_fix() -> None:
    assert native_transfer.NON_RETRYABLE_CODES is NON_RETRYABLE_CODES
    # input a retry meets unchanged: exit 2 in the CLI, no Airflow retries (issue: they were retried)
    for code in (
        ErrorCode.CONNECTION_MISSING,
        ErrorCode.CONNECTION_INVALID,
        ErrorCode.EMBEDDED_EXTRA_MISSING,
        ErrorCode.MANIFEST_INVALID,
        ErrorCode.USAGE,
    ):
        assert code in NON_RETRYABLE_CODES and code in USAGE_CODES
    assert ErrorCode.UNSUPPORTED_COLUMN_TYPE in NON_RETRYABLE_CODES
    assert ErrorCode.TARGET_INCOMPATIBLE in NON_RETRYABLE_CODES
    # an operator may resolve a blocked route between tries; a busy route frees itself
    assert not BLOCKING_CODES & NON_RETRYABLE_CODES
    assert ErrorCode.ROUTE_BUSY not in NON_RETRYABLE_CODES


def test_the_public_exit_codes_stay_what_scripts_rely_on() -> None:
    assert (EXIT_FAILED, EXIT_USAGE, EXIT_BLOCKED, EXIT_BUSY) == (1, 2, 3, 4)
    assert {
        ErrorCode.MANUAL_RECONCILIATION_REQUIRED,
        ErrorCode.GUARD_INVALID,
        ErrorCode.QUALITY_REPLAY_UNRESOLVED,
        ErrorCode.TARGET_LOST_COMMITTED_ROWS,
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        ErrorCode.TARGET_NOT_EMPTY,
        ErrorCode.TARGET_CHANGED_DURING_LOAD,
    } == BLOCKING_CODES
    assert ERROR_TABLE[ErrorCode.ROUTE_BUSY].exit_code == EXIT_BUSY


def test_the_readme_names_every_code_that_blocks_a_route_or_means_bad_input() -> None:
    """Scripts are written from the README's exit-code list: a code missing there is a surprise exit 2 or 3."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes of `dpone`", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert {code.value for code in BLOCKING_CODES | USAGE_CODES | {ErrorCode.ROUTE_BUSY}} <= named
