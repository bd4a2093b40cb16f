"""Where a run's rows come from: the source's reads, run ahead of the target, or the files an export wrote.

Every read of a run goes through here, so how far ahead of the target it reads (``READ_AHEAD_CHUNKS``), how
many partitions read at once (``ConcurrentSource``) and how counting, progress and stop requests follow the
rows are decided in one place, whichever path (``direct``/``staged`` x ``lazy_plan``/``file_artifact``) runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Sequence

from airflow_provider_dpone.contracts.artifact import ArtifactRef
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.ports.artifacts import ArtifactStore
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.cancellation import CancellationToken
from airflow_provider_dpone.runtime.chunk_stream import StreamTally, in_flight_from
from airflow_provider_dpone.runtime.cleanup import cleanup
from airflow_provider_dpone.runtime.guard.commit_lifecycle import ActivePartition
from airflow_provider_dpone.runtime.progress import ProgressListener
from airflow_provider_dpone.runtime.read_ahead import PartitionReads

#: Chunks a reading thread may hold ready per partition while the target takes one (``runtime.read_ahead``).
#: One: 5M-row peak RSS 549 MB (2: 575 MB) for the same speed; the memory target is 1.2x the 1M peak.
READ_AHEAD_CHUNKS = 1


class RunReads:
    """The reads of one run's active partitions, in ``chunk_rows`` chunks (see the module)."""

    def __init__(
        self,
        source: Source,
        artifacts: ArtifactStore | None,
        *,
        chunk_rows: int,
        cancellation: CancellationToken,
        progress: ProgressListener,
    ) -> None:
        self._source = source
        self._artifacts = artifacts
        self._chunk_rows = chunk_rows
        self._cancellation = cancellation
        self._progress = progress

    def require_artifacts(self) -> ArtifactStore:
        if self._artifacts is None:
            raise DponeError(ErrorCode.USAGE, "the file_artifact export path needs an artifact directory")
        return self._artifacts

    def chunks(
        self, active: Sequence[ActivePartition], artifacts: Sequence[ArtifactRef], tally: StreamTally
    ) -> Generator[ColumnChunk, None, None]:
        """Every active partition's rows, from artifacts when exported, else straight from the source.

        The partitions are read ahead of the target (:meth:`_reads`). Counting, progress and stop requests
        stay in the consumer's thread, as the chunks reach the target. Leaving the stream (the load ended,
        failed or was stopped) stops the threads and closes every open read before the run goes on, so no
        source generator is left for the garbage collector to finalize after the source is closed.
        """
        if artifacts:
            store = self.require_artifacts()
            by_id = {ref.partition_id: ref for ref in artifacts}
            opens = [
                functools.partial(store.read, by_id[p.planned.partition_id], self._chunk_rows) for p in active
            ]
            reads = PartitionReads(opens, workers=1, depth=READ_AHEAD_CHUNKS, clock=tally.monotonic)
        else:
            reads = self._reads(active, tally.monotonic)
        with reads:
            for index, p in enumerate(active):
                planned = p.planned
                yield from tally.counted(
                    planned.partition_id,
                    planned.bounds.label,
                    reads.chunks(index),
                    self._progress,
                    opened=functools.partial(reads.opened_at, index),
                )

    def export_artifacts(
        self, schema: TableSchema, active: list[ActivePartition], tally: StreamTally
    ) -> list[ArtifactRef]:
        """Each partition written to its file, the next partitions read meanwhile (:meth:`_reads`). When the
        export fails or stops, the files it wrote are removed (best effort) before the error goes on."""
        store = self.require_artifacts()
        refs: list[ArtifactRef] = []
        monotonic = tally.monotonic
        try:
            with self._reads(active, monotonic) as reads:
                for index, part in enumerate(active):
                    planned = part.planned
                    exporting = monotonic()
                    chunks = self._cancellation.checked(reads.chunks(index))
                    ref = store.write(planned.partition_id, schema, chunks)
                    began = in_flight_from(exporting, reads.opened_at(index))
                    tally.add_seconds(planned.partition_id, monotonic() - began)
                    refs.append(ref)
                    part.rows = ref.rows
                    part.bytes = ref.bytes
                    part.evidence["artifact_sha256"] = ref.artifact_sha256
        except BaseException:
            self.remove_artifacts(refs, failing=True)
            raise
        return refs

    def remove_artifacts(self, refs: Sequence[ArtifactRef], *, failing: bool) -> None:
        """Remove the files of ``refs`` (none without an artifact store); while an error propagates
        (``failing``), a removal that fails is logged, never raised in its place."""
        store = self._artifacts
        if store is None:
            return
        for ref in refs:
            cleanup(failing, "artifact removal", functools.partial(store.remove, ref))

    def _reads(
        self, active: Sequence[ActivePartition], clock: Callable[[], float]
    ) -> PartitionReads[ColumnChunk]:
        """The source reads of ``active``, run ahead by reading threads (``runtime.read_ahead``): one, or as
        many as the source allows for these partitions (``ConcurrentSource``). N reads each take chunks of
        ``chunk_rows / N`` rows: the rows waiting ahead of the target stay what one read holds."""
        source = self._source
        workers = 1
        concurrent_reads = getattr(source, "concurrent_reads", None)
        if callable(concurrent_reads):
            workers = max(1, concurrent_reads([p.planned.bounds for p in active]))
        chunk_rows = max(1, self._chunk_rows // workers)
        opens = [
            functools.partial(source.read, p.planned.partition_id, p.planned.bounds, chunk_rows)
            for p in active
        ]
        return PartitionReads(opens, workers=workers, depth=READ_AHEAD_CHUNKS, clock=clock)
