"""A new run's ID is one printable line: it is recorded in every checkpoint and printed in every report.

Found trying it: ``dpone run --run-id $'x\\nerror: forged line'`` ran, and its own output then held an
``error:`` line the run never raised (task logs and scripts read those lines). IDs of up to 250 printable
characters (Airflow's own limit) are taken as they are, Unicode included.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.compose import RUN_ID_MAX_CHARS, require_printable_run_id
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

PRINTABLE = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")),
    min_size=1,
    max_size=RUN_ID_MAX_CHARS,
)


@given(PRINTABLE)
def test_a_printable_line_is_a_run_id(run_id: str) -> None:
    require_printable_run_id(run_id)


@given(PRINTABLE, st.sampled_from(["\n", "\r", "\t", "\x00", "\x1b", "\u2028", "\x85"]), st.integers(0, 250))
def test_a_control_character_anywhere_is_refused(run_id: str, control: str, at: int) -> None:
    at = min(at, len(run_id))
    with pytest.raises(DponeError) as refused:
        require_printable_run_id(run_id[:at] + control + run_id[at:])
    assert refused.value.code is ErrorCode.USAGE


@pytest.mark.parametrize(
    "run_id",
    ["scheduled__2026-12-05T00:00:00+00:00", "manual__2026-12-05T23:06:04.514017Z", "nächtlich 東京"],
)
def test_airflow_and_cli_run_ids_are_accepted(run_id: str) -> None:
    require_printable_run_id(run_id)


@pytest.mark.parametrize("run_id", ["", "   ", "x" * (RUN_ID_MAX_CHARS + 1)])
def test_an_empty_or_overlong_run_id_is_refused(run_id: str) -> None:
    with pytest.raises(DponeError) as refused:
        require_printable_run_id(run_id)
    assert refused.value.code is ErrorCode.USAGE
