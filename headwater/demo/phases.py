"""A partition's reassignment as the controller writes it to ZooKeeper, phase by phase.

The rows are the seed's table for ORS {1,2,3} -> TRS {4,5,6}: the replica set (RS), the replicas
being added (AR) and removed (RR) from ``/brokers/topics/<topic>``, and the leader and ISR from
``/brokers/topics/<topic>/partitions/<p>/state``. The watcher reads both znodes every few
milliseconds and keeps each distinct combination in the order it appeared; the controller's last
steps follow each other within milliseconds, so a row the controller wrote and overwrote between
two reads may be missing, never invented: each row says how many writes ZooKeeper took since the
row before (the znodes' versions), so a missing step shows as a count.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from rich.table import Table

POLL_S = 0.01


@dataclass(frozen=True)
class Row:
    at_s: float  # since the watcher started
    rs: tuple[int, ...]
    ar: tuple[int, ...]
    rr: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    versions: tuple[int, int]  # of the topic znode and of the partition state znode
    writes: int  # ZooKeeper writes to the two znodes since the row before

    def key(self) -> tuple[object, ...]:
        return self.rs, self.ar, self.rr, self.leader, tuple(sorted(self.isr))


def phase(row: Row, ors: tuple[int, ...], trs: tuple[int, ...]) -> str:
    """Which step of ``onPartitionReassignment`` (seed 002) the row shows."""
    isr = set(row.isr)
    if not row.ar and not row.rr:
        if set(row.rs) == set(trs) and set(trs) != set(ors):
            return "B6: RS = TRS, done"
        return "initial state"
    if not set(trs) <= isr:
        joined = sorted(isr & set(row.ar))
        if joined:
            return f"A: {','.join(map(str, joined))} in the ISR"
        return "A: RS = ORS+TRS, AR copy"
    if row.leader not in trs:
        return "B: TRS all in the ISR"
    if isr & set(row.rr):
        return "B3: leader from TRS"
    return "B4: RR leave the ISR"


class PhaseWatcher(threading.Thread):
    """Polls one partition's two znodes until stopped; ``on_row`` sees each new combination."""

    def __init__(self, zookeeper: str, topic: str, partition: int, on_row: Callable[[Row], None]) -> None:
        super().__init__(daemon=True, name=f"phases-{topic}-{partition}")
        self.rows: list[Row] = []
        self._zk = KazooClient(hosts=zookeeper, timeout=10.0)
        self._topic, self._partition = topic, partition
        self._on_row = on_row
        self._stop_event = threading.Event()
        self._zk.start(timeout=15)
        self._t0 = time.monotonic()
        self.sample()  # the state before anything moves, read before the caller starts the move

    def sample(self) -> None:
        try:
            topic_data, topic_stat = self._zk.get(f"/brokers/topics/{self._topic}")
            state_data, state_stat = self._zk.get(f"/brokers/topics/{self._topic}/partitions/{self._partition}/state")
        except NoNodeError:
            return
        doc, state = json.loads(topic_data), json.loads(state_data)
        p = str(self._partition)
        versions = (topic_stat.version, state_stat.version)
        writes = sum(now - before for now, before in zip(versions, self.rows[-1].versions, strict=True)) if self.rows else 0
        row = Row(round(time.monotonic() - self._t0, 2), tuple(doc["partitions"][p]),
                  tuple(doc.get("adding_replicas", {}).get(p, ())), tuple(doc.get("removing_replicas", {}).get(p, ())),
                  int(state["leader"]), tuple(state["isr"]), versions, writes)
        if not self.rows or self.rows[-1].key() != row.key():
            self.rows.append(row)
            self._on_row(row)

    def run(self) -> None:
        while not self._stop_event.wait(POLL_S):
            self.sample()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(5)
        self._zk.stop()
        self._zk.close()


def fmt(replicas: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, replicas)) + "}"


def phase_table(title: str, rows: list[Row], ors: tuple[int, ...], trs: tuple[int, ...]) -> Table:
    table = Table(title=title, caption="writes: ZooKeeper writes since the row above. Phase B (a leader from TRS, "
                  "each RR out of the ISR, RS = TRS) is several writes within milliseconds, so one row may stand "
                  "for several steps.")
    for col in ("#", "after", "writes", "RS", "AR", "RR", "leader", "ISR", "phase"):
        table.add_column(col, justify="left" if col in ("phase", "RS") else "right")
    for i, row in enumerate(rows, 1):
        table.add_row(str(i), f"{row.at_s:.2f} s", str(row.writes) if i > 1 else "", fmt(row.rs), fmt(row.ar), fmt(row.rr), str(row.leader),
                      fmt(row.isr), phase(row, ors, trs))
    return table
