"""Column pruning for the "rocketstore" source: a query reads only the columns its schema names.

PySpark 4.3's Python data sources get no column pruning from Spark (the reader is planned with the whole
schema, and a projection or df.drop is applied after the scan, every column having been read and sent to
the JVM). So the columns are asked for explicitly, by a schema that names some of the source's columns:

    spark.read.format("rocketstore").schema("topic STRING, queueOffset BIGINT")...   # or
    spark.read.format("rocketstore").option("columns", "topic, queueOffset")...

and only those are built (record_batch.from_records fills no other buffer: no body is copied) and shipped.
A schema's columns must be the source's, with its types; NOT NULL where the source's column can be null is
refused. Any order; a column not named is never read.
"""

from __future__ import annotations

import re

import pyarrow as pa

from .options import OptionError
from .record_batch import DDL, SCHEMA

NAMES = tuple(SCHEMA.names)
_DDL_OF = {part.split()[0]: part for part in re.split(r", (?=\w+ )", DDL)}  # a map's "<STRING, STRING>" stays whole


def ddl(option: str | None) -> str:
    """The source's schema (DDL) for the `columns` option: the columns named, in that order; all when unset."""
    if option is None or not option.strip():
        return DDL
    names = [c.strip() for c in option.split(",")]
    unknown = [c for c in names if c not in _DDL_OF]
    if unknown or len(set(names)) != len(names):
        what = f"no such column {', '.join(map(repr, unknown))}" if unknown else "a column named twice"
        raise OptionError(f"option 'columns': {what} in {option!r} (columns: {', '.join(NAMES)})")
    return ", ".join(_DDL_OF[c] for c in names)


def arrow_schema(schema) -> pa.Schema | None:
    """The Arrow schema of the batches a query of the Spark schema `schema` (a StructType) gets: the columns it
    names with its nullability, or None when it is the source's whole schema as it is."""
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema

    if [(f.name, f.nullable) for f in schema.fields] == [(f.name, f.nullable) for f in SCHEMA]:
        got = None
    else:
        got = to_arrow_schema(schema, timezone="UTC")
    for field in schema.fields:
        if field.name not in NAMES:
            raise OptionError(
                f"schema: the source has no column {field.name!r} (columns: {', '.join(NAMES)}; names are exact)"
            )
        ours = SCHEMA.field(field.name)
        if field.dataType != from_arrow_type(ours.type):
            raise OptionError(
                f"schema: column {field.name!r} is {from_arrow_type(ours.type).simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )
        if ours.nullable and not field.nullable:
            raise OptionError(f"schema: column {field.name!r} can be null: declare it without NOT NULL")
    if len({f.name for f in schema.fields}) != len(schema.fields):
        raise OptionError("schema: a column named twice")
    if not schema.fields:
        raise OptionError("schema: no column (name at least one of the source's)")
    return got


def needed(schema: pa.Schema | None, tags: bool, sql: bool) -> tuple[str, ...] | None:
    """The columns a read builds for the batches of `schema` (None: all): those it returns, and tags or
    properties when the exact tag check or a SQL filter reads them."""
    if schema is None:
        return None
    want = set(schema.names) | ({"tags"} if tags else set()) | ({"properties"} if sql else set())
    return tuple(n for n in NAMES if n in want)


def shaped(batch: pa.RecordBatch, schema: pa.Schema | None) -> pa.RecordBatch:
    """`batch` as the query's `schema` has it: its columns in that order, that nullability (no copy)."""
    if schema is None:
        return batch
    return pa.RecordBatch.from_arrays([batch.column(n) for n in schema.names], schema=schema)
