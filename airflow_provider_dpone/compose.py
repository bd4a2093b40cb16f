"""The composition root: a validated manifest plus endpoint descriptors -> a runnable runtime.

The CLI and the Airflow operator both build everything here, never by hand, so a run behaves the
same wherever it starts. Nothing is opened until a method needs it: composing is free of I/O, and the
target is opened only after the route guard scan found the route clear.

Durable quality replay (``sink.options.durable_quality_replay``) is honoured here, identically for both:
capsules and reader guards live in the checkpoint database (same connection, their own tables), the
bounded reader is the supervised worker, and it reads through the sink's own admitted endpoint. The
capsule stores are opened for every run whose route references a capsule, whatever the selector says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from airflow_provider_dpone.adapters.arrow_memory import use_system_allocator
from airflow_provider_dpone.adapters.local_host import SystemClock
from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.manifest import ExportPath
from airflow_provider_dpone.contracts.partition import PartitionBounds, canonical_json, sha256_tag
from airflow_provider_dpone.contracts.report import RunReport
from airflow_provider_dpone.contracts.route import Strategy
from airflow_provider_dpone.manifests.loader import LoadedManifest
from airflow_provider_dpone.ports.checkpoint_store import CheckpointStore
from airflow_provider_dpone.ports.clock import Clock
from airflow_provider_dpone.ports.route_lease import LeaseHold, RouteLease
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source
from airflow_provider_dpone.ports.target_reader import TargetMetricsReader
from airflow_provider_dpone.runtime.cancellation import CancellationToken
from airflow_provider_dpone.runtime.causal_clock import CausalClock
from airflow_provider_dpone.runtime.connection_binding import ConnectionBinding
from airflow_provider_dpone.runtime.guard.inspection import InspectionRow, inspect_blocked
from airflow_provider_dpone.runtime.guard.resolution import ResolutionRequest, resolve
from airflow_provider_dpone.runtime.guard.schema_checked import require_target_columns_for_schema_checked
from airflow_provider_dpone.runtime.key_fingerprint import KeyChecks, check_keys, route_key_candidates
from airflow_provider_dpone.runtime.progress import ProgressListener
from airflow_provider_dpone.runtime.replay.durable import ReplayPorts
from airflow_provider_dpone.runtime.replay.resolution import (
    ReplayResolutionRequest,
    ReplayStatus,
    replay_status,
    resolve_replay,
)
from airflow_provider_dpone.runtime.replay.scan import CapsuleStores, OperationRecord
from airflow_provider_dpone.runtime.route_family import RouteFamily, capsule_scope, load_family
from airflow_provider_dpone.runtime.route_identity import (
    AdoptionResult,
    RebaselineRequest,
    RebaselineResult,
    adopt,
    rebaseline,
    release_partly_covered,
    views_fed_again_notice,
)
from airflow_provider_dpone.runtime.target_counts import TargetCounts
from airflow_provider_dpone.runtime.transfer import TransferEngine, TransferPorts

#: (connection name or inline URI, role) -> endpoint. Roles: "source", "sink", "checkpoints".
EndpointResolver = Callable[[str, str], EndpointDescriptor]


def env_resolver(manifest_dir: Path) -> EndpointResolver:
    """Resolve connections the CLI way: inline URIs or ``AIRFLOW_CONN_<NAME>`` variables."""
    from airflow_provider_dpone.connections import resolve_endpoint

    def _resolve(name_or_uri: str, role: str) -> EndpointDescriptor:
        return resolve_endpoint(name_or_uri, role=role, manifest_dir=manifest_dir)

    return _resolve


#: Airflow's own limit of a run ID's length (``dag_run.run_id``).
RUN_ID_MAX_CHARS = 250


def require_printable_run_id(run_id: str) -> None:
    """A new run's ID is recorded in every checkpoint and printed in task logs and reports: one printable
    line of at most ``RUN_ID_MAX_CHARS`` characters. A line break in it forged lines of the run's own output
    (``--run-id $'x\\nerror: ...'`` printed an ``error:`` line of its own)."""
    if not run_id.strip():
        raise DponeError(ErrorCode.USAGE, "a run ID must not be empty")
    if len(run_id) > RUN_ID_MAX_CHARS or not run_id.isprintable():
        raise DponeError(
            ErrorCode.USAGE,
            f"a run ID must be one printable line of at most {RUN_ID_MAX_CHARS} characters (no line breaks, "
            "tabs or control characters); nothing was read or written",
        )


@dataclass
class Runtime:
    """Everything one manifest needs, opened lazily and closed together."""

    loaded: LoadedManifest
    resolve_endpoint: EndpointResolver
    manifest_ref: str
    clock: CausalClock = field(default_factory=lambda: CausalClock(SystemClock()))
    progress: ProgressListener | None = None
    #: The bounded target reader; ``None`` means the supervised worker (tests may wrap it).
    target_reader: TargetMetricsReader | None = None
    #: A stop request for the run (Airflow's on_kill); it also kills a live reader worker at once.
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    #: For read-only commands: the checkpoint store must exist already (never created, schema untouched).
    read_only: bool = False
    #: For commands that record on-call decisions about a route's history (``guard resolve``,
    #: ``replay resolve``, a plain ``guard rebaseline``): the store must exist already. Made afresh at a
    #: mistyped path, it said "nothing to resolve", and every read-only command then saw a clean route.
    existing_store: bool = False
    _closers: list[Callable[[], None]] = field(default_factory=list)
    _store: CheckpointStore | None = None
    _capsule_stores: CapsuleStores | None = None

    @property
    def manifest(self):  # type: ignore[no-untyped-def]
        return self.loaded.manifest

    # -- parts -------------------------------------------------------------------------------------

    def store(self) -> CheckpointStore:
        if self._store is None:
            from airflow_provider_dpone.adapters.checkpoint_sql import store_from_endpoint

            endpoint = self.resolve_endpoint(self.manifest.checkpoints.connection, "checkpoints")
            if self.read_only or self.existing_store:
                from airflow_provider_dpone.adapters.checkpoint_sql.presence import require_checkpoint_store

                require_checkpoint_store(endpoint, self.loaded.manifest_dir)
            store = store_from_endpoint(endpoint, self.loaded.manifest_dir)
            if not self.read_only:
                store.ensure_schema()
            self._store = store
            self._closers.append(store.close)
        return self._store

    def capsule_stores(self) -> CapsuleStores:
        """Capsules and reader guards, in the checkpoint database (opened on first use)."""
        if self._capsule_stores is None:
            from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore
            from airflow_provider_dpone.adapters.checkpoint_sql import store_url_for

            endpoint = self.resolve_endpoint(self.manifest.checkpoints.connection, "checkpoints")
            url = store_url_for(endpoint, self.loaded.manifest_dir)
            capsules = SqlCapsuleStore(url, clock=self.clock)
            self._closers.append(capsules.close)
            guards = SqlReaderGuardStore(url, clock=self.clock)
            self._closers.append(guards.close)
            capsules.ensure_schema()  # creates both tables
            self._capsule_stores = CapsuleStores(capsules=capsules, guards=guards)
        return self._capsule_stores

    def reader(self) -> TargetMetricsReader:
        if self.target_reader is None:
            from airflow_provider_dpone.adapters.target_reader import SupervisedTargetReader
            from airflow_provider_dpone.adapters.target_reader.supervisor import kill_live_workers

            self.target_reader = SupervisedTargetReader()
            self.cancellation.on_cancel(kill_live_workers)  # the observing call reaps it
        return self.target_reader

    def open_source(self) -> Source:
        from airflow_provider_dpone.adapters.sources.factory import open_source

        endpoint = self.resolve_endpoint(self.manifest.source.connection, "source")
        source = open_source(self.manifest.source, endpoint)
        self._closers.append(source.close)
        return source

    def count_source_partitions(self, bounds: Sequence[PartitionBounds]) -> list[int]:
        """Rows the source holds now within each bounds (read-only; one grouped query where it can)."""
        return self.open_source().count_partitions(bounds)

    def key_checks(self, committed: Sequence[PartitionCheckpoint]) -> KeyChecks:
        """Read-only, for ``dpone checkpoints --verify``: each committed partition's key fingerprint on the
        source beside the target's (``runtime.key_fingerprint``; one statement per side and batch)."""
        if not committed:
            return KeyChecks()
        source = self.open_source()
        sink = self.sink_factory()()
        try:
            candidates = route_key_candidates(self.manifest)
            return check_keys(committed, source, sink, self.manifest.sink.table, candidates)
        finally:
            sink.close()

    def naming(self) -> RouteNaming:
        from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming

        return SourceRouteNaming(self.manifest.source)

    def family(self) -> RouteFamily:
        """Every stored checkpoint of this route (any spelling) and of every route writing its target; the
        records this runtime writes from then on are timed after them (``CausalClock``)."""
        family = load_family(self.store(), self.loaded.route, self.naming())
        self.clock.after(family.target_wide)
        return family

    def sink_endpoint(self) -> EndpointDescriptor:
        return self.resolve_endpoint(self.manifest.sink.connection, "sink")

    def sink_factory(self, endpoint: EndpointDescriptor | None = None) -> Callable[[], Sink]:
        """Opens the run's sink over ``endpoint`` (default: the manifest's sink connection, resolved now)."""
        endpoint = endpoint if endpoint is not None else self.sink_endpoint()
        sink = self.manifest.sink
        allow_ttl = bool(sink.options.allow_target_ttl)
        replacing = sink.strategy is not Strategy.INCREMENTAL_APPEND and not sink.options.allow_target_views

        def _open() -> Sink:
            from airflow_provider_dpone.adapters.clickhouse.sink import ClickHouseSink

            return ClickHouseSink(
                endpoint,
                allow_ttl=allow_ttl,
                views_refused_for=sink.strategy if replacing else None,
                deletes_rows=sink.strategy is Strategy.REPLACE_PARTITION,
            )

        return _open

    # -- operations --------------------------------------------------------------------------------

    def run(self, run_id: str, *, allow_nonempty_target: bool = False) -> RunReport:
        """One run of the manifest's route under the target commit guard."""
        require_printable_run_id(run_id)
        use_system_allocator()  # Arrow's buffers: see adapters/arrow_memory.py (the user's pool wins)
        store = self.store()
        # the target's lease first: a second run stops before it opens the source or reads a checkpoint
        with self._target_lease(store) as lease:
            engine = self._engine(store, allow_nonempty_target=allow_nonempty_target, lease=lease)
            return engine.run(run_id)

    def _target_lease(self, store: CheckpointStore) -> contextlib.AbstractContextManager[LeaseHold]:
        lease = cast(RouteLease, store)  # the SQL store is also the lease (its own database holds it)
        return lease.lease(self.loaded.route.target_table)

    def record_source_move(self, request: RebaselineRequest, *, force: bool = False) -> PartitionCheckpoint:
        """``dpone guard rebaseline --source-moved``: one audited record naming this manifest's source
        connection as the route's (see ``runtime.source_binding``). Counts the source's rows within one
        partition and compares every committed partition's keys on both sides (``runtime.key_fingerprint``:
        refused where they differ behind equal counts, unless ``force``); never writes the target."""
        return self._record_move(
            lambda engine, run_id: engine.record_source_move(run_id, request, force=force)
        )

    def record_target_move(self, request: RebaselineRequest) -> PartitionCheckpoint:
        """``dpone guard rebaseline --target-moved``: one audited record naming where this manifest's sink
        connection leads as the route's target (see ``runtime.target_binding``). Counts the target's rows
        within one partition; writes no row of the target."""
        return self._record_move(lambda engine, run_id: engine.record_target_move(run_id, request))

    def _record_move(self, make: Callable[[TransferEngine, str], PartitionCheckpoint]) -> PartitionCheckpoint:
        """The record ``make`` builds from the checkpoints, written under the target's lease, like a run's."""
        store = self.store()
        run_id = "rebaseline__" + self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._target_lease(store) as hold:
            record = make(self._engine(store), run_id)
            _proven_store(store, hold).write_batch([record])
            return record

    def rebaseline(
        self, request: RebaselineRequest, *, adopt_target: bool = False, release_partial: bool = False
    ) -> RebaselineResult | AdoptionResult:
        """``dpone guard rebaseline``: audited COMMITTED records under the target's lease, like a run's.

        Without ``adopt_target`` nothing but checkpoints and the source's schema and partitions is read;
        with it, rows are counted read-only on both sides."""
        store = self.store()
        run_id = "rebaseline__" + self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._target_lease(store) as hold:
            engine = self._engine(store)
            result: RebaselineResult | AdoptionResult
            if adopt_target:
                result = adopt(engine.adoption_counts(run_id), engine.route, run_id, self.clock, request)
                views = engine.views_fed_by_target() if result.left_to_run else []
                if views:
                    result = dataclasses.replace(
                        result, notices=(*result.notices, views_fed_again_notice(result, views))
                    )
            else:
                overlaps = engine.identity_overlaps(run_id)
                if request.schema_checked:  # the operator's word, but not over a column the target lacks
                    require_target_columns_for_schema_checked(
                        engine.route, self.manifest.sink.table, engine.columns_missing_from_target()
                    )
                planned = [o.partition.bounds for o in overlaps]
                # and the old partitions' own bounds (a coarser partitioning checks each of them)
                older = {c.bounds for o in overlaps for c in o.committed if c.bounds not in set(planned)}
                counted = [*planned, *older]
                # one grouped query for every new partition's rows, not one count each
                source_rows = dict(zip(counted, engine.count_source_partitions(counted), strict=True))
                result = rebaseline(
                    overlaps,
                    engine.route,
                    run_id,
                    self.clock,
                    request,
                    count_source=source_rows.__getitem__,  # only these bounds are asked
                    count_target=engine.count_target,
                    columns_unchanged=engine.columns_unchanged,
                )
                if release_partial and result.partial:
                    result = release_partly_covered(result, run_id, self.clock, request, engine.count_target)
            # what they record was counted or planned through this manifest's connections: they name them
            result = dataclasses.replace(result, recorded=engine.naming_the_connections(result.recorded))
            filling = engine.filling_notice(result.recorded)
            if filling is not None:
                result = dataclasses.replace(result, notices=(*result.notices, filling))
            records = [*result.recorded, *(result.released if isinstance(result, RebaselineResult) else ())]
            if records:
                _proven_store(store, hold).write_batch(records)
            return result

    def _engine(
        self, store: CheckpointStore, *, allow_nonempty_target: bool = False, lease: LeaseHold | None = None
    ) -> TransferEngine:
        source = self.open_source()
        sink = self.sink_endpoint()  # resolved once: an Airflow connection lookup each time
        artifacts = None
        if self.manifest.source.export is ExportPath.FILE_ARTIFACT:
            from airflow_provider_dpone.adapters.artifacts.arrow_ipc import ArrowIpcArtifactStore

            directory = Path(tempfile.mkdtemp(prefix="dpone-artifacts-"))
            self._closers.append(lambda: shutil.rmtree(directory, ignore_errors=True))
            artifacts = ArrowIpcArtifactStore(directory)
        ports = TransferPorts(
            store=store,
            source=source,
            open_sink=self.sink_factory(sink),
            clock=self.clock,
            artifacts=artifacts,
            source_state=store,  # type: ignore[arg-type]
            capsule_stores=self.capsule_stores,
            replay=self._replay_ports() if self.manifest.sink.options.durable_quality_replay else None,
            naming=self.naming(),
            cancellation=self.cancellation,
            **self._source_connection(),
            **self._target_connection(sink),
            lease=lease,
        )
        return TransferEngine(
            self.manifest,
            ports,
            manifest_ref=self.manifest_ref,
            progress=self.progress,
            identity=self.loaded.identity,
            allow_nonempty_target=allow_nonempty_target,
        )

    def connection_binding(self) -> ConnectionBinding:
        """What this manifest's runs record of their connections (resolved, nothing opened): what
        ``route_status`` checks the route's newest commit against, as a run does."""
        source = self._source_connection()
        target = self._target_connection(self.sink_endpoint())
        return ConnectionBinding(
            source=source["source_connection"],
            source_as_written=source["source_connection_as_written"],
            target=target["target_connection"],
            target_place=target["target_place"],
        )

    def _source_connection(self) -> dict[str, str | None]:
        """What checkpoints record of the source connection: its name, or an inline URI with its file, and
        the URI as written, which earlier releases recorded (``runtime.source_binding``: still taken where
        it names one file, an absolute path; a relative or ``~`` one stops once). The file: an
        absolute path as written (normalised: a link it names, flipped to a new snapshot, stays the same
        source); a relative one under the manifest folder's real path (one text names two files in two
        folders; the operator finds a manifest from the DAG file's real folder, the CLI from the path it is
        given: both name the same file).

        A named connection whose file path is relative, or under ``~``, names a file per manifest folder
        or per user too (one ``AIRFLOW_CONN_SHARD_SRC='sqlite:///orders.sqlite'`` for dags/eu and dags/us:
        the second folder's run skipped every day as committed, exit 0): it is recorded as that file, as an
        inline URI naming it is. Its bare name (what earlier releases recorded) goes along as the form as
        written, but names no file: ``runtime.connection_binding`` stops a history recorded under it."""
        endpoint = self.resolve_endpoint(self.manifest.source.connection, "source")
        named, as_written = self._named(endpoint)
        if as_written is None and endpoint.path_per_place and endpoint.path:
            named, as_written = f"{endpoint.kind.value}://{endpoint.path}", endpoint.name
        return {"source_connection": named, "source_connection_as_written": as_written}

    def _target_connection(self, endpoint: EndpointDescriptor) -> dict[str, str]:
        """What checkpoints record of the target connection: its name (as ``_named``) and where it leads."""
        return {"target_connection": self._named(endpoint)[0], "target_place": self._place(endpoint)}

    def _place(self, endpoint: EndpointDescriptor) -> str:
        """Where a target connection leads, whatever its name, user or settings: the server's interface,
        host, port and database, or the chDB folder (resolved as ``_named`` resolves it). A digest: no
        host or path is stored."""
        if endpoint.path:
            named, inline = self._named(endpoint)
            folder = named.removeprefix("chdb://") if inline is not None else os.path.normpath(endpoint.path)
            where: dict[str, object] = {"chdb": folder}
        else:
            where = {
                "interface": endpoint.interface.value if endpoint.interface is not None else None,
                "host": (endpoint.host or "").lower(),
                "port": endpoint.port or (8443 if endpoint.secure else 8123),
                "database": endpoint.database or "default",
            }
        return sha256_tag(canonical_json(where))

    def _named(self, endpoint: EndpointDescriptor) -> tuple[str, str | None]:
        """How checkpoints name a connection (see ``_source_connection``), and the inline URI as written
        where that differs (None: a connection name)."""
        from airflow_provider_dpone.connections.inline import is_inline, parse_inline

        if not is_inline(endpoint.name) or not endpoint.path:
            return endpoint.name, None
        inline = parse_inline(endpoint.name)
        written = os.path.expanduser(inline.path)
        path = (
            endpoint.path
            if os.path.isabs(written)
            else os.path.normpath(os.path.join(os.path.realpath(self.loaded.manifest_dir), written))
        )
        return f"{inline.scheme}://{path}", endpoint.name

    def _replay_ports(self) -> ReplayPorts:
        from airflow_provider_dpone.adapters.local_host import LocalHost

        return ReplayPorts(
            stores=self.capsule_stores, reader=self.reader(), target=self.sink_endpoint(), host=LocalHost()
        )

    def replay_status(self, run_id: str | None = None) -> ReplayStatus:
        """Read-only: the route's capsules, reader guards and unverified committed partitions."""
        return replay_status(
            capsule_scope(self.family(), self.naming()),
            self.capsule_stores,
            self.loaded.identity,
            selector_on=self.manifest.sink.options.durable_quality_replay,
            run_id=run_id,
        )

    def resolve_replay(
        self, request: ReplayResolutionRequest
    ) -> tuple[OperationRecord, list[PartitionCheckpoint]]:
        """An operator's audited resolution of a blocked operation. Opens neither the source nor the target.

        Under the target's lease, as a run: while a run of the target is live (ROUTE_BUSY), what looks
        blocked may be its own operation in progress, and it would write past the resolution."""
        store = self.store()
        with self._target_lease(store) as hold:
            return resolve_replay(
                _proven_store(store, hold),
                capsule_scope(self.family(), self.naming()),
                self.capsule_stores(),
                self.clock,
                self.loaded.route,
                self.loaded.identity,
                request,
            )

    def checkpoints(self) -> list[PartitionCheckpoint]:
        """The latest checkpoints of every route writing this target (any blocks this route's runs)."""
        return sorted(self.family().target_wide, key=lambda c: (c.bounds.label, c.partition_id))

    def resolve_guards(self, request: ResolutionRequest) -> list[PartitionCheckpoint]:
        """Append audited resolutions. Writes neither the source nor the target: counts the target's rows,
        and the source's where ``committed`` is asked over an attempt that recorded no count (read-only).

        Under the target's lease, as a run: a live run's ARMED partitions look blocked, and resolving them
        while it loads (``not-applied`` before its insert lands) would let the next run append them again."""
        sinks: list[Sink] = []
        tables: dict[str, TargetCounts] = {}

        def count_target(checkpoint: PartitionCheckpoint) -> int | None:
            if not sinks:
                sinks.append(self.sink_factory()())  # read-only counts, opened only when needed
            table = checkpoint.route.target_table
            return tables.setdefault(table, TargetCounts(sinks[0], table)).within(checkpoint.bounds)

        sources: list[Source] = []
        naming = self.naming()

        def count_source(checkpoint: PartitionCheckpoint) -> int | None:
            if naming.canonical(checkpoint.route).source_table != self.loaded.route.source_table:
                return None  # another source table's partition: this manifest's source cannot count it
            try:
                if not sources:
                    sources.append(self.open_source())  # read-only: committed over an uncounted attempt
                return sources[0].count(checkpoint.bounds)
            except DponeError as unavailable:  # the same error, saying why the source was asked
                unavailable.hint_lines = (
                    *unavailable.hint_lines,
                    "guard resolve --as committed counts the source where the attempt recorded no row count "
                    "(a direct load); with the source unavailable, compare the target yourself and re-run "
                    "with --force",
                )
                raise

        from airflow_provider_dpone.runtime.target_binding import written_elsewhere

        target = self._target_connection(self.sink_endpoint())
        store = self.store()
        try:
            with self._target_lease(store) as hold:
                # a killed run's statement may still be writing on the server: its counts are not final
                # then, whatever --force says (a count that fails is forced to unknown; this never is)
                sinks.append(self.sink_factory()())
                self._require_no_writes_in_flight(sinks[0])
                views = self._views_fed(sinks[0])
                return resolve(
                    _proven_store(store, hold),
                    self.clock,
                    self.loaded.route,
                    request,
                    latest=self.family().target_wide,
                    count_target=count_target,
                    count_source=count_source,
                    written_elsewhere=lambda c: written_elsewhere(
                        c, target["target_connection"], target["target_place"]
                    ),
                    views=views,
                )
        finally:
            for sink in sinks:
                sink.close()

    def inspect(self, *, with_source: bool = True) -> list[InspectionRow]:
        """Read-only comparison of each blocked partition's attempt, source and target row counts; a
        partition whose attempt wrote another target than the sink connection leads to now is marked (its
        counts are that other target's: ``guard resolve`` refuses it)."""
        from airflow_provider_dpone.runtime.target_binding import written_elsewhere

        latest: Sequence[PartitionCheckpoint] = self.family().target_wide
        target = self._target_connection(self.sink_endpoint())
        source = self.open_source() if with_source else None
        sink = self.sink_factory()()
        try:
            return inspect_blocked(
                latest,
                source,
                sink,
                self.manifest.sink.table,
                self.loaded.route,
                written_elsewhere=lambda c: written_elsewhere(
                    c, target["target_connection"], target["target_place"]
                ),
            )
        finally:
            sink.close()

    def views_fed_by_target(self) -> list[str]:
        """Read-only: the views an insert into the target feeds (``[]`` where the sink cannot tell):
        ``guard inspect`` names them, since an attempt's rows deleted from the target stay in theirs."""
        sink = self.sink_factory()()
        try:
            return self._views_fed(sink)
        finally:
            sink.close()

    def _views_fed(self, sink: Sink) -> list[str]:
        listing = getattr(sink, "views_fed_by", None)
        return list(listing(self.manifest.sink.table)) if callable(listing) else []

    def _require_no_writes_in_flight(self, sink: Sink) -> None:
        """``route_busy`` while the sink reports a statement of dpone's still changing the target."""
        require_idle = getattr(sink, "require_no_writes_in_flight", None)
        if callable(require_idle):
            require_idle(self.manifest.sink.table)

    def writes_in_flight(self) -> DponeError | None:
        """Read-only: why the target's counts are not final yet (a statement dpone sent still running on
        the server, one of its deletes pending), or None; ``guard resolve`` refuses while there is one."""
        sink = self.sink_factory()()
        try:
            self._require_no_writes_in_flight(sink)
        except DponeError as busy:
            if busy.code is ErrorCode.ROUTE_BUSY:
                return busy
            raise
        finally:
            sink.close()
        return None

    def close(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            # closing is best effort and must never hide a primary error
            with contextlib.suppress(Exception):
                closer()


@contextmanager
def open_runtime(
    loaded: LoadedManifest,
    *,
    resolve: EndpointResolver | None = None,
    manifest_ref: str | None = None,
    clock: Clock | None = None,
    progress: ProgressListener | None = None,
    target_reader: TargetMetricsReader | None = None,
    cancellation: CancellationToken | None = None,
    read_only: bool = False,
    existing_store: bool = False,
) -> Iterator[Runtime]:
    """Compose the runtime for one manifest; everything it opened is closed on exit.

    ``target_reader`` replaces the supervised reader worker (for instance a wrapper in a test).
    ``cancellation`` lets the caller stop the run (``TransferInterrupted`` at the next chunk).
    ``read_only`` (inspection commands): a missing checkpoint store is refused, never created.
    ``existing_store`` (commands recording on-call decisions): refused too, though they write to it.
    """
    runtime = Runtime(
        loaded=loaded,
        resolve_endpoint=resolve or env_resolver(loaded.manifest_dir),
        # every hint prints it for pasting into a shell (a path with blanks, quotes or non-ASCII)
        manifest_ref=shlex.quote(manifest_ref or loaded.origin),
        clock=CausalClock.over(clock or SystemClock()),
        progress=progress,
        target_reader=target_reader,
        cancellation=cancellation or CancellationToken(),
        read_only=read_only,
        existing_store=existing_store,
    )
    try:
        yield runtime
    finally:
        runtime.close()


class _LeaseProvenStore:
    """A checkpoint store whose writes each prove the target's lease first: an on-call command (resolve,
    rebaseline, a recorded move) whose PostgreSQL lease session ended while it counted wrote its record
    over the commits of a run that took the lease meanwhile (seen: a ``not-applied`` over a newer commit,
    the route then stopped with no command to clear it)."""

    def __init__(self, store: CheckpointStore, hold: LeaseHold) -> None:
        self._store = store
        self._hold = hold

    def write_batch(self, checkpoints: Sequence[PartitionCheckpoint]) -> None:
        self._hold.require_held()
        self._store.write_batch(checkpoints)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _proven_store(store: CheckpointStore, hold: LeaseHold) -> CheckpointStore:
    return cast(CheckpointStore, _LeaseProvenStore(store, hold))
