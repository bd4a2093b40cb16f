"""NativeTransferOperator: run one manifest through the composition root, exactly like ``dpone run``.

Parse-time safety: ``__init__`` only stores its arguments. The manifest is read, validated and the
connections resolved in :meth:`execute`, so importing a DAG file opens no socket, reads no manifest and
starts no process.

Retries: a blocked route (``native_transfer_manual_reconciliation_required`` or
``native_transfer_target_commit_guard_invalid``) fails the task as an ordinary failure. Airflow may
retry it; every retry re-reads the durable guard and stops again before any target I/O, which is the
correctness boundary. The task never claims to be non-retryable for those codes.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_dpone.contracts.errors import NON_RETRYABLE_CODES, DponeError, ErrorCode
from airflow_provider_dpone.contracts.report import QualitySummary, RunReport
from airflow_provider_dpone.operators.task_log import (
    StageRecorder,
    TouchedTarget,
    after_target_text,
    exception_chain,
    outside_airflow_lines,
    touched_target,
)
from airflow_provider_dpone.runtime.cancellation import CancellationToken, TransferInterrupted

if TYPE_CHECKING:
    from airflow_provider_dpone.compose import EndpointResolver, Runtime
    from airflow_provider_dpone.manifests.loader import LoadedManifest
    from airflow_provider_dpone.operators.lineage import RouteLineage, RouteOperatorLineage

from airflow.sdk import BaseOperator

try:  # Airflow 3.2+: the task SDK holds the exceptions
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 3.1 (the tested floor): they still live in airflow.exceptions
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined,unused-ignore]
        AirflowException,
        AirflowFailException,
    )


class DponeTaskFailed(AirflowException):
    """The task's failure as Airflow sees it: the stable code and safe message, chained to nothing.

    ``code`` is ``None`` for an interruption or an unexpected error (the task log names its type)."""

    def __init__(self, code: ErrorCode | None, message: str) -> None:
        super().__init__(message)
        self.code = code


class NativeTransferOperator(BaseOperator):
    """Move one route (source table -> ClickHouse table) as a manifest describes, under the commit guard.

    :param manifest: path to a manifest YAML file (relative paths resolve against the DAG file's
        folder) or the manifest as a dict. Templated.
    :param source_conn_id: Airflow connection ID that replaces the manifest's ``source.connection``. The
        route remembers it: a task of the same route through another source connection stops (ADR 0079).
    :param sink_conn_id: replaces ``sink.connection``.
    :param checkpoints_conn_id: replaces ``checkpoints.connection``.
    :param allow_nonempty_target: ``dpone run --allow-nonempty-target``. ``True`` or ``False``, or a template
        that renders to ``true`` or ``false`` for one DAG run (``"{{ dag_run.conf.get('allow_nonempty_target',
        false) }}"``); anything else fails the task before the run (a never-rendered template's text used to
        count as ``True``). It is for another writer's rows: over the route's own (a restored or lost
        checkpoint store) an append fails the task where a partition holds exactly the source's count, or
        another count whose integer key values are not all outside the source's range there (ADR 0092).

    Returns (and pushes to XCom) a small summary: partitions committed and skipped, rows committed,
    the checkpoint batch ID and the quality verdict (counts and states only). Never data.
    """

    template_fields: Sequence[str] = (
        "manifest",
        "source_conn_id",
        "sink_conn_id",
        "checkpoints_conn_id",
        "allow_nonempty_target",
    )
    template_ext: Sequence[str] = ()
    ui_color = "#f7e9c5"

    def __init__(
        self,
        *,
        manifest: str | os.PathLike[str] | Mapping[str, Any],
        source_conn_id: str | None = None,
        sink_conn_id: str | None = None,
        checkpoints_conn_id: str | None = None,
        allow_nonempty_target: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest: str | dict[str, Any] = (
            dict(manifest) if isinstance(manifest, Mapping) else os.fspath(manifest)
        )
        self.source_conn_id = source_conn_id
        self.sink_conn_id = sink_conn_id
        self.checkpoints_conn_id = checkpoints_conn_id
        #: write although the target holds rows this route did not load (``--allow-nonempty-target``): append
        #: with no checkpoint, or let full_refresh / replace_partition delete another source's committed rows
        #: (or, on their first run, rows no route loaded); a template is rendered per run (:func:`allow_flag`)
        if not isinstance(allow_nonempty_target, bool) and not _templated(allow_nonempty_target):
            raise ValueError(
                _ALLOW_FLAG_REFUSED.format(kind=type(allow_nonempty_target).__name__, rendered="", then="")
            )
        self.allow_nonempty_target: bool | str = allow_nonempty_target

    def execute(self, context: Any) -> dict[str, Any]:
        run_id = str(context["run_id"])
        # rendered by now: a value that is no boolean would delete rows on every run (a retry renders it alike)
        self._allow_nonempty_target = allow_flag(self.allow_nonempty_target)
        # Created per try, never in __init__: operators are copied and serialized, a token is not.
        self._cancellation = CancellationToken()
        self._stages = StageRecorder()
        self._touched: TouchedTarget | None = None
        self._loaded: LoadedManifest | None = None
        try:
            report = self._run(context, run_id)
        except DponeError as err:
            # The on-call text: route, blocked partitions, the dpone commands to inspect and resolve.
            self.log.error("%s", err.render())
            # Full partition and batch IDs for tooling (the text above shortens them); all safe values.
            self.log.error("dpone error details: %s", json.dumps(err.to_json(), sort_keys=True, default=str))
            self._log_next_steps(err.code)
            # A fresh exception, chained to nothing: Airflow logs the traceback of what leaves execute(),
            # and a driver error under a DponeError (a failed checkpoint INSERT) would print its SQL
            # and bound values there.
            failure = DponeTaskFailed(err.code, str(err))
            if not err.retry_can_help:
                raise AirflowFailException(str(err)) from None
            raise failure from None
        except TransferInterrupted as stop:
            self.log.error(
                "error: transfer_interrupted: the task was stopped (%s) and the run ended at its next chunk",
                stop.reason,
            )
            self._log_next_steps(None)
            raise DponeTaskFailed(None, f"transfer_interrupted: {stop.reason}") from None
        except Exception as exc:
            # Not a DponeError: its message and its chain may hold SQL, values or a connector's answer.
            self.log.error(
                "error: unexpected_failure: %s (its message is not shown: it may hold SQL or values; "
                "run `dpone run MANIFEST --debug` outside Airflow to see it)",
                exception_chain(exc),
            )
            self._log_next_steps(None)
            raise DponeTaskFailed(None, f"unexpected failure: {type(exc).__name__}") from None
        except BaseException:
            # AirflowTaskTimeout (and friends) stay themselves: Airflow handles them, then calls on_kill.
            self._log_next_steps(None)
            raise
        summary = summarize(report)
        batch = summary["checkpoint_batch_id"]
        self.log.info(
            "dpone run %s: %d partition(s) committed, %d skipped, %d row(s) committed (%s)",
            run_id,
            summary["partitions_committed"],
            summary["partitions_skipped"],
            summary["rows_committed"],
            f"batch {batch}" if batch is not None else "nothing to move",
        )
        idle = report.idle_reason()
        if idle is not None:
            self.log.info("dpone run %s: %s", run_id, idle)
        # report.notices are in the task log already: the run logged each as it made it (NOTICE_LOGGER)
        if self._cancellation.cancelled:
            self.log.warning(
                "dpone run %s: the stop request (%s) came after the batch was committed; the run completed",
                run_id,
                self._cancellation.reason,
            )
        quality = summary["quality"]
        if quality is not None:
            # The on-call view of durable quality replay: verdict, check counts, capsule state.
            self.log.info(
                "dpone quality %s: verdict %s, %d check(s) passed, %d failed, %d unavailable, "
                "capsule %s, replayed %s",
                run_id,
                quality["verdict"],
                quality["checks_passed"],
                quality["checks_failed"],
                quality["checks_unavailable"],
                quality["capsule_state"] or "none",
                "yes" if quality["replayed"] else "no",
            )
            if quality["unverified_partitions"]:
                self.log.warning(
                    "dpone quality %s: %d committed partition(s) REQUIRED/UNVERIFIED (committed without "
                    "original durable proof; no later run certifies them; inspect: dpone replay status)",
                    run_id,
                    quality["unverified_partitions"],
                )
        return summary

    def on_kill(self) -> None:
        """Airflow stops the task ("mark failed", a timeout, a worker shutdown): end the run at once.

        Airflow 3 calls this from its SIGTERM handler in the main thread and then lets ``execute`` go on
        (the supervisor sends SIGKILL about five seconds later); on a timeout it calls it after
        ``AirflowTaskTimeout`` left ``execute``. Either way this only records the stop request and kills
        a live reader worker: the engine raises at its next chunk, the guard lifecycle records
        ``failed_before_target`` or ``target_outcome_unknown``, and the clients are closed on the way out.
        """
        token: CancellationToken | None = getattr(self, "_cancellation", None)
        if token is not None:
            token.cancel("Airflow stopped the task (on_kill)")

    def _run(self, context: Any, run_id: str) -> RunReport:
        loaded, manifest_ref = self._load(_dag_folder(context, self))
        self._loaded, self._manifest_ref = loaded, manifest_ref
        resolver = self._resolver(loaded.manifest_dir)
        with self._open_runtime(loaded, resolver, manifest_ref) as runtime:
            runtime.cancellation = self._cancellation
            if runtime.progress is None:
                runtime.progress = self._stages
            try:
                report = runtime.run(run_id=run_id, allow_nonempty_target=self._allow_nonempty_target)
            except BaseException:
                if self._stages.target_touched:
                    self._touched = touched_target(runtime, run_id)
                raise
            self._record_lineage(runtime, report, context)
            return report

    # -- OpenLineage (operators/lineage.py; the provider is optional and imported only when it asks) ----

    def get_openlineage_facets_on_start(self) -> RouteOperatorLineage | None:
        """The source and target datasets, named from the manifest and connections (no database I/O)."""
        from airflow_provider_dpone.operators import lineage

        return lineage.operator_lineage(self._named_lineage())

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> RouteOperatorLineage | None:
        """The datasets with the columns the run moved and, after a completed run, the rows it wrote.

        Also called after a failed try (there is no ``_on_failure``): then only the names, built anew,
        because the provider may have run ``_on_start`` in a forked process (Airflow 3.1)."""
        from airflow_provider_dpone.operators import lineage

        recorded = lineage.recorded(task_instance)
        return lineage.operator_lineage(recorded if recorded is not None else self._named_lineage())

    def _named_lineage(self) -> RouteLineage | None:
        """Both datasets from the manifest and the connections, or ``None`` (never raises)."""
        from airflow_provider_dpone.operators import lineage

        try:
            loaded, _ = self._load(_dag_folder({}, self))
            return lineage.route_lineage(
                loaded.manifest, loaded.route.source_table, self._resolver(loaded.manifest_dir)
            )
        except Exception as exc:  # lineage never fails a task; execute reports a bad manifest itself
            self.log.warning("dpone lineage: the datasets could not be named (%s)", type(exc).__name__)
            return None

    def _record_lineage(self, runtime: Runtime, report: RunReport, context: Any) -> None:
        """After a completed run, and only when OpenLineage emits: the datasets, the source's schema (one
        more schema read) and the rows written, for :meth:`get_openlineage_facets_on_complete`."""
        from airflow_provider_dpone.operators import lineage

        if not lineage.lineage_enabled():
            return
        try:
            named = lineage.route_lineage(
                runtime.manifest, runtime.loaded.route.source_table, runtime.resolve_endpoint
            )
        except Exception as exc:
            self.log.warning("dpone lineage: the datasets could not be named (%s)", type(exc).__name__)
            return
        schema = None
        try:
            schema = runtime.open_source().describe()
        except Exception as exc:
            self.log.warning("dpone lineage: the source's columns could not be read (%s)", type(exc).__name__)
        lineage.record(context.get("ti"), named.with_run(schema, report))

    def _resolver(self, manifest_dir: Path) -> EndpointResolver:
        from airflow_provider_dpone.hooks.endpoint_resolver import AirflowEndpointResolver

        return AirflowEndpointResolver(
            manifest_dir,
            overrides={
                "source": self.source_conn_id,
                "sink": self.sink_conn_id,
                "checkpoints": self.checkpoints_conn_id,
            },
        )

    def _log_next_steps(self, code: ErrorCode | None) -> None:
        """What the on-call operator needs beyond the error: did this try touch the target, and how to
        run the ``dpone`` commands outside Airflow."""
        raw: str | None = getattr(self, "_manifest_ref", None)
        ref = None if raw is None else shlex.quote(raw)  # pasted from the task log into a shell
        from_dict = raw is not None and raw.startswith("<")  # the pseudo-path of a dict manifest
        stages: StageRecorder | None = getattr(self, "_stages", None)
        if stages is not None and stages.target_touched and ref is not None:
            self.log.error("%s", after_target_text(getattr(self, "_touched", None), ref, from_dict=from_dict))
        loaded: LoadedManifest | None = getattr(self, "_loaded", None)
        if loaded is None or ref is None or code in NON_RETRYABLE_CODES:
            return
        lines = outside_airflow_lines(
            self._connection_ids(loaded), self._replaced_connections(loaded), from_dict=from_dict
        )
        if lines:
            self.log.info("%s", "\n".join(lines))

    def _replaced_connections(self, loaded: LoadedManifest) -> dict[str, str]:
        """Role -> the connection ID an operator argument reads instead of the manifest's."""
        manifest = loaded.manifest
        pairs = {
            "source": (self.source_conn_id, manifest.source.connection),
            "sink": (self.sink_conn_id, manifest.sink.connection),
            "checkpoints": (self.checkpoints_conn_id, manifest.checkpoints.connection),
        }
        return {role: given for role, (given, named) in pairs.items() if given and given != named}

    def _connection_ids(self, loaded: LoadedManifest) -> list[str]:
        """The Airflow connection IDs this task reads (inline URIs are not connections)."""
        manifest = loaded.manifest
        named = [
            self.source_conn_id or manifest.source.connection,
            self.sink_conn_id or manifest.sink.connection,
            self.checkpoints_conn_id or manifest.checkpoints.connection,
        ]
        return list(dict.fromkeys(n for n in named if "://" not in n))

    def _open_runtime(
        self, loaded: LoadedManifest, resolver: EndpointResolver, manifest_ref: str
    ) -> AbstractContextManager[Runtime]:
        """Compose the runtime through the composition root, exactly as the CLI does."""
        from airflow_provider_dpone.compose import open_runtime

        return open_runtime(loaded, resolve=resolver, manifest_ref=manifest_ref)

    def _load(self, dag_dir: Path) -> tuple[LoadedManifest, str]:
        """Strictly validate the manifest; returns it and the reference the on-call hints print."""
        from airflow_provider_dpone.manifests.loader import load_manifest, load_manifest_dict

        if isinstance(self.manifest, dict):
            origin = f"<manifest of task {self.dag_id}.{self.task_id}>"
            return load_manifest_dict(self.manifest, origin, manifest_dir=dag_dir), origin
        path = Path(self.manifest).expanduser()
        if not path.is_absolute():
            path = dag_dir / path
        return load_manifest(path), str(path)


