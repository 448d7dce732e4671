"""Connect types → PostgreSQL types, and the few value conversions COPY needs.

Schema types (``auto.create`` with a value/key schema):

=====================  ===========================  ==========================================
Connect type           PostgreSQL                   value conversion
=====================  ===========================  ==========================================
int8, int16            smallint
int32                  integer
int64                  bigint
float                  real
double                 double precision
boolean                boolean
string                 text
bytes                  bytea
array, map, struct     jsonb                        dict/list written as JSON
Timestamp (logical)    timestamp with time zone     int milliseconds since epoch → datetime UTC
Date (logical)         date                         int days since epoch → date
Time (logical)         time                         int milliseconds of day → time
Decimal (logical)      numeric                      unscaled big-endian bytes → Decimal
=====================  ===========================  ==========================================

Schemaless values (``auto.create`` infers from the first non-null value of each column in the
first batch): bool → boolean, int → bigint, float → double precision, str → text,
dict/list → jsonb, bytes → bytea, datetime → timestamptz, date → date, time → time,
Decimal → numeric; a column that is null throughout → text.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

from conveyor.api import Schema, SchemaType

TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
DECIMAL = "org.apache.kafka.connect.data.Decimal"

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

_SCHEMA_TYPES = {
    SchemaType.INT8: "smallint",
    SchemaType.INT16: "smallint",
    SchemaType.INT32: "integer",
    SchemaType.INT64: "bigint",
    SchemaType.FLOAT32: "real",
    SchemaType.FLOAT64: "double precision",
    SchemaType.BOOLEAN: "boolean",
    SchemaType.STRING: "text",
    SchemaType.BYTES: "bytea",
    SchemaType.ARRAY: "jsonb",
    SchemaType.MAP: "jsonb",
    SchemaType.STRUCT: "jsonb",
}

_LOGICAL_TYPES = {TIMESTAMP: "timestamp with time zone", DATE: "date", TIME: "time", DECIMAL: "numeric"}

# Order matters: bool before int (bool is an int), datetime before date.
_PYTHON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "bigint"),
    (float, "double precision"),
    (str, "text"),
    (dict, "jsonb"),
    (list, "jsonb"),
    (tuple, "jsonb"),
    (bytes, "bytea"),
    (bytearray, "bytea"),
    (memoryview, "bytea"),
    (dt.datetime, "timestamp with time zone"),
    (dt.date, "date"),
    (dt.time, "time"),
    (decimal.Decimal, "numeric"),
)


def pg_type_for_schema(schema: Schema) -> str:
    """The PostgreSQL column type for a Connect field schema."""
    if schema.name in _LOGICAL_TYPES:
        return _LOGICAL_TYPES[schema.name]
    return _SCHEMA_TYPES[schema.type]


def pg_type_for_value(value: Any) -> str:
    """The PostgreSQL column type inferred from a schemaless Python value (``None`` → text)."""
    for py_type, pg_type in _PYTHON_TYPES:
        if isinstance(value, py_type):
            return pg_type
    return "text"


def value_converter(schema: Schema) -> Callable[[Any], Any] | None:
    """A function turning a Connect logical-type value into what psycopg writes, or
    ``None`` when the value is written as it is (the common, fast case)."""
    if schema.name == TIMESTAMP:
        return _timestamp
    if schema.name == DATE:
        return _date
    if schema.name == TIME:
        return _time
    if schema.name == DECIMAL:
        scale = int((schema.parameters or {}).get("scale", "0"))
        return lambda v: _decimal(v, scale)
    return None


def _timestamp(value: Any) -> Any:
    return _EPOCH + dt.timedelta(milliseconds=value) if isinstance(value, int) else value


def _date(value: Any) -> Any:
    return _EPOCH.date() + dt.timedelta(days=value) if isinstance(value, int) else value


def _time(value: Any) -> Any:
    if isinstance(value, int):
        return (dt.datetime.min + dt.timedelta(milliseconds=value)).time()
    return value


def _decimal(value: Any, scale: int) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
    return value
