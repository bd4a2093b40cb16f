"""A partition's key fingerprint: exact integer aggregates of its key columns, the same on every engine.

Row counts cannot tell two databases' tables of equal counts apart (shards: same days, same rows per day,
other ids), so ``dpone checkpoints --verify`` and ``dpone guard rebaseline --source-moved`` also compare,
per partition, what the source holds within its bounds with what the target holds there (ADR 0079,
addendum): ``COUNT(*)`` and, for each integer key column, ``COUNT(c)``, ``MIN(c)``, ``MAX(c)`` and
``SUM(c % KEY_MODULUS)``. Integers only, with the remainder taken in 64-bit signed arithmetic (the sign
of the dividend on SQLite, SQL Server and ClickHouse alike; each term below 2**31, so the sum of up to 2**32
rows stays within 64 bits): no hash, no float and no collation takes part, so equal rows give equal
fingerprints on SQLite, SQL Server, chDB and ClickHouse 18.16. A fingerprint holds no row value beyond
these aggregates and is never printed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

#: The divisor of the summed remainders: the largest prime below 2**31.
KEY_MODULUS = 2_147_483_647


class ColumnDigest(BaseModel):
    """One key column's aggregates over a partition's rows: NULLs are not counted, and a column with no
    value there has no minimum, maximum or sum (``None``, whatever the engine returns for an empty set)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    values: int
    minimum: int | None = None
    maximum: int | None = None
    residue_sum: int | None = None


class KeyFingerprint(BaseModel):
    """The rows within one partition's bounds and the digest of each key column, in the order asked."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    rows: int
    columns: tuple[ColumnDigest, ...]


class MalformedFingerprint(ValueError):
    """An aggregate row that is not exact integers (the engine's value is never repeated)."""


def empty_fingerprint(width: int) -> KeyFingerprint:
    """What a partition without a row has: no row, no value in any column."""
    return KeyFingerprint(rows=0, columns=tuple(ColumnDigest(values=0) for _ in range(width)))


def fingerprint_from_row(aggregates: Sequence[object], width: int) -> KeyFingerprint:
    """``(COUNT(*), then COUNT, MIN, MAX, SUM of each of width columns)`` as one fingerprint; anything
    but integers (and NULLs beside a zero count) raises :class:`MalformedFingerprint`."""
    if len(aggregates) != 1 + 4 * width:
        raise MalformedFingerprint("an aggregate row of another width")
    rows = _integer(aggregates[0])
    columns = []
    for index in range(width):
        count, low, high, total = aggregates[1 + 4 * index : 5 + 4 * index]
        values = _integer(count)
        if values == 0:
            columns.append(ColumnDigest(values=0))
            continue
        columns.append(
            ColumnDigest(
                values=values, minimum=_integer(low), maximum=_integer(high), residue_sum=_integer(total)
            )
        )
    return KeyFingerprint(rows=rows, columns=tuple(columns))


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedFingerprint("an aggregate that is not an integer")
    return value


def fingerprints_from_rows(
    rows: Iterable[Sequence[object]], partitions: int, width: int
) -> list[KeyFingerprint]:
    """Rows ``(key, aggregates...)`` grouped by the index of a batch's partition -> one fingerprint per
    partition, in order (a partition without a row has no group; a row of no partition, key NULL or -1,
    is passed over). :class:`MalformedFingerprint` for a key or an aggregate that is not an exact integer."""
    found = [empty_fingerprint(width) for _ in range(partitions)]
    for row in rows:
        key, *aggregates = row
        if key is None or key == -1:
            continue
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < partitions:
            raise MalformedFingerprint("a group key outside the batch")
        found[key] = fingerprint_from_row(aggregates, width)
    return found
