"""``headwater plan``: plan a reassignment (or score one with ``--evaluate``) from a snapshot or a live cluster."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from headwater.admin.options import command_config_option
from headwater.admin.security import SecurityConfigError, kafka_python_settings, read_properties
from headwater.planner.engine import Engine, LocalEngine, build_report, evaluate_plan, run_plan
from headwater.planner.errors import PlannerError
from headwater.planner.model import (
    DEFAULT_BALANCE_BAND,
    DEFAULT_DISK_THRESHOLD,
    DEFAULT_PARTITIONS_PER_BUCKET,
    Goal,
    PlanOptions,
)
from headwater.planner.reassignment import read_reassignment
from headwater.planner.report import render, to_json
from headwater.planner.snapshot import read_snapshot, write_snapshot

DEFAULT_THROTTLE_BYTES_PER_S = 50 * 1024 * 1024
DEFAULT_CONCURRENCY = 5  # Cruise Control's num.concurrent.partition.movements.per.broker


def _ids(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        return tuple(sorted({int(x) for x in value.split(",") if x.strip()}))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated broker ids, got {value!r}") from None


def _conf(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"--spark-conf expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k] = v
    return out


@contextmanager
def _engine(
    snapshot: str | None,
    bootstrap: str | None,
    engine_name: str,
    master: str,
    spark_conf: dict[str, str],
    capacity_bytes: int | None,
    timings: dict[str, float],
    client_settings: dict[str, Any] | None = None,
) -> Iterator[Engine]:
    if bool(snapshot) == bool(bootstrap):
        raise PlannerError("give exactly one of --snapshot FILE or --bootstrap-server HOST:PORT")
    tmp: tempfile.TemporaryDirectory[str] | None = None
    source = snapshot
    if bootstrap:
        from headwater.planner.live import read_live

        t = time.perf_counter()
        snap = read_live(bootstrap, default_capacity_bytes=capacity_bytes, client_settings=client_settings)
        timings["read_live_s"] = round(time.perf_counter() - t, 3)
        if engine_name == "local":
            yield LocalEngine(snap, bootstrap)
            return
        tmp = tempfile.TemporaryDirectory(prefix="headwater-plan-")
        source = str(Path(tmp.name) / "snapshot.parquet")
        write_snapshot(source, snap.brokers, snap.partitions)
    assert source is not None
    try:
        if engine_name == "local":
            yield LocalEngine(read_snapshot(source), source)
            return
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        from pyspark.sql import SparkSession

        from headwater.planner.spark_engine import SparkEngine, spark_session

        t = time.perf_counter()
        existing = SparkSession.getActiveSession()
        spark = existing if existing is not None else spark_session(master, spark_conf)
        timings["spark_start_s"] = round(time.perf_counter() - t, 3)
        try:
            yield SparkEngine.from_file(spark, source)
        finally:
            if existing is None:  # a session someone else started (a notebook, a test) stays theirs
                spark.stop()
    finally:
        if tmp is not None:
            tmp.cleanup()


@click.command("plan")
@click.option(
    "--snapshot", "snapshot", type=click.Path(dir_okay=False), help="Snapshot file (.jsonl or .parquet)."
)
@click.option("--bootstrap-server", "bootstrap", help="Read the cluster live over the Kafka protocol.")
@click.option(
    "--goal", type=click.Choice([g.value for g in Goal]), default=Goal.REBALANCE.value, show_default=True
)
@click.option("--brokers", default="", help="Broker ids for add-brokers / remove-brokers (comma-separated).")
@click.option(
    "--dead-brokers", default="", help="Treat these brokers as dead (on top of those the snapshot marks)."
)
@click.option("--replication-factor", type=int, default=None, help="New RF (goal replication-factor).")
@click.option("--rf-topics", default=None, help="Regex of topics whose RF changes (default: all).")
@click.option("--exclude-topics", default=None, help="Regex of topics never changed.")
@click.option("--exclude-brokers", default="", help="Brokers that receive no replicas and no leadership.")
@click.option(
    "--disk-threshold",
    type=float,
    default=DEFAULT_DISK_THRESHOLD,
    show_default=True,
    help="Hard limit: bytes on a broker <= this fraction of its capacity.",
)
@click.option(
    "--balance-band",
    type=float,
    default=DEFAULT_BALANCE_BAND,
    show_default=True,
    help="A broker within band x mean bytes is balanced (Cruise Control's threshold).",
)
@click.option("--no-byte-swaps", is_flag=True, help="Never spend extra moves on disk balance alone.")
@click.option(
    "--throttle",
    "throttle_bytes_per_s",
    type=float,
    default=DEFAULT_THROTTLE_BYTES_PER_S,
    show_default=True,
    help="Replication throttle per broker, bytes/s (for the duration estimate).",
)
@click.option(
    "--concurrency",
    type=int,
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Concurrent partition moves per broker in one batch.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default="reassignment.json",
    show_default=True,
    help="Where to write the Kafka reassignment JSON ('-' for stdout).",
)
@click.option(
    "--schedule-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the batch of every changed partition as JSON lines.",
)
@click.option(
    "--evaluate",
    "evaluate",
    type=click.Path(dir_okay=False),
    default=None,
    help="Score this reassignment JSON (any tool's) instead of planning.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--per-broker", is_flag=True, help="Also print the per-broker table.")
@click.option(
    "--engine",
    "engine_name",
    type=click.Choice(["spark", "local"]),
    default="spark",
    show_default=True,
    help="spark: a PySpark job; local: in this process (small clusters, tests).",
)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--spark-conf", multiple=True, help="Extra Spark setting key=value (repeatable).")
@click.option(
    "--partitions-per-bucket",
    type=int,
    default=DEFAULT_PARTITIONS_PER_BUCKET,
    show_default=True,
    help="Partitions per Spark task; fixed so the plan does not depend on the core count.",
)
@click.option(
    "--capacity-bytes", type=int, default=None, help="Disk capacity of every broker of a live cluster."
)
@command_config_option
def plan(
    snapshot: str | None,
    bootstrap: str | None,
    goal: str,
    brokers: str,
    dead_brokers: str,
    replication_factor: int | None,
    rf_topics: str | None,
    exclude_topics: str | None,
    exclude_brokers: str,
    disk_threshold: float,
    balance_band: float,
    no_byte_swaps: bool,
    throttle_bytes_per_s: float,
    concurrency: int,
    output: str,
    schedule_out: str | None,
    evaluate: str | None,
    fmt: str,
    per_broker: bool,
    engine_name: str,
    master: str,
    spark_conf: tuple[str, ...],
    partitions_per_bucket: int,
    capacity_bytes: int | None,
    command_config: Path | None,
) -> None:
    """Plan a partition reassignment with minimal data movement, or score an existing plan."""
    options = PlanOptions(
        goal=Goal(goal),
        brokers=_ids(brokers),
        dead_brokers=_ids(dead_brokers),
        replication_factor=replication_factor,
        rf_topics=rf_topics,
        exclude_topics=exclude_topics,
        exclude_brokers=_ids(exclude_brokers),
        disk_threshold=disk_threshold,
        balance_band=balance_band,
        balance_bytes=not no_byte_swaps,
        partitions_per_bucket=partitions_per_bucket,
    )
    timings: dict[str, float] = {}
    try:
        report = _run(
            options,
            snapshot,
            bootstrap,
            engine_name,
            master,
            _conf(spark_conf),
            capacity_bytes,
            timings,
            evaluate,
            output,
            schedule_out,
            concurrency,
            throttle_bytes_per_s,
            _client_settings(command_config),
        )
    except PlannerError as exc:
        raise click.ClickException(str(exc)) from None
    report["timings_s"] = timings
    if fmt == "json":
        click.echo(to_json(report))
    else:
        console = Console(file=sys.stderr if output == "-" else sys.stdout)
        render(report, console, per_broker)
        if not evaluate and output != "-":
            console.print(f"plan written to {output}")


def _client_settings(command_config: Path | None) -> dict[str, Any] | None:
    """--command-config as kafka-python settings (the live reader is kafka-python's admin client)."""
    if command_config is None:
        return None
    try:
        return kafka_python_settings(read_properties(command_config))
    except SecurityConfigError as exc:
        raise click.ClickException(f"--command-config {command_config}: {exc}") from None


def _run(
    options: PlanOptions,
    snapshot: str | None,
    bootstrap: str | None,
    engine_name: str,
    master: str,
    spark_conf: dict[str, str],
    capacity_bytes: int | None,
    timings: dict[str, float],
    evaluate: str | None,
    output: str,
    schedule_out: str | None,
    concurrency: int,
    throttle_bytes_per_s: float,
    client_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    foreign = read_reassignment(evaluate) if evaluate else None
    with _engine(snapshot, bootstrap, engine_name, master, spark_conf, capacity_bytes, timings,
                 client_settings) as engine:
        t = time.perf_counter()
        if foreign is not None:
            report = evaluate_plan(engine, foreign, options, concurrency, throttle_bytes_per_s)
            timings["evaluate_s"] = round(time.perf_counter() - t, 3)
            return report
        info = run_plan(engine, options)
        timings["plan_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        tmp_out = None if output == "-" else f"{output}.tmp-{os.getpid()}"
        out_fh = sys.stdout if tmp_out is None else open(tmp_out, "w", encoding="utf-8")  # noqa: SIM115
        sched_fh = open(schedule_out, "w", encoding="utf-8") if schedule_out else None  # noqa: SIM115
        try:
            report = build_report(
                engine, info["setup"], options, concurrency, throttle_bytes_per_s, out_fh, sched_fh
            )
        except BaseException:
            if tmp_out is not None:
                out_fh.close()
                Path(tmp_out).unlink(missing_ok=True)
            raise
        finally:
            if out_fh is not sys.stdout:
                out_fh.close()
            if sched_fh is not None:
                sched_fh.close()
        if tmp_out is not None:
            os.replace(tmp_out, output)  # a failed run leaves no half-written plan behind
        else:
            sys.stdout.write("\n")
        timings["report_s"] = round(time.perf_counter() - t, 3)
        report["rounds"] = {k: v for k, v in info.items() if k != "setup"}
        return report


if __name__ == "__main__":
    plan()
