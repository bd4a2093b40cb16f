"""A route's guard status, read from its checkpoint store: what a DAG waits on instead of burning retries.

Read-only: the latest checkpoints of every route writing the manifest's target table, classified by the
same scan a run starts with, and who holds the target's lease (``busy``: another run is writing it), read
from the store's lock tables without taking the lease (taking it, even for a moment, could make a starting
run fail as busy). It opens neither the source nor the target.

A route is blocked by either of the two scans a run starts with: the commit guard's (partitions) and the
durable quality capsules' (operations that owe target evidence, or whose evidence failed; ADR 0074). The
capsule scan is the run's own: every operation the route's latest checkpoints reference, under any stored
spelling, whatever ``durable_quality_replay`` says. Asked for one run ID (the sensor gives its DAG run's),
that run's own operation does not count when a retry of the run decides it (it observes the target
again, replays, or reports the final failure: ``OperationRecord.decided_by_its_run``); a retained reader
guard, which on-call must release, or a missing or invalid capsule keeps it blocking.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.endpoints import EndpointDescriptor
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.manifests.loader import LoadedManifest
from airflow_provider_dpone.ports.route_naming import RouteNaming
from airflow_provider_dpone.runtime.connection_binding import ConnectionBinding, require_bound_connections
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, scan_route
from airflow_provider_dpone.runtime.replay.ref import operation_id_for
from airflow_provider_dpone.runtime.replay.scan import CapsuleStores, OperationRecord, scan_capsules
from airflow_provider_dpone.runtime.route_family import RouteFamily, capsule_scope, load_family

if TYPE_CHECKING:
    from airflow_provider_dpone.adapters.checkpoint_sql.lease_holder import LeaseHolder


@dataclass(frozen=True)
class RouteStatus:
    """``clear``: no partition of the target blocks a run; ``blocked``: the partitions below do;
    ``busy``: nothing blocks, but another run holds the target's lease (``holder``) and is writing it.

    ``blocked`` wins over ``busy`` (on-call must act either way); ``holder`` is reported in both.
    """

    route: str
    blocked: tuple[BlockedPartition, ...]
    invalid: tuple[BlockedPartition, ...]
    holder: LeaseHolder | None = None
    #: operations whose durable quality evidence blocks a run (see the module)
    operations: tuple[OperationRecord, ...] = ()
    #: partitions whose capsule reference is malformed (they block every run too)
    invalid_references: tuple[BlockedPartition, ...] = ()
    #: the run's stop when a connection no longer leads where the newest commit went (ADR 0079, 0088)
    moved: DponeError | None = None
    #: the store does not exist yet: nothing has run against it, and the route's first run creates it
    store_missing: bool = False

    @property
    def clear(self) -> bool:
        """Nothing blocks (a busy route is clear of blocks; see :attr:`busy`)."""
        return not (self.blocked or self.invalid or self.operations or self.invalid_references or self.moved)

    @property
    def busy(self) -> bool:
        return self.holder is not None

    @property
    def state(self) -> str:
        if not self.clear:
            return "blocked"
        return "busy" if self.busy else "clear"

    def as_json(self) -> dict[str, Any]:
        """Safe facts only: route, partition and batch IDs, phases."""
        return {
            "route": self.route,
            "state": self.state,
            "blocked": [b.as_json() for b in self.blocked],
            "invalid": [b.as_json() for b in self.invalid],
            "operations": [r.as_json() for r in self.operations],
            "invalid_capsule_references": [b.as_json() for b in self.invalid_references],
            "holder": self.holder.as_json() if self.holder else None,
            "connection_changed": None if self.moved is None else self.moved.details.get("changed"),
            "store_missing": self.store_missing,
        }

    def describe(self) -> str:
        held = f"another run holds the target's lease ({self.holder.describe()})" if self.holder else ""
        if self.clear:
            if self.store_missing:
                return f"route {self.route} is clear: its checkpoint store does not exist yet (its first run creates it)"
            return f"route {self.route} is busy: {held}" if held else f"route {self.route} is clear"
        counts = (
            [f"{len(self.blocked) + len(self.invalid)} partition(s)"] if self.blocked or self.invalid else []
        )
        if self.operations or self.invalid_references:
            counts.append(
                f"{len(self.operations) + len(self.invalid_references)} durable quality operation(s)"
            )
        if self.moved is not None:
            counts.append(f"its {' and '.join(self.moved.details.get('changed', []))} connection changed")
        lines = [f"route {self.route} is blocked: {', '.join(counts)}"]
        lines += [f"  {held}"] if held else []
        if self.moved is not None:
            lines += [f"  {line}" for line in self.moved.render().splitlines()]
        lines += [
            f"  partition {b.label}  phase={b.phase}  batch={b.checkpoint_batch_id}" for b in self.blocked
        ]
        lines += [f"  partition {b.label}  guard invalid: {b.phase}" for b in self.invalid]
        lines += [
            f"  operation {r.operation_id}  run={r.run_id}  state={r.state.value}  ({r.reason()})"
            for r in self.operations
        ]
        lines += [f"  partition {b.label}  malformed capsule reference" for b in self.invalid_references]
        return "\n".join(lines)

    @property
    def runbook(self) -> str:
        """The runbook for what blocks: the commit guard's, else durable quality replay's."""
        return "dpone runbook guard" if self.blocked or self.invalid or self.moved else "dpone runbook replay"


def route_status(
    loaded: LoadedManifest,
    store_endpoint: EndpointDescriptor,
    run_id: str | None = None,
    binding: ConnectionBinding | None = None,
) -> RouteStatus:
    """The status of ``loaded``'s route in the checkpoint store at ``store_endpoint``; for the run
    ``run_id`` when given (its own operation, see the module); with ``binding`` (what the run's
    connections resolve to), blocked as the run would be where a connection leads elsewhere than the
    route's newest commit went."""
    from airflow_provider_dpone.adapters.checkpoint_sql import store_from_endpoint, store_url_for
    from airflow_provider_dpone.adapters.checkpoint_sql.lease_holder import lease_holder
    from airflow_provider_dpone.adapters.sources.route_naming import SourceRouteNaming

    naming = SourceRouteNaming(loaded.manifest.source)
    route = naming.canonical(loaded.manifest.route())
    if not _store_exists(store_endpoint, loaded):
        # nothing to read, and opening the store would create it (a sensor upstream of a new route's first
        # run failed every poke, and that run never came)
        return RouteStatus(route=route.describe(), blocked=(), invalid=(), store_missing=True)
    store_url = store_url_for(store_endpoint, loaded.manifest_dir)
    store = store_from_endpoint(store_endpoint, loaded.manifest_dir)
    try:
        family = load_family(store, route, naming)
    finally:
        store.close()
    scan = scan_route(family.target_wide)
    own = operation_id_for(loaded.identity, run_id) if run_id is not None else None
    operations, references = _capsule_blocks(capsule_scope(family, naming), store_url, own)
    holder = lease_holder(store_url, loaded.route.target_table)
    return RouteStatus(
        route=route.describe(),
        blocked=scan.unresolved,
        invalid=scan.invalid,
        holder=holder,
        operations=operations,
        invalid_references=references,
        moved=None if binding is None else _moved(family, binding, loaded.origin, naming),
    )


