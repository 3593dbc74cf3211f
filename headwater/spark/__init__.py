"""PySpark data source for Kafka-protocol topics: ``spark.read``/``readStream``/``df.write`` format ``headwater``.

Usage::

    import headwater.spark
    headwater.spark.register(spark)
    df = (spark.read.format("headwater")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Options and columns follow Spark's built-in Kafka source; see docs/spark.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.spark.errors import DataLossError, TopicSourceError
from headwater.spark.source import FORMAT, TopicDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "DataLossError", "TopicDataSource", "TopicSourceError", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("headwater")`` available to ``spark.read``, ``spark.readStream`` and ``df.write``."""
    spark.dataSource.register(TopicDataSource)
