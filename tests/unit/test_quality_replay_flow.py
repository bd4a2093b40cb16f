"""Durable quality replay through the transfer engine, with real capsule stores and scripted readers.

Each test drives one route across attempts (engines sharing durable state), the way Airflow retries do,
and reads the durable records afterwards: the capsule chain, the reader guard and the checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_dpone.contracts.capsule import CapsuleChain, TargetComplete, TargetPending
from airflow_provider_dpone.contracts.errors import BLOCKING_CODES, DponeError, ErrorCode
from airflow_provider_dpone.contracts.target_observation import (
    ReaderGuardState,
    ReaderOutcomeKind,
    ReaderReason,
)
from airflow_provider_dpone.manifests.identity import semantic_identity
from airflow_provider_dpone.runtime.replay.ref import CAPSULE_REF_KEY, operation_id_for
from airflow_provider_dpone.runtime.replay.resolution import (
    ReplayResolutionRequest,
    ReplayResolveAs,
    replay_status,
    resolve_replay,
)
from tests.doubles import FaultyStore, WriteFault, orders_rows
from tests.quality_replay_rig import Rig, expect_code, outcome, quality_manifest

MANIFEST = quality_manifest(
    checks=(
        {"type": "row_count"},
        {"type": "not_null", "columns": ["amount"]},
        {"type": "unique", "columns": ["id"]},
        {"type": "distinct_count", "columns": ["order_date"], "severity": "warn"},
    )
)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path, orders_rows())
    yield made
    made.close()


def chain_of(rig: Rig, run_id: str, manifest=MANIFEST) -> CapsuleChain:  # type: ignore[no-untyped-def]
    stored = rig.capsules.read(operation_id_for(semantic_identity(manifest), run_id))
    assert isinstance(stored, CapsuleChain)
    return stored


def guard_state(rig: Rig, run_id: str) -> ReaderGuardState | None:
    chain = chain_of(rig, run_id)
    guard = rig.guards.read(chain.operation_id, chain.core.target_plan.generation_key())
    return None if guard is None else guard.state


def source_accesses(rig: Rig) -> list[str]:
    return [e for e in rig.events if e.startswith("source.")]


def test_run_seals_core_before_publication_and_completes_after_the_sink_is_closed(rig: Rig) -> None:
    report = rig.engine(MANIFEST).run("run-1")

    chain = chain_of(rig, "run-1")
    assert [r.kind.value for r in chain.records] == ["sealed_core", "target_pending", "complete"]
    assert isinstance(chain.terminal, TargetComplete)
    assert guard_state(rig, "run-1") is ReaderGuardState.RELEASED
    events = rig.events
    # probes and spawn proof before any extraction; observation only after the sink closed
    assert events.index("reader.prove_spawn") < events.index("source.profile") < events.index("sink.open")
    assert events.index("sink.load") < events.index("sink.close") < events.index("reader.observe")
    assert report.quality is not None and report.quality.verdict == "passed"
    assert report.quality.capsule_state == "complete" and not report.quality.replayed
    core = chain.core
    assert core.identity == semantic_identity(MANIFEST) and core.run_id == "run-1"
    assert core.load_ids == (core.checkpoint_batch_id,)
    # three adjacent days: one merged range selects exactly the generation
    assert len(core.target_plan.selector.partitions) == 1
    # every committed checkpoint of the batch names the operation's capsule
    refs = {
        c.diagnostics[CAPSULE_REF_KEY]["operation_id"]
        for c in rig.store.list_latest(rig.engine(MANIFEST)._route)
    }  # type: ignore[index]
    assert refs == {chain.operation_id}


def test_retry_of_a_completed_run_succeeds_from_the_capsule_reading_no_source_and_only_counting_the_target(
    rig: Rig,
) -> None:
    rig.engine(MANIFEST).run("run-1")
    rows_before = list(rig.target_rows())
    rig.events.clear()

    report = rig.engine(MANIFEST).run("run-1")

    # no describe, plan, profile, read; the sink opened for its read-only counts only (no load, no
    # summary); no reader
    assert rig.events == ["sink.open", "sink.close"]
    assert rig.target_rows() == rows_before
    assert report.quality is not None and report.quality.replayed and report.quality.verdict == "passed"
    assert report.partitions_skipped == 3 and report.rows_committed == 0
    assert {p.reason for p in report.partitions} == {"replayed_from_capsule"}
    # a run ID reused for a new run (a cron job's fixed --run-id) reads nothing: the report says so
    assert len(report.notices) == 1 and "'run-1' of this route completed before" in report.notices[0]
    assert "A new run ID moves them" in report.notices[0]


def test_retry_of_a_completed_run_over_a_target_that_lost_its_rows_stops_and_reads_no_source(
    rig: Rig,
) -> None:
    """Red before: the retry reported the run from its capsule, exit 0 and ``quality: passed``, over a table
    a DBA had truncated since; without replay the same retry stops (``target_lost_committed_rows``)."""
    rig.engine(MANIFEST).run("run-1")
    committed = list(rig.target_rows())
    assert sorted(committed) == sorted(orders_rows())
    head = chain_of(rig, "run-1").head_sha256
    rig.target_rows().clear()  # the DBA's TRUNCATE, between the run and its retry
    rig.events.clear()

    err = expect_code(ErrorCode.TARGET_LOST_COMMITTED_ROWS, lambda: rig.engine(MANIFEST).run("run-1"))

    assert source_accesses(rig) == [] and "reader.observe" not in rig.events  # the source is never read
    assert err.code in BLOCKING_CODES
    assert (err.details["committed_rows"], err.details["target_rows"]) == (len(committed), 0)
    assert err.details["replayed_run_id"] == "run-1"
    assert any("this retry of run 'run-1'" in line for line in err.hint_lines)
    assert chain_of(rig, "run-1").head_sha256 == head  # the capsule is left as it was
    assert rig.target_rows() == []  # nothing written
    # the table restored, the same retry replays again and moves nothing
    rig.target_rows().extend(committed)
    report = rig.engine(MANIFEST).run("run-1")
    assert report.quality is not None and report.quality.replayed and report.quality.verdict == "passed"
    assert sorted(rig.target_rows()) == sorted(orders_rows())


def test_retry_observing_again_over_a_target_that_lost_its_rows_stops_after_its_observation(rig: Rig) -> None:
    """A published run whose observation is still owed observes again; checks that hold on an empty table
    (no row count) pass there, and the retry ended green over a table that lost every committed row."""
    manifest = quality_manifest(checks=({"type": "not_null", "columns": ["amount"]},))
    rig.reader.outcomes = [outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=True)]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(manifest).run("run-1"))
    assert sorted(rig.target_rows()) == sorted(orders_rows())
    rig.target_rows().clear()
    rig.events.clear()

    err = expect_code(ErrorCode.TARGET_LOST_COMMITTED_ROWS, lambda: rig.engine(manifest).run("run-1"))

    assert source_accesses(rig) == [] and rig.events.count("reader.observe") == 1
    assert err.details["target_rows"] == 0 and err.details["replayed_run_id"] == "run-1"
    assert rig.target_rows() == []


def test_target_altered_after_publication_is_a_mismatch_that_blocks_the_route(rig: Rig) -> None:
    import datetime as dt

    rig.reader.before_observe = lambda: rig.target_rows().append((999, dt.date(2026, 11, 29), 5))
    err = expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["published"] is True
    assert err.retry_can_help  # its retries replay the kept verdict and fail the same way
    chain = chain_of(rig, "run-1")
    assert isinstance(chain.terminal, TargetComplete)  # the observation itself is final evidence
    assert guard_state(rig, "run-1") is ReaderGuardState.RELEASED

    rig.events.clear()
    blocked = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-2"))
    assert blocked.code in BLOCKING_CODES
    assert blocked.details["operations"][0]["state"] == "complete_failed"
    hints = "\n".join(blocked.hint_lines)
    # on-call is told to close it, not to retry it: a retry of its run ID fails the same way
    assert "failed:   a retry of its run ID reports the same failure" in hints
    assert "--as failed" in hints and "retry:    re-run" not in hints
    # the same run's retry fails again from its evidence, never succeeds, and reads nothing
    expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert rig.events == []


def test_timeout_with_verified_termination_keeps_pending_releases_guard_and_retry_observes_again(
    rig: Rig,
) -> None:
    rig.reader.outcomes = [outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=True)]
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["reader_guard"] == "released" and err.details["termination_verified"] is True
    assert isinstance(chain_of(rig, "run-1").terminal, type(None))
    assert isinstance(chain_of(rig, "run-1").pending, TargetPending)
    assert guard_state(rig, "run-1") is ReaderGuardState.RELEASED
    blocked = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-2"))
    hints = "\n".join(blocked.hint_lines)
    assert "retry:    re-run the blocked operation's run ID" in hints
    assert "failed:" not in hints and "retained:" not in hints

    rig.events.clear()
    report = rig.engine(MANIFEST).run("run-1")
    assert source_accesses(rig) == []  # observed again from the sealed plan alone
    assert "sink.load" not in rig.events and rig.events.count("reader.observe") == 1
    assert report.quality is not None and report.quality.verdict == "passed"
    assert isinstance(chain_of(rig, "run-1").terminal, TargetComplete)
    assert len(rig.target_rows()) == 12  # nothing inserted twice


def test_unverified_termination_retains_the_guard_until_an_operator_resolves(rig: Rig) -> None:
    rig.reader.outcomes = [outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=False)]
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["reader_guard"] == "retained" and err.details["worker_pid"] == 4242
    assert guard_state(rig, "run-1") is ReaderGuardState.ACQUIRED

    # a retry of the same run does not take over a guard held by an earlier attempt
    rig.events.clear()
    blocked = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-2"))
    hints = "\n".join(blocked.hint_lines)
    assert "retained: verify its worker is gone" in hints
    assert "retry:    re-run" not in hints
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert "reader.observe" not in rig.events

    identity = semantic_identity(MANIFEST)
    route = MANIFEST.route()
    request = ReplayResolutionRequest(
        "run-1", ReplayResolveAs.RETRY, "worker pid 4242 gone (ps)", "oncall@host"
    )
    record, audit = resolve_replay(
        rig.store, rig.latest(route), rig.stores, rig.clock, route, identity, request
    )
    assert record.blocking and not record.guard_retained and len(audit) == 3
    assert all(c.diagnostics[CAPSULE_REF_KEY]["resolution"]["by"] == "oncall@host" for c in audit)  # type: ignore[index]

    report = rig.engine(MANIFEST).run("run-1")
    assert report.quality is not None and report.quality.verdict == "passed"
    assert not replay_status(rig.latest(route), lambda: rig.stores, identity, selector_on=True).blocked


def test_complete_answer_with_unverified_termination_is_not_accepted_and_keeps_the_guard(rig: Rig) -> None:
    """ADR 0074 flowchart: retain the guard when the local lifecycle is unknown, even after an answer."""
    rig.reader.verified = False
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["outcome"] == "complete" and err.details["termination_verified"] is False
    assert err.details["reader_guard"] == "retained"
    assert guard_state(rig, "run-1") is ReaderGuardState.ACQUIRED
    chain = chain_of(rig, "run-1")
    assert chain.terminal is None and isinstance(chain.pending, TargetPending)  # the answer was not persisted
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-2"))

    rig.reader.verified = True
    rig.events.clear()
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert "reader.observe" not in rig.events  # the retained guard is not taken over by a retry


def test_operator_close_as_failed_unblocks_the_route_but_never_certifies_the_run(rig: Rig) -> None:
    rig.reader.outcomes = [outcome(ReaderOutcomeKind.REJECTED, ReaderReason.FRAME_MALFORMED, verified=True)]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    identity, route = semantic_identity(MANIFEST), MANIFEST.route()
    request = ReplayResolutionRequest(
        "run-1", ReplayResolveAs.FAILED, "target checked by hand", "oncall@host"
    )
    record, _ = resolve_replay(rig.store, rig.latest(route), rig.stores, rig.clock, route, identity, request)
    assert record.closed_by_operator and not record.blocking
    assert chain_of(rig, "run-1").terminal is not None and chain_of(rig, "run-1").terminal.kind == "failed"  # type: ignore[union-attr]

    expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(MANIFEST).run("run-1"))
    report = rig.engine(MANIFEST).run("run-2")  # unblocked: every partition is already committed
    assert report.partitions_committed == 0


def test_selector_off_never_skips_an_active_v2_capsule(rig: Rig) -> None:
    rig.reader.outcomes = [outcome(ReaderOutcomeKind.TIMEOUT, ReaderReason.BUDGET_EXHAUSTED, verified=True)]
    expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    off = quality_manifest(durable=False, checks=())
    assert semantic_identity(off) != semantic_identity(MANIFEST)  # checks differ; the selector alone does not
    rig.events.clear()
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(off).run("run-2"))
    assert any("durable_quality_replay is off" in line for line in err.hint_lines)
    assert source_accesses(rig) == [] and "sink.open" not in rig.events
    same_checks_off = MANIFEST.model_copy(
        update={
            "sink": MANIFEST.sink.model_copy(
                update={"options": MANIFEST.sink.options.model_copy(update={"durable_quality_replay": False})}
            )
        }
    )
    assert semantic_identity(same_checks_off) == semantic_identity(MANIFEST)
    again = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(same_checks_off).run("run-1"))
    # red before: "retry: re-run the blocked operation's run ID", which with the selector off printed the
    # same block again, for good; the way out is the selector back on (or closing the operation)
    retry = next(line for line in again.hint_lines if line.startswith("retry:"))
    assert "durable_quality_replay back to true" in retry and "--as failed" in retry
    rig.events.clear()
    assert rig.engine(MANIFEST).run("run-1").quality is not None  # selector on: the retry observes it


def test_committed_partitions_without_a_capsule_stay_required_unverified(rig: Rig) -> None:
    import datetime as dt

    off = quality_manifest(durable=False, checks=())
    rig.engine(off).run("legacy")
    rig.source.rows.append((100, dt.date(2026, 12, 1), 7))
    rig.events.clear()
    report = rig.engine(MANIFEST).run("run-1")
    assert report.quality is not None and report.quality.unverified_partitions == 3
    assert report.partitions_committed == 1
    # only the new partition was measured: the plan selects the new day alone, no rescan of history
    request = rig.reader.requests[-1]
    assert [(b.lower, b.upper) for b in request.selector.partitions] == [("2026-12-01", "2026-12-02")]
    status = replay_status(
        rig.latest(MANIFEST.route()), lambda: rig.stores, semantic_identity(MANIFEST), selector_on=True
    )
    assert len(status.unverified) == 3 and not status.blocked
    assert {p["quality"] for p in status.as_json()["unverified_partitions"]} == {"REQUIRED/UNVERIFIED"}  # type: ignore[index, union-attr]


def test_environment_without_spawn_capability_fails_before_extraction(rig: Rig) -> None:
    rig.reader.spawn_error = DponeError(ErrorCode.TARGET_READER_UNSUPPORTED, "no process groups here")
    expect_code(ErrorCode.TARGET_READER_UNSUPPORTED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert not any(e.startswith(("source.read", "source.profile", "sink.")) for e in rig.events)
    assert rig.capsules.current_version(operation_id_for(semantic_identity(MANIFEST), "run-1")) == 0


def test_worst_case_envelope_that_cannot_fit_fails_before_extraction(rig: Rig) -> None:
    import datetime as dt

    # 1100 separate (non-adjacent) days cannot be one reader plan: refused before any read or capsule
    rig.source.rows[:] = [(i, dt.date(2020, 1, 1) + dt.timedelta(days=2 * i), i) for i in range(1100)]
    expect_code(ErrorCode.CAPSULE_CAPACITY_EXCEEDED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert not any(
        e.startswith(("source.read", "source.profile", "sink.", "reader.prove")) for e in rig.events
    )


def test_required_source_check_failure_stops_before_publication(rig: Rig) -> None:
    import datetime as dt

    rig.source.rows.append((50, dt.date(2026, 11, 28), None))
    err = expect_code(ErrorCode.QUALITY_CHECK_FAILED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["published"] is False
    assert "sink.load" not in rig.events and "reader.observe" not in rig.events
    assert rig.capsules.current_version(operation_id_for(semantic_identity(MANIFEST), "run-1")) == 0
    phases = {c.diagnostics["target_commit_guard"]["phase"] for c in rig.store.list_latest(MANIFEST.route())}  # type: ignore[index]
    assert phases == {"failed_before_target"}


def test_warn_only_target_metric_unavailable_is_explicit_and_empty(rig: Rig) -> None:
    manifest = quality_manifest(checks=({"type": "row_count", "severity": "warn"},))
    rig.reader.fail_query = True
    report = rig.engine(manifest).run("run-1")
    assert report.quality is not None and report.quality.verdict == "warned"
    (check,) = report.quality.checks
    assert check.status == "unavailable" and check.values == {}
    chain = chain_of(rig, "run-1", manifest)
    assert isinstance(chain.terminal, TargetComplete) and chain.terminal.observation.metrics == ()


def test_required_target_metric_that_cannot_be_had_stays_pending(rig: Rig) -> None:
    rig.reader.fail_query = True
    err = expect_code(ErrorCode.QUALITY_REPLAY_UNRESOLVED, lambda: rig.engine(MANIFEST).run("run-1"))
    assert err.details["outcome"] == "worker_failed"
    assert chain_of(rig, "run-1").terminal is None


def test_core_sealed_by_an_attempt_that_never_published_is_reused_or_refused(rig: Rig) -> None:
    import datetime as dt

    failing = FaultyStore(rig.store, write_faults=[WriteFault(phase="armed", after_rows=0)])
    with pytest.raises(Exception):  # noqa: B017 - the injected store fault itself
        rig.engine(MANIFEST, store=failing).run("run-1")
    assert chain_of(rig, "run-1").version == 1  # sealed, never published
    report = rig.engine(MANIFEST).run("run-1")  # same evidence: the stored core is reused
    assert report.partitions_committed == 3
    assert chain_of(rig, "run-1").version == 3

    failing = FaultyStore(rig.store, write_faults=[WriteFault(phase="armed", after_rows=0)])
    rig.source.rows.append((77, dt.date(2026, 12, 2), 1))
    with pytest.raises(Exception):  # noqa: B017
        rig.engine(MANIFEST, store=failing).run("run-2")
    rig.source.rows.append((78, dt.date(2026, 12, 2), 2))  # the source changed since run-2 sealed
    expect_code(ErrorCode.CAPSULE_CONFLICT, lambda: rig.engine(MANIFEST).run("run-2"))
    assert rig.engine(MANIFEST).run("run-3").partitions_committed == 1


def test_staged_path_records_a_staged_probe(rig: Rig) -> None:
    manifest = quality_manifest(checks=({"type": "row_count"},), load="staged", export="file_artifact")
    from tests.doubles import MemoryArtifactStore

    rig.engine(manifest, artifacts=MemoryArtifactStore()).run("run-1")
    chain = chain_of(rig, "run-1", manifest)
    assert [p.scope.value for p in chain.core.probes] == ["source", "staged"]
    assert rig.events.index("sink.column_summary") < rig.events.index("sink.finalize_staged_load")


def test_a_v1_capsule_of_the_run_is_never_upgraded(rig: Rig) -> None:
    from airflow_provider_dpone.contracts.capsule import CapsuleV1, QualityPolicy
    from airflow_provider_dpone.runtime.quality.policy import IMPLICIT_ROW_COUNT

    operation_id = operation_id_for(semantic_identity(MANIFEST), "run-1")
    v1 = CapsuleV1(
        operation_id=operation_id,
        run_id="run-1",
        identity=semantic_identity(MANIFEST),
        route=MANIFEST.route(),
        policy=QualityPolicy(checks=(IMPLICIT_ROW_COUNT,)),
        probes=(),
        sealed_at=rig.clock.now(),
    )
    rig.capsules.append(operation_id, 0, v1)
    expect_code(ErrorCode.CAPSULE_CONFLICT, lambda: rig.engine(MANIFEST).run("run-1"))
    assert source_accesses(rig) == [] and rig.capsules.current_version(operation_id) == 1
