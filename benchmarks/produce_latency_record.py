"""What recording acks=all produce latencies costs (the adaptive reassignment throttle's input).

The produce handler reads ``time.perf_counter()`` when a request arrives and, for acks=all, calls
``ReplicaManager.record_produce_latency`` after the answer's waits: a no-op while the throttle is
static, one list append while it is adaptive (and, judging by CreateTime, one read of the first
batch's stamp and one wall-clock read). This times (1) that added code alone, off and on, and
(2) an in-process acks=all produce of one small batch (``ReplicaManager.append`` on a leader whose
ISR is itself, then awaiting the answer's future: the cheapest acks=all produce there is, without
decoding or network) with the recording off and on, in alternating rounds. Prints one JSON line per
measurement.

    .venv/bin/python benchmarks/produce_latency_record.py [--produces 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import tempfile
import time
import timeit
import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.errors import ErrorCode
from headwater.records.batch import create_time_ms
from headwater.replication.adaptive_throttle import FROM_CREATE_TIME, AdaptiveSettings
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

SETTINGS = AdaptiveSettings(min_rate=1_000_000, max_rate=100_000_000, max_produce_latency_ms=100,
                            max_follower_lag_ms=5_000)


def batch() -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"x" * 100, headers=[])
    return bytearray(builder.build())


def manager(root: Path) -> ReplicaManager:
    logs = LogManager([root], LogConfig(), clock_ms=lambda: 1_700_000_000_000)
    logs.load()
    rm = ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                        wake=lambda _t, _p: None, broker_address=lambda _b: None,
                        controller_id=lambda: 1, broker_epoch=lambda: 1)
    assert rm.become("t", 0, LeaderAndIsrState(1, 0, (1,), 0, (1,)), topic_id=uuid.UUID(int=1),
                     config=LogConfig(), min_insync_replicas=1, max_message_bytes=1 << 20) == ErrorCode.NONE
    return rm


def record_only(rm: ReplicaManager, n: int, records: bytearray) -> float:
    """ns per produce of the added code alone, as the handler runs it: the stamp is read only when
    the throttle judges by CreateTime."""
    def added() -> None:
        started = time.perf_counter()
        created = create_time_ms(records) if rm.judges_create_time else None
        rm.record_produce_latency(started, created)
    seconds = min(timeit.repeat(added, number=n, repeat=5))
    if rm.produce_latencies_ms is not None:
        rm.produce_latencies_ms.clear()
    return seconds / n * 1e9


async def produce_round(rm: ReplicaManager, records: bytearray, n: int) -> float:
    """µs per in-process acks=all produce, recording as the handler does."""
    hosted = rm.leader("t", 0)
    start = time.perf_counter()
    for _ in range(n):
        started = time.perf_counter()
        _result, wait = rm.append(hosted, bytearray(records), -1, 30_000)
        assert wait is not None and await wait == ErrorCode.NONE
        rm.record_produce_latency(started)
    elapsed = time.perf_counter() - start
    if rm.produce_latencies_ms is not None:
        rm.produce_latencies_ms.clear()  # what a tick does every second
    return elapsed / n * 1e6


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rm = manager(Path(tmp))
        records = batch()
        rm.set_reassignment_rate(None)
        off_ns = record_only(rm, 1_000_000, records)
        rm.set_reassignment_rate(None, SETTINGS)
        on_ns = record_only(rm, 1_000_000, records)
        rm.set_reassignment_rate(None, dataclasses.replace(SETTINGS, latency_from=FROM_CREATE_TIME))
        stamped_ns = record_only(rm, 1_000_000, records)
        rm.set_reassignment_rate(None)
        print(json.dumps({"benchmark": "produce_latency_record", "measure": "added_code_ns_per_produce",
                          "static": round(off_ns, 1), "adaptive": round(on_ns, 1),
                          "adaptive_create_time": round(stamped_ns, 1)}), flush=True)
        await produce_round(rm, records, 2_000)  # warm up
        off: list[float] = []
        on: list[float] = []
        for _ in range(args.rounds):
            rm.set_reassignment_rate(None)
            off.append(await produce_round(rm, records, args.produces))
            rm.set_reassignment_rate(None, SETTINGS)
            on.append(await produce_round(rm, records, args.produces))
        print(json.dumps({"benchmark": "produce_latency_record", "measure": "acks_all_produce_us",
                          "produces_per_round": args.produces, "rounds": args.rounds,
                          "static_median": round(statistics.median(off), 2),
                          "adaptive_median": round(statistics.median(on), 2),
                          "static_rounds": [round(x, 2) for x in off], "adaptive_rounds": [round(x, 2) for x in on],
                          "added_share": round(on_ns / 1000 / statistics.median(off), 4)}), flush=True)
        await rm.stop()
        rm.logs.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--produces", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
