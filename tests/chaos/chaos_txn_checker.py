"""The transactional workload's checks (KIP-98): pure data in, violations out; no I/O.

History: each transaction of ``TransactionalWorkload``, in the order it ran: its values (each sent
to a partition of the transactional topic) and its outcome as the client saw it:

* ``committed``: commit_transaction returned;
* ``aborted``: abort_transaction returned, or the producer failed (fenced, fatal error, abort
  impossible) before commit_transaction was called; the next producer's init_transactions, with
  the same transactional.id, then aborted it;
* ``unknown``: commit_transaction was called and raised: the coordinator may have written
  PrepareCommit before the error, so either end is possible.

Final state: the topic read from offset 0 to its end twice, read_committed and read_uncommitted
(the second only to say where a missing value is).

Checks:
* txn-aborted-read: no value of an aborted transaction is read committed;
* txn-lost: every value of a committed transaction is read committed;
* txn-partial: every transaction is all or nothing: all its values read committed, or none
  (an unknown transaction may end either way, but not half);
* txn-duplicate: no value is read committed twice;
* txn-order: each value is read in the partition it was sent to, and in a partition the values
  come in the order they were produced (one producer at a time, each transaction after the last);
* txn-stray: nothing is read committed that no transaction wrote.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # chaos_checker imports this module
    from chaos_checker import ReplicaLog

OUTCOMES = ("committed", "aborted", "unknown")


@dataclass
class Txn:
    id: int
    values: list[tuple[int, str]]  # (partition, value) in the order produced
    outcome: str = "open"  # one of OUTCOMES once the workload decided; "open" while it runs
    producer: int = 1  # which producer instance ran it (a new one after each fatal error)
    note: str = ""  # the error that made it aborted or unknown, or "chosen" for a planned abort
    delivered: dict[str, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset) reported


@dataclass
class TxnFinal:
    committed: dict[int, list[tuple[int, str]]]  # partition -> [(offset, value)] read_committed
    uncommitted: dict[int, list[tuple[int, str]]]  # partition -> [(offset, value)] read_uncommitted
    # For chaos_checker's replica and epoch checks of the transactional topic (markers included):
    high_watermark: dict[int, int] = field(default_factory=dict)
    assignment: dict[int, tuple[int, ...]] = field(default_factory=dict)
    replicas: dict[int, dict[int, ReplicaLog]] = field(default_factory=dict)  # partition -> broker -> its log


def describe(t: Txn) -> str:
    """How a violation names a transaction: id, outcome and why, its values' partitions."""
    why = f": {t.note}" if t.note and t.note != "chosen" else ""
    parts = sorted({p for p, _ in t.values})
    return f"transaction {t.id} ({t.outcome}{why}; producer #{t.producer}, {len(t.values)} values on partitions {parts})"


def check_txns(txns: list[Txn], final: TxnFinal, v: dict[str, list[str]]) -> None:
    owner: dict[str, tuple[Txn, int, int]] = {}  # value -> (its transaction, index in it, partition sent to)
    for t in txns:
        for i, (p, value) in enumerate(t.values):
            owner[value] = (t, i, p)
    read_at: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in sorted(final.committed.items()):
        last: tuple[int, int, str, int] | None = None  # (txn id, index, value, offset) read last
        for offset, value in records:
            read_at[value].append((p, offset))
            own = owner.get(value)
            if own is None:
                v["txn-stray"].append(f"{p}@{offset} holds {value!r}, which no transaction wrote")
                continue
            t, i, sent_to = own
            if sent_to != p:
                v["txn-order"].append(f"{value!r} of {describe(t)} was sent to partition {sent_to} but is read at "
                                      f"{p}@{offset}")
            if last is not None and (t.id, i) < last[:2]:
                v["txn-order"].append(f"partition {p}: {value!r} of transaction {t.id} at offset {offset} comes after "
                                      f"{last[2]!r} of transaction {last[0]} at offset {last[3]}")
            if last is None or (t.id, i) > last[:2]:
                last = (t.id, i, value, offset)
    in_log: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final.uncommitted.items():
        for offset, value in records:
            in_log[value].append((p, offset))

    def where(value: str) -> str:
        if value in read_at:
            return f"{value!r} at {_places(read_at[value])}"
        if value in in_log:
            return f"{value!r} (in the log at {_places(in_log[value])}, read_uncommitted only)"
        return f"{value!r} (not in the log)"

    for value, places in sorted(read_at.items()):
        if len(places) > 1 and value in owner:
            v["txn-duplicate"].append(f"{value!r} of {describe(owner[value][0])} is read committed {len(places)} "
                                      f"times: {_places(places)}")
    for t in txns:
        values = [value for _, value in t.values]
        seen = [x for x in values if x in read_at]
        missing = [x for x in values if x not in read_at]
        if t.outcome == "aborted" and seen:
            v["txn-aborted-read"].append(f"{describe(t)}: read committed: " + ", ".join(map(where, seen)))
        if t.outcome == "committed" and missing:
            v["txn-lost"].append(f"{describe(t)}: {len(missing)} of {len(values)} values not read committed: "
                                 + ", ".join(map(where, missing)))
        if seen and missing:
            v["txn-partial"].append(f"{describe(t)}: {len(seen)} of {len(values)} values read committed: "
                                    + ", ".join(map(where, seen)) + "; missing: " + ", ".join(map(where, missing)))


def txn_stats(txns: list[Txn], final: TxnFinal | None) -> dict[str, int]:
    out = {"txns": len(txns), **{f"txns_{o}": sum(1 for t in txns if t.outcome == o) for o in OUTCOMES}}
    out["txn_read_committed"] = sum(len(r) for r in final.committed.values()) if final else 0
    return out


def _places(places: list[tuple[int, int]]) -> str:
    return ", ".join(f"{p}@{o}" for p, o in places)
