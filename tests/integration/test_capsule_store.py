"""SqlCapsuleStore and SqlReaderGuardStore on real SQLite files and a real PostgreSQL 15.

Every test runs as ``[sqlite]`` and ``[postgres]``. PostgreSQL gets one fresh database per module (the
table names are fixed); tests isolate themselves by unique operation IDs.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_provider_dpone.adapters.capsule_store import SqlCapsuleStore, SqlReaderGuardStore
from airflow_provider_dpone.adapters.capsule_store.tables import CAPSULE_TABLE, READER_GUARD_TABLE
from airflow_provider_dpone.contracts.capsule import (
    GENESIS_SHA256,
    CapsuleChain,
    CapsuleRecord,
    CapsuleV1,
    CheckKind,
    CheckSeverity,
    PolicyCheck,
    QualityPolicy,
    SealedCore,
    TargetComplete,
    TargetPending,
    sha256_of,
)
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.route import RouteIdentity, Strategy
from airflow_provider_dpone.contracts.target_observation import (
    GenerationSelector,
    LoadIdSelector,
    MetricValue,
    ObservationMetric,
    ObservationStatus,
    ReaderGuardState,
    TargetObservation,
    TargetReadRequest,
)

pytestmark = pytest.mark.service

T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)
ROUTE = RouteIdentity(
    source_table="dbo.orders", target_table="analytics.orders", strategy=Strategy.INCREMENTAL_APPEND
)


# --- builders -----------------------------------------------------------------------------------------


def new_op() -> str:
    return "op-" + uuid.uuid4().hex


def plan(
    columns: tuple[str, ...] = ("customer",),
    metrics: tuple[ObservationMetric, ...] = (ObservationMetric.ROW_COUNT, ObservationMetric.NULL_COUNT),
) -> TargetReadRequest:
    return TargetReadRequest(
        target_table="analytics.orders",
        selector=GenerationSelector(load_id=LoadIdSelector(column="dpone_load_id", value="L1")),
        columns=columns,
        metrics=metrics,
    )


def core(op: str, *, run_id: str = "run-1", request: TargetReadRequest | None = None) -> CapsuleRecord:
    return CapsuleRecord(
        operation_id=op,
        version=1,
        prev_sha256=GENESIS_SHA256,
        body=SealedCore(
            identity="sha256:" + "1" * 64,
            run_id=run_id,
            route=ROUTE,
            load_ids=("L1",),
            policy=QualityPolicy(
                checks=(PolicyCheck(check=CheckKind.ROW_COUNT, severity=CheckSeverity.ERROR),)
            ),
            probes=(),
            target_plan=request or plan(),
            sealed_at=T0,
        ),
    )


def pending(c: CapsuleRecord) -> CapsuleRecord:
    assert isinstance(c.body, SealedCore)
    return CapsuleRecord(
        operation_id=c.operation_id,
        version=2,
        prev_sha256=c.sha256(),
        body=TargetPending(
            core_sha256=c.sha256(),
            request_sha256=c.body.target_plan.sha256(),
            generation_key=c.body.target_plan.generation_key(),
            recorded_at=T0,
        ),
    )


def complete(c: CapsuleRecord, p: CapsuleRecord, rows: int = 10) -> CapsuleRecord:
    assert isinstance(c.body, SealedCore)
    observation = TargetObservation(
        request_sha256=c.body.target_plan.sha256(),
        status=ObservationStatus.COMPLETE,
        metrics=(
            MetricValue(metric=ObservationMetric.NULL_COUNT, column="customer", value=0),
            MetricValue(metric=ObservationMetric.ROW_COUNT, value=rows),
        ),
    )
    return CapsuleRecord(
        operation_id=c.operation_id,
        version=3,
        prev_sha256=p.sha256(),
        body=TargetComplete(core_sha256=c.sha256(), observation=observation, recorded_at=T0),
    )


def v1(op: str) -> CapsuleV1:
    return CapsuleV1(
        operation_id=op,
        run_id="run-0",
        identity="sha256:" + "4" * 64,
        route=ROUTE,
        policy=QualityPolicy(),
        probes=(),
        sealed_at=T0,
    )


def expect(code: ErrorCode, call: Callable[[], Any]) -> DponeError:
    with pytest.raises(DponeError) as raised:
        call()
    assert raised.value.code is code, raised.value.render()
    return raised.value


def race(calls: list[Callable[[], object]]) -> list[str]:
    """Start every call at once (one thread each); ``won`` or the error code of each."""
    barrier = threading.Barrier(len(calls))
    results: list[str] = []

    def run(call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            call()
            results.append("won")
        except DponeError as exc:
            results.append(exc.code.value)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return sorted(results)


# --- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    base = request.getfixturevalue("postgres_url")
    name = "capsules_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(base).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return str(request.getfixturevalue("module_pg_url"))


@pytest.fixture
def store(url: str) -> Iterator[SqlCapsuleStore]:
    s = SqlCapsuleStore(url)
    s.ensure_schema()
    yield s
    s.close()


@pytest.fixture
def guards(url: str) -> Iterator[SqlReaderGuardStore]:
    s = SqlReaderGuardStore(url)
    s.ensure_schema()
    yield s
    s.close()


# --- capsules ------------------------------------------------------------------------------------------


def test_v2_chain_is_appended_in_order_and_read_back_verified(store: SqlCapsuleStore) -> None:
    op = new_op()
    c = core(op)
    p = pending(c)
    done = complete(c, p)
    assert store.current_version(op) == 0
    assert store.read(op) is None
    assert store.append(op, 0, c) == 1
    assert store.append(op, 1, p) == 2
    assert store.append(op, 2, done) == 3
    chain = store.read(op)
    assert isinstance(chain, CapsuleChain)
    assert chain.records == (c, p, done)
    assert store.current_version(op) == 3


def test_append_with_a_stale_expected_version_conflicts(store: SqlCapsuleStore) -> None:
    op = new_op()
    c = core(op)
    store.append(op, 0, c)
    error = expect(ErrorCode.CAPSULE_CONFLICT, lambda: store.append(op, 0, c))
    assert error.details["current_version"] == 1
    expect(ErrorCode.CAPSULE_CONFLICT, lambda: store.append(op, 2, complete(c, pending(c))))


def test_primary_key_decides_when_two_writers_checked_the_same_version(
    url: str, store: SqlCapsuleStore
) -> None:
    """Writer B read version 1 before writer A appended version 2; B's INSERT must lose, not overwrite."""
    op = new_op()
    c = core(op)
    store.append(op, 0, c)
    stale_rows = store._rows("append", op)  # what B saw

    class StaleReader(SqlCapsuleStore):
        def _rows(self, operation: str, operation_id: str) -> Any:
            return stale_rows if operation == "append" else super()._rows(operation, operation_id)

    writer_b = StaleReader(url)
    try:
        store.append(op, 1, pending(c))  # writer A wins
        expect(ErrorCode.CAPSULE_CONFLICT, lambda: writer_b.append(op, 1, pending(c)))
    finally:
        writer_b.close()
    chain = store.read(op)
    assert isinstance(chain, CapsuleChain) and chain.version == 2


