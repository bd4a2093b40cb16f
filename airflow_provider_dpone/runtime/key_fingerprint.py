"""Whether a source connection holds the rows the target holds, beyond their counts (ADR 0079, addendum).

A route remembers the name of its source connection; ``dpone guard rebaseline --source-moved`` records a
new one after the operator checked, with ``dpone checkpoints --verify``, that it reads the same table. Both
compared row counts only, so another database's table of equal counts per partition (a sibling shard:
same days, same rows per day, other ids) passed both: ``0 drifted``, the move recorded, and every later
run of that shard skipped its partitions as committed, exit 0, its rows never loaded.

So both now also compare each committed partition's **key fingerprint** on the source with the target's
(``contracts.key_fingerprint``: exact integer aggregates of the route's integer key columns, the same on
every engine), over the columns every route may have: the source table's primary key, ``sink.order_by``
and the partitioning column, those the read returns and the target holds as integers. One statement per
side for each batch of up to ``BATCH_PARTITIONS`` pairwise disjoint partitions; none per row.

A partition is compared where the source and the target each hold exactly the committed number of rows
within its bounds; fingerprints that then differ mean other rows behind equal counts (another database's
table, or rows replaced at the source): drift, and ``--source-moved`` refuses. Where counts differ (late
or deleted rows, or other routes' rows in the target) counts already tell, and keys are not compared.
A route without such a column keeps counts alone, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from typing import Any

from pydantic import JsonValue

from airflow_provider_dpone.contracts.checkpoint import PartitionCheckpoint
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.key_fingerprint import KeyFingerprint
from airflow_provider_dpone.contracts.manifest import Manifest
from airflow_provider_dpone.contracts.partition import BoundsKind, PartitionBounds
from airflow_provider_dpone.contracts.route import RouteIdentity
from airflow_provider_dpone.contracts.schema import TableSchema
from airflow_provider_dpone.ports.sink import Sink
from airflow_provider_dpone.ports.source import Source

#: The most partitions one fingerprint statement covers (each is a ``CASE`` branch every row of the batch
#: may test, and two predicates of the statement's text).
BATCH_PARTITIONS = 50
#: The most key columns fingerprinted (four aggregates each).
MAX_KEY_COLUMNS = 4
#: ClickHouse's integer types (as sources map theirs, and as a target declares them).
INTEGER_TYPES = frozenset({"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"})
#: Partitions a refusal names in its message and details.
NAMED = 10
#: Each partition's fingerprint on one side.
_ByBounds = dict[PartitionBounds, KeyFingerprint]

NO_KEY_COLUMN = (
    "no integer key column (the source table's primary key, sink.order_by or the partitioning column) is read "
    "from the source and held by the target"
)
TARGET_MISSING = "the target table does not exist"
TARGET_LACKS_PARTITION_COLUMN = (
    "the target table does not hold the partition column (a full_refresh route whose source.columns leave it "
    "out), so it cannot select a partition's rows"
)
NOT_SUPPORTED = "the source or the target cannot fingerprint keys"


class KeyVerdict(str, Enum):
    MATCH = "match"
    DIFFERS = "differs"
    NOT_COMPARED = "not_compared"


class NotCompared(str, Enum):
    """Why one partition's keys were not compared (its counts decide for it)."""

    NO_ROW_COUNT = "the commit recorded no row count"
    SOURCE_ROWS_DIFFER = "the source holds another number of rows there than were committed"
    TARGET_ROWS_DIFFER = (
        "the target holds another number of rows there than were committed (other routes' rows, or rows "
        "changed in the target)"
    )


@dataclass(frozen=True)
class KeyCheck:
    verdict: KeyVerdict
    why: NotCompared | None = None


