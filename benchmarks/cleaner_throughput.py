"""Log cleaner throughput on a compacted log, next to a plain sequential read of the same log.

Prints one JSON line. The log: ``--updates`` records over ``--keys`` keys, ``--per-batch`` records
per batch (``--codec``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), in segments of ``--segment-mib``.
Both figures count the bytes of the segments behind the active one, from the page cache (the log was
just written):

- ``read_mb_s``: ``PartitionLog.read`` of those segments in 1 MiB fetches, bytes copied to memory;
- ``clean_mb_s``: one whole ``clean_log`` of the same log (map, filter, write, fsync, swap),
  bytes of log cleaned per second of wall time (the cleaner reads the dirty part twice, for the
  map and for the rewrite: ``bytes_read`` is twice the log here);
- ``ratio``: clean / read;
- ``clean_records_per_s``: records the clean looked at per second (MB/s depends on record size);
- ``loop_stall_ms``: how late a 1 ms timer on an event loop ran at worst (max) and at the 99th
  percentile while the broker's cleaner service cleaned a copy of the log (map and writes on its
  worker thread), next to the same figures for the idle loop over the same time (``idle_``).
  This is what a produce or fetch waits at most for the cleaner.

Run by hand: ``.venv/bin/python benchmarks/cleaner_throughput.py [--updates N] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.server.cleaner import LogCleanerService
from headwater.storage import LogConfig, LogManager, PartitionLog
from headwater.storage.cleaner import clean_log, cleanable_range


def batch(start: int, count: int, keys: int, codec: int, value_bytes: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(start, start + count):
        value = (b"value-%09d-" % i).ljust(value_bytes, b"x")
        builder.append(i - start, timestamp=1_700_000_000_000 + i, key=b"key-%07d" % (i % keys), value=value,
                       headers=[])
    return bytearray(builder.build())


async def ticker(stop: asyncio.Event) -> list[float]:
    """Lateness (ms) of every 1 ms sleep until ``stop`` is set."""
    lateness = []
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        lateness.append((time.perf_counter() - t0 - 0.001) * 1000)
    return lateness


def stall_figures(lateness: list[float]) -> tuple[float, float]:
    ordered = sorted(lateness)
    return round(ordered[-1], 2), round(ordered[int(len(ordered) * 0.99)], 2)


async def clean_on_loop(log_root: Path, config: LogConfig) -> tuple[list[float], list[float]]:
    """Clean through the broker's service while a ticker runs; then tick idle as long."""
    manager = LogManager([log_root], config, clock_ms=lambda: 0)
    manager.load()
    for plog in manager.all_logs():
        plog.high_watermark = plog.log_end_offset
    service = LogCleanerService(manager, {}, lambda: 0)
    stop = asyncio.Event()
    ticks = asyncio.create_task(ticker(stop))
    started = time.perf_counter()
    assert await service.clean_one()
    busy_s = time.perf_counter() - started
    stop.set()
    busy = await ticks
    idle_stop = asyncio.Event()
    idle_ticks = asyncio.create_task(ticker(idle_stop))
    await asyncio.sleep(busy_s)
    idle_stop.set()
    idle = await idle_ticks
    manager.close()
    return busy, idle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--per-batch", type=int, default=100)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--codec", type=int, default=0)
    parser.add_argument("--segment-mib", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        config = LogConfig(segment_bytes=args.segment_mib << 20, cleanup_policy="compact", file_delete_delay_ms=0)
        plog = PartitionLog("bench", 0, Path(tmp) / "bench-0", config, clock_ms=lambda: 0)
        for start in range(0, args.updates, args.per_batch):
            plog.append_as_leader(batch(start, min(args.per_batch, args.updates - start), args.keys, args.codec,
                                        args.value_bytes), 0, 0)
        plog.roll()
        plog.high_watermark = plog.log_end_offset
        plog.flush()
        copy_root = Path(tmp) / "copy"
        shutil.copytree(plog.directory, copy_root / "bench-0")  # the same dirty log for the loop run
        end = plog.segments[-1].base_offset
        log_bytes = sum(s.size_bytes for s in plog.segments[:-1])

        started = time.perf_counter()
        offset = 0
        read_bytes = 0
        while offset < end:
            result = plog.read(offset, 1 << 20, max_offset=end)
            data = result.read()
            read_bytes += len(data)
            pos = 0  # whole batches: the next fetch starts after the last one
            while pos < len(data):
                length = int.from_bytes(data[pos + 8 : pos + 12], "big")
                offset = int.from_bytes(data[pos : pos + 8], "big") + int.from_bytes(data[pos + 23 : pos + 27], "big") + 1
                pos += 12 + length
        read_s = time.perf_counter() - started

        started = time.perf_counter()
        done = clean_log(plog, cleanable_range(plog, None, 0))
        clean_s = time.perf_counter() - started
        assert done is not None
        _, stats = done
        plog.close()
        busy, idle = asyncio.run(clean_on_loop(copy_root, config))
    read_mb_s = read_bytes / read_s / 1e6
    clean_mb_s = log_bytes / clean_s / 1e6
    print(json.dumps({
        "benchmark": "cleaner_throughput",
        "updates": args.updates,
        "keys": args.keys,
        "codec": args.codec,
        "log_mb": round(log_bytes / 1e6, 1),
        "read_mb_s": round(read_mb_s, 1),
        "clean_mb_s": round(clean_mb_s, 1),
        "ratio": round(clean_mb_s / read_mb_s, 4),
        "clean_s": round(clean_s, 3),
        "clean_records_per_s": round((stats.records_kept + stats.records_dropped) / clean_s),
        "loop_stall_ms": stall_figures(busy),
        "idle_loop_stall_ms": stall_figures(idle),
        "bytes_read": stats.bytes_read,
        "bytes_written": stats.bytes_written,
        "records_kept": stats.records_kept,
        "records_dropped": stats.records_dropped,
    }))


if __name__ == "__main__":
    main()