def test_concurrent_writers_of_the_same_version_have_exactly_one_winner(url: str) -> None:
    writers = [SqlCapsuleStore(url) for _ in range(4)]
    writers[0].ensure_schema()
    try:
        for _ in range(5):
            op = new_op()
            c = core(op)
            writers[0].append(op, 0, c)
            results = race([partial(w.append, op, 1, pending(c)) for w in writers])
            assert results == ["quality_capsule_conflict"] * 3 + ["won"], results
            assert writers[0].current_version(op) == 2
    finally:
        for w in writers:
            w.close()


def test_records_that_would_change_the_sealed_core_are_refused(store: SqlCapsuleStore) -> None:
    op = new_op()
    c = core(op)
    store.append(op, 0, c)
    other_core = core(op, run_id="run-2")
    replacement = other_core.model_copy(update={"version": 2, "prev_sha256": c.sha256()})
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.append(op, 1, replacement))
    forged = pending(other_core)  # links to and names a core that is not the stored one
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.append(op, 1, forged))
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.append(op, 1, complete(c, pending(c))))  # skips pending
    assert store.current_version(op) == 1


def test_a_record_of_another_operation_is_refused(store: SqlCapsuleStore) -> None:
    op = new_op()
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.append(op, 0, core(new_op())))


def test_v1_capsule_is_stored_byte_identical_and_ends_its_chain(store: SqlCapsuleStore, url: str) -> None:
    op = new_op()
    capsule = v1(op)
    assert store.append(op, 0, capsule) == 1
    assert store.read(op) == capsule
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text(f"SELECT payload_text FROM {CAPSULE_TABLE} WHERE operation_id = :op"), {"op": op}
            ).scalar_one()
    finally:
        engine.dispose()
    assert stored.encode("utf-8") == capsule.to_canonical()
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.append(op, 1, pending(core(op))))
    expect(ErrorCode.CAPSULE_CONFLICT, lambda: store.append(op, 0, v1(op)))


@pytest.mark.parametrize(
    ("tamper", "params"),
    [
        (
            "UPDATE {t} SET payload_text = replace(payload_text, :old, :new) WHERE operation_id = :op AND version = 3",
            {"old": '"value":10', "new": '"value":11'},
        ),
        (
            "UPDATE {t} SET payload_text = replace(payload_text, :old, :new) WHERE operation_id = :op AND version = 1",
            {"old": "run-1", "new": "run-9"},
        ),
        ("DELETE FROM {t} WHERE operation_id = :op AND version = 2", {}),
    ],
)
def test_tampered_rows_fail_closed_on_read(
    store: SqlCapsuleStore, url: str, tamper: str, params: dict[str, str]
) -> None:
    op = new_op()
    c = core(op)
    p = pending(c)
    for version, record in enumerate((c, p, complete(c, p)), start=0):
        store.append(op, version, record)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.text(tamper.format(t=CAPSULE_TABLE)), {"op": op, **params}).rowcount == 1
    finally:
        engine.dispose()
    expect(ErrorCode.CAPSULE_INVALID, lambda: store.read(op))


