"""A chunk column held as an Arrow array: what the columnar fast path hands from a source to a sink.

It is a ``Sequence`` of exactly the Python values the per-value converters give (``date``, naive
``datetime``, ``Decimal``, ``None``), built once on first Python access, so every consumer that knows
nothing of Arrow (the runtime's cursor high-water mark, merged insert blocks, artifacts) still works and
sees the same values. Consumers that know it skip Python objects: ``pa.array(column)`` takes the array
itself (``__arrow_array__``), the ClickHouse sink inserts it as Arrow (chDB) or encodes Native from it.
``contracts.ColumnChunk`` stays free of pyarrow: it only carries this as one of its column sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, overload

import pyarrow as pa


class ArrowColumn(Sequence[object]):
    """One column's values as ``array``; ``unscaled`` holds a decimal column's integers (value * 10**scale)
    as ``int64``, which is what ClickHouse's Native ``Decimal`` stores. ``python`` builds the Python values
    when ``array.to_pylist()`` would give equal values in another form (a decimal from an integer is
    ``Decimal('100')`` on the per-value path, ``Decimal('100.00')`` from Arrow: equal, but written
    differently into a cursor's high-water mark)."""

    __slots__ = ("_python", "_values", "array", "unscaled")

    def __init__(
        self,
        array: pa.Array,
        unscaled: pa.Array | None = None,
        python: Callable[[], list[object]] | None = None,
    ) -> None:
        self.array = array
        self.unscaled = unscaled
        self._python = python
        self._values: list[object] | None = None

    def values(self) -> list[object]:
        """The Python values (built once): what the per-value converter gives for the same input."""
        if self._values is None:
            self._values = self._python() if self._python is not None else self.array.to_pylist()
            self._python = None
        return self._values

    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, index: int) -> object: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[object]: ...

    def __getitem__(self, index: int | slice) -> object:
        return self.values()[index]

    def __iter__(self) -> Iterator[object]:
        return iter(self.values())

    def __contains__(self, value: object) -> bool:
        if value is None:
            return bool(self.array.null_count)
        return value in self.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ArrowColumn):
            return self.values() == other.values()
        if isinstance(other, (list, tuple)):
            return self.values() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ArrowColumn({self.array.type}, {len(self.array)} values)"

    def __arrow_array__(self, type: Any = None) -> pa.Array:
        if type is None or type == self.array.type:
            return self.array
        return self.array.cast(type)


def concat(parts: Sequence[ArrowColumn]) -> ArrowColumn:
    """One column of several chunks' columns (same Arrow type), without building Python values."""
    array = pa.concat_arrays([part.array for part in parts])
    scaled = [part.unscaled for part in parts]
    unscaled = pa.concat_arrays(scaled) if all(s is not None for s in scaled) else None
    return ArrowColumn(array, unscaled, lambda: [v for part in parts for v in part.values()])


def join_columns(pieces: Sequence[Sequence[object]]) -> Sequence[object]:
    """One column of consecutive pieces (chunks, or fetches of one chunk), values in order: Arrow
    concatenated when every piece is an :class:`ArrowColumn` of one Arrow type (no Python values built),
    otherwise a list of the pieces' values (an Arrow piece's values are exactly its Python values)."""
    arrow = [piece for piece in pieces if isinstance(piece, ArrowColumn)]
    if len(arrow) == len(pieces) and len({piece.array.type for piece in arrow}) == 1:
        return concat(arrow)
    return list(chain.from_iterable(pieces))
