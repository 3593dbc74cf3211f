"""The Spark engine: partitions live in a DataFrame, each bucket is planned in a Spark task.

Per-bucket functions run through ``groupBy("bucket").applyInPandas``; the driver receives only
their per-broker and per-bucket aggregates (``stats``, ``evaluate``) and, at the end, streams the
changed partitions through ``toLocalIterator`` into the JSON writer. After each planning pass the
DataFrame is checkpointed locally so later passes do not recompute the earlier ones.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas

from headwater.planner.bucket import (
    STATS_COLUMNS,
    BucketContext,
    StatsContext,
    bucket_stats,
    plan_leaders,
    plan_replicas,
)
from headwater.planner.errors import PlannerError
from headwater.planner.evaluate import AGG_COLUMNS, EvalContext, evaluate_bucket
from headwater.planner.model import NO_BROKER, Broker, IntArray
from headwater.planner.reassignment import Change
from headwater.planner.snapshot import PartitionSummary, orig_cols, plan_cols

JSON_SCHEMA = (
    "type STRING, id INT, rack STRING, capacity_bytes BIGINT, alive BOOLEAN, cordoned BOOLEAN, topic STRING, partition INT, "
    "replicas ARRAY<INT>, leader INT, size_bytes BIGINT"
)


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession set up for the planner (loopback, no UI, this interpreter for Python workers)."""
    repo = str(Path(__file__).resolve().parents[2])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if repo not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([repo, *paths])
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("headwater-plan")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        # Executors elsewhere cannot see this work tree: ship the package with the job.
        archive = Path(tempfile.mkdtemp(prefix="headwater-")) / "headwater.zip"
        pkg = Path(repo) / "headwater"
        with zipfile.ZipFile(archive, "w") as zf:
            for f in pkg.rglob("*.py"):
                zf.write(f, f.relative_to(repo))
        spark.sparkContext.addPyFile(str(archive))
    return spark


def _spark_message(exc: BaseException) -> str:
    text = str(exc)
    marker = "PlannerError: "
    if marker in text:
        return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else type(exc).__name__


