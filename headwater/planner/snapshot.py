"""Cluster snapshot files: JSON lines or Parquet, one record per broker and one per partition.

JSON lines (``.jsonl`` / ``.json``), one object a line::

    {"type": "broker", "id": 1, "rack": "r1", "capacity_bytes": 1000000000000, "alive": true, "cordoned": false}
    {"type": "partition", "topic": "t", "partition": 0, "replicas": [1, 2, 3], "leader": 1, "size_bytes": 123}

``rack``, ``capacity_bytes``, ``alive`` (default true) and ``cordoned`` (default false: every log dir of
the broker in ``cordoned.log.dirs``, KIP-1066) are optional; ``leader`` may be -1 or absent
(offline); ``size_bytes`` defaults to 0. Parquet (``.parquet``) holds the same records in one table with a
``type`` column and the union of the fields (null where a field does not apply), so one file is one
snapshot whichever format it is in.

This module reads and writes snapshots in the driver for the local engine, the generator and tests;
the Spark engine reads the same files with Spark (``headwater.planner.spark_engine``) and applies the
same checks through :func:`check_partitions_summary`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from headwater.planner.errors import PlannerError
from headwater.planner.model import NO_BROKER, Broker, BrokerTable, IntArray, max_per_rack

PARQUET_SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("id", pa.int32()),
        ("rack", pa.string()),
        ("capacity_bytes", pa.int64()),
        ("alive", pa.bool_()),
        ("cordoned", pa.bool_()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("replicas", pa.list_(pa.int32())),
        ("leader", pa.int32()),
        ("size_bytes", pa.int64()),
    ]
)


def orig_cols(width: int) -> list[str]:
    return [f"o{i}" for i in range(width)]


def plan_cols(width: int) -> list[str]:
    return [f"r{i}" for i in range(width)]


@dataclass
class Snapshot:
    """A whole cluster held in the driver: brokers plus a wide partition frame (local engine only)."""

    brokers: list[Broker]
    partitions: pd.DataFrame  # topic, partition, size_bytes, leader, o0..oK

    @property
    def width(self) -> int:
        return sum(1 for c in self.partitions.columns if c.startswith("o") and c[1:].isdigit())


def wide_frame(
    topics: Iterable[str] | np.ndarray[Any, Any],
    partitions: IntArray | list[int],
    replicas: list[list[int]] | np.ndarray[Any, Any],
    leaders: IntArray | list[int],
    sizes: IntArray | list[int],
) -> pd.DataFrame:
    """Columnar partitions to the wide frame. ``replicas`` is a list of lists or a -1 padded matrix."""
    if isinstance(replicas, np.ndarray) and replicas.ndim == 2:
        matrix = replicas.astype(np.int64)
    else:
        rows = list(replicas)
        width = max((len(r) for r in rows), default=1)
        matrix = np.full((len(rows), max(width, 1)), NO_BROKER, dtype=np.int64)
        for i, r in enumerate(rows):
            matrix[i, : len(r)] = r
    frame = pd.DataFrame(
        {
            "topic": pd.Series(list(topics) if not isinstance(topics, np.ndarray) else topics, dtype=object),
            "partition": np.asarray(partitions, dtype=np.int64),
            "size_bytes": np.asarray(sizes, dtype=np.int64),
            "leader": np.asarray(leaders, dtype=np.int64),
        }
    )
    for i in range(matrix.shape[1]):
        frame[f"o{i}"] = matrix[:, i]
    return frame


def read_snapshot(path: str | Path) -> Snapshot:
    p = Path(path)
    if not p.exists():
        raise PlannerError(f"snapshot {p} does not exist")
    if p.suffix == ".parquet":
        return _read_parquet(p)
    return _read_jsonl(p)


def _read_jsonl(path: Path) -> Snapshot:
    brokers: list[Broker] = []
    topics: list[str] = []
    parts: list[int] = []
    reps: list[list[int]] = []
    leaders: list[int] = []
    sizes: list[int] = []
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PlannerError(f"snapshot {path} line {lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise PlannerError(f"snapshot {path} line {lineno}: expected a JSON object")
            kind = rec.get("type")
            try:
                if kind == "broker":
                    brokers.append(_broker_from_record(rec))
                elif kind == "partition":
                    topics.append(_req_str(rec, "topic"))
                    parts.append(_req_int(rec, "partition"))
                    r = rec.get("replicas")
                    if not isinstance(r, list) or not all(isinstance(x, int) for x in r):
                        raise ValueError("'replicas' must be a list of broker ids")
                    reps.append(r)
                    leaders.append(_opt_int(rec, "leader", NO_BROKER))
                    sizes.append(_opt_int(rec, "size_bytes", 0))
                else:
                    raise ValueError(f"unknown record type {kind!r} (expected 'broker' or 'partition')")
            except ValueError as exc:
                raise PlannerError(f"snapshot {path} line {lineno}: {exc}") from None
    return Snapshot(brokers, wide_frame(topics, parts, reps, leaders, sizes))


def _read_parquet(path: Path) -> Snapshot:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise PlannerError(f"snapshot {path}: not a readable Parquet file ({exc})") from None
    missing = {"type", "id", "topic", "partition", "replicas"} - set(table.column_names)
    if missing:
        raise PlannerError(f"snapshot {path}: Parquet file lacks column(s) {sorted(missing)}")
    frame = table.to_pandas()
    kinds = frame["type"]
    bad = set(kinds.dropna().unique()) - {"broker", "partition"}
    if bad or kinds.isna().any():
        raise PlannerError(f"snapshot {path}: unknown record type(s) {sorted(map(str, bad)) or ['null']}")
    broker_cols = [c for c in ("type", "id", "rack", "capacity_bytes", "alive", "cordoned") if c in table.column_names]
    broker_rows = table.select(broker_cols).filter(pc.equal(table["type"], "broker")).to_pylist()
    try:
        brokers = [_broker_from_record(row) for row in broker_rows]
    except ValueError as exc:
        raise PlannerError(f"snapshot {path}: {exc}") from None
    pf = frame[kinds == "partition"]
    if pf["topic"].isna().any() or pf["partition"].isna().any() or pf["replicas"].isna().any():
        raise PlannerError(f"snapshot {path}: a partition record lacks topic, partition or replicas")
    leaders = pf["leader"].fillna(NO_BROKER) if "leader" in pf else pd.Series(NO_BROKER, index=pf.index)
    sizes = pf["size_bytes"].fillna(0) if "size_bytes" in pf else pd.Series(0, index=pf.index)
    return Snapshot(
        brokers,
        wide_frame(
            pf["topic"].to_numpy(dtype=object),
            pf["partition"].to_numpy(dtype=np.int64),
            [list(map(int, r)) for r in pf["replicas"]],
            leaders.to_numpy(dtype=np.int64),
            sizes.to_numpy(dtype=np.int64),
        ),
    )


def _broker_from_record(rec: dict[str, Any]) -> Broker:
    rack = rec.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ValueError("'rack' must be a string")
    cap = rec.get("capacity_bytes")
    alive = rec.get("alive", True)
    cordoned = rec.get("cordoned", False)
    if cordoned is not None and not isinstance(cordoned, bool):
        raise ValueError("'cordoned' must be true or false")
    return Broker(
        id=_req_int(rec, "id"),
        rack=rack,
        capacity_bytes=None if cap is None else int(cap),
        alive=True if alive is None else bool(alive),
        cordoned=bool(cordoned),
    )


def _req_str(rec: dict[str, Any], key: str) -> str:
    v = rec.get(key)
    if not isinstance(v, str) or not v:
        raise ValueError(f"'{key}' must be a non-empty string")
    return v


def _req_int(rec: dict[str, Any], key: str) -> int:
    v = rec.get(key)
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise ValueError(f"'{key}' must be an integer")
    return int(v)


def _opt_int(rec: dict[str, Any], key: str, default: int) -> int:
    return default if rec.get(key) is None else _req_int(rec, key)


def write_snapshot(path: str | Path, brokers: list[Broker], partitions: pd.DataFrame) -> None:
    p = Path(path)
    width = sum(1 for c in partitions.columns if c.startswith("o") and c[1:].isdigit())
    matrix = partitions[orig_cols(width)].to_numpy(dtype=np.int64)
    if p.suffix == ".parquet":
        lists = [row[row >= 0].tolist() for row in matrix]
        n_b, n_p = len(brokers), len(partitions)
        table = pa.table(
            {
                "type": ["broker"] * n_b + ["partition"] * n_p,
                "id": [b.id for b in brokers] + [None] * n_p,
                "rack": [b.rack for b in brokers] + [None] * n_p,
                "capacity_bytes": [b.capacity_bytes for b in brokers] + [None] * n_p,
                "alive": [b.alive for b in brokers] + [None] * n_p,
                "cordoned": [b.cordoned for b in brokers] + [None] * n_p,
                "topic": [None] * n_b + partitions["topic"].tolist(),
                "partition": [None] * n_b + partitions["partition"].astype(int).tolist(),
                "replicas": [None] * n_b + lists,
                "leader": [None] * n_b + partitions["leader"].astype(int).tolist(),
                "size_bytes": [None] * n_b + partitions["size_bytes"].astype(int).tolist(),
            },
            schema=PARQUET_SCHEMA,
        )
        pq.write_table(table, p, row_group_size=200_000)
        return
    with p.open("w", encoding="utf-8") as fh:
        for line in _jsonl_lines(brokers, partitions, matrix):
            fh.write(line)


def _jsonl_lines(
    brokers: list[Broker], partitions: pd.DataFrame, matrix: np.ndarray[Any, Any]
) -> Iterator[str]:
    for b in brokers:
        rec: dict[str, Any] = {
            "type": "broker",
            "id": b.id,
            "rack": b.rack,
            "capacity_bytes": b.capacity_bytes,
        }
        if not b.alive:
            rec["alive"] = False
        if b.cordoned:
            rec["cordoned"] = True
        yield json.dumps(rec, separators=(",", ":")) + "\n"
    topics = partitions["topic"].tolist()
    parts = partitions["partition"].tolist()
    leaders = partitions["leader"].tolist()
    sizes = partitions["size_bytes"].tolist()
    for i, row in enumerate(matrix):
        reps = row[row >= 0].tolist()
        yield (
            f'{{"type":"partition","topic":{json.dumps(topics[i])},"partition":{int(parts[i])},'
            f'"replicas":{json.dumps(reps, separators=(",", ":"))},"leader":{int(leaders[i])},'
            f'"size_bytes":{int(sizes[i])}}}\n'
        )


@dataclass(frozen=True)
class PartitionSummary:
    """What the checks need to know about the partitions, as aggregates (computable in Spark too)."""

    partitions: int
    duplicate_examples: list[str]
    empty_examples: list[str]
    unknown_broker_examples: list[tuple[str, int]]  # (topic-partition, broker id)
    repeated_broker_examples: list[str]
    bad_leader_examples: list[str]
    negative_size_examples: list[str]
    max_rf: int
    max_rf_example: str


def summarize_partitions(frame: pd.DataFrame, broker_ids: IntArray) -> PartitionSummary:
    width = sum(1 for c in frame.columns if c.startswith("o") and c[1:].isdigit())
    m = frame[orig_cols(width)].to_numpy(dtype=np.int64)
    names = frame["topic"].astype(str) + "-" + frame["partition"].astype(str)
    dup = names[names.duplicated()].head(5).tolist()
    rf = (m >= 0).sum(axis=1) if len(m) else np.zeros(0, dtype=np.int64)
    empty = names[rf == 0].head(5).tolist()
    known = np.isin(m, broker_ids) | (m < 0)
    unknown_rows = np.nonzero(~known.all(axis=1))[0][:5]
    unknown = [(names.iat[i], int(m[i][~known[i]][0])) for i in unknown_rows]
    srt = np.sort(m, axis=1)
    repeated = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0) if width > 1 else np.zeros((len(m), 0), bool)
    rep_names = names[repeated.any(axis=1)].head(5).tolist() if len(m) else []
    lead = frame["leader"].to_numpy(dtype=np.int64)
    bad_lead = (lead >= 0) & ~(m == lead[:, None]).any(axis=1) if len(m) else np.zeros(0, bool)
    neg = frame["size_bytes"].to_numpy(dtype=np.int64) < 0
    max_rf = int(rf.max()) if len(rf) else 0
    example = names.iat[int(np.argmax(rf))] if len(rf) else ""
    return PartitionSummary(
        partitions=len(frame),
        duplicate_examples=dup,
        empty_examples=empty,
        unknown_broker_examples=unknown,
        repeated_broker_examples=rep_names,
        bad_leader_examples=names[bad_lead].head(5).tolist() if len(m) else [],
        negative_size_examples=names[neg].head(5).tolist() if len(m) else [],
        max_rf=max_rf,
        max_rf_example=example,
    )


def check_partitions_summary(summary: PartitionSummary, source: str) -> None:
    """Refuse a snapshot whose partitions are inconsistent with themselves or with the broker list."""
    if summary.partitions == 0:
        raise PlannerError(f"snapshot {source} has no partitions")
    if summary.duplicate_examples:
        raise PlannerError(
            f"snapshot {source} lists partition(s) twice: {', '.join(summary.duplicate_examples)}"
        )
    if summary.empty_examples:
        raise PlannerError(
            f"snapshot {source} has partition(s) with no replicas: {', '.join(summary.empty_examples)}"
        )
    if summary.unknown_broker_examples:
        shown = ", ".join(f"{tp} on broker {b}" for tp, b in summary.unknown_broker_examples)
        raise PlannerError(
            f"snapshot {source} places replicas on unknown broker(s): {shown}; "
            'add a broker record for each (with "alive": false if it is dead)'
        )
    if summary.repeated_broker_examples:
        raise PlannerError(
            f"snapshot {source} has a broker twice in a replica set: {', '.join(summary.repeated_broker_examples)}"
        )
    if summary.bad_leader_examples:
        raise PlannerError(
            f"snapshot {source} has leader(s) outside the replica set: {', '.join(summary.bad_leader_examples)}"
        )
    if summary.negative_size_examples:
        raise PlannerError(
            f"snapshot {source} has negative size_bytes: {', '.join(summary.negative_size_examples)}"
        )


def check_brokers(brokers: list[Broker], source: str) -> BrokerTable:
    if not brokers:
        raise PlannerError(f"snapshot {source} has no broker records")
    seen: set[int] = set()
    for b in brokers:
        if b.id < 0:
            raise PlannerError(f"snapshot {source}: broker id {b.id} is negative")
        if b.id in seen:
            raise PlannerError(f"snapshot {source}: broker {b.id} is listed twice")
        if b.capacity_bytes is not None and b.capacity_bytes <= 0:
            raise PlannerError(f"snapshot {source}: broker {b.id} has a non-positive capacity_bytes")
        seen.add(b.id)
    return BrokerTable.build(brokers)


def check_rf_feasible(rf: int, holders: np.ndarray[Any, Any], table: BrokerTable, what: str) -> None:
    """``holders`` marks the brokers allowed to hold replicas. Refuse an RF they cannot hold rack-aware."""
    n = int(holders.sum())
    if rf > n:
        raise PlannerError(
            f"replication factor {rf} ({what}) is larger than the {n} broker(s) that can hold replicas"
        )
    racks = table.rack_index[holders]
    sizes = np.bincount(racks, minlength=len(table.rack_names))
    sizes = sizes[sizes > 0]
    cap = max_per_rack(rf, len(sizes))
    if int(np.minimum(sizes, cap).sum()) < rf:
        raise PlannerError(
            f"replication factor {rf} ({what}) cannot be spread over the {len(sizes)} rack(s) of the brokers "
            f"that can hold replicas with at most {cap} replica(s) per rack (rack sizes {sorted(sizes.tolist())})"
        )
