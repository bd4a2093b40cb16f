"""The engines a target table may have: those that keep every inserted row as it was inserted.

dpone's promise is that the target holds exactly the source's rows of every committed partition. A target
table created by hand with another engine breaks it after the run reported success:

- the row-merging MergeTree variants (Replacing, Summing, Aggregating, Collapsing, VersionedCollapsing,
  Graphite, Coalescing, their Replicated forms) replace, add up or cancel rows in background merges, so
  values change and rows disappear after the partition was committed;
- ``Null`` keeps nothing, ``Memory``, ``Buffer``, ``Set`` and ``Join`` keep nothing durable, ``Distributed``
  forwards rows in the background, and views, ``Merge`` and the integration engines (Kafka, S3, URL, File,
  MySQL, ...) are not tables whose rows dpone can count, delete and read back.

So the target's engine is read before arming and anything but a plain MergeTree (``MergeTree``,
``ReplicatedMergeTree``, ``SharedMergeTree``) is refused with ``target_table_incompatible``, naming the
engine. A table dpone creates is always ``MergeTree``.

A MergeTree **table TTL** deletes rows too: those whose TTL expression has passed, in merges, and on
insert already (seen on chDB: a day loaded into a table with ``TTL day + INTERVAL 10 DAY`` reported its
30 rows committed, exit 0, and the table held none). So a table TTL is refused as well, unless every one of
its rules only moves parts (``TO DISK`` / ``TO VOLUME``) or recompresses them (``RECOMPRESS``): those keep
every row and value. The rules are read from the server's own formatting of the engine clause
(``system.tables.engine_full``); anything else there (a ``DELETE``, ``WHERE`` or ``GROUP BY`` rule, a rule
this reading does not recognise) is refused. Column TTLs are refused with the columns
(``table_schema.compatibility_problems``). A manifest that sets ``sink.options.allow_target_ttl: true`` (a
retention table, loaded with partitions younger than its TTL) accepts both: its owner has said that rows leave
the table by design.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.adapters.clickhouse.listed_reads import one_row
from airflow_provider_dpone.adapters.clickhouse.quoting import TableName, quote_string
from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode

ROW_KEEPING_ENGINES = frozenset({"MergeTree", "ReplicatedMergeTree", "SharedMergeTree"})

#: A TTL rule that keeps every row and value: it moves the parts or recompresses them.
_ROW_KEEPING_TTL_RULE = re.compile(
    r"^\S.*\s(?:TO\s+(?:DISK|VOLUME)\s+'(?:[^'\\]|\\.)*'|RECOMPRESS\s+CODEC\(.*\))$", re.DOTALL
)
#: The engine clause's parts that follow ``TTL`` in the server's formatting.
_AFTER_TTL = frozenset({"SETTINGS", "COMMENT"})
_WORD = re.compile(r"[A-Za-z_]\w*")
_WORD_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class TableFacts:
    """What ``system.tables`` says of a target table, read once before arming."""

    engine: str
    #: the full engine clause as the server formats it (``TTL`` rules included)
    engine_full: str
    #: ``(database, table)`` of every table that depends on it (views reading it), sorted
    dependents: tuple[tuple[str, str], ...]


def table_facts(client: Client, name: TableName) -> TableFacts | None:
    """The table's engine, engine clause and dependents (``None``: no such table).

    One row whatever the table, its ``count()`` beside the values: an answer cut right after its headers
    arrives whole and empty through an HTTP/1.0 proxy, and read as "no such table" it skipped every check
    here (a ReplacingMergeTree target was loaded, exit 0; ADR 0094, addendum). No row raises instead."""
    found, engine, engine_full, databases, tables = one_row(
        client,
        "SELECT count(), any(engine), any(engine_full), any(dependencies_database), any(dependencies_table)"
        f" FROM system.tables WHERE database = {quote_string(name.database)} AND name = {quote_string(name.table)}",
        "the count of system.tables",
    )
    if not int(found):
        return None
    dependents = sorted(set(zip(map(str, databases), map(str, tables), strict=True)))
    return TableFacts(str(engine), str(engine_full or ""), tuple(dependents))


def ttl_rules(engine_full: str) -> list[str] | None:
    """The rules of the engine clause's table ``TTL`` (``None``: it has none), split at the commas outside
    parentheses, quotes and back-quotes."""
    top = list(_top_level_positions(engine_full))
    words = [(match.group(), at) for at in top if (match := _word_at(engine_full, at))]
    start = next((i for i, (word, _) in enumerate(words) if word == "TTL"), None)
    if start is None:
        return None
    begin = words[start][1] + len("TTL")
    end = next((at for word, at in words[start + 1 :] if word in _AFTER_TTL), len(engine_full))
    commas = [at for at in top if begin <= at < end and engine_full[at] == ","]
    bounds = zip([begin, *(at + 1 for at in commas)], [*commas, end], strict=True)
    return [engine_full[first:last].strip() for first, last in bounds]


def rows_dropping_ttl(engine_full: str) -> bool:
    """Whether the table TTL of ``engine_full`` may delete rows or change values (see the module)."""
    rules = ttl_rules(engine_full)
    return rules is not None and not all(_ROW_KEEPING_TTL_RULE.match(rule) for rule in rules)


def _top_level_positions(text: str) -> Iterator[int]:
    """Where ``text`` has a character outside parentheses, quotes and back-quotes."""
    depth, quote, at = 0, "", 0
    while at < len(text):
        char = text[at]
        if quote:
            if char == "\\":
                at += 1  # an escaped character, the quote included
            elif char == quote:
                quote = ""
        elif char in "'`\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            yield at
        at += 1


def _word_at(text: str, at: int) -> re.Match[str] | None:
    """The bare word that starts at ``at`` (``None``: none starts there)."""
    if at > 0 and _WORD_CHAR.match(text[at - 1]):
        return None
    return _WORD.match(text, at)


#: What on-call is told beside a refused TTL: one added after rows were committed may have expired some
#: already, and no later run sees all of it (older partitions short are taken for retention; reset values
#: keep their count).
TTL_ALREADY_EXPIRED = (
    "a TTL added after rows were committed may already have expired some: rows it deleted from older partitions "
    "and values it reset are not seen by any later run; after taking it off (ALTER TABLE ... REMOVE TTL, or "
    "MODIFY COLUMN <column> REMOVE TTL), reload the partitions older than its horizon",
    "runbook:  dpone runbook guard (section 'A TTL on the target')",
)


def require_row_keeping_engine(found: TableFacts, name: TableName, *, allow_ttl: bool = False) -> None:
    """Before arming: refuse a target whose engine, or table TTL unless the manifest allows one
    (``allow_ttl``: a retention table), does not keep the rows inserted into it."""
    engine, engine_full = found.engine, found.engine_full
    if engine in ROW_KEEPING_ENGINES:
        if not allow_ttl and rows_dropping_ttl(engine_full):
            raise DponeError(
                ErrorCode.TARGET_INCOMPATIBLE,
                f"target table {name} has a TTL that deletes rows or changes values once they expire (on "
                "insert already, when they are old), so the target could not hold exactly the source's "
                "rows of every committed partition. Load into a table without a deleting TTL (TTL rules "
                "that only move parts TO DISK / TO VOLUME or RECOMPRESS them are accepted) and expire "
                "rows elsewhere (a materialized view into a table with the TTL), or, for a retention table "
                "whose partitions are never older than its TTL when they arrive, set "
                "sink.options.allow_target_ttl: true",
                details={"table": str(name), "step": "prepare", "engine": engine, "problem": "table_ttl"},
                hint_lines=TTL_ALREADY_EXPIRED,
            )
        return
    raise DponeError(
        ErrorCode.TARGET_INCOMPATIBLE,
        f"target table {name} has engine {engine}: it does not keep every inserted row as inserted (rows "
        "merged away, summed, kept in memory only, forwarded or not stored), so the target could not hold "
        "exactly the source's rows. Load into a MergeTree table (let dpone create it, or create it with "
        "ENGINE = MergeTree / ReplicatedMergeTree) and build other engines from it (a materialized view)",
        details={"table": str(name), "step": "prepare", "engine": engine},
        hint_lines=_READS_ANOTHER_TABLE if engine in _READING_ENGINES else (),
    )


#: Engines that store nothing and read another table: where one stands in the target's place, the table a
#: route committed to may have been renamed away with a view left behind (seen: "let dpone create it" led
#: on-call to drop the view, and the next run stopped on lost committed rows).
_READING_ENGINES = frozenset({"View", "MaterializedView", "Merge", "Distributed", "LiveView"})
_READS_ANOTHER_TABLE = (
    "this target stores no rows of its own, it reads another table: if the table this route committed to "
    "was renamed or moved (a view left in its place), do not drop the view; point sink.table at the moved "
    "table, and run the route (its checkpoints name the rows it holds: a first run there stops "
    "native_transfer_target_not_empty and says how to adopt them)",
    "if this is a new route, load into a MergeTree table and read it through the view",
)
