"""A Spark application for test_exactly_once.py, run in its own process (it gets killed, or needs
``local[N,F]`` for task retries, neither of which the shared test session can do).

``stream``: two availableNow queries over the same input, one exactly-once and one at-least-once,
each checkpointed under ``--checkpoint``. With ``--slow-partition P`` the rows of input partition
P pass a Python UDF that sleeps, so that task's transaction stays open for a while.

``batch``: ``spark.range`` written twice, exactly-once and at-least-once, under ``local[2,2]``;
the first attempt of Spark partition 1 fails half-way through its rows (a Python UDF raises).

Prints one line ``RESULT {json}`` at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

ROW_DELAY_S = 0.1


def session(master: str) -> Any:
    from pyspark.sql import SparkSession

    import headwater.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("headwater-eos-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.python.authenticate.socketTimeout", "120s")
        # Small Arrow batches and socket buffers: rows reach the writer (and the cluster) while a
        # slow or failing task is still running, as they would with large inputs.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
        .config("spark.buffer.size", "1024")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    headwater.spark.register(spark)
    return spark


def stream(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql.functions import col, udf

    spark = session("local[4]")
    slow = args.slow_partition

    @udf(returnType="binary", useArrow=True)  # type: ignore[misc]
    def maybe_slow(partition: int, value: bytes) -> bytes:
        if partition == slow:
            time.sleep(ROW_DELAY_S)
        return value

    source = (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .load()
    )
    if slow is not None:
        source = source.select(maybe_slow(col("partition"), col("value")).alias("value"))
    else:
        source = source.select("value")
    queries = {}
    for mode, topic in (("eos", args.eos_output), ("alo", args.alo_output)):
        writer = (
            source.writeStream.format("headwater")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", topic)
            .option("checkpointLocation", str(Path(args.checkpoint) / mode))
            .queryName(f"{mode}_query")
        )
        if mode == "eos":
            writer = writer.option("exactlyOnce", "true").option("transactionalIdPrefix", args.prefix)
        queries[mode] = writer.trigger(availableNow=True).start()
    result: dict[str, Any] = {}
    for mode, query in queries.items():
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{mode}: {query.exception()}")
        result[mode] = {"batches": [p["batchId"] for p in query.recentProgress if p["numInputRows"]]}
    spark.stop()
    return result


def batch(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql.functions import col, udf

    spark = session("local[2,2]")
    marks = Path(args.marks)
    marks.mkdir(parents=True, exist_ok=True)
    fail_at = args.rows * 3 // 4  # half-way through partition 1's rows

    def fail_once(mode: str) -> Any:
        @udf(returnType="binary", useArrow=True)  # type: ignore[misc]
        def f(i: int, value: bytes) -> bytes:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            if i == fail_at:
                (marks / f"{mode}-{ctx.partitionId()}-{ctx.attemptNumber()}").touch()
                if ctx.attemptNumber() == 0:
                    time.sleep(2)  # the writer's earlier rows reach the cluster
                    raise RuntimeError("injected failure of the first attempt")
            return value

        return f

    result: dict[str, Any] = {}
    for mode, topic in (("eos", args.eos_output), ("alo", args.alo_output)):
        df = spark.range(0, args.rows, 1, 2).selectExpr(
            "id", "cast(concat('row-', cast(id as string)) as binary) as value"
        )
        df = df.select(fail_once(mode)(col("id"), col("value")).alias("value"))
        writer = (
            df.write.format("headwater")
            .mode("append")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", topic)
        )
        if mode == "eos":
            writer = writer.option("exactlyOnce", "true").option("transactionalIdPrefix", args.prefix)
        writer.save()
        result[mode] = sorted(p.name for p in marks.iterdir() if p.name.startswith(mode))
    result["attempts"] = len(result["eos"])
    spark.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("stream", "batch"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input")
    parser.add_argument("--eos-output", required=True)
    parser.add_argument("--alo-output", required=True)
    parser.add_argument("--checkpoint")
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--slow-partition", type=int)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--marks", default=None)
    args = parser.parse_args()
    if args.mode == "batch" and args.marks is None:
        import tempfile

        args.marks = tempfile.mkdtemp(prefix="eos-marks-")
    result = stream(args) if args.mode == "stream" else batch(args)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
