"""Streaming pipeline: read a topic, count records and bytes per key, write the running totals to a topic.

    python examples/topic_aggregation.py --bootstrap 127.0.0.1:9092 --input events --output totals [--seconds 60]

Every micro-batch reads the new records of ``--input`` (all partitions, from the first record),
updates a count and a byte total per key, and produces the keys whose totals changed to
``--output`` as JSON (``{"key": ..., "records": n, "bytes": b}``, record key = the input key).
A consumer of ``--output`` keeps the last value per key (or the topic is compacted). If the job
dies in the middle of a micro-batch, that batch's totals may be written twice on restart (the
same values again), never lost.
Progress is checkpointed in ``--checkpoint`` (a temporary directory by default): started again
with the same directory, the job carries on where it stopped, reading no record twice.

The job needs nothing from the cluster but the Kafka protocol, so it keeps running while a
partition reassignment moves ``--input`` between brokers: its reads follow each partition's
leader. Records with a null key are counted under the key "<null>".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...] of the cluster")
    parser.add_argument("--input", required=True, help="topic to read")
    parser.add_argument("--output", required=True, help="topic to write the totals to (must exist)")
    parser.add_argument(
        "--seconds", type=float, default=None, help="stop after this long (default: run until Ctrl-C)"
    )
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint directory (default: a new temporary one)"
    )
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help="cap on records per micro-batch (default: none)",
    )
    return parser.parse_args(argv)


def start_pipeline(
    spark: SparkSession,
    *,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    checkpoint: str,
    trigger_seconds: float = 1.0,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Start the aggregation on a session where the headwater format is registered."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = reader.load()

    totals = (
        records.select(
            F.coalesce(F.col("key").cast("string"), F.lit("<null>")).alias("k"),
            F.coalesce(F.length("value"), F.lit(0)).alias("size"),
        )
        .groupBy("k")
        .agg(F.count(F.lit(1)).alias("records"), F.sum("size").alias("bytes"))
    )
    out = totals.select(
        F.col("k").cast("binary").alias("key"),
        F.to_json(F.struct(F.col("k").alias("key"), "records", "bytes")).cast("binary").alias("value"),
    )

    def write_totals(batch: DataFrame, batch_id: int) -> None:
        # Python data source sinks take appends only; a running aggregate is an update, so
        # each micro-batch's changed totals go through the batch writer instead.
        (
            batch.write.format("headwater")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output_topic)
            .save()
        )

    query = (
        out.writeStream.outputMode("update")
        .foreachBatch(write_totals)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )
    return query


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Spark's Python workers must run this interpreter (it has pyarrow and headwater) and Spark
    # must stay on loopback; set before the session starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, str(REPO))

    from pyspark.sql import SparkSession

    import headwater.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-topic-aggregation")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    headwater.spark.register(spark)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="headwater-aggregation-")

    query = start_pipeline(
        spark,
        bootstrap=args.bootstrap,
        input_topic=args.input,
        output_topic=args.output,
        checkpoint=checkpoint,
        trigger_seconds=args.trigger_seconds,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    print(f"aggregating {args.input} -> {args.output}; checkpoint {checkpoint}", flush=True)
    started = time.monotonic()
    read_total = 0
    last_batch = -1
    try:
        while query.isActive:
            if args.seconds is not None and time.monotonic() - started >= args.seconds:
                break
            query.awaitTermination(1.0)
            for progress in query.recentProgress:
                if progress["batchId"] > last_batch:
                    last_batch = progress["batchId"]
                    read_total += progress["numInputRows"]
                    if progress["numInputRows"]:
                        print(
                            f"batch {last_batch}: {progress['numInputRows']} records in, {read_total} in total",
                            flush=True,
                        )
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
        error = query.exception()
        spark.stop()
    if error is not None:
        print(f"the query failed: {error}", file=sys.stderr)
        return 1
    print(f"stopped after {time.monotonic() - started:.1f} s; {read_total} records read", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