class SparkEngine:
    def __init__(self, spark: Any, source: str, partitions_df: Any, brokers: list[Broker]) -> None:
        self.spark = spark
        self.source = source
        self.df = partitions_df
        self._brokers = brokers
        self._width = 0
        self._buckets = 1

    # ---- loading ------------------------------------------------------------------------------------
    @staticmethod
    def from_file(spark: Any, path: str | Path) -> SparkEngine:
        from pyspark.sql import functions as F

        p = Path(path)
        if not p.exists():
            raise PlannerError(f"snapshot {p} does not exist")
        try:
            if p.suffix == ".parquet":
                raw = spark.read.parquet(str(p))
                missing = {"type", "id", "topic", "partition", "replicas"} - set(raw.columns)
                if missing:
                    raise PlannerError(f"snapshot {p}: Parquet file lacks column(s) {sorted(missing)}")
                for col, typ in (
                    ("rack", "string"),
                    ("capacity_bytes", "bigint"),
                    ("alive", "boolean"),
                    ("cordoned", "boolean"),
                    ("leader", "int"),
                    ("size_bytes", "bigint"),
                ):
                    if col not in raw.columns:
                        raw = raw.withColumn(col, F.lit(None).cast(typ))
            else:
                raw = spark.read.schema(JSON_SCHEMA).option("mode", "FAILFAST").json(str(p))
            bad = (
                raw.filter(~F.coalesce(F.col("type").isin("broker", "partition"), F.lit(False)))
                .limit(1)
                .collect()
            )
            if bad:
                raise PlannerError(
                    f"snapshot {p}: unknown record type {bad[0]['type']!r} (expected 'broker' or 'partition')"
                )
            rows = (
                raw.filter(F.col("type") == "broker")
                .select("id", "rack", "capacity_bytes", "alive", "cordoned")
                .collect()
            )
        except PlannerError:
            raise
        except Exception as exc:  # Spark reports corrupt input as a JVM exception
            raise PlannerError(f"snapshot {p}: corrupt or unreadable ({_spark_message(exc)})") from None
        brokers = []
        for r in rows:
            if r["id"] is None:
                raise PlannerError(f"snapshot {p}: a broker record has no id")
            brokers.append(
                Broker(
                    int(r["id"]),
                    r["rack"],
                    None if r["capacity_bytes"] is None else int(r["capacity_bytes"]),
                    True if r["alive"] is None else bool(r["alive"]),
                    bool(r["cordoned"]),
                )
            )
        parts = raw.filter(F.col("type") == "partition").select(
            F.col("topic"),
            F.col("partition").cast("bigint").alias("partition"),
            F.col("replicas"),
            F.coalesce(F.col("leader"), F.lit(NO_BROKER)).cast("bigint").alias("leader"),
            F.coalesce(F.col("size_bytes"), F.lit(0)).cast("bigint").alias("size_bytes"),
        )
        return SparkEngine(spark, str(p), parts, brokers)

    @staticmethod
    def from_pandas(
        spark: Any, frame: pd.DataFrame, brokers: list[Broker], source: str = "<memory>"
    ) -> SparkEngine:
        """From a wide frame (o* columns), e.g. a live cluster's metadata or a generated cluster."""
        width = sum(1 for c in frame.columns if c.startswith("o") and c[1:].isdigit())
        m = frame[orig_cols(width)].to_numpy(dtype=np.int64)
        slim = pd.DataFrame(
            {
                "topic": frame["topic"].astype(str).to_numpy(dtype=object),
                "partition": frame["partition"].to_numpy(dtype=np.int64),
                "replicas": [row[row >= 0].tolist() for row in m],
                "leader": frame["leader"].to_numpy(dtype=np.int64),
                "size_bytes": frame["size_bytes"].to_numpy(dtype=np.int64),
            }
        )
        df = spark.createDataFrame(
            slim, "topic STRING, partition BIGINT, replicas ARRAY<BIGINT>, leader BIGINT, size_bytes BIGINT"
        )
        return SparkEngine(spark, source, df, brokers)

    # ---- Engine interface ---------------------------------------------------------------------------------
    def brokers(self) -> list[Broker]:
        return list(self._brokers)

    def summary(self, broker_ids: IntArray) -> PartitionSummary:
        from pyspark.sql import functions as F

        df = self.df.cache()
        self.df = df
        name = F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))
        ids = [int(x) for x in broker_ids.tolist()]
        rf = F.coalesce(F.size(F.col("replicas")), F.lit(0))
        unknown = (
            F.filter(F.coalesce(F.col("replicas"), F.array()), lambda x: ~x.isin(ids))
            if ids
            else F.col("replicas")
        )
        try:
            with_cols = df.select(
                name.alias("name"),
                rf.alias("rf"),
                unknown.alias("unknown"),
                (F.size(F.array_distinct(F.col("replicas"))) != F.size(F.col("replicas"))).alias("repeated"),
                (
                    (F.col("leader") >= 0)
                    & ~F.coalesce(F.array_contains(F.col("replicas"), F.col("leader")), F.lit(False))
                ).alias("bad_leader"),
                (F.col("size_bytes") < 0).alias("negative"),
                F.col("topic").isNull().alias("no_topic"),
            )
            agg = with_cols.agg(
                F.count(F.lit(1)).alias("n"),
                F.max("rf").alias("max_rf"),
                F.max_by("name", "rf").alias("max_rf_example"),
                F.sum(F.col("no_topic").cast("int")).alias("no_topic"),
            ).collect()[0]
            if agg["no_topic"]:
                raise PlannerError(f"snapshot {self.source}: a partition record has no topic")

            def examples(cond: Any) -> list[str]:
                return [
                    r["name"]
                    for r in with_cols.filter(cond).select("name").orderBy("name").limit(5).collect()
                ]

            unknown_rows = (
                with_cols.filter(F.size("unknown") > 0)
                .select("name", F.col("unknown")[0].alias("b"))
                .orderBy("name")
                .limit(5)
                .collect()
            )
            dups = (
                df.groupBy("topic", "partition")
                .count()
                .filter(F.col("count") > 1)
                .select(F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("name"))
                .orderBy("name")
                .limit(5)
                .collect()
            )
            return PartitionSummary(
                partitions=int(agg["n"]),
                duplicate_examples=[r["name"] for r in dups],
                empty_examples=examples(F.col("rf") == 0),
                unknown_broker_examples=[(r["name"], int(r["b"])) for r in unknown_rows],
                repeated_broker_examples=examples(F.col("repeated")),
                bad_leader_examples=examples(F.col("bad_leader")),
                negative_size_examples=examples(F.col("negative")),
                max_rf=int(agg["max_rf"] or 0),
                max_rf_example=str(agg["max_rf_example"] or ""),
            )
        except PlannerError:
            raise
        except Exception as exc:
            raise PlannerError(
                f"snapshot {self.source}: corrupt or unreadable ({_spark_message(exc)})"
            ) from None

    def width(self) -> int:
        from pyspark.sql import functions as F

        if "replicas" in self.df.columns:
            row = self.df.agg(F.max(F.size("replicas")).alias("w")).collect()[0]
            return max(int(row["w"] or 1), 1)
        return self._width

    def partitions(self) -> int:
        return int(self.df.count())

    def prepare(self, width: int, buckets: int) -> None:
        from pyspark.sql import functions as F

        self._width = width
        self._buckets = buckets
        cols = [F.col("topic"), F.col("partition"), F.col("size_bytes"), F.col("leader")]
        # get() is null past a shorter replica list; indexing raises there under ANSI mode (Spark 4's default).
        cols += [
            F.coalesce(F.get(F.col("replicas"), i), F.lit(NO_BROKER)).cast("bigint").alias(f"o{i}")
            for i in range(width)
        ]
        cols += [
            F.coalesce(F.get(F.col("replicas"), i), F.lit(NO_BROKER)).cast("bigint").alias(f"r{i}")
            for i in range(width)
        ]
        cols += [(F.crc32(F.col("topic").cast("binary")) % F.lit(buckets)).cast("bigint").alias("bucket")]
        old = self.df
        self.df = self.df.select(*cols).repartition(min(buckets, 200), "bucket").localCheckpoint()
        old.unpersist()

    def _schema(self) -> str:
        cols = ["topic STRING", "partition BIGINT", "size_bytes BIGINT", "leader BIGINT"]
        cols += [f"o{i} BIGINT" for i in range(self._width)] + [f"r{i} BIGINT" for i in range(self._width)]
        return ", ".join([*cols, "bucket BIGINT"])

    def _map(self, fn: Callable[[pd.DataFrame, Any, int], pd.DataFrame], ctx: Any) -> None:
        columns = [
            "topic",
            "partition",
            "size_bytes",
            "leader",
            *orig_cols(self._width),
            *plan_cols(self._width),
            "bucket",
        ]

        def run(pdf: pd.DataFrame) -> pd.DataFrame:
            bucket = int(pdf["bucket"].iat[0])
            out = fn(pdf, ctx, bucket)
            return out[columns]

        try:
            self.df = self.df.groupBy("bucket").applyInPandas(run, self._schema()).localCheckpoint()
        except Exception as exc:
            raise PlannerError(_spark_message(exc)) from None

    def _aggregate(
        self, fn: Callable[[pd.DataFrame, Any, int], pd.DataFrame], ctx: Any, schema: str
    ) -> pd.DataFrame:
        def run(pdf: pd.DataFrame) -> pd.DataFrame:
            return fn(pdf, ctx, int(pdf["bucket"].iat[0]))

        try:
            return self.df.groupBy("bucket").applyInPandas(run, schema).toPandas()
        except Exception as exc:
            raise PlannerError(_spark_message(exc)) from None

    def stats(self, ctx: StatsContext) -> pd.DataFrame:
        schema = "bucket BIGINT, broker BIGINT, replicas BIGINT, bytes DOUBLE, leaders BIGINT, extra DOUBLE"
        out = self._aggregate(bucket_stats, ctx, schema)
        return out[STATS_COLUMNS]

    def map_replicas(self, ctx: BucketContext) -> None:
        self._map(plan_replicas, ctx)

    def map_leaders(self, ctx: BucketContext) -> None:
        self._map(plan_leaders, ctx)

    def evaluate(self, ctx: EvalContext) -> pd.DataFrame:
        schema = ", ".join(["kind STRING", "key BIGINT", *[f"{c} DOUBLE" for c in AGG_COLUMNS[2:]]])
        return self._aggregate(evaluate_bucket, ctx, schema)

    def changes(self) -> Iterator[Change]:
        from pyspark.sql import functions as F

        w = self._width
        differs = F.lit(False)
        for i in range(w):
            differs = differs | (F.col(f"o{i}") != F.col(f"r{i}"))
        rows = self.df.filter(differs).orderBy("topic", "partition").toLocalIterator(prefetchPartitions=True)
        for r in rows:
            yield Change(
                r["topic"],
                int(r["partition"]),
                tuple(int(r[f"o{i}"]) for i in range(w) if r[f"o{i}"] >= 0),
                tuple(int(r[f"r{i}"]) for i in range(w) if r[f"r{i}"] >= 0),
                int(r["size_bytes"]),
                int(r["leader"]),
            )

    def apply_plan(self, plan: dict[tuple[str, int], list[int]]) -> None:
        from pyspark.sql import functions as F

        w = self._width
        rows = [(t, p, *[*reps, *([NO_BROKER] * (w - len(reps)))]) for (t, p), reps in plan.items()]
        schema = ", ".join(["topic STRING", "partition BIGINT", *[f"p{i} BIGINT" for i in range(w)]])
        plan_df = self.spark.createDataFrame(rows, schema) if rows else self.spark.createDataFrame([], schema)
        missing = plan_df.join(self.df, ["topic", "partition"], "left_anti").limit(5).collect()
        if missing:
            names = ", ".join(f"{r['topic']}-{r['partition']}" for r in missing)
            raise PlannerError(f"plan names partition(s) not in snapshot {self.source}: {names}")
        joined = self.df.join(
            F.broadcast(plan_df) if len(rows) < 200_000 else plan_df, ["topic", "partition"], "left"
        )
        matched = F.col("p0").isNotNull()
        cols = [c for c in self.df.columns if not c.startswith("r") or not c[1:].isdigit()]
        out = joined.select(
            *[F.col(c) for c in cols],
            *[F.when(matched, F.col(f"p{i}")).otherwise(F.col(f"o{i}")).alias(f"r{i}") for i in range(w)],
        )
        self.df = out.localCheckpoint()
