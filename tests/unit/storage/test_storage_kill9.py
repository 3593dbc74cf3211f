"""kill -9 a process in the middle of a produce stream; every acknowledged record must come back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _storage_batches import decode, make_batch

from headwater.storage import LogConfig, LogManager

PRODUCER = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from _storage_batches import make_batch
from headwater.storage import LogConfig, LogManager

mgr = LogManager([Path(sys.argv[1])], LogConfig(segment_bytes=5_000), clock_ms=lambda: int(time.time() * 1000))
mgr.load()
log = mgr.get_or_create("t", 0)
i = 0
while True:
    n = 1 + i % 3
    res = log.append_as_leader(make_batch([b"%d" % (i + k) for k in range(n)]), 0, 0)
    log.high_watermark = log.log_end_offset
    # "acknowledge" only after the append returned
    sys.stdout.write(f"{res.base_offset} {res.last_offset}\n")
    sys.stdout.flush()
    i += n
"""


def test_every_acknowledged_record_survives_kill_9(tmp_path: Path) -> None:
    here = str(Path(__file__).parent)
    log_dir = tmp_path / "d0"
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, str(log_dir), here],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[3]),
    )
    assert proc.stdout is not None
    acked: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(acked) < 400 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        base, last = map(int, line.split())
        acked.append((base, last))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Everything the process printed before the kill, plus whatever it wrote but never printed.
    for line in proc.stdout:
        base, last = map(int, line.split())
        acked.append((base, last))
    assert len(acked) >= 400
    mgr = LogManager([log_dir], LogConfig(segment_bytes=5_000), clock_ms=lambda: 0)
    mgr.load()
    log = mgr.get("t", 0)
    assert log is not None
    assert len(log.segments) > 3
    last_acked = acked[-1][1]
    assert log.log_end_offset >= last_acked + 1
    records = decode(log.read(0, 1 << 30).read())
    assert [o for o, _, _ in records] == list(range(log.log_end_offset))
    assert [v for _, _, v in records] == [b"%d" % o for o in range(log.log_end_offset)]
    nxt = log.append_as_leader(make_batch([b"after"]), 1, 0)
    assert nxt.base_offset == log.log_end_offset - 1
    log.validate_state()
    mgr.close()