def summarize(report: RunReport) -> dict[str, Any]:
    """The XCom value: counts and identities only (JSON-serializable, never rows)."""
    return {
        "manifest": report.manifest_name,
        "route": report.route,
        "run_id": report.run_id,
        "checkpoint_batch_id": report.checkpoint_batch_id,
        "partitions_committed": report.partitions_committed,
        "partitions_skipped": report.partitions_skipped,
        "rows_committed": report.rows_committed,
        "export": report.export,
        "load": report.load,
        "seconds": round(report.seconds, 3),
        "quality": summarize_quality(report.quality),
    }


def summarize_quality(quality: QualitySummary | None) -> dict[str, Any] | None:
    """The quality verdict in the XCom summary: states and counts, never the measured metrics.

    ``None`` when the run had neither quality checks nor durable replay.
    """
    if quality is None:
        return None
    statuses = [check.status for check in quality.checks]
    return {
        "verdict": quality.verdict,
        "durable_replay": quality.durable_replay,
        "checks_passed": statuses.count("passed"),
        "checks_failed": statuses.count("failed"),
        "checks_unavailable": statuses.count("unavailable"),
        "replayed": quality.replayed,
        "capsule_state": quality.capsule_state,
        "operation_id": quality.operation_id,
        "unverified_partitions": quality.unverified_partitions,
    }