def _store_exists(store_endpoint: EndpointDescriptor, loaded: LoadedManifest) -> bool:
    """Whether anything is there to read, looked at without creating anything (a store this role cannot
    see is there: reading it fails and says so)."""
    from airflow_provider_dpone.adapters.checkpoint_sql.presence import checkpoint_store_absent

    return not checkpoint_store_absent(store_endpoint, loaded.manifest_dir)


def _moved(
    family: RouteFamily, binding: ConnectionBinding, manifest_ref: str, naming: RouteNaming
) -> DponeError | None:
    """The run's own stop for a connection that leads elsewhere than the newest commit went, or None."""
    try:
        require_bound_connections(family, binding, shlex.quote(manifest_ref), naming)
    except DponeError as err:
        if err.code is not ErrorCode.ROUTE_IDENTITY_CHANGED:
            raise
        return err
    return None


def _capsule_blocks(
    latest: Sequence[PartitionCheckpoint], store_url: Any, own: str | None
) -> tuple[tuple[OperationRecord, ...], tuple[BlockedPartition, ...]]:
    """The operations that block a run (``own``: the asking run's, which a retry settles unless its reader
    guard is retained) and the malformed references; the capsule tables are read only when referenced.
    ``store_url``: the store adapter's own URL object (``store_url_for``), handed on as it is."""
    from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore

    opened: list[SqlCapsuleStore | SqlReaderGuardStore] = []

    def open_stores() -> CapsuleStores:
        capsules, guards = SqlCapsuleStore(store_url), SqlReaderGuardStore(store_url)
        opened.extend((capsules, guards))
        return CapsuleStores(capsules=capsules, guards=guards)

    try:
        records, invalid = scan_capsules(latest, open_stores)
    finally:
        for store in opened:
            store.close()
    blocking = tuple(
        r for r in records if r.blocking and not (r.operation_id == own and r.decided_by_its_run)
    )
    references = tuple(
        BlockedPartition(c.partition_id, c.bounds.label, "malformed capsule reference", None) for c in invalid
    )
    return blocking, references