@dataclass(frozen=True)
class KeyChecks:
    """The key comparison of a set of committed partitions, by partition ID.

    ``unusable``: why no partition could be compared at all (a fixed phrase; ``checks`` is then empty)."""

    columns: tuple[str, ...] = ()
    unusable: str | None = None
    checks: Mapping[str, KeyCheck] = field(default_factory=dict)

    def with_verdict(self, verdict: KeyVerdict) -> list[str]:
        return [pid for pid, check in self.checks.items() if check.verdict is verdict]

    @property
    def compared(self) -> int:
        return sum(1 for c in self.checks.values() if c.verdict is not KeyVerdict.NOT_COMPARED)

    def summary(self) -> str:
        """One line for an operator: what was compared, over which columns, or why nothing was."""
        if self.unusable is not None:
            return (
                f"not compared: {self.unusable}; counts alone cannot tell another database's table of "
                "equal counts per partition (a shard) from this one"
            )
        differ = len(self.with_verdict(KeyVerdict.DIFFERS))
        left = len(self.checks) - self.compared
        text = (
            f"{', '.join(self.columns)} compared with the target in {self.compared} partition(s), "
            f"{differ} differ"
        )
        if left:
            text += f"; {left} not compared (their row counts differ: see source_rows and the target's)"
        return text


def key_candidates(
    primary_key: Sequence[str], order_by: Sequence[str] | None, partition_column: str | None
) -> list[str]:
    """The columns a key fingerprint may use, in order of preference, each once."""
    names = [*primary_key, *(order_by or ()), *((partition_column,) if partition_column else ())]
    return list(dict.fromkeys(names))


def route_key_candidates(manifest: Manifest) -> Callable[[Source], list[str]]:
    """:func:`key_candidates` of ``manifest``'s route, given its source (whose primary key comes first)."""

    def candidates(source: Source) -> list[str]:
        primary_key = getattr(source, "key_columns", None)
        return key_candidates(
            primary_key() if callable(primary_key) else [],
            manifest.sink.order_by,
            manifest.source.partitioning.column,
        )

    return candidates


def fingerprint_columns(read: TableSchema, target: TableSchema, candidates: Sequence[str]) -> tuple[str, ...]:
    """Those ``candidates`` the read returns and the target holds, both as integers (at most
    ``MAX_KEY_COLUMNS``): an exact value on every engine, and one the target got from the source."""
    read_types = {c.name: c.clickhouse_type for c in read.columns}
    target_types = {c.name: c.clickhouse_type for c in target.columns}
    chosen = [
        name
        for name in candidates
        if read_types.get(name) in INTEGER_TYPES and target_types.get(name) in INTEGER_TYPES
    ]
    return tuple(chosen[:MAX_KEY_COLUMNS])


def disjoint_batches(bounds: Sequence[PartitionBounds]) -> list[list[PartitionBounds]]:
    """``bounds`` (distinct) in batches of at most ``BATCH_PARTITIONS``, the bounds of a batch pairwise
    disjoint (a statement keys each row by the first bounds that selects it): ranges of one column and a
    typed value, as layers of non-overlapping ranges (a route partitioned by month, then by day, gives two);
    integer lists whose values do not meet. Any other bounds (the whole table, text ranges and lists, whose
    equality follows a collation) is a batch of its own."""
    groups: dict[tuple[object, ...], list[tuple[Any, Any, PartitionBounds]]] = {}
    lists: dict[str | None, list[tuple[frozenset[int], list[PartitionBounds]]]] = {}
    alone: list[list[PartitionBounds]] = []
    for one in bounds:
        interval = _interval(one)
        if interval is not None:
            groups.setdefault((one.column, one.value_type), []).append((*interval, one))
            continue
        values = _integer_values(one)
        if values is None:
            alone.append([one])
            continue
        layers = lists.setdefault(one.column, [])
        for index, (taken, members) in enumerate(layers):
            if len(members) < BATCH_PARTITIONS and not taken & values:
                layers[index] = (taken | values, [*members, one])
                break
        else:
            layers.append((values, [one]))
    batches: list[list[PartitionBounds]] = []
    for intervals in groups.values():
        for layer in _layers(intervals):
            batches += [layer[i : i + BATCH_PARTITIONS] for i in range(0, len(layer), BATCH_PARTITIONS)]
    batches += [members for layers in lists.values() for _, members in layers]
    return batches + alone


