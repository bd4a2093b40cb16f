"""What every pre-arm check reads: the run's manifest, route and ports, and the facts several
checks share (the commits elsewhere, the rows a source holds in a partition).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.partition import PartitionBounds, PlannedPartition
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.runtime.guard.resolution import other_sources_rows
from airflow_provider_dpone.runtime.left_out_rows import DefinitionLookup
from airflow_provider_dpone.runtime.route_family import (
    History,
    RouteFamily,
    committed_by_source,
    other_identity_committed,
    sibling_committed,
)


class CheckContext:
    """What the pre-arm checks of one run of ``route`` (its canonical identity) as ``manifest`` defines it read.

    ``target`` returns the run's one sink (the engine opens it at the first call and closes it when the run
    ends); ``notice`` records a fact about a run that goes on; ``definitions`` reads the route's kept read
    definitions by query hash (``left_out_rows``; None: none are kept); ``history`` reads every record of one
    partition (the commit under a later failed or resolved attempt; None: no record below the latest is
    known, and only what the latest records say is taken)."""

    def __init__(
        self,
        manifest: Manifest,
        route: RouteIdentity,
        *,
        naming: RouteNaming,
        clock: Clock,
        manifest_ref: str,
        allow_nonempty_target: bool,
        target: Callable[[], Sink],
        notice: Callable[[str], None],
        source: Callable[[], Source] | None = None,
        definitions: DefinitionLookup | None = None,
        history: History | None = None,
    ) -> None:
        self._manifest = manifest
        self._route = route
        self._naming = naming
        self._clock = clock
        self._manifest_ref = manifest_ref
        self._allow_nonempty_target = allow_nonempty_target
        self._target = target
        self._notice = notice
        self._source = source
        self._definitions = definitions
        self._history: History = history if history is not None else (lambda route, partition_id: ())

    def _elsewhere(
        self, family: RouteFamily, planned: Sequence[PlannedPartition]
    ) -> list[PartitionCheckpoint]:
        """The commits of the route under another definition and of its siblings (another strategy): one
        pass over every latest checkpoint of the target, a tenth of a second at 50,000."""
        elsewhere = other_identity_committed(family, planned, self._naming)
        elsewhere.extend(sibling_committed(family, self._naming))
        return elsewhere

    def _still_spelled(self, bounds: PartitionBounds) -> bool:
        """Whether the source delivers one of ``bounds``' listed values byte for byte (no: a source that
        cannot tell, which errs toward the stop)."""
        ask = getattr(self._source() if self._source is not None else None, "delivers_spelling", None)
        return bool(ask(bounds)) if callable(ask) else False

    def _other_sources(self, family: RouteFamily) -> list[PartitionCheckpoint]:
        """Committed checkpoints of other source tables' routes on the target (a fan-in)."""
        return committed_by_source(family.target_wide, self._route.source_table, self._naming)[1]

    def own_rows(self, sink: Sink, bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]) -> int:
        """The target's rows within ``bounds`` less those other source tables committed there (a fan-in;
        the whole count where their share is unknown)."""
        held, theirs = self.held_and_theirs(sink, bounds, others)
        return held if theirs is None or theirs > held else held - theirs

    def held_and_theirs(
        self, sink: Sink, bounds: PartitionBounds, others: Sequence[PartitionCheckpoint]
    ) -> tuple[int, int | None]:
        """The target's rows within ``bounds`` and how many of them other source tables committed (None:
        unknown, see ``other_sources_rows``)."""
        held = sink.count_rows(self._manifest.sink.table, bounds)
        return held, other_sources_rows(self._route, bounds, others) if others and held else 0

    def _other_routes_details(self, hits: Sequence[PartitionCheckpoint]) -> dict[str, object]:
        """The details of a stop over other routes' committed partitions (``hits``) in this run's scope."""
        return {
            "route": self._route.describe(),
            "target_table": self._manifest.sink.table,
            "other_routes": sorted({c.route.describe() for c in hits}),
            "other_committed_partitions": len(hits),
        }


def forced_not_applied(checkpoint: PartitionCheckpoint | None) -> bool:
    """An operator's ``guard resolve --as not-applied --force``: they checked the rows in the bounds are
    another writer's (the resolution recorded the count)."""
    if checkpoint is None:
        return False
    resolution = checkpoint.diagnostics.get("resolution")
    return isinstance(resolution, dict) and resolution.get("forced") is True


def some_labels(partitions: Sequence[PlannedPartition]) -> str:
    """The first three partitions' labels, for a message that names them (``, ...`` when there are more)."""
    return some_bounds_labels([p.bounds for p in partitions])


def some_bounds_labels(bounds: Sequence[PartitionBounds]) -> str:
    """:func:`some_labels` of bare bounds."""
    return ", ".join(b.label for b in bounds[:3]) + (", ..." if len(bounds) > 3 else "")
