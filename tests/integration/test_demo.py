"""`make demo` runs `headwater demo`; it must keep passing (and say so) from a clean state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_passes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "headwater", "demo", "--messages", "4000", "--data-dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=240,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    out = " ".join(out.split())  # rich wraps its lines at the terminal's width
    assert "0 acknowledged messages missing" in out
    assert "rejoined every ISR: yes" in out
    # The seeds' story: a new broker, the planner's moves under a live producer, the plan's leaders.
    assert "Successfully started partition reassignment" in out
    assert "every move completed in" in out and "completed in 0.0 s" not in out
    assert ", as planned: yes" in out
    assert "in all, 0 missing or changed" in out
    assert "demo passed" in out
    # Everything it started is gone: no pid file points at a live process.
    for pid_file in (tmp_path / "demo").glob("*.pid"):
        pid = int(pid_file.read_text())
        assert not Path(f"/proc/{pid}").exists(), f"{pid_file.name} still running"
