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
    assert "0 acknowledged messages missing" in out
    assert "rejoined every ISR: yes" in out
    assert "demo passed" in out
    # Everything it started is gone: no pid file points at a live process.
    for pid_file in (tmp_path / "demo").glob("*.pid"):
        pid = int(pid_file.read_text())
        assert not Path(f"/proc/{pid}").exists(), f"{pid_file.name} still running"
