"""SQL Server column types -> ClickHouse types (the subset ClickHouse 18.16 and current engines share).

Every choice here must load into both the 18.16 server (no ``Bool``, no ``DateTime64``) and chDB:
- ``bit`` -> ``UInt8`` (values 0/1), because 18.16 has no ``Bool``;
- ``datetime``/``datetime2``/``smalldatetime`` -> ``DateTime``: whole seconds (18.16 has no
  ``DateTime64``); a value with sub-second digits is refused by the value audit before arming, naming the
  column; ``datetimeoffset`` is converted to UTC first;
- ``time`` -> ``String`` (``HH:MM:SS[.ffffff]``), binary types -> ``String`` holding the raw bytes.
Types with no faithful ClickHouse column (``xml``, spatial types, ``sql_variant``, ...) are refused with
``unsupported_column_type`` naming the column, before any row is read.
"""

from __future__ import annotations

from airflow_provider_dpone.contracts.errors import DponeError, ErrorCode
from airflow_provider_dpone.contracts.schema import ColumnSpec

#: Fixed mappings (type name as INFORMATION_SCHEMA.COLUMNS.DATA_TYPE spells it -> ClickHouse type).
FIXED_TYPES: dict[str, str] = {
    "tinyint": "UInt8",  # SQL Server tinyint is unsigned 0..255
    "smallint": "Int16",
    "int": "Int32",
    "bigint": "Int64",
    "bit": "UInt8",
    "money": "Decimal(19, 4)",
    "smallmoney": "Decimal(10, 4)",
    "float": "Float64",
    "real": "Float32",
    "char": "String",
    "varchar": "String",
    "nchar": "String",
    "nvarchar": "String",
    "text": "String",
    "ntext": "String",
    "sysname": "String",
    "date": "Date",
    "datetime": "DateTime",
    "datetime2": "DateTime",
    "smalldatetime": "DateTime",
    "datetimeoffset": "DateTime",
    "time": "String",
    "uniqueidentifier": "UUID",
    "binary": "String",
    "varbinary": "String",
    "image": "String",
    "timestamp": "String",  # rowversion: 8 opaque bytes
    "rowversion": "String",
}

#: Types whose precision and scale come from the column.
DECIMAL_TYPES = frozenset({"decimal", "numeric"})

#: Known types deliberately refused (listed so the docs and tests can name them); unknown types are
#: refused as well.
UNSUPPORTED_TYPES = frozenset(
    {"xml", "geography", "geometry", "hierarchyid", "sql_variant", "cursor", "table", "json", "vector"}
)

#: Source types whose driver values are not already the declared Python type.
_COERCED = frozenset({"time"})

MAX_DECIMAL_PRECISION = 38


def base_type_name(type_name: str) -> str:
    """``decimal(12,2)`` / ``nvarchar(max)`` / ``DATETIME2(7)`` -> ``decimal`` / ``nvarchar`` / ``datetime2``."""
    return type_name.split("(", 1)[0].strip().lower()


def unsupported(column: str, type_name: str) -> DponeError:
    return DponeError(
        ErrorCode.UNSUPPORTED_COLUMN_TYPE,
        f"column {column!r} has SQL Server type {type_name!r}, which has no supported ClickHouse mapping; "
        "leave it out with 'columns' or convert it in a 'query'",
        details={"column": column, "source_type": type_name},
    )


def clickhouse_type(column: str, type_name: str, precision: int | None, scale: int | None) -> str:
    """The ClickHouse base type of one SQL Server column, or ``unsupported_column_type``."""
    base = base_type_name(type_name)
    if base in DECIMAL_TYPES:
        p = 18 if precision is None else int(precision)
        s = 0 if scale is None else int(scale)
        if not (1 <= p <= MAX_DECIMAL_PRECISION and 0 <= s <= p):
            raise unsupported(column, f"{base}({p},{s})")
        return f"Decimal({p}, {s})"
    mapped = FIXED_TYPES.get(base)
    if mapped is None:
        raise unsupported(column, base)
    return mapped


def source_type_text(type_name: str, precision: int | None, scale: int | None) -> str:
    base = base_type_name(type_name)
    if base in DECIMAL_TYPES and precision is not None:
        return f"{base}({int(precision)},{int(scale or 0)})"
    return base


def column_spec(
    name: str, type_name: str, nullable: bool, precision: int | None = None, scale: int | None = None
) -> ColumnSpec:
    return ColumnSpec(
        name=name,
        clickhouse_type=clickhouse_type(name, type_name, precision, scale),
        nullable=bool(nullable),
        source_type=source_type_text(type_name, precision, scale),
    )


def needs_coercion(column: ColumnSpec) -> bool:
    """Whether the driver's values for this column need converting even for pass-through types."""
    source = column.source_type or ""
    return source in _COERCED or source.startswith("tds:")


# -- coarse descriptions (servers without sys.dm_exec_describe_first_result_set) ---------------------------

#: The tag of pymssql's BINARY family: every type it does not name (binary, varbinary, image, but also
#: ``date``, ``time``, ``datetime2``, ``datetimeoffset`` and ``uniqueidentifier``). Its ``time`` and
#: datetime values arrive as Python objects holding microseconds, the seventh digit already dropped, and
#: nothing says the column's scale: they are refused (``value_audit.UNKNOWN_PRECISION``).
COARSE_BINARY = "tds:binary"
#: The tag of pymssql's NUMBER family (every integer, float and bit): ``Float64``, which holds integers
#: exactly only up to 2**53 (``value_audit.mssql_beyond_float``).
COARSE_NUMBER = "tds:number"

#: pymssql's DB-API type codes (cursor.description[i][1]) -> (ClickHouse type, tag).
#: NUMBER covers every integer, float and bit, so it must be Float64; DECIMAL keeps money exact.
COARSE_TYPES: dict[int, tuple[str, str]] = {
    1: ("String", "tds:string"),
    2: ("String", COARSE_BINARY),
    3: ("Float64", COARSE_NUMBER),
    4: ("DateTime", "tds:datetime"),
    5: ("Decimal(38, 10)", "tds:decimal"),
}


def coarse_column_spec(name: str, type_code: int) -> ColumnSpec:
    """A column described only by the wire's type family (every one nullable: nothing says otherwise)."""
    mapped = COARSE_TYPES.get(int(type_code))
    if mapped is None:
        raise unsupported(name, f"tds type code {type_code}")
    clickhouse, tag = mapped
    return ColumnSpec(name=name, clickhouse_type=clickhouse, nullable=True, source_type=tag)
