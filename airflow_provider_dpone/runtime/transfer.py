"""One run of a route, in the order of ARCHITECTURE.md section 3.

    route guard scan -> capsule scan / durable replay resume -> plan + resume decisions
    -> quality preparation (policy, reader plan, capacity, spawn proof, source probe)
    -> pre-target work (extract / stage, staged probe, pre-publication verdict, sealed core) -> arm
    -> target mutation -> committed promotion -> evidence -> source state
    -> durable quality replay (opt-in: TARGET_PENDING -> bounded reader -> COMPLETE -> release)

The four execution paths combine how rows leave the source (``file_artifact``: local files first;
``lazy_plan``: streamed inside the target call) with how they enter the target (``direct``: ``load()``;
``staged``: staging table first, then ``finalize_staged_load()``). All four go through the same lifecycle.

Nothing between the route guard scan and the capsule scan touches the source: a retry whose capsule is
COMPLETE succeeds from the capsule alone, and an unresolved capsule of the route stops every other run
before any source or target I/O, whatever ``durable_quality_replay`` says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, assert_never

from airflow_provider_dpone.contracts.artifact import ArtifactRef
from airflow_provider_dpone.contracts.capsule import ProbeScope, SealedCore
from airflow_provider_dpone.contracts.checkpoint import CheckpointStatus, PartitionCheckpoint
from airflow_provider_dpone.contracts.chunk import ColumnChunk
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import ExportPath, LoadPath, Manifest, PartitionKind
from airflow_provider_dpone.contracts.partition import (
    BoundsKind,
    PartitionBounds,
    PlannedPartition,
    partition_id_for,
)
from airflow_provider_dpone.contracts.permit import TargetPermit
from airflow_provider_dpone.contracts.read_definition import ReadDefinition
from airflow_provider_dpone.contracts.report import NOTICE_LOGGER, QualitySummary, RunReport
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.contracts.target_observation import TargetReadRequest
from airflow_provider_dpone.ports.artifacts import ArtifactStore
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore, SourceStateStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.route_lease import LeaseHold
from airflow_provider_dpone.ports.route_naming import RawRouteNaming, RouteNaming
from airflow_provider_dpone.ports.sink import SettledCountingSink, Sink, StagedSink
from airflow_provider_dpone.ports.source import Source, ValuesUnproven
from airflow_provider_dpone.runtime import cursor_mark, empty_source
from airflow_provider_dpone.runtime.cancellation import CancellationToken
from airflow_provider_dpone.runtime.causal_clock import CausalClock
from airflow_provider_dpone.runtime.chunk_stream import StreamTally
from airflow_provider_dpone.runtime.cleanup import cleanup
from airflow_provider_dpone.runtime.collector import collector_paused
from airflow_provider_dpone.runtime.connection_binding import (
    ConnectionBinding,
    require_bound_connections,
    siblings_of,
)
from airflow_provider_dpone.runtime.guard.batch_id import checkpoint_batch_id
from airflow_provider_dpone.runtime.guard.commit_lifecycle import ActivePartition, TargetCommitLifecycle
from airflow_provider_dpone.runtime.guard.route_guard import require_clear_route
from airflow_provider_dpone.runtime.key_fingerprint import (
    KeyChecks,
    check_keys,
    key_audit,
    refuse_other_keys,
    refuse_unverified_keys,
    route_key_candidates,
)
from airflow_provider_dpone.runtime.lookback_shortfall import shrunk_by_lookback, shrunk_notice
from airflow_provider_dpone.runtime.lost_rows import replayed_as_skipped
from airflow_provider_dpone.runtime.null_free import schema_for_target
from airflow_provider_dpone.runtime.partition_column import require_partition_column_written
from airflow_provider_dpone.runtime.pre_arm_checks import PreArmChecks, some_labels
from airflow_provider_dpone.runtime.progress import BestEffortProgress, ProgressListener, SilentProgress
from airflow_provider_dpone.runtime.quality.gate import QualityGate
from airflow_provider_dpone.runtime.quality.policy import build_policy
from airflow_provider_dpone.runtime.quality.verdict import Verdict
from airflow_provider_dpone.runtime.replay.durable import (
    DurableReplay,
    Fresh,
    ObserveAgain,
    Replayed,
    ReplayPorts,
)
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY, RefInvalid, read_ref
from airflow_provider_dpone.runtime.replay.scan import (
    CapsuleStores,
    OperationRecord,
    require_clear_capsules,
    scan_capsules,
)
from airflow_provider_dpone.runtime.resume_planner import (
    Action,
    Reason,
    ResumeDecision,
    committed_empty,
    is_settled,
    plan_resume,
    settled_cutoff,
    takes_a_slot,
)
from airflow_provider_dpone.runtime.route_family import (
    RouteFamily,
    capsule_scope,
    committed_by_source,
    latest_by_partition,
    load_family,
    other_identity_replacing,
    sibling_committed,
    with_standing_commits,
)
from airflow_provider_dpone.runtime.route_identity import (
    AdoptionCount,
    IdentityOverlap,
    RebaselineRequest,
)
from airflow_provider_dpone.runtime.run_reads import RunReads
from airflow_provider_dpone.runtime.run_report import capsule_report, quality_summary, run_report
from airflow_provider_dpone.runtime.source_binding import (
    SOURCE_KEY,
    TARGET_KEY,
    TARGET_PLACE_KEY,
    connection_reference,
    record_move,
    record_source_move,
    refuse_other_count,
    refuse_unproven_file,
    source_reference,
)
from airflow_provider_dpone.runtime.superseded import could_supersede, rerun_superseded
from airflow_provider_dpone.runtime.target_binding import same_target
from airflow_provider_dpone.runtime.target_counts import TargetCounts
from airflow_provider_dpone.runtime.vanished import (
    as_planned,
    bounds_order,
    rolled_out_within_reach,
    units_of_other_definitions,
    vanished_committed,
)

_notices_log = logging.getLogger(NOTICE_LOGGER)
log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: How many partitions the source no longer plans one run counts on the target (``_still_held``): the first
#: run after a months -> days edit counts every day of the old months in reach (a year of days is 366).
_MAX_UNITS_COUNTED = 400
#: How many units of earlier definitions' commits one run lists at most (an old integer range split into a
#: much smaller size): far more than it may count.
_MAX_UNITS_LISTED = 10_000

#: Called just before arming with the rows extracted (None on the lazy direct path) and the staging table.
BeforeArm = Callable[[int | None, str | None], None]


@dataclass
class TransferPorts:
    """Everything a run needs, already composed. The sink is opened lazily, after the guard scan."""

    store: CheckpointStore
    source: Source
    open_sink: Callable[[], Sink]
    clock: Clock
    artifacts: ArtifactStore | None = None
    source_state: SourceStateStore | None = None
    #: The capsule and reader-guard stores, opened only when a checkpoint references a capsule.
    capsule_stores: Callable[[], CapsuleStores] | None = None
    #: Required when ``sink.options.durable_quality_replay`` is on.
    replay: ReplayPorts | None = None
    #: Canonical route names; the default keeps names as written (tests without a source adapter).
    naming: RouteNaming = field(default_factory=RawRouteNaming)
    #: A stop request (Airflow's on_kill): honoured at the next chunk and before arming.
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    #: The source connection's name (or inline URI, its path resolved) the run reads; checkpoints record
    #: it (a URI's digest) and a route last committed from another one stops (``runtime.source_binding``).
    #: None: not recorded.
    source_connection: str | None = None
    #: What releases before the resolved form recorded of this connection, where that differs: an inline
    #: URI as written, or the bare name of one with a relative or ``~`` path; taken as it only where it
    #: names one file (``source_binding.names_its_file``), else the route stops once.
    source_connection_as_written: str | None = None
    #: The target (sink) connection's name (or inline URI, its folder resolved) the run writes through;
    #: checkpoints record it and a route last committed through another one stops
    #: (``runtime.target_binding``). None: not recorded.
    target_connection: str | None = None
    #: Where that connection leads (a digest of its interface, host, port and database, or its chDB
    #: folder): another connection name to the same place is the same target. None: not recorded.
    target_place: str | None = None
    #: The run's hold on its target's lease, proven still held right before arming (a database session
    #: can end under a live run, and a second run may then take the lease). None: nothing to prove.
    lease: LeaseHold | None = None


@dataclass
class _QualityRun:
    """What quality preparation hands the later phases of one run."""

    gate: QualityGate | None
    bounds: list[PartitionBounds]
    batch_id: str
    staged: bool
    stored_core: SealedCore | None
    plan: TargetReadRequest | None = None
    before_publication: list[Verdict] = field(default_factory=list)


@dataclass
class _Preparation:
    """What must precede the target's first write: ``prepare`` (the target table, the PLANNED records) and
    the value audit, unless deferred to the pre-arm reads (``audit``, see ``TransferEngine._audit_values``).
    A failure of either leaves no ``failed_before_target`` record (``quiet``), as before either could run
    later: a refused value or target is a user error found before anything was written to the target."""

    prepare: Callable[[], None]
    audit: Callable[[], None] | None = None
    prepared: bool = False
    quiet: bool = False

    def prepare_target(self) -> None:
        self._quietly(self.prepare)
        self.prepared = True

    def decide(self) -> None:
        """The deferred audit, now: it refuses the value (``quiet``), or the reads go on without proving."""
        audit, self.audit = self.audit, None
        if audit is not None:
            self._quietly(audit)

    def _quietly(self, step: Callable[[], None]) -> None:
        try:
            step()
        except BaseException:
            self.quiet = True
            raise


class TransferEngine:
    def __init__(
        self,
        manifest: Manifest,
        ports: TransferPorts,
        *,
        manifest_ref: str,
        progress: ProgressListener | None = None,
        identity: str | None = None,
        allow_nonempty_target: bool = False,
    ) -> None:
        self._manifest = manifest
        self._identity = identity
        self._allow_nonempty_target = allow_nonempty_target
        #: the run's sink, opened by its first pre-arm check and closed when the publish ends (``_target``)
        self._run_sink: Sink | None = None
        #: other source tables' commits into the target (a fan-in), read once for ``count_target``
        self._other_sources: list[PartitionCheckpoint] | None = None
        self._notices: list[str] = []
        #: whether the store keeps this run's read definition (None: not asked yet; ``_kept_definitions``)
        self._definition_kept: bool | None = None
        #: record times after every record the run read (``_guard_scan``), whatever this worker's clock says
        self._clock = CausalClock.over(ports.clock)
        ports = dataclasses.replace(ports, clock=self._clock)
        self._ports = ports
        self._manifest_ref = manifest_ref
        self._progress: ProgressListener = (
            SilentProgress() if progress is None else BestEffortProgress(progress)
        )
        self._reads = RunReads(
            ports.source,
            ports.artifacts,
            chunk_rows=manifest.source.chunk_rows,
            cancellation=ports.cancellation,
            progress=self._progress,
        )
        self._route = ports.naming.canonical(manifest.route())
        self._checks = PreArmChecks(
            manifest,
            self._route,
            naming=ports.naming,
            clock=ports.clock,
            manifest_ref=manifest_ref,
            allow_nonempty_target=allow_nonempty_target,
            target=self._target,
            notice=self._notice,
            source=lambda: self._ports.source,
            definitions=self._kept_definitions,
            history=lambda route, partition_id: self._ports.store.history(route, partition_id),
        )
        self._same_columns: frozenset[str] = frozenset()
        self._lacking: tuple[str, ...] | None = None
        self._durable = manifest.sink.options.durable_quality_replay
        self._policy = build_policy(manifest.quality, durable=self._durable)
        self._replay: DurableReplay | None = None
        if self._durable:
            if ports.replay is None or identity is None:
                raise DponeError(
                    ErrorCode.USAGE,
                    "durable_quality_replay needs capsule stores, a target reader and the manifest identity; "
                    "build the runtime through airflow_provider_dpone.compose",
                )
            self._replay = DurableReplay(
                ports.replay,
                clock=ports.clock,
                route=self._route,
                identity=identity,
                target_table=manifest.sink.table,
                manifest_ref=manifest_ref,
            )

    @property
    def route(self) -> RouteIdentity:
        """The canonical route this engine runs."""
        return self._route

    # -- planning ----------------------------------------------------------------------------------

    def identity_overlaps(self, run_id: str) -> list[IdentityOverlap]:
        """For ``dpone guard rebaseline``: partitions to move that overlap ones of another identity.

        The same guard scan and plan as a run (read-only: source schema and partitions, checkpoints). Only
        an append route is recorded this way: a replacing route moves its new partitions itself, and
        recording them as committed would keep the old definition's rows in their bounds for good."""
        if self._route.strategy is not Strategy.INCREMENTAL_APPEND:
            raise DponeError(
                ErrorCode.USAGE,
                f"route {self._route.describe()} is {self._route.strategy.value}: it replaces what it writes, so "
                "a changed definition needs no rebaseline (its next run moves the new partitions and says so); "
                "recording them as committed could keep the old definition's rows in the target. Run "
                f"`dpone run {self._manifest_ref}` instead",
                details={"route": self._route.describe(), "strategy": self._route.strategy.value},
            )
        family = self._scan_route()
        schema, decisions, _ = self._plan_from(family, run_id)
        with self._releasing_target():
            describe = getattr(self._target(), "target_schema", None)
            target = describe(self._manifest.sink.table) if callable(describe) else None
            # what the old definition wrote is known only by its hash: this schema read another way, or the
            # target's own columns (no column was added to it, or retyped, after those rows were loaded),
            # once the target holds this schema's columns: before its ALTER it still matches the old one
            self._same_columns = schema.hashes_up_to_nullability() | (
                target.hashes_up_to_nullability()
                if isinstance(target, TableSchema) and holds_columns_of(target, schema)
                else frozenset()
            )
            # what a schema-checked rebaseline cannot have checked: a column the target does not have yet
            # (None: the sink cannot describe its target; no table: it lacks every column)
            known = target.names if isinstance(target, TableSchema) else () if callable(describe) else None
            self._lacking = None if known is None else tuple(n for n in schema.names if n not in known)
            return self._checks.append_overlaps(family, decisions)

    def columns_unchanged(self, schema_hash: str) -> bool:
        """Whether a committed partition's schema hash is the planned schema's, or the target table's own
        columns', up to nullability (after :meth:`identity_overlaps`): its rows hold a value of every column
        this definition writes, written by a run, not a default filled in by ``ADD COLUMN``."""
        return schema_hash in self._same_columns

    def columns_missing_from_target(self) -> tuple[str, ...] | None:
        """The columns this definition writes that the target table lacks (after :meth:`identity_overlaps`;
        every column where the table does not exist), or None where the sink cannot describe its target."""
        return self._lacking

    def count_source_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """Rows the source holds now within each of ``bounds``, in order (read-only, grouped)."""
        return self._ports.source.count_partitions(bounds) if bounds else []

    def count_target(self, bounds: PartitionBounds) -> int | None:
        """Rows of this route's source table the target may hold within ``bounds`` (read-only; 0 when it
        does not exist): the table's rows there less those other source tables committed (a fan-in; the
        whole count where their share is unknown). A rebaseline compared the whole count with this source's
        and kept every day of a fan-in blocked; its printed fix then deleted the other source's rows.
        ``None`` where the target table lacks the column the bounds select by (``target_counts``)."""
        others = self._other_sources_of()
        sink = self._ports.open_sink()
        try:
            if TargetCounts(sink, self._manifest.sink.table).lacks_column_of(bounds):
                return None
            return self._checks.own_rows(sink, bounds, others)
        finally:
            sink.close()

    def _other_sources_of(self, family: RouteFamily | None = None) -> list[PartitionCheckpoint]:
        """Other source tables' committed checkpoints on the target (a fan-in), read once: from ``family``,
        or a read-only guard scan."""
        if self._other_sources is None:
            scanned = family if family is not None else self._guard_scan()
            _, self._other_sources = committed_by_source(
                scanned.target_wide, self._route.source_table, self._ports.naming
            )
        return self._other_sources

    def views_fed_by_target(self) -> list[str]:
        """The views an insert into the target feeds (read-only; ``[]`` when the sink cannot tell)."""
        sink = self._ports.open_sink()
        try:
            listing = getattr(sink, "views_fed_by", None)
            return list(listing(self._manifest.sink.table)) if callable(listing) else []
        finally:
            sink.close()

    def _still_filling_in_target(self, partition: PlannedPartition) -> DponeError:
        """``--adopt-target`` of an append route over a partition ``settle`` still holds open while the target
        holds this route's rows of it."""
        return DponeError(
            ErrorCode.USAGE,
            f"route {self._route.describe()}: partition {partition.bounds.label} is still filling "
            f"(source.partitioning.settle: {self._manifest.source.partitioning.settle}) and target table "
            f"{self._manifest.sink.table} holds rows of it: adopted now, the rows that reach the source "
            "before it settles would never be moved; nothing was recorded",
            details={"route": self._route.describe(), "partition_id": partition.partition_id},
            hint_lines=(
                "nothing was recorded; either",
                "  wait until that partition has settled, then run the same rebaseline --adopt-target again,",
                "  or, to adopt now: delete this route's rows of that partition from the target table (the "
                "first run after it has settled moves it whole), then run the same rebaseline --adopt-target",
                "see `dpone runbook guard`, 'An empty checkpoint store in front of a non-empty target'",
            ),
        )

    def adoption_counts(self, run_id: str) -> list[AdoptionCount]:
        """For ``dpone guard rebaseline --adopt-target``: (partition, source rows, target rows) of a route
        with no checkpoint at all. Read-only counts on both sides; refused when the route has checkpoints.
        In a fan-in the target's rows are counted less those other source tables committed there: the whole
        count adopted another source's rows as this route's (a new route beside a committed one, equal
        counts: its rows were never moved, exit 0); where their share is unknown, the partition cannot be
        adopted (``others_unknown``)."""
        family = self._scan_route()
        if family.own:
            raise DponeError(
                ErrorCode.USAGE,
                f"route {self._route.describe()} has checkpoints: --adopt-target is for a route the checkpoint "
                "store does not know (a lost or new store); use `dpone guard rebaseline` without it",
            )
        _, decisions, _ = self._plan_from(family, run_id)
        others = self._other_sources_of(family)
        sink = self._ports.open_sink()
        try:
            if isinstance(sink, SettledCountingSink):
                # seen: a day an owner's delete was still removing was adopted at its old count; once the
                # delete ended the run skipped it, 20 of 50 rows missing, exit 0
                sink.require_no_pending_mutation(self._manifest.sink.table)
            counts = []
            for d in decisions:
                bounds = d.partition.bounds
                held, theirs = self._checks.held_and_theirs(sink, bounds, others)
                if d.reason is Reason.OPEN_PARTITION:
                    # still filling by ``settle``: adopted at today's count, its late rows never moved (seen:
                    # exit 0, the late row lost). Left to a run: a replacing one replaces it once settled; an
                    # append one moves it whole where the target holds none of this route's rows of it, and
                    # would stop in front of them otherwise (other routes' rows of a fan-in are theirs)
                    own = held > 0 and (theirs is None or held - theirs > 0)
                    if own and self._route.strategy is Strategy.INCREMENTAL_APPEND:
                        raise self._still_filling_in_target(d.partition)
                    continue
                counts.append(
                    AdoptionCount(
                        partition=d.partition,
                        source_rows=self._ports.source.count(bounds),
                        target_rows=held if theirs is None or theirs > held else held - theirs,
                        # more than the table holds: some of their rows are gone, so whose these are is unknown
                        others_unknown=theirs is None or theirs > held,
                        others_rows=theirs if theirs is not None and theirs <= held else 0,
                    )
                )
            return counts
        finally:
            sink.close()

    def _scan_route(self) -> RouteFamily:
        """The guard scan over every route writing the target table, before anything else of the run."""
        family = self._guard_scan()
        binding = ConnectionBinding(
            source=self._ports.source_connection,
            source_as_written=self._ports.source_connection_as_written,
            target=self._ports.target_connection,
            target_place=self._ports.target_place,
        )
        if binding.source is None and binding.target is None:
            return family
        require_bound_connections(family, binding, self._manifest_ref, self._ports.naming)
        return family

    def _guard_scan(self) -> RouteFamily:
        with collector_paused():  # every latest checkpoint becomes a model: see runtime/collector.py
            family = load_family(self._ports.store, self._route, self._ports.naming)
            self._clock.after(family.target_wide)
            require_clear_route(self._route, family.target_wide, self._manifest_ref)
        return family

    def _target(self) -> Sink:
        """The run's one sink, opened at its first use: the pre-arm checks and the publish share it (an
        embedded target's client costs ~45 ms to open; a daily run opened three)."""
        if self._run_sink is None:
            self._run_sink = self._ports.open_sink()
        return self._run_sink

    @contextlib.contextmanager
    def _releasing_target(self) -> Iterator[None]:
        """Close the run's sink on leaving (an embedded path is held by one process at a time: before any
        reader). While an error propagates, a failing close is logged: the error stays the run's own."""
        failing = True
        try:
            yield
            failing = False
        finally:
            cleanup(failing, "closing the target client", self._release_target)

    def _release_target(self) -> None:
        sink, self._run_sink = self._run_sink, None
        if sink is not None:
            sink.close()

    def _siblings(self, family: RouteFamily) -> list[PartitionCheckpoint]:
        return siblings_of(family, self._ports.naming)

    def filling_notice(self, records: Sequence[PartitionCheckpoint]) -> str | None:
        """For ``dpone guard rebaseline``: the notice a run gives when it commits partitions that may still
        be filling, for the records the rebaseline writes (a still-filling month recorded committed is never
        moved again either)."""
        decisions = [ResumeDecision(as_planned(r), Action.RUN, Reason.MISSING_CHECKPOINT) for r in records]
        return self._checks.what_may_still_fill(decisions, verb="this rebaseline records as committed")

    def naming_the_connections(
        self, records: Sequence[PartitionCheckpoint]
    ) -> tuple[PartitionCheckpoint, ...]:
        """``records`` (a rebaseline's or an adoption's COMMITTED ones) naming this run's source and target
        connections, as a run's own commits do: from then on a run through another connection stops."""
        evidence = self._connection_evidence()
        return tuple(r.model_copy(update={"diagnostics": {**r.diagnostics, **evidence}}) for r in records)

    def _connection_evidence(self) -> dict[str, object]:
        """What every checkpoint of the run records of its source and target connections."""
        evidence: dict[str, object] = {}
        if self._ports.source_connection is not None:
            evidence[SOURCE_KEY] = source_reference(self._ports.source_connection)
        if self._ports.target_connection is not None:
            evidence[TARGET_KEY] = connection_reference(self._ports.target_connection)
        if self._ports.target_place is not None:
            evidence[TARGET_PLACE_KEY] = self._ports.target_place
        return evidence

    def record_source_move(
        self, run_id: str, request: RebaselineRequest, *, force: bool = False
    ) -> PartitionCheckpoint:
        """For ``dpone guard rebaseline --source-moved``: the audited record naming this run's source
        connection (the guard scan first: a blocked route is resolved before anything is recorded), with
        the source's row count now within the copied partition and the key comparison of every committed
        partition (``runtime.key_fingerprint``, read-only on both sides): refused where keys differ behind
        equal counts, unless ``force``."""
        connection = self._ports.source_connection
        if connection is None:
            raise DponeError(ErrorCode.USAGE, "this runtime records no source connection")
        family = self._guard_scan()
        siblings = self._siblings(family)
        moved = record_source_move(
            self._route,
            family.canonical_checkpoints(),
            source_reference(connection),
            run_id,
            self._ports.clock,
            request,
            count_source=self._ports.source.count,
            siblings=siblings,
        )
        committed = [*(c for c in family.own if c.status is CheckpointStatus.COMMITTED), *siblings]
        checks = self._key_checks(committed)
        if not force:
            refuse_other_keys(self._route, checks, committed, self._manifest_ref)
            refuse_unverified_keys(self._route, checks, committed, self._manifest_ref)
            if checks.unusable is not None:  # no key to compare: counts are all that can tell the file
                refuse_unproven_file(
                    self._route,
                    family.canonical_checkpoints(),
                    siblings,
                    self._ports.source_connection_as_written,
                    checks.unusable,
                    self._manifest_ref,
                )
                refuse_other_count(self._route, moved, checks.unusable, self._manifest_ref)
        audit = moved.diagnostics.get("rebaseline")
        audited = {**(audit if isinstance(audit, dict) else {}), **key_audit(checks, committed)}
        return moved.model_copy(update={"diagnostics": {**moved.diagnostics, "rebaseline": audited}})

    def _key_checks(self, committed: Sequence[PartitionCheckpoint]) -> KeyChecks:
        """The key comparison of ``committed`` between the source and the target (read-only)."""
        sink = self._ports.open_sink()
        try:
            candidates = route_key_candidates(self._manifest)
            return check_keys(committed, self._ports.source, sink, self._manifest.sink.table, candidates)
        finally:
            sink.close()

    def record_target_move(self, run_id: str, request: RebaselineRequest) -> PartitionCheckpoint:
        """For ``dpone guard rebaseline --target-moved``: the audited record naming this run's target
        connection (after the guard scan), with the target's rows now within the copied partition
        (read-only)."""
        connection = self._ports.target_connection
        if connection is None:
            raise DponeError(ErrorCode.USAGE, "this runtime records no target connection")
        family = self._guard_scan()
        reference, place = connection_reference(connection), self._ports.target_place
        return record_move(
            "target",
            self._route,
            family.canonical_checkpoints(),
            reference,
            run_id,
            self._ports.clock,
            request,
            self.count_target,
            self._siblings(family),
            also={} if place is None else {TARGET_PLACE_KEY: place},
            unmoved=lambda newest: same_target(newest, reference, place),
        )

    def _plan_from(
        self, family: RouteFamily, run_id: str
    ) -> tuple[TableSchema, list[ResumeDecision], dict[str, PartitionCheckpoint]]:
        """Schema, resume decisions, and the stored checkpoint each decision was taken from.

        The collector is paused from the source's planning on: a long route plans tens of thousands of
        partitions, and with the collector running, building their models took several times as long.
        """
        with collector_paused():
            return self._plan_unpaused(family, run_id)

    def _say_unlisted_values_stay(self, family: RouteFamily, planned: Sequence[PlannedPartition]) -> None:
        """A ``replace_partition`` list route whose manifest dropped a value it committed says that value's
        rows stay in the target as they were: no run replaces them any more (seen: a value taken out of
        ``values`` while some of its rows moved to a listed one: those rows twice in the target, exit 0, no
        word). Nothing is deleted: dropping a value may as well mean "keep what was loaded"."""
        listed = {v for p in planned for v in p.bounds.values or ()}
        column = self._manifest.source.partitioning.column
        dropped = sorted(
            {
                v
                for c in family.canonical_checkpoints()
                if c.status is CheckpointStatus.COMMITTED
                and c.rows
                and c.bounds.kind is BoundsKind.VALUES
                and (c.bounds.column or "").casefold() == (column or "").casefold()
                for v in c.bounds.values or ()
                if v not in listed
            }
        )
        if dropped:
            shown = ", ".join(repr(v) for v in dropped[:3]) + (" ..." if len(dropped) > 3 else "")
            self._notice(
                f"{len(dropped)} value(s) of column {column!r} that route {self._route.describe()} committed are no "
                f"longer in source.partitioning.values ({shown}): their rows stay in target table "
                f"{self._manifest.sink.table} as they were loaded, and no run replaces them; delete them there if "
                "they should go (rows of theirs that moved to a listed value are in the target twice until then)"
            )

    def _plan_unpaused(
        self, family: RouteFamily, run_id: str
    ) -> tuple[TableSchema, list[ResumeDecision], dict[str, PartitionCheckpoint]]:
        source = self._ports.source
        schema = source.describe()
        require_partition_column_written(self._manifest, schema)
        query_hash = source.query_hash()
        schema_hash = schema.schema_hash()
        planned = [self._planned(bounds, query_hash, schema_hash) for bounds in source.plan_partitions()]
        partitioning = self._manifest.source.partitioning
        vanished: list[PlannedPartition] = []
        gone: list[PlannedPartition] = []
        if self._route.strategy is Strategy.REPLACE_PARTITION and partitioning.kind is PartitionKind.LIST:
            self._say_unlisted_values_stay(family, planned)
        if self._route.strategy is Strategy.REPLACE_PARTITION and partitioning.lookback is not None:
            # a partition's commit stays what the target holds under a later attempt that never reached it
            canonical = with_standing_commits(self._ports.store, family.canonical_checkpoints(), planned)
            gone = vanished_committed(self._route, canonical, planned, query_hash, schema_hash, partitioning)
            vanished = self._still_held(family, canonical, planned, gone, query_hash, schema_hash)
            self._say_rolled_out_kept(
                family,
                rolled_out_within_reach(
                    self._route, canonical, planned, query_hash, schema_hash, partitioning
                ),
            )
            self._say_partly_rewritten_kept(family, canonical, planned, query_hash, schema_hash)
        matched = latest_by_partition(family, [*planned, *gone, *vanished], self._ports.naming)
        decisions = plan_resume(
            planned,
            matched,
            self._route.strategy,
            run_id,
            partitioning=partitioning,
            now=self._clock.wall_now(),  # the worker's own time, never the records' floor: ``causal_clock``
            vanished=vanished,
        )
        if self._route.strategy is Strategy.REPLACE_PARTITION:
            # a replacing record hidden under another definition's failed attempt counts: one read each
            others = other_identity_replacing(
                family,
                [*planned, *gone, *vanished],
                self._ports.naming,
                self._ports.store.history,
                could_supersede(decisions, matched),
            )
            decisions = rerun_superseded(decisions, matched, others)
        return schema, decisions, matched

    def _planned(self, bounds: PartitionBounds, query_hash: str, schema_hash: str) -> PlannedPartition:
        return PlannedPartition(
            partition_id=partition_id_for(self._route, query_hash, schema_hash, bounds),
            bounds=bounds,
            query_hash=query_hash,
            schema_hash=schema_hash,
        )

    def _still_held(
        self,
        family: RouteFamily,
        canonical: Sequence[PartitionCheckpoint],
        planned: Sequence[PlannedPartition],
        gone: Sequence[PlannedPartition],
        query_hash: str,
        schema_hash: str,
    ) -> list[PlannedPartition]:
        """The partitions the source no longer plans that the target still holds rows of: they run beside the
        lookback's N partitions, taking no slot (``resume_planner._look_back``), and are emptied.

        Candidates: this definition's committed partitions the source emptied (``gone``:
        ``vanished_committed``) and the units of an earlier definition's, or a sibling strategy's, commits
        (``vanished.units_of_other_definitions``), newer than the oldest of the N committed partitions the
        lookback moves again (``_look_back``: vanished ones take no slot). Only those the target still holds
        rows of are returned: an emptied one needs nothing (it used to keep a slot for good, so a day the
        source emptied later stayed in the target), nor does a unit that never held a row (a weekend, the rest
        of an old month). Counted on the target newest first, settled only, at most ``_MAX_UNITS_COUNTED``
        counts per run. Beside them, the units holding rows that no planned partition and no recorded commit
        covers (a store restored from an older backup: ``PreArmChecks.unrecorded_rows_in_lookback``, which
        stops the run unless the operator allows them to be emptied)."""
        partitioning = self._manifest.source.partitioning
        count = partitioning.lookback or 0
        if not planned or count < 1:
            return []
        settle = partitioning.settle_delta()
        now = self._clock.wall_now()  # what has settled or begun: the worker's own time (``causal_clock``)
        cutoff = settled_cutoff(now, settle) if settle is not None else None

        # as ``_look_back`` ranks them: one committed with 0 rows runs again and takes no slot
        committed = {
            c.partition_id
            for c in canonical
            if c.status is CheckpointStatus.COMMITTED and not committed_empty(c)
        }
        ranked = sorted(
            (
                bounds_order(p.bounds)
                for p in planned
                if p.partition_id in committed and takes_a_slot(p.bounds, cutoff, now)
            ),
            reverse=True,
        )
        oldest = min(bounds_order(p.bounds) for p in planned)
        floor = max(oldest, ranked[count - 1]) if len(ranked) >= count else oldest
        # this route's history and its siblings': the same source table's commits under another strategy
        # (the route was switched to replace_partition; the runbook advises it for drifted partitions)
        history = [*canonical, *sibling_committed(family, self._ports.naming)]
        above: list[PlannedPartition] = []  # of another query, above every planned partition: kept
        units = units_of_other_definitions(
            self._route, history, [*planned, *gone], query_hash, schema_hash, partitioning, floor, above
        )
        listed = list(itertools.islice(units, _MAX_UNITS_LISTED))
        if next(units, None) is not None:
            self._notice(
                f"route {self._route.describe()}: the commits of an earlier definition split into more than "
                f"{_MAX_UNITS_LISTED} of this partitioning's partitions; only those listed first were counted: "
                f"rows the source deleted in the others, if any, stay in {self._manifest.sink.table}"
            )
        candidates = sorted(
            [p for p in [*gone, *listed] if is_settled(p.bounds, cutoff)],
            key=lambda p: bounds_order(p.bounds),
            reverse=True,
        )
        self._say_newer_days_of_other_queries_kept(family, above)
        floor_partition = min(
            (p for p in planned if bounds_order(p.bounds) >= floor), key=lambda p: bounds_order(p.bounds)
        )
        unrecorded = self._checks.unrecorded_rows_in_lookback(
            family, canonical, planned, floor_partition.bounds, cutoff, _MAX_UNITS_COUNTED
        )
        held = [self._planned(bounds, query_hash, schema_hash) for bounds in unrecorded]
        for counted, candidate in enumerate(candidates):
            if bounds_order(candidate.bounds) < floor:
                break
            if counted == _MAX_UNITS_COUNTED:
                self._notice(
                    f"route {self._route.describe()}: {_MAX_UNITS_COUNTED} partitions the source no longer "
                    f"plans were counted on the target; {candidate.bounds.label} and older ones were not: if "
                    f"the source deleted rows there, they stay in {self._manifest.sink.table} "
                    "(compare the source's and the target's counts there; delete such rows by hand)"
                )
                break
            if self._checks.own_rows(self._target(), candidate.bounds, self._other_sources_of(family)) > 0:
                held.append(candidate)
        return held

    def _held_in_target(
        self, family: RouteFamily, partitions: Sequence[PlannedPartition]
    ) -> list[PlannedPartition]:
        """Those of ``partitions`` the target holds rows of this source table within (one count each)."""
        if not partitions:
            return []
        others = self._other_sources_of(family)
        return [p for p in partitions if self._checks.own_rows(self._target(), p.bounds, others)]

    def _say_rolled_out_kept(self, family: RouteFamily, rolled_out: Sequence[PlannedPartition]) -> None:
        """Committed partitions older than everything the source plans are kept as rolled out of a windowed
        source (``vanished.rolled_out_within_reach``); where the lookback would still reach them and the
        target holds their rows, the run says they may be there twice."""
        held = self._held_in_target(family, rolled_out)
        if held:
            column = self._manifest.source.partitioning.column
            self._notice(
                f"route {self._route.describe()}: {len(held)} committed partition(s) the source no longer holds "
                f"any row of ({some_labels(held)}) are older than every partition it plans, so they are kept in "
                f"{self._manifest.sink.table} as rolled out of a source that keeps a window (a retention job); "
                f"if their rows moved to a newer partition instead (an UPDATE of {column}), the target holds "
                "those rows twice: delete these partitions in the target by hand "
                "(`dpone checkpoints MANIFEST --verify` shows them drifted)"
            )

    def _say_partly_rewritten_kept(
        self,
        family: RouteFamily,
        canonical: Sequence[PartitionCheckpoint],
        planned: Sequence[PlannedPartition],
        query_hash: str,
        schema_hash: str,
    ) -> None:
        """Partitions the source no longer plans whose last attempt an operator resolved ``not-applied`` over
        rows it had partly rewritten (no commit stands there: ``route_family.with_standing_commits``): the
        re-run that answer relies on never comes, so where the target holds rows of them the run says so.
        Seen: a worker killed mid-insert left 260,000 of a day's 300,000 rows, resolved not-applied; the
        source's retention then dropped the day, and it stayed 40,000 rows short, exit 0, no word."""
        planned_ids = {p.partition_id for p in planned}
        left = [
            as_planned(c)
            for c in canonical
            if c.partition_id not in planned_ids
            and c.status is CheckpointStatus.FAILED
            and c.query_hash == query_hash
            and c.schema_hash == schema_hash
            and isinstance(resolution := c.diagnostics.get("resolution"), dict)
            and resolution.get("as") == "not-applied"
        ]
        held = self._held_in_target(family, left[:_MAX_UNITS_COUNTED])
        if held:
            self._notice(
                f"route {self._route.describe()}: {len(held)} partition(s) the source no longer holds "
                f"({some_labels(held)}) were resolved not-applied after an attempt that reached the target, and "
                f"{self._manifest.sink.table} still holds rows there that no commit recorded (a partly rewritten "
                "partition): no run replaces them any more; compare them with a backup and restore or delete "
                "them by hand (`dpone guard inspect` and the runbook's 'Resolve')"
            )

    def _say_newer_days_of_other_queries_kept(
        self, family: RouteFamily, above: Sequence[PlannedPartition]
    ) -> None:
        """Units of commits made under another ``source.query`` above everything the source plans now are
        kept, not emptied (``vanished.units_of_other_definitions``); where the target holds rows of them, the
        run says so: after an edit they may be days the source deleted since, while a query templated per
        run (``{{ ds }}``) just selects other days."""
        held = self._held_in_target(family, above[:_MAX_UNITS_COUNTED])
        if held:
            self._notice(
                f"route {self._route.describe()}: {len(held)} partition(s) newer than every partition the source "
                f"plans now ({some_labels(held)}) were committed under another source.query (or source.columns) "
                f"and {self._manifest.sink.table} still holds their rows: "
                "they are kept (a query templated per run selects other days on each run); if the source deleted "
                "those rows, delete them in the target by hand"
            )

    # -- one run -----------------------------------------------------------------------------------

    def run(self, run_id: str) -> RunReport:
        """One run, in named phases. The composition root holds the target's lease around it
        (``compose.Runtime.run``)."""
        with self._releasing_target():  # a run that stopped before its publish, which closes it itself
            return self._run(run_id)

    def _run(self, run_id: str) -> RunReport:
        started = self._ports.clock.monotonic()
        family = self._scan_route()
        resumed = self._resume_from_capsules(run_id, family, started)
        if isinstance(resumed, RunReport):
            return resumed
        schema, decisions, matched = self._plan_from(family, run_id)
        self._checks.say_the_records_ran_ahead(family)
        evidence = self._connection_evidence()
        active = [
            ActivePartition(d.partition, evidence=dict(evidence)) for d in decisions if d.action is Action.RUN
        ]
        self._progress.plan_ready(len(active), sum(1 for d in decisions if d.reason is Reason.COMMITTED))
        self._checks.require_unchanged_identity(family, decisions)
        self._checks.require_scope_spares_other_sources(family, [a.planned for a in active])
        self._checks.require_replay_measures_this_route_alone(family, [a.planned for a in active])
        unverified = self._unverified(decisions, matched)
        target_rows = self._checks.require_target_holds_committed(
            decisions, matched, moving=bool(active), family=family, count_source=self._count_source_partitions
        )
        if not active:
            self._checks.drop_leftover_staging()
            self._checks.say_the_whole_table_moved_once(decisions)
            if not decisions:
                self._notice_if(
                    empty_source.nothing_planned(
                        self._route, family.own, self._manifest.sink.table, self._manifest_ref
                    )
                )
            if self._route.strategy is Strategy.FULL_REFRESH and decisions:
                # plan_resume skips a full refresh only when this very run ID committed every partition
                self._notice(
                    f"every partition of route {self._route.describe()} was committed by run {run_id}: a "
                    "full refresh run again under the same run ID changes nothing; give each new refresh "
                    "a new run ID (the default of `dpone run`; each Airflow DAG run has its own)"
                )
            return self._report(run_id, decisions, None, {}, started, self._summary(None, None, unverified))

        self._checks.require_no_rows_where_appending(family, decisions, target_rows, matched)
        self._checks.say_what_may_still_fill(decisions)
        self._record_definition()
        quality = self._prepare_quality(run_id, schema, active, stored_core=resumed)
        lifecycle, tally = self._publish(run_id, family, schema, active, quality, held=target_rows)
        self._advance_source_state(run_id, lifecycle, tally)
        self._say_what_the_lookback_found_fewer(decisions, matched, lifecycle.committed)
        self._notice_if(empty_source.refresh_emptied(self._route, tally.rows(), self._manifest.sink.table))
        verdict, operation_id = self._evidence_after_publication(run_id, quality, tally)
        report = self._report(
            run_id,
            decisions,
            lifecycle.batch_id,
            {c.partition_id: c for c in lifecycle.committed},
            started,
            self._summary(verdict, operation_id, unverified),
            seconds=tally.seconds(),
        )
        if verdict is not None:
            # final without durable replay: a retry finds every partition committed, measures nothing and
            # would end green (with it, the retry replays the kept verdict and fails the same way)
            verdict.require_passed(
                self._route.describe(),
                published=True,
                final=self._replay is None,
                hints=("the batch is committed; see the run report and the runbook before re-running",),
            )
        return report

    # -- the phases of one run ---------------------------------------------------------------------

    def _say_what_the_lookback_found_fewer(
        self,
        decisions: Sequence[ResumeDecision],
        matched: Mapping[str, PartitionCheckpoint],
        committed: Sequence[PartitionCheckpoint],
    ) -> None:
        """A lookback partition committed with fewer rows than before: deleted at the source, or moved, maybe
        into a committed partition no run reads again (``lookback_shortfall``)."""
        self._notice_if(
            shrunk_notice(
                self._route,
                self._manifest.source.partitioning.column,
                shrunk_by_lookback(decisions, matched, committed),
                self._manifest.sink.table,
                self._manifest_ref,
            )
        )

    def _kept_definitions(self, query_hashes: Sequence[str]) -> Mapping[str, ReadDefinition]:
        """The route's kept read definitions among ``query_hashes`` (``left_out_rows``), read with this run's
        own in the same statement: :meth:`_record_definition` then knows whether it is kept."""
        current = self._ports.source.query_hash()
        found = self._ports.store.read_definitions(self._route, [*query_hashes, current])
        self._definition_kept = current in found
        return found

    def _record_definition(self) -> None:
        """Before arming a ``replace_partition`` run: keep its read definition in the store unless it is kept
        already (ADR 0090), so a later definition's run can compare the two reads before it replaces what
        this one commits. One read of one key per run (none when the comparison read it), one insert the
        first time; a failure stops the run before the target, like any store failure."""
        if self._route.strategy is not Strategy.REPLACE_PARTITION or self._definition_kept:
            return
        source, store = self._ports.source, self._ports.store
        if self._definition_kept is None:
            current = source.query_hash()
            self._definition_kept = current in store.read_definitions(self._route, [current])
        if not self._definition_kept:
            store.record_definition(self._route, source.read_definition())
            self._definition_kept = True

    def _resume_from_capsules(
        self, run_id: str, family: RouteFamily, started: float
    ) -> RunReport | SealedCore | None:
        """Capsules, before any source access: a run decided by its capsule returns its report; otherwise
        the core this run sealed in an attempt that never published (or None)."""
        latest = list(capsule_scope(family, self._ports.naming))
        if self._replay is None:
            if self._ports.capsule_stores is not None:
                records, invalid_refs = scan_capsules(latest, self._ports.capsule_stores)
                require_clear_capsules(
                    self._route,
                    records,
                    invalid_refs,
                    self._manifest_ref,
                    selector_on=False,
                    identity=self._identity,
                )
            return None
        match self._replay.resume(run_id, latest, family.target_wide):
            case Replayed(record=record):
                self._require_target_holds_replayed(run_id, family, record)
                self._notice(
                    f"run {run_id!r} of this route completed before: this run replayed its durable evidence "
                    "and read nothing from the source, and rows that reached the source since that run are "
                    "not moved by a retry of it. A new run ID moves them (omit --run-id; in Airflow, the next "
                    "DAG run): reuse a run ID only to retry that run"
                )
                return self._capsule_report(run_id, record, started, replayed=True)
            case ObserveAgain(record=record):
                self._progress.stage("observe")
                result = self._replay.observe(run_id)
                record.verdict = result.verdict
                result.verdict.require_passed(self._route.describe(), published=True)
                self._require_target_holds_replayed(run_id, family, record)
                return self._capsule_report(run_id, record, started, replayed=False)
            case Fresh(stored_core=stored_core):
                return stored_core
            case unreachable:
                assert_never(unreachable)

    def _require_target_holds_replayed(
        self, run_id: str, family: RouteFamily, record: OperationRecord
    ) -> None:
        """A run reported from its capsule moves nothing and skips every committed partition, like a retry
        without replay: the same lost-rows stop, from the checkpoints and read-only counts of the target,
        nothing of the source (``lost_rows``). Seen: a TRUNCATE between a run and its retry, exit 0 and
        ``quality: passed`` on an empty table."""
        decisions, matched = replayed_as_skipped(family, record.partitions, self._route.strategy)
        self._checks.require_target_holds_committed(
            decisions, matched, moving=False, family=family, replayed=run_id
        )

    def _prepare_quality(
        self,
        run_id: str,
        schema: TableSchema,
        active: list[ActivePartition],
        *,
        stored_core: SealedCore | None,
    ) -> _QualityRun:
        """Quality preparation, before extraction: policy measurable, reader plan, source metrics."""
        quality = _QualityRun(
            gate=QualityGate(self._policy, self._route.describe()) if self._policy.checks else None,
            bounds=[p.planned.bounds for p in active],
            batch_id=checkpoint_batch_id(run_id, [p.planned.partition_id for p in active]),
            staged=self._manifest.sink.load is LoadPath.STAGED,
            stored_core=stored_core,
        )
        if quality.gate is not None:
            quality.gate.require_measurable(schema, self._ports.source, None)
        if self._replay is not None:
            scopes = (ProbeScope.SOURCE, ProbeScope.STAGED) if quality.staged else (ProbeScope.SOURCE,)
            quality.plan = self._replay.prepare(
                run_id, self._policy, quality.bounds, quality.batch_id, scopes
            )
        if quality.gate is not None:
            self._progress.stage("quality")
            quality.gate.measure_source(self._ports.source, quality.bounds)
        return quality

    def _publish(
        self,
        run_id: str,
        family: RouteFamily,
        schema: TableSchema,
        active: list[ActivePartition],
        quality: _QualityRun,
        *,
        held: int | None = None,
    ) -> tuple[TargetCommitLifecycle, StreamTally]:
        """Pre-target checks on the sink, then the guarded path: extract/stage, verdict and seal, arm,
        target mutation, committed promotion. The sink is closed before any reader runs. ``held``: the
        table's rows when the run began, counted because the route has committed rows in it."""
        gate = quality.gate

        def before_arm(moved_rows: int | None, staging: str | None) -> None:
            if held:
                self._checks.require_table_not_emptied(sink, held)
            if moved_rows is not None or staging is not None:
                # the source was read since the first look (a staging insert, an export: minutes): a part
                # detached meanwhile comes back beside this run's rows as well (ADR 0093)
                self._checks.require_no_detached_parts_in_scope(family, sink, [a.planned for a in active])
            if gate is None:
                return
            if staging is not None:
                gate.measure_staged(sink, staging)
            verdict = gate.verdict(moved_rows)
            verdict.require_passed(self._route.describe(), published=False)
            quality.before_publication.append(verdict)
            if self._replay is not None and quality.plan is not None:
                ref = self._replay.seal(
                    run_id, quality.batch_id, self._policy, quality.plan, gate.probes(), quality.stored_core
                )
                for part in active:
                    part.evidence[CAPSULE_REF_KEY] = ref

        sink = self._target()
        with self._releasing_target():  # before any reader: an embedded (chDB) path, one process
            self._checks.require_target_empty_for_new_route(family, sink, [a.planned for a in active])
            # a column the target declares without Nullable: the rows to move must prove no NULL there
            schema = schema_for_target(
                sink,
                self._ports.source,
                self._manifest.sink.table,
                schema,
                self._order_by(schema),
                quality.bounds,
            )
            self._checks.require_lists_stored_as_listed(self._ports.source, quality.bounds)
            # read-only, before the first target write or checkpoint: a value the reads would refuse or
            # the target could not hold stops here (manifest_invalid, the route stays clear), not mid-stream
            deferred_audit = self._audit_values(sink, quality.bounds)
            # a partition at the very end of a calendar type's range has bounds the target would misread
            require_bounds_comparable = getattr(sink, "require_bounds_comparable", None)
            if callable(require_bounds_comparable):
                require_bounds_comparable(self._manifest.sink.table, schema, quality.bounds)
            if gate is not None and quality.staged:
                gate.require_measurable(schema, self._ports.source, sink)

            def prepare() -> None:
                sink.prepare_target(self._manifest.sink.table, schema, self._order_by(schema))
                self._write_progress(run_id, active, CheckpointStatus.PLANNED)

            check_target = getattr(sink, "check_target", None)
            checking: Callable[[], None] | None = (
                functools.partial(check_target, self._manifest.sink.table, schema, self._order_by(schema))
                if callable(check_target)
                else None
            )
            if deferred_audit is not None and checking is not None:
                # the target is prepared after the reads: a user mistake it would refuse stops the run now
                checking()
                checking = None
            if checking is not None:  # run once, by whichever of the two reads below comes first
                checking = _once(checking)
            self._checks.require_first_replacement_knows_the_rows(
                family, sink, [a.planned for a in active], before_reading_target=checking
            )
            # a part detached where this run writes comes back beside its rows when attached (ADR 0093)
            self._checks.require_no_detached_parts_in_scope(
                family, sink, [a.planned for a in active], before_reading_target=checking
            )

            lifecycle = TargetCommitLifecycle(
                store=self._ports.store,
                clock=self._ports.clock,
                route=self._route,
                run_id=run_id,
                partitions=active,
            )
            tally = StreamTally(
                cursor=self._cursor(),
                cancellation=self._ports.cancellation,
                monotonic=self._ports.clock.monotonic,
            )
            preparation = _Preparation(prepare, deferred_audit)
            self._execute_path(sink, schema, active, lifecycle, tally, run_id, preparation, before_arm)
            # committed: on the run's one client, still open (a staging attempt dropped its own strategy's
            # leftovers as it began, not those a killed attempt left under the manifest's former strategy)
            self._checks.drop_leftover_staging()
        return lifecycle, tally

    def _audit_values(self, sink: Sink, bounds: Sequence[PartitionBounds]) -> Callable[[], None] | None:
        """The source's value audit (``AuditingSource``), or, on a path that reads every partition before
        anything is written (``file_artifact``'s export, ``staged``'s staging insert) from a source whose
        reads prove their own values (``ProvingSource``), nothing yet: the source is read once instead of
        twice, and the audit is returned, to run only if a read cannot prove a value (:meth:`_read_proven`)."""
        source = self._ports.source
        audit_values = getattr(source, "audit_values", None)
        if not callable(audit_values):
            return None
        value_limits = getattr(sink, "value_limits", None)
        limits = value_limits() if callable(value_limits) else None
        reads_first = (
            self._manifest.source.export is ExportPath.FILE_ARTIFACT
            or self._manifest.sink.load is LoadPath.STAGED
        )
        prove_while_reading = getattr(source, "prove_while_reading", None)
        if reads_first and callable(prove_while_reading) and prove_while_reading(bounds, limits):
            return functools.partial(audit_values, bounds, limits)
        audit_values(bounds, limits)
        return None

    def _read_proven(self, read: Callable[[], _T], tally: StreamTally, preparation: _Preparation) -> _T:
        """``read()``, a pre-arm read of every active partition (an export removes its files when it fails;
        each staging read creates its table afresh). While the audit is deferred to the reads: when one
        cannot prove a value, the audit decides (it names what is wrong, or proves the values for the
        source's other read) and the reads run again."""
        if preparation.audit is None:
            return read()
        try:
            return read()
        except ValuesUnproven:
            tally.partitions.clear()
            preparation.decide()
            return read()

    def _evidence_after_publication(
        self, run_id: str, quality: _QualityRun, tally: StreamTally
    ) -> tuple[Verdict | None, str | None]:
        """The verdict of the published batch: the durable replay's observation, or the gate's own."""
        if self._replay is not None:
            self._ports.cancellation.raise_if_cancelled()  # committed; the capsule is observed on retry
            self._progress.stage("observe")
            result = self._replay.observe(run_id)
            result.verdict.log_warnings(self._route.describe())
            return result.verdict, result.operation_id
        if quality.gate is None:
            return None, None
        lazy_direct = self._manifest.source.export is ExportPath.LAZY_PLAN and not quality.staged
        # the lazy direct path learns the rows it moved only while publishing: compare them now
        if lazy_direct:
            return quality.gate.verdict(sum(tally.rows().values())), None
        return quality.before_publication[-1], None

    def _notice(self, line: str) -> None:
        """A fact the operator should know about a run that went on: logged once as it is made (see
        ``NOTICE_LOGGER``), and in the report."""
        _notices_log.warning("note: %s", line)
        self._notices.append(line)

    def _notice_if(self, line: str | None) -> None:
        if line is not None:
            self._notice(line)

    def _unverified(
        self, decisions: Sequence[ResumeDecision], matched: dict[str, PartitionCheckpoint]
    ) -> int:
        """Skipped committed partitions with no capsule: REQUIRED/UNVERIFIED, never certified by a rescan."""
        if not self._durable:
            return 0
        count = 0
        for decision in decisions:
            checkpoint = matched.get(decision.partition.partition_id)
            if decision.action is not Action.SKIP or checkpoint is None:
                continue
            try:
                ref = read_ref(checkpoint)
            except RefInvalid:
                ref = None
            if ref is None:
                count += 1
        return count

    def _summary(
        self, verdict: Verdict | None, operation_id: str | None, unverified: int
    ) -> QualitySummary | None:
        return quality_summary(
            verdict, operation_id, unverified, durable=self._durable, checks=bool(self._policy.checks)
        )

    def _capsule_report(
        self, run_id: str, record: OperationRecord, started: float, *, replayed: bool
    ) -> RunReport:
        seconds = self._ports.clock.monotonic() - started
        return capsule_report(
            self._manifest,
            self._route,
            run_id,
            record,
            seconds=seconds,
            durable=self._durable,
            replayed=replayed,
            notices=self._notices,
        )

    def _execute_path(
        self,
        sink: Sink,
        schema: TableSchema,
        active: list[ActivePartition],
        lifecycle: TargetCommitLifecycle,
        tally: StreamTally,
        run_id: str,
        preparation: _Preparation,
        before_arm: BeforeArm | None = None,
    ) -> None:
        """The pre-target work, then arming and the one guarded target mutation. The target is prepared
        (and the PLANNED records written) first, or, while the value audit is deferred to the pre-arm reads,
        after them: a refused value then leaves nothing written, as the audit always did."""
        export = self._manifest.source.export
        load = self._manifest.sink.load
        table = self._manifest.sink.table
        artifacts: list[ArtifactRef] = []
        staging: str | None = None
        staged_sink = self._staged(sink) if load is LoadPath.STAGED else None
        moved: int | None = None
        try:
            # ---- pre-target work: nothing here may mutate the target table ----
            try:
                if preparation.audit is None:
                    preparation.prepare_target()
                if export is ExportPath.FILE_ARTIFACT:
                    self._progress.stage("extract")
                    artifacts = self._read_proven(
                        lambda: self._reads.export_artifacts(schema, active, tally),
                        tally,
                        preparation,
                    )
                if staged_sink is not None:
                    self._progress.stage("stage")

                    def stage_all() -> int:
                        nonlocal staging
                        # named for the route, not the attempt: the next attempt of the route drops
                        # what a killed one left (the route's guard scan has passed by now)
                        staging = staged_sink.begin_staging(
                            table, schema, self._route.key(), self._order_by(schema)
                        )
                        with contextlib.closing(self._reads.chunks(active, artifacts, tally)) as chunks:
                            return staged_sink.stage(staging, schema, self._while_held(chunks, armed=False))

                    staged_rows = self._read_proven(stage_all, tally, preparation)
                    for part in active:
                        part.rows = tally.partitions[part.planned.partition_id].rows
                    moved = staged_rows
                    if staged_rows != sum(p.rows or 0 for p in active):
                        raise DponeError(
                            ErrorCode.QUALITY_CHECK_FAILED,
                            "staged row count disagrees with the rows read from the source",
                            details={"route": self._route.describe()},
                        )
                if not preparation.prepared:
                    preparation.prepare_target()
                if staged_sink is not None:
                    self._write_progress(run_id, active, CheckpointStatus.LOADED)

                if artifacts:
                    store = self._reads.require_artifacts()
                    for ref in artifacts:
                        store.verify(ref)  # every file is intact before any of them reaches the target
                    if moved is None:
                        moved = sum(ref.rows for ref in artifacts)
                if before_arm is not None:
                    # quality verdict and the sealed core: the last pre-target step, staging still present
                    before_arm(moved, staging)
                self._ports.cancellation.raise_if_cancelled()  # stopped: the target was never invoked
            except BaseException:
                # once the lease is gone another run may own these partitions: no record of ours may
                # become their latest (a failed_before_target over its commits hid them)
                if not preparation.quiet and self._lease_still_held():
                    lifecycle.mark_failed_before_target()
                raise

            # ---- arm, then the one guarded target mutation ----
            self._progress.stage("arm")
            if self._ports.lease is not None:
                try:
                    self._ports.lease.require_held()
                except BaseException:
                    # another run may own these partitions now: no record of ours may become their latest,
                    # and the staging table, named for the route, may be that run's
                    staging = None
                    raise
            permit = lifecycle.arm()
            self._progress.stage("target")
            # proven again after arming: a run paused between the proof and its arm must not reach the
            # target once another run may have moved these partitions (its armed records stay: the route's
            # guard then asks on-call, who finds the other run's rows)
            self._prove_lease_after_arming(loading=False)
            if staged_sink is not None and staging is not None:
                staging_table = staging
                lifecycle.invoke_target(
                    permit, lambda p: staged_sink.finalize_staged_load(p, staging_table, table)
                )
                staging = None  # published and dropped by the sink
            else:
                lifecycle.invoke_target(
                    permit, lambda p: self._direct_load(sink, p, schema, active, artifacts, tally)
                )

            # ---- committed promotion: the same rows the pre-target work or the stream counted ----
            self._progress.stage("commit")
            lifecycle.promote(tally.rows())
        finally:
            # while an exception propagates, a cleanup failure is logged, never raised in its place
            failing = sys.exc_info()[1] is not None
            if staging is not None and staged_sink is not None:
                cleanup(failing, "staging abort", lambda: staged_sink.abort_staged_load(staging))
            self._reads.remove_artifacts(artifacts, failing=failing)

    def _direct_load(
        self,
        sink: Sink,
        permit: TargetPermit,
        schema: TableSchema,
        active: list[ActivePartition],
        artifacts: list[ArtifactRef],
        tally: StreamTally,
    ) -> int:
        with contextlib.closing(self._reads.chunks(active, artifacts, tally)) as chunks:
            return sink.load(permit, self._manifest.sink.table, schema, self._while_held(chunks, armed=True))

    def _count_source_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """The source's rows within each of ``bounds`` now, read-only: one grouped read where the source
        offers it."""
        source = self._ports.source
        count_partitions = getattr(source, "count_partitions", None)
        if callable(count_partitions):
            return list(count_partitions(bounds))
        return [source.count(b) for b in bounds]

    def _while_held(self, chunks: Iterable[ColumnChunk], *, armed: bool) -> Iterator[ColumnChunk]:
        """``chunks``, the lease proven held before each reaches the target or staging: a run whose lease
        ended mid-load (its database session closed) stops before its next insert instead of loading on
        beside the run that took the lease over (seen: every row twice, both exit 0). Before arming (a
        staging insert) the plain ``lease_lost``: nothing is armed, the next run needs no on-call."""
        for chunk in chunks:
            if armed:
                self._prove_lease_after_arming(loading=True)
            elif self._ports.lease is not None:
                self._ports.lease.require_held()
            yield chunk

    def _prove_lease_after_arming(self, *, loading: bool) -> None:
        """The lease proven held; once armed, a lost one is said as what it leaves: armed partitions, and
        while loading perhaps some of this run's rows, for on-call (the route's guard blocks the next run)."""
        if self._ports.lease is None:
            return
        try:
            self._ports.lease.require_held()
        except DponeError as lost:
            if lost.details.get("problem") != "lease_lost":
                raise
            what = (
                "while it loaded the target: rows it inserted before that may be in the target"
                if loading
                else "after it armed, before it wrote any target row"
            )
            raise DponeError(
                ErrorCode.ROUTE_BUSY,
                f"this run's lease of target table {self._manifest.sink.table} ended {what}; another run may "
                "be moving the same partitions, so this run stopped and its partitions stay armed for on-call",
                details={**lost.details, "armed": True, "loading": loading},
                hint_lines=(
                    "its checkpoint store session was closed (an idle limit, pg_terminate_backend, a failover, "
                    "a pooler); the route's next run stops on these partitions until on-call resolves them",
                    f"inspect: dpone guard inspect {self._manifest_ref}",
                    "see `dpone runbook guard`, 'A run lost its lease after arming'",
                ),
            ) from lost

    def _lease_still_held(self) -> bool:
        """Whether the run may still write records of its own: no lease to prove, or one proven held."""
        if self._ports.lease is None:
            return True
        try:
            self._ports.lease.require_held()
        except Exception:  # while another error propagates: never raised in its place
            log.warning("the route's lease ended or cannot be proven: this run writes no further checkpoint")
            return False
        return True

    # -- helpers -----------------------------------------------------------------------------------

    def _staged(self, sink: Sink) -> StagedSink:
        if not isinstance(sink, StagedSink):
            raise DponeError(ErrorCode.USAGE, "this sink does not support the staged load path")
        return sink

    def _order_by(self, schema: TableSchema) -> tuple[str, ...]:
        if self._manifest.sink.order_by:
            return self._manifest.sink.order_by
        column = self._manifest.source.partitioning.column
        return (column,) if column and column in schema.names else ()

    def _cursor(self) -> str | None:
        incremental = self._manifest.source.incremental
        return incremental.cursor if incremental else None

    def _write_progress(
        self, run_id: str, active: Sequence[ActivePartition], status: CheckpointStatus
    ) -> None:
        """Unguarded progress records (PLANNED, LOADED): the target has not been touched yet."""
        at = self._ports.clock.now()
        self._ports.store.write_batch(
            [
                PartitionCheckpoint.model_validate(
                    {
                        "partition_id": p.planned.partition_id,
                        "route": self._route,
                        "run_id": run_id,
                        "status": status,
                        "started_at": at,
                        "completed_at": None,
                        "rows": p.rows,
                        "bytes": p.bytes,
                        "query_hash": p.planned.query_hash,
                        "schema_hash": p.planned.schema_hash,
                        "bounds": p.planned.bounds,
                        "diagnostics": {},
                    }
                )
                for p in active
            ]
        )

    def _advance_source_state(
        self, run_id: str, lifecycle: TargetCommitLifecycle, tally: StreamTally
    ) -> None:
        """Source state moves only after the complete commit (seed 000 ordering)."""
        if self._ports.source_state is None or tally.cursor is None:
            return
        high = tally.cursor_high_water()
        previous = self._ports.source_state.read_state(self._route) or {}
        same_cursor = previous.get("cursor") == tally.cursor
        if same_cursor:
            high = cursor_mark.later(high, previous.get("high_water"), previous.get(cursor_mark.KIND_KEY))
        if high is not None:
            mark = cursor_mark.stored(high)
        elif same_cursor:  # nothing moved: the recorded mark stays, kind included
            mark = {k: previous[k] for k in ("high_water", cursor_mark.KIND_KEY) if k in previous}
            mark.setdefault("high_water", None)
        else:  # a cursor renamed to another column has no mark until it moves a value (it took the old one's)
            mark = {"high_water": None}
        self._ports.source_state.advance_state(
            self._route,
            {"cursor": tally.cursor, **mark, "run_id": run_id, "checkpoint_batch_id": lifecycle.batch_id},
        )

    def _report(
        self,
        run_id: str,
        decisions: Sequence[ResumeDecision],
        batch_id: str | None,
        committed: dict[str, PartitionCheckpoint],
        started: float,
        quality: QualitySummary | None = None,
        seconds: Mapping[str, float] | None = None,
    ) -> RunReport:
        return run_report(
            self._manifest,
            self._route,
            run_id,
            decisions,
            batch_id=batch_id,
            committed=committed,
            seconds=self._ports.clock.monotonic() - started,
            quality=quality,
            partition_seconds=seconds or {},
            notices=self._notices,
        )


def holds_columns_of(target: TableSchema, schema: TableSchema) -> bool:
    """Whether a target's columns include each of ``schema``'s, of the same type (nullability aside)."""
    types = {c.name: c.clickhouse_type for c in target.columns}
    return all(types.get(c.name) == c.clickhouse_type for c in schema.columns)


def _once(call: Callable[[], None]) -> Callable[[], None]:
    """``call``, run at its first call only: a read-only check two pre-arm reads may each need first."""
    done = False

    def run() -> None:
        nonlocal done
        if not done:
            done = True
            call()

    return run
