"""Render a plan report: a rich table for people, one JSON document for machines."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def human_bytes(n: float) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:,.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} PiB"


def human_seconds(s: float) -> str:
    s = float(s)
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=False, separators=(",", ":"))


def render(report: dict[str, Any], console: Console, per_broker: bool = False) -> None:
    ex = report["execution"]
    summary = Table(title=f"headwater plan: {report['goal']}", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    rows = [
        ("partitions", f"{report['partitions']:,}"),
        ("replica moves", f"{report['replica_moves']:,}"),
        ("partitions moved", f"{report['partitions_moved']:,}"),
        ("bytes moved", human_bytes(report["bytes_moved"])),
        ("leader changes", f"{report['leader_changes']:,}"),
        (
            "largest inbound",
            f"{human_bytes(report['max_inbound']['bytes'])} (broker {report['max_inbound']['broker']})",
        ),
        (
            "largest outbound",
            f"{human_bytes(report['max_outbound']['bytes'])} (broker {report['max_outbound']['broker']})",
        ),
        ("batches", f"{ex['batches']:,} at {ex['concurrency_per_broker']} moves per broker"),
        (
            "estimated duration",
            f"{human_seconds(ex['estimated_duration_s'])} at {human_bytes(ex['throttle_bytes_per_s'])}/s",
        ),
        ("lower bound", human_seconds(ex["lower_bound_s"])),
        (
            "balancedness (CC-style)",
            f"{report['balancedness']['before']} -> {report['balancedness']['after']}",
        ),
    ]
    for k, v in rows:
        summary.add_row(k, v)
    console.print(summary)
    bal = Table(title="balance per broker (before -> after)")
    for col in ("metric", "max", "min", "CV"):
        bal.add_column(col, justify="right" if col != "metric" else "left")
    for metric in ("replicas", "leaders", "bytes"):
        b, a = report["balance"]["before"][metric], report["balance"]["after"][metric]
        fmt = human_bytes if metric == "bytes" else (lambda x: f"{int(x):,}")
        bal.add_row(
            metric,
            f"{fmt(b['max'])} -> {fmt(a['max'])}",
            f"{fmt(b['min'])} -> {fmt(a['min'])}",
            f"{b['cv']:.4f} -> {a['cv']:.4f}",
        )
    bb, ba = report["balance"]["before"], report["balance"]["after"]
    bal.add_row(
        "topic spread",
        f"{bb['topic_spread_max']} -> {ba['topic_spread_max']}",
        "",
        f"mean {bb['topic_spread_mean']} -> {ba['topic_spread_mean']}",
    )
    console.print(bal)
    v = report["violations"]
    vt = Table(title="constraints after the plan")
    vt.add_column("check")
    vt.add_column("count", justify="right")
    vt.add_row("rack violations (before)", f"{v['rack_after']} ({v['rack_before']})")
    for key in (
        "rf_changed",
        "duplicate_replicas",
        "replicas_on_removed_or_dead",
        "excluded_topics_changed",
        "over_disk_limit_after",
    ):
        vt.add_row(key.replace("_", " "), str(v[key]))
    violated = ", ".join(report["balancedness"]["goals_violated_after"]) or "none"
    vt.add_row("CC goals still violated", violated)
    console.print(vt)
    if ex["schedule"]:
        st = Table(title="schedule")
        for col in ("batch", "moves", "bytes", "brokers", "estimate"):
            st.add_column(col, justify="right")
        for row in ex["schedule"][:20]:
            st.add_row(
                str(row["batch"]),
                str(row["replica_moves"]),
                human_bytes(row["bytes"]),
                str(row["brokers"]),
                human_seconds(row["estimated_s"]),
            )
        more = ex["batches"] - min(len(ex["schedule"]), 20)
        if more > 0:
            st.caption = f"... and {more} more batches"
        console.print(st)
    if per_broker:
        pt = Table(title="per broker (before -> after)")
        for col in ("broker", "replicas", "leaders", "bytes", "in", "out"):
            pt.add_column(col, justify="right")
        for bid, row in report["per_broker"].items():
            pt.add_row(
                bid,
                f"{row['replicas'][0]} -> {row['replicas'][1]}",
                f"{row['leaders'][0]} -> {row['leaders'][1]}",
                f"{human_bytes(row['bytes'][0])} -> {human_bytes(row['bytes'][1])}",
                human_bytes(row["in_bytes"]),
                human_bytes(row["out_bytes"]),
            )
        console.print(pt)
