"""`make demo` runs `headwater demo`; it must keep telling the seeds' story, and say it held.

The expected outcomes are Kafka's: KIP-455's phases (seed 002's table for ORS {1,2,3} -> TRS
{4,5,6}) and its cancel (the partition returns to its original replicas), KIP-599's strict
(CreateTopics v6+: error 89 for the topics over the quota) and permissive (older versions: created,
with throttle_time_ms) answers, and the preferred-replica election after a move.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_demo_tells_the_story_and_passes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "headwater", "demo", "--data-dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=420,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    flat = " ".join(out.split())  # rich wraps long lines
    assert re.search(r"Console: http://127\.0\.0\.1:\d+/reassignments", flat), out
    # Step 2: the controller's phases as ZooKeeper recorded them, in the seed's order.
    assert "RS {4,5,6,1,2,3} AR {4,5,6} RR {1,2,3} leader 1 ISR {1,2,3}" in flat
    assert "RS {4,5,6} AR {} RR {} leader 4 ISR {4,5,6}" in flat
    assert "Successfully started partition reassignments for" in flat
    assert re.search(r"copying to 4,5,6: [\d.]+ of [\d.]+ MB copied \(\d+%\), [\d.]+ MB/s, ETA \d+ s", flat), out
    assert "Clearing broker-level throttles on brokers" in flat
    # Step 3: KIP-455's cancel, in Kafka's tool's words.
    assert "Successfully cancelled partition reassignment for: demo-cancel-0" in flat
    # Step 4: KIP-599.
    assert "6 created, 2 refused with THROTTLING_QUOTA_EXCEEDED (89)" in flat
    permissive = re.search(r"8 created, none refused; throttle_time_ms=(\d+)", flat)
    assert permissive is not None and 4800 <= int(permissive.group(1)) <= 5000, out  # a debt of 10 tokens at 2/s
    # Step 5: the Spark plan and the election that ends it (auto rebalance is off in the demo, so
    # the leaders that stayed in their partitions move only through this election).
    assert "--engine spark" in flat
    assert "Successfully completed leader election (PREFERRED) for partitions" in flat
    # Step 6 and the verdict: every check held, nothing acknowledged lost.
    assert ", 0 missing or changed, 0 sends failed" in flat
    assert "NO" not in re.findall(r"\b(?:yes|NO)\b", flat)
    assert "demo passed" in flat
    # Everything it started is gone: no pid file points at a live process.
    pid_files = list((tmp_path / "demo").glob("*.pid"))
    assert any(p.name == "console.pid" for p in pid_files)
    for pid_file in pid_files:
        pid = int(pid_file.read_text())
        assert not Path(f"/proc/{pid}").exists(), f"{pid_file.name} still running"
