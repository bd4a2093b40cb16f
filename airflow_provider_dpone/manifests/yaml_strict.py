"""A YAML reader for manifests: safe, JSON-shaped scalars, duplicate keys reported with their lines.

PyYAML's ``SafeLoader`` follows YAML 1.1, which turns ``yes``/``on``/``no`` into booleans,
``2026-01-01`` into a date, ``010`` into 8 and ``1:30`` into 90. A manifest gets none of that: only
``true``/``false`` are booleans, integers are decimal, timestamps stay strings. A value that should be a
boolean but is written ``yes`` therefore stays the string ``"yes"`` and strict validation rejects it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"

_BOOL_RE = re.compile(r"^(?:true|false)$")
_INT_RE = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_RE = re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$|^[-+]?[0-9]+[eE][-+]?[0-9]+$")

PathKey = tuple[str | int, ...]

#: Walk budget: a manifest is small; aliases that expand beyond this are refused ("billion laughs").
MAX_NODES = 50_000
#: Nesting budget: a manifest is a few levels deep; deeper documents are refused before they are built.
MAX_DEPTH = 100


class YamlTooComplex(ValueError):
    """The document expands (through aliases) to more values, or nests deeper, than any manifest needs."""


TOO_DEEP = f"the manifest is nested deeper than {MAX_DEPTH} levels"


class StrictSafeLoader(yaml.SafeLoader):
    """``SafeLoader`` with YAML-1.2-core-like scalars: ``true``/``false``, decimal ints, no timestamps."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in {_BOOL, _INT, _FLOAT, _TIMESTAMP}]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_strict_bool(self, node: Node) -> bool:
        value = self.construct_scalar(node)  # type: ignore[arg-type]
        if value not in ("true", "false"):
            raise yaml.constructor.ConstructorError(
                None, None, "a boolean must be written true or false", node.start_mark
            )
        return value == "true"

    def construct_decimal_int(self, node: Node) -> int:
        value = self.construct_scalar(node)  # type: ignore[arg-type]
        if not isinstance(value, str) or not _INT_RE.match(value):
            raise yaml.constructor.ConstructorError(
                None, None, "an integer must be written in decimal digits", node.start_mark
            )
        return int(value, 10)

    def construct_timestamp_as_text(self, node: Node) -> str:
        return str(self.construct_scalar(node))  # type: ignore[arg-type]


StrictSafeLoader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tf"))
StrictSafeLoader.add_implicit_resolver(_INT, _INT_RE, list("-+0123456789"))
StrictSafeLoader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+0123456789."))
StrictSafeLoader.add_constructor(_BOOL, StrictSafeLoader.construct_strict_bool)
StrictSafeLoader.add_constructor(_INT, StrictSafeLoader.construct_decimal_int)
StrictSafeLoader.add_constructor(_TIMESTAMP, StrictSafeLoader.construct_timestamp_as_text)


@dataclass(frozen=True)
class DuplicateKey:
    path: PathKey
    line: int
    first_line: int


@dataclass
class ParsedYaml:
    """The constructed document plus where each key and item was written (1-based lines)."""

    data: Any
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    duplicates: list[DuplicateKey] = field(default_factory=list)
    visited: int = 0


def parse_yaml(text: str) -> ParsedYaml:
    """Parse one YAML document.

    Raises ``yaml.YAMLError`` (with marks) on syntax errors and :class:`YamlTooComplex` on alias bombs
    and on nesting deeper than :data:`MAX_DEPTH` (PyYAML composes and constructs recursively, so a deep
    document would otherwise end in a ``RecursionError``).
    """
    loader = StrictSafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlTooComplex(TOO_DEEP) from None  # the traceback is thousands of frames deep
        if node is None:
            return ParsedYaml(data=None)
        parsed = ParsedYaml(data=None)
        _walk(node, (), parsed, set())
        parsed.data = loader.construct_document(node)
        return parsed
    finally:
        loader.dispose()


def _walk(node: Node, path: PathKey, parsed: ParsedYaml, active: set[int]) -> None:
    """Record positions and duplicate keys. Aliased nodes are walked once per path, cycles not at all."""
    if id(node) in active:
        return
    if len(path) > MAX_DEPTH:
        raise YamlTooComplex(TOO_DEEP)
    parsed.visited += 1
    if parsed.visited > MAX_NODES:
        raise YamlTooComplex("the manifest expands to too many values")
    active.add(id(node))
    try:
        if isinstance(node, MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE:
                    continue
                line = key_node.start_mark.line + 1
                child: PathKey = (*path, key_node.value)
                marker = (key_node.tag, key_node.value)
                if marker in seen:
                    parsed.duplicates.append(DuplicateKey(path=child, line=line, first_line=seen[marker]))
                    continue
                seen[marker] = line
                parsed.positions.setdefault(child, (line, key_node.start_mark.column + 1))
                _walk(value_node, child, parsed, active)
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                child = (*path, index)
                parsed.positions.setdefault(child, (item.start_mark.line + 1, item.start_mark.column + 1))
                _walk(item, child, parsed, active)
    finally:
        active.discard(id(node))