_ALLOW_FLAG_REFUSED = (
    "allow_nonempty_target must be True or False, or a template that renders to true or false (got a "
    "{kind} that is neither{rendered}){then}; it lets a run delete rows this route did not load, so nothing "
    "else is taken for True"
)


def _templated(value: object) -> bool:
    """Whether ``value`` is Jinja text that Airflow renders before ``execute`` (a template field)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def allow_flag(value: object) -> bool:
    """``allow_nonempty_target`` as rendered for this run: a boolean, or the text ``true`` / ``false`` (any
    case, blanks around) a template renders. Anything else (text still holding ``{{``, which Airflow never
    rendered; ``yes``; ``1``) fails the task, not retried: any text was taken for ``True``, and every hourly
    run of a window then deleted the hour before it, with success. The value is never shown."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    rendered = ", a template left unrendered" if _templated(value) else ""
    raise AirflowFailException(
        _ALLOW_FLAG_REFUSED.format(
            kind=type(value).__name__, rendered=rendered, then=": the run was not started"
        )
    )


def _dag_folder(context: Any, task: Any) -> Path:
    """Folder of the DAG file, the base for a relative manifest path (falls back to the cwd)."""
    dag = None
    try:
        dag = context.get("dag")
    except AttributeError:
        dag = None
    if dag is None:
        try:
            dag = getattr(task, "dag", None)
        except RuntimeError:  # Airflow 3: a task outside any DAG raises instead of returning None
            dag = None
    fileloc = getattr(dag, "fileloc", None)
    if fileloc:
        return Path(fileloc).resolve().parent
    return Path.cwd()