def check_keys(
    committed: Sequence[PartitionCheckpoint],
    source: Source,
    sink: Sink,
    table: str,
    candidates: Callable[[Source], list[str]],
) -> KeyChecks:
    """Compare the key fingerprint of each committed partition on ``source`` with ``table``'s (read-only;
    one statement per side for each batch). ``candidates``: the columns a fingerprint may use, given the
    source (its primary key first)."""
    if not committed:
        return KeyChecks()
    both = _both_sides(list(dict.fromkeys(c.bounds for c in committed)), source, sink, table, candidates)
    if isinstance(both, str):
        return KeyChecks(unusable=both)
    columns, on_source, on_target = both
    checks = {c.partition_id: _verdict(c, on_source[c.bounds], on_target[c.bounds]) for c in committed}
    return KeyChecks(columns=columns, checks=checks)


@dataclass(frozen=True)
class KeyRanges:
    """What the key ranges of some partitions say of the target's rows there against the source's.

    ``apart``: those where none of the target's rows can be one of the source's (``keys_apart``).
    ``columns``: the integer key columns compared; empty where none could be (``unusable`` says why), and
    then nothing is apart and nothing is known."""

    columns: tuple[str, ...] = ()
    apart: frozenset[PartitionBounds] = frozenset()
    unusable: str | None = None


def key_ranges(
    bounds: Sequence[PartitionBounds],
    source: Source,
    sink: Sink,
    table: str,
    candidates: Callable[[Source], list[str]],
) -> KeyRanges:
    """Those of ``bounds`` within which, for some integer key column, every row the target holds has a value
    outside the range of the values the source holds (read-only; one statement per side for each batch): no
    row of the target there is a row of the source, whatever their counts (ADR 0092). None where the source
    holds no value of the column, or the target a NULL in it; none at all, and no column, where keys cannot
    be fingerprinted. Overlapping ranges prove nothing either way (interleaved ids of another writer, or
    the source's own rows), so they are never "apart"."""
    unique = list(dict.fromkeys(bounds))
    if not unique:
        return KeyRanges()
    both = _both_sides(unique, source, sink, table, candidates)
    if isinstance(both, str):
        return KeyRanges(unusable=both)
    columns, on_source, on_target = both
    apart = frozenset(b for b in unique if _apart(on_source[b], on_target[b]))
    return KeyRanges(columns=columns, apart=apart)


def keys_apart(
    bounds: Sequence[PartitionBounds],
    source: Source,
    sink: Sink,
    table: str,
    candidates: Callable[[Source], list[str]],
) -> set[PartitionBounds]:
    """:func:`key_ranges`' ``apart``: those of ``bounds`` none of whose target rows is a row of the source."""
    return set(key_ranges(bounds, source, sink, table, candidates).apart)


def _apart(source: KeyFingerprint, target: KeyFingerprint) -> bool:
    """Whether some column's values in ``target`` (one in every row) all lie outside ``source``'s range."""
    for ours, theirs in zip(source.columns, target.columns, strict=True):
        if ours.minimum is None or ours.maximum is None or theirs.minimum is None or theirs.maximum is None:
            continue
        if theirs.values == target.rows and (theirs.maximum < ours.minimum or ours.maximum < theirs.minimum):
            return True
    return False


def _both_sides(
    bounds: Sequence[PartitionBounds],
    source: Source,
    sink: Sink,
    table: str,
    candidates: Callable[[Source], list[str]],
) -> tuple[tuple[str, ...], _ByBounds, _ByBounds] | str:
    """The columns fingerprinted and each of ``bounds``' (distinct) fingerprint on the source and on the
    target, or why none can be taken (``NOT_SUPPORTED``, ``TARGET_MISSING``, ``TARGET_LACKS_PARTITION_COLUMN``,
    ``NO_KEY_COLUMN``)."""
    fingerprint_source = getattr(source, "key_fingerprints", None)
    fingerprint_target = getattr(sink, "key_fingerprints", None)
    describe_target = getattr(sink, "target_schema", None)
    if not (callable(fingerprint_source) and callable(fingerprint_target) and callable(describe_target)):
        return NOT_SUPPORTED
    target_schema = describe_target(table)
    if target_schema is None:
        return TARGET_MISSING
    held = set(target_schema.names)
    if any(one.column is not None and one.column not in held for one in bounds):
        return TARGET_LACKS_PARTITION_COLUMN
    columns = fingerprint_columns(source.describe(), target_schema, candidates(source))
    if not columns:
        return NO_KEY_COLUMN
    on_source: dict[PartitionBounds, KeyFingerprint] = {}
    on_target: dict[PartitionBounds, KeyFingerprint] = {}
    for batch in disjoint_batches(bounds):
        theirs = fingerprint_target(table, batch, columns)
        if theirs is None:  # dropped since it was described
            return TARGET_MISSING
        on_target.update(zip(batch, theirs, strict=True))
        on_source.update(zip(batch, fingerprint_source(batch, columns), strict=True))
    return columns, on_source, on_target


