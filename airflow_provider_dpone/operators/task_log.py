"""What the operator adds to a failed try's task log, beyond the error itself.

An on-call operator reads the task log, not the code: it must say whether this try touched the target
(and so why the next try will stop), and how to run the ``dpone`` commands it names outside Airflow.
Everything here is safe to log: stages, route identities, partition and batch IDs, connection IDs,
exception *type* names. Never a message, SQL, a value or a credential.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_dpone.connections import env_var_name, setting_line
from airflow_provider_dpone.runtime.guard.route_guard import BlockedPartition, scan_route

if TYPE_CHECKING:
    from airflow_provider_dpone.compose import Runtime

#: Stages of a run after which the target may hold rows of the batch that no checkpoint calls committed.
TARGET_STAGES = frozenset({"target", "commit"})
RUNBOOK_COMMAND = "dpone runbook guard"
#: `airflow connections get -o json` prints a one-element list of the connection's fields, each as text,
#: and its ``get_uri``; this turns them into Airflow's JSON form, which dpone reads: the fields as stored,
#: the extras from the URI (which keeps their types). Not the URI alone: its host is lower-cased when read,
#: so a chDB folder or SQLite file in the host field (``ChData``) named another one (``chdata``), whose
#: counts ``guard inspect`` showed as the target's.
CONNECTION_OF_JSON = (
    "python3 -c 'import json,sys,urllib.parse as u; c=json.load(sys.stdin)[0]; "
    'q=dict(u.parse_qsl(u.urlsplit(c["get_uri"]).query,keep_blank_values=True)); '
    'print(json.dumps(dict({k: c.get(k) for k in ("conn_type","host","schema","login","password","port")}, '
    'extra=json.loads(q["__extra__"]) if "__extra__" in q else q)))\''
)


class StageRecorder:
    """A progress listener that remembers the last stage the engine began."""

    def __init__(self) -> None:
        self.last: str | None = None

    def plan_ready(self, to_run: int, to_skip: int) -> None:
        return None

    def partition_moved(self, label: str, rows: int, seconds: float) -> None:
        return None

    def stage(self, name: str) -> None:
        self.last = name

    @property
    def target_touched(self) -> bool:
        """The target call began and no committed promotion finished (``observe`` comes after one)."""
        return self.last in TARGET_STAGES


@dataclass(frozen=True)
class TouchedTarget:
    """This run's partitions that the durable guard now blocks, as the next try will read them."""

    batches: tuple[str, ...]
    partitions: tuple[BlockedPartition, ...]


def touched_target(runtime: Runtime, run_id: str) -> TouchedTarget | None:
    """Read back this run's blocking guards; ``None`` when the checkpoint store cannot be read."""
    try:
        latest = [c for c in runtime.checkpoints() if c.run_id == run_id]
    except Exception:  # best effort: the failure being reported stays the one that counts
        return None
    blocked = scan_route(latest).unresolved
    batches = tuple(dict.fromkeys(b.checkpoint_batch_id for b in blocked if b.checkpoint_batch_id))
    return TouchedTarget(batches=batches, partitions=blocked)


#: What a task whose manifest is a dict (``manifest_ref`` ``<manifest of task ...>``) tells the operator.
DICT_MANIFEST_HINT = (
    "this task's manifest is a dict: save its rendered form (the task's Rendered Template view) as a YAML "
    "file and pass that path to dpone where these commands say <manifest of task ...>"
)


def after_target_text(touched: TouchedTarget | None, manifest_ref: str, *, from_dict: bool = False) -> str:
    """The lines for a try that failed after the target call began (``from_dict``: the manifest is a dict
    the commands cannot name, ``DICT_MANIFEST_HINT``)."""
    if touched is None:
        batch = "this try's batch (the checkpoint store could not be read back)"
    elif touched.batches:
        batch = ", ".join(touched.batches)
    else:
        batch = "this try's batch"
    lines = [
        f"this try failed after the target was touched: the target may hold rows of batch {batch}; "
        "the next try will stop before the target until the route is resolved (the server may still be "
        "running this try's statement: guard resolve waits for it)"
    ]
    if touched is not None:
        lines.extend(
            f"  partition {b.label}  id={b.partition_id}  phase={b.phase}" for b in touched.partitions
        )
    lines.extend(
        [
            f"  inspect:  dpone checkpoints {manifest_ref}",
            f"  compare:  dpone guard inspect {manifest_ref}",
            f"  resolve:  dpone guard resolve {manifest_ref} --all-blocked --as committed|not-applied "
            "--reason TEXT   (or --partition ID)",
            *([f"  {DICT_MANIFEST_HINT}"] if from_dict else []),
            f"  runbook:  {RUNBOOK_COMMAND}",
        ]
    )
    return "\n".join(lines)


def outside_airflow_lines(
    connection_ids: list[str],
    replaced: dict[str, str] | None = None,
    *,
    from_dict: bool = False,
) -> list[str]:
    """How to run the ``dpone`` commands of this log outside Airflow, with this task's connections.

    ``replaced``: role -> the connection ID an operator argument put in place of the manifest's. ``dpone``
    reads the manifest's names, so the commands need a copy naming these (a route remembers its source
    connection's name: the manifest's own would be another source, ADR 0079). ``from_dict``: the manifest
    is a dict, which the commands cannot name (said even when every connection is an inline URI)."""
    if not connection_ids and not from_dict:
        return []
    lines = []
    if connection_ids:
        lines.append(
            "to run these dpone commands outside Airflow, on a host with this manifest and the Airflow CLI, "
            "export the connections the task reads as AIRFLOW_CONN_* first (dpone reads Airflow's JSON form):"
        )
    else:
        lines.append("to run these dpone commands outside Airflow:")
    lines.extend(
        "  "
        + setting_line(
            env_var_name(conn_id),
            f'"$(airflow connections get {shlex.quote(conn_id)} -o json | {CONNECTION_OF_JSON})"',
        )
        for conn_id in connection_ids
    )
    for role, conn_id in (replaced or {}).items():
        lines.append(
            f"  this task reads {role}.connection {conn_id!r} (operator argument {role}_conn_id), not the "
            f"manifest's: give dpone a copy of the manifest with {role}.connection: {conn_id}"
        )
    if from_dict:
        lines.append(f"  {DICT_MANIFEST_HINT}")
    lines.append(f"  the runbook: {RUNBOOK_COMMAND}")
    return lines


def exception_chain(exc: BaseException, limit: int = 6) -> str:
    """Type names along an exception's cause/context chain, outermost first (never their messages)."""
    names: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(names) < limit:
        seen.add(id(current))
        names.append(type(current).__name__)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return " <- ".join(names)