def test_a_core_whose_worst_case_answer_cannot_be_stored_is_refused(store: SqlCapsuleStore) -> None:
    op = new_op()
    wide = plan(
        tuple(f"c{i:03d}_" + "x" * 120 for i in range(256)),
        (ObservationMetric.NULL_COUNT, ObservationMetric.DISTINCT_COUNT),
    )
    error = expect(ErrorCode.CAPSULE_CAPACITY_EXCEEDED, lambda: store.append(op, 0, core(op, request=wide)))
    assert error.details["worst_case_bytes"] > error.details["limit_bytes"]
    assert store.current_version(op) == 0


def test_ensure_schema_is_idempotent(url: str) -> None:
    for _ in range(2):
        s = SqlCapsuleStore(url)
        s.ensure_schema()
        s.close()
    engine = sa.create_engine(url)
    try:
        names = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {CAPSULE_TABLE, READER_GUARD_TABLE} <= names


# --- reader guards -------------------------------------------------------------------------------------

GEN = "sha256:" + "7" * 64


def owner() -> str:
    return "owner-" + uuid.uuid4().hex


def test_guard_is_acquired_once_and_released_only_by_its_owner(guards: SqlReaderGuardStore) -> None:
    op, a, b = new_op(), owner(), owner()
    held = guards.acquire(op, GEN, a)
    assert held.state is ReaderGuardState.ACQUIRED and held.owner_token == a
    assert guards.acquire(op, GEN, a).owner_token == a  # same owner: idempotent
    expect(ErrorCode.READER_GUARD_HELD, lambda: guards.acquire(op, GEN, b))
    expect(ErrorCode.READER_GUARD_HELD, lambda: guards.release(op, GEN, b))
    released = guards.release(op, GEN, a)
    assert released.state is ReaderGuardState.RELEASED and released.released_at is not None
    assert guards.release(op, GEN, a).state is ReaderGuardState.RELEASED  # idempotent for the owner
    assert guards.acquire(op, GEN, b).owner_token == b  # free again after an exact release
    expect(ErrorCode.READER_GUARD_HELD, lambda: guards.release(op, GEN, a))
    read = guards.read(op, GEN)
    assert read is not None and read.owner_token == b and read.state is ReaderGuardState.ACQUIRED


def test_releasing_a_guard_nobody_acquired_is_refused(guards: SqlReaderGuardStore) -> None:
    error = expect(ErrorCode.READER_GUARD_HELD, lambda: guards.release(new_op(), GEN, owner()))
    assert error.details["guard_exists"] is False


def test_a_held_guard_never_expires(url: str) -> None:
    class FixedClock:
        def __init__(self, at: datetime) -> None:
            self.at = at

        def now(self) -> datetime:
            return self.at

    then = SqlReaderGuardStore(url, clock=FixedClock(T0))
    much_later = SqlReaderGuardStore(url, clock=FixedClock(T0 + timedelta(days=3650)))
    try:
        then.ensure_schema()
        op = new_op()
        then.acquire(op, GEN, owner())
        expect(ErrorCode.READER_GUARD_HELD, lambda: much_later.acquire(op, GEN, owner()))
        guard = much_later.read(op, GEN)
        assert guard is not None and guard.acquired_at == T0 and guard.state is ReaderGuardState.ACQUIRED
    finally:
        then.close()
        much_later.close()


def test_concurrent_acquirers_have_exactly_one_winner(url: str) -> None:
    stores = [SqlReaderGuardStore(url) for _ in range(4)]
    stores[0].ensure_schema()
    try:
        for _ in range(5):
            op = new_op()
            results = race([partial(s.acquire, op, GEN, owner()) for s in stores])
            assert results == ["reader_guard_held"] * 3 + ["won"], results
    finally:
        for s in stores:
            s.close()


def test_malformed_guard_inputs_are_refused_before_any_write(guards: SqlReaderGuardStore) -> None:
    expect(ErrorCode.CAPSULE_INVALID, lambda: guards.acquire(new_op(), "not-a-key", owner()))
    expect(ErrorCode.CAPSULE_INVALID, lambda: guards.acquire(new_op(), GEN, "short"))


def test_a_consistently_rewritten_core_row_is_still_caught_by_the_chain(
    store: SqlCapsuleStore, url: str
) -> None:
    """Someone rewrites the core's payload AND its digest column: the next record's link exposes it."""
    op = new_op()
    c = core(op)
    store.append(op, 0, c)
    store.append(op, 1, pending(c))
    forged = core(op, run_id="run-forged").to_canonical()
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    f"UPDATE {CAPSULE_TABLE} SET payload_text = :payload, record_sha256 = :digest "
                    "WHERE operation_id = :op AND version = 1"
                ),
                {"payload": forged.decode("utf-8"), "digest": sha256_of(forged), "op": op},
            )
    finally:
        engine.dispose()
    error = expect(ErrorCode.CAPSULE_INVALID, lambda: store.read(op))
    assert "different sealed core" in error.safe_message or "does not link" in error.safe_message