def refuse_other_keys(
    route: RouteIdentity,
    checks: KeyChecks,
    committed: Sequence[PartitionCheckpoint],
    manifest_ref: str,
) -> None:
    """``--source-moved`` over a connection whose rows differ from the target's in some partition of equal
    counts: it reads another table (a shard), not the one that moved. Nothing is recorded."""
    differ = set(checks.with_verdict(KeyVerdict.DIFFERS))
    if not differ:
        return
    labels = sorted({c.bounds.label for c in committed if c.partition_id in differ})
    named = ", ".join(labels[:NAMED]) + (f" and {len(labels) - NAMED} more" if len(labels) > NAMED else "")
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"this source connection does not hold the rows route {route.describe()} committed: in {len(labels)} "
        f"partition(s) ({named}) it holds as many rows as were committed, but other keys "
        f"({', '.join(checks.columns)}) than the target holds there; it reads another table (another "
        "database's, a shard), not the one that moved; nothing was recorded",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "key_columns": list(checks.columns),
            "partitions_differing": len(labels),
            "partitions": labels[:NAMED],
        },
        hint_lines=(
            "nothing was recorded; runs through this connection stay stopped",
            "another database (shards): give it a target table of its own (sink.table) and read both "
            "through a ClickHouse view or Merge table; its first run then moves all its rows",
            f"see the partitions: dpone checkpoints {manifest_ref} --verify (DRIFTED, keys)",
            "only if this IS the moved table and those partitions changed at the source since their commit "
            "(rows replaced at equal counts): record the move with --force, then reload them:",
            f"  dpone guard rebaseline {manifest_ref} --source-moved --force --reason '<what you checked>'",
            "see `dpone runbook guard`, 'The route's source changed' and 'Drifted partitions'",
        ),
    )


def refuse_unverified_keys(
    route: RouteIdentity,
    checks: KeyChecks,
    committed: Sequence[PartitionCheckpoint],
    manifest_ref: str,
) -> None:
    """``--source-moved`` where key columns exist but no committed partition holding rows could be compared
    (the source or the target holds another count in each). Seen: a shard of other counts in every day, and
    the F6 shard into a target another source table's route also appends to (a fan-in), were recorded exit
    0 ("keys match the target's in 0 partition(s)"), their rows never loaded. A moved live table keeps its
    settled partitions, which match; a route without an integer key keeps the counts-only warning."""
    if checks.unusable is not None or not checks.checks:
        return
    rows = {c.partition_id: c.rows for c in committed}
    if any(c.verdict is KeyVerdict.MATCH and rows.get(pid) for pid, c in checks.checks.items()):
        return
    why = [c.why for c in checks.checks.values() if c.verdict is KeyVerdict.NOT_COMPARED]
    source_differ = why.count(NotCompared.SOURCE_ROWS_DIFFER)
    target_differ = why.count(NotCompared.TARGET_ROWS_DIFFER)
    raise DponeError(
        ErrorCode.ROUTE_IDENTITY_CHANGED,
        f"no committed partition of route {route.describe()} could be compared by its keys "
        f"({', '.join(checks.columns)}) on this source connection and the target: of {len(checks.checks)}, "
        f"{source_differ} hold another number of rows on this connection than were committed, "
        f"{target_differ} in the target (other routes' rows: a fan-in), the rest no row or no count; counts "
        "alone cannot tell another database's table (a shard) from the one that moved; nothing was recorded",
        details={
            "route": route.describe(),
            "changed": ["source"],
            "key_columns": list(checks.columns),
            "partitions_compared": 0,
            "source_rows_differ": source_differ,
            "target_rows_differ": target_differ,
        },
        hint_lines=(
            "nothing was recorded; runs through this connection stay stopped",
            f"see the counts: dpone checkpoints {manifest_ref} --verify (source_rows beside rows)",
            "another database (shards): give it a target table of its own (sink.table) and read both "
            "through a ClickHouse view or Merge table; its first run then moves all its rows",
            "only if this IS the moved table (every committed partition changed at the source since its "
            "commit, or other routes' rows share the target table) and you compared its ids with the "
            "target's yourself: record the move with --force:",
            f"  dpone guard rebaseline {manifest_ref} --source-moved --force --reason '<what you checked>'",
            "see `dpone runbook guard`, 'The route's source changed'",
        ),
    )


