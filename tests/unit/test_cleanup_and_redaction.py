"""Cleanup never masks the primary failure; streams close before the source; no bound value leaks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.guard import (
    GUARD_KEY,
    GuardInvalid,
    GuardPhase,
    TargetCommitGuard,
    read_guard,
)
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import TableSchema
from tests.doubles import (
    InjectedFault,
    MemoryArtifactStore,
    MemorySource,
    RecordingSink,
    orders_rows,
    transfer_engine,
)


class AbortBreaks(RecordingSink):
    def abort_staged_load(self, staging_table: str) -> None:
        super().abort_staged_load(staging_table)
        raise RuntimeError("abort failed too")


class RemoveBreaks(MemoryArtifactStore):
    def remove(self, ref) -> None:  # type: ignore[no-untyped-def]
        raise OSError("artifact removal failed too")


def test_a_failing_staging_abort_never_replaces_the_target_failure() -> None:
    sink = AbortBreaks(fail_before_mutation=True)
    with pytest.raises(InjectedFault) as caught:
        transfer_engine(sink=sink, load="staged").run("run-1")
    assert "before mutation" in str(caught.value)
    assert "sink.abort_staged_load" in sink.events


def test_a_failing_artifact_removal_never_replaces_the_target_failure() -> None:
    with pytest.raises(InjectedFault):
        transfer_engine(
            sink=RecordingSink(fail_before_mutation=True), artifacts=RemoveBreaks(), export="file_artifact"
        ).run("run-1")


def test_a_failing_cleanup_after_success_is_still_reported() -> None:
    with pytest.raises(OSError):
        transfer_engine(sink=RecordingSink(), artifacts=RemoveBreaks(), export="file_artifact").run("r")


class TrackedSource(MemorySource):
    def __init__(self) -> None:
        super().__init__(orders_rows())
        self.open_streams = 0

    def read(self, partition_id: str, bounds: PartitionBounds, chunk_rows: int) -> Iterator[ColumnChunk]:
        self.open_streams += 1
        try:
            yield from super().read(partition_id, bounds, chunk_rows)
        finally:
            self.open_streams -= 1


class FailsMidStream(RecordingSink):
    def load(
        self, permit: TargetPermit, table: str, schema: TableSchema, chunks: Iterable[ColumnChunk]
    ) -> int:
        next(iter(chunks))
        raise InjectedFault("target broke after the first chunk")


def test_a_failed_lazy_target_call_closes_the_source_stream_before_returning() -> None:
    source = TrackedSource()
    with pytest.raises(InjectedFault) as caught:
        transfer_engine(source=source, sink=FailsMidStream()).run("run-1")
    # the traceback still holds every frame: only an explicit close can have ended the stream
    assert caught.value.__traceback__ is not None
    assert source.open_streams == 0


def test_a_batch_id_with_a_trailing_newline_is_a_malformed_batch_id() -> None:
    guard = TargetCommitGuard.for_phase(GuardPhase.ARMED, "sha256:" + "a" * 64).to_json()
    guard["checkpoint_batch_id"] = "sha256:" + "a" * 64 + "\n"
    at = datetime(2026, 12, 1, tzinfo=timezone.utc)
    checkpoint = PartitionCheckpoint(
        partition_id="p",
        route=RouteIdentity(source_table="a", target_table="d.t", strategy=Strategy.FULL_REFRESH),
        run_id="r",
        status=CheckpointStatus.EXPORTED,
        started_at=at,
        query_hash="q",
        schema_hash="s",
        bounds=PartitionBounds(kind=BoundsKind.ALL, label="all"),
        diagnostics={GUARD_KEY: guard},
    )
    with pytest.raises(GuardInvalid) as caught:
        read_guard(checkpoint)
    assert caught.value.reason == "malformed checkpoint batch id"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_store_errors_never_carry_bound_values(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    from airflow_provider_dpone.adapters.checkpoint_sql.engine import create_store_engine

    url = (
        f"sqlite:///{tmp_path / 's.sqlite'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    engine = create_store_engine(sa.engine.make_url(url))
    with pytest.raises(sa.exc.DBAPIError) as caught, engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO missing_table_dpone VALUES (:v)"), {"v": "bound-source-value-2026"})
    assert "bound-source-value-2026" not in str(caught.value)
    engine.dispose()
