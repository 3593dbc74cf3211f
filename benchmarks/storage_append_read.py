"""Append throughput and read-path cost of headwater.storage with 1 MiB batches.

Prints one JSON line. Append: one 1 MiB RecordBatch per append_as_leader call (CRC check, offset
assignment, one pwrite to the page cache, index updates). Read: read() of one batch by offset, which
returns file slices without touching record bytes; the figure is the Python time per call.
Run by hand: ``.venv/bin/python benchmarks/storage_append_read.py [--batches N] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.storage import LogConfig, PartitionLog

BATCH_BYTES = 1 << 20


def one_mib_batch() -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    builder.append(
        0, timestamp=1_700_000_000_000, key=None, value=random.randbytes(BATCH_BYTES - 100), headers=[]
    )
    return bytearray(builder.build())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=256)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    batch = one_mib_batch()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        config = LogConfig(segment_bytes=256 * BATCH_BYTES)
        log = PartitionLog("bench", 0, Path(tmp) / "bench-0", config, clock_ms=lambda: 0)
        append_wall = []
        append_cpu = []
        start = time.perf_counter()
        for _ in range(args.batches):
            t0, c0 = time.perf_counter(), time.thread_time()
            log.append_as_leader(batch, 0, 0)
            append_cpu.append(time.thread_time() - c0)
            append_wall.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        total_mb = log.size_bytes / 1e6
        read_wall = []
        offsets = [random.randrange(log.log_end_offset) for _ in range(args.reads)]
        for offset in offsets:
            t0 = time.perf_counter()
            res = log.read(offset, BATCH_BYTES)
            read_wall.append(time.perf_counter() - t0)
            assert res.slices and res.size_bytes == len(batch)
        log.close()
    read_us = sorted(x * 1e6 for x in read_wall)
    print(
        json.dumps(
            {
                "benchmark": "storage_append_read",
                "batch_bytes": len(batch),
                "batches": args.batches,
                "append_mb_per_s": round(total_mb / elapsed, 1),
                "append_call_wall_us_median": round(statistics.median(append_wall) * 1e6, 1),
                "append_call_cpu_us_median": round(statistics.median(append_cpu) * 1e6, 1),
                "read_call_us_median": round(statistics.median(read_us), 2),
                "read_call_us_p99": round(read_us[int(len(read_us) * 0.99) - 1], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