def key_audit(checks: KeyChecks, committed: Sequence[PartitionCheckpoint]) -> dict[str, JsonValue]:
    """What a recorded move keeps of the key comparison (in ``diagnostics.rebaseline``)."""
    if checks.unusable is not None:
        return {"keys_not_compared": checks.unusable}
    differ = set(checks.with_verdict(KeyVerdict.DIFFERS))
    audit: dict[str, JsonValue] = {
        "key_columns": list(checks.columns),
        "keys_compared": checks.compared,
    }
    if differ:
        labels: list[JsonValue] = [*sorted({c.bounds.label for c in committed if c.partition_id in differ})]
        audit["keys_differ"] = labels
    return audit


def _verdict(checkpoint: PartitionCheckpoint, source: KeyFingerprint, target: KeyFingerprint) -> KeyCheck:
    if checkpoint.rows is None:
        return KeyCheck(KeyVerdict.NOT_COMPARED, NotCompared.NO_ROW_COUNT)
    if source.rows != checkpoint.rows:
        return KeyCheck(KeyVerdict.NOT_COMPARED, NotCompared.SOURCE_ROWS_DIFFER)
    if target.rows != checkpoint.rows:
        return KeyCheck(KeyVerdict.NOT_COMPARED, NotCompared.TARGET_ROWS_DIFFER)
    return KeyCheck(KeyVerdict.MATCH if source == target else KeyVerdict.DIFFERS)


def _typed(value: str, value_type: str) -> Any:
    if value_type == "integer":
        return int(value)
    if value_type == "date":
        return date.fromisoformat(value)
    return datetime.fromisoformat(value)


def _interval(bounds: PartitionBounds) -> tuple[Any, Any] | None:
    """``(lower, upper)`` of a range whose values compare as typed values (``None`` for an open side);
    ``None`` for any other bounds, or one that does not parse."""
    if bounds.kind is not BoundsKind.RANGE or bounds.value_type not in ("integer", "date", "datetime"):
        return None
    try:
        lower = _typed(bounds.lower, bounds.value_type) if bounds.lower is not None else None
        upper = _typed(bounds.upper, bounds.value_type) if bounds.upper is not None else None
    except ValueError:
        return None
    return lower, upper


def _integer_values(bounds: PartitionBounds) -> frozenset[int] | None:
    if bounds.kind is not BoundsKind.VALUES or bounds.value_type != "integer" or not bounds.values:
        return None
    try:
        return frozenset(int(v) for v in bounds.values)
    except ValueError:
        return None


def _layers(intervals: Sequence[tuple[Any, Any, PartitionBounds]]) -> list[list[PartitionBounds]]:
    """Ranges in layers of pairwise disjoint ones (sorted by lower end, each into the first layer that ends
    at or before it begins); ranges whose ends cannot be ordered (naive beside aware times) one a layer."""
    try:
        ordered = sorted(intervals, key=lambda i: (0,) if i[0] is None else (1, i[0]))
        ends: list[Any] = []
        layers: list[list[PartitionBounds]] = []
        for lower, upper, one in ordered:
            for index, end in enumerate(ends):
                if end is not None and lower is not None and end <= lower:
                    ends[index] = upper
                    layers[index].append(one)
                    break
            else:
                ends.append(upper)
                layers.append([one])
        return layers
    except TypeError:
        return [[one] for _, _, one in intervals]
