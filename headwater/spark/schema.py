"""The columns of a read, as in Spark's built-in Kafka source, and their Arrow form."""

from __future__ import annotations

from functools import cache

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

# Kafka's TimestampType ids, which Spark's source puts in the timestampType column.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


def read_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


@cache
def arrow_read_schema(include_headers: bool) -> pa.Schema:
    """Exactly the Arrow schema Spark checks a data source's record batches against."""
    return to_arrow_schema(read_schema(include_headers), timezone="UTC")
