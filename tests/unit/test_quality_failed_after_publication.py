"""A required check that fails after its batch was committed is final: Airflow does not retry it.

Without durable replay, the lazy direct path knows the moved rows only while publishing, so a disagreement
is found after the commit. Red before: the error kept ``quality_check_failed``'s retryable row, Airflow
retried, the retry found every partition committed, measured nothing and turned the task green
(``not_checked``). A failure before publication stays retryable: nothing was published, and the retry
measures again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.errors import ErrorCode
from airflow_provider_dpone.contracts.partition import PartitionBounds
from tests.doubles import orders_rows
from tests.quality_replay_rig import Rig, expect_code, quality_manifest, summarize


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def _source_written_during_the_run(rig: Rig) -> None:
    """The source's count, taken before extraction, holds one row more than the read returns."""

    def profile(bounds: Sequence[PartitionBounds], columns: Sequence[str]) -> dict[str, object]:
        rows = [r for r in rig.source.rows if any(str(r[1]) >= (b.lower or "") for b in bounds)]
        counted = summarize(rows, columns)
        return {**counted, "rows": counted["rows"] + 1}

    rig.source.profile = profile  # type: ignore[method-assign,assignment]


def test_a_row_count_that_fails_after_the_commit_is_final_and_its_retry_would_find_nothing(rig: Rig) -> None:
    _source_written_during_the_run(rig)
    manifest = quality_manifest(durable=False)

    err = expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(manifest).run("run-1"))

    assert err.details["published"] is True
    assert err.retry_can_help is False
    retried = rig.engine(manifest).run("run-1")  # what an automatic retry would have done
    assert retried.rows_committed == 0 and retried.quality is not None
    assert retried.quality.verdict == "not_checked"


def test_a_check_that_fails_before_publication_stays_retryable(rig: Rig) -> None:
    manifest = quality_manifest(durable=False, checks=({"type": "unique", "columns": ["order_date"]},))

    err = expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(manifest).run("run-1"))

    assert err.details["published"] is False
    assert err.retry_can_help is True
    assert rig.target_rows() == []
