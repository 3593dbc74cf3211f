from __future__ import annotations

from pathlib import Path

from _storage_batches import decode, make_batch
from conftest import FakeClock

from headwater.storage import LogConfig, LogManager
from headwater.storage.checkpoint import read_offsets
from headwater.storage.manager import CLEAN_SHUTDOWN_MARKER


def test_load_append_close_reopen(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    mgr = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr.load()
    logs = [mgr.get_or_create("t", p) for p in range(4)]
    # placement alternates: each new partition goes to the dir with the fewest
    assert sorted(mgr.log_dir_of(p).name for p in logs) == ["d0", "d0", "d1", "d1"]
    for p in logs:
        p.append_as_leader(make_batch([b"x", b"y"]), 3, clock())
        p.high_watermark = 2
    mgr.close()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_MARKER).exists()
        hws = read_offsets(d / "replication-offset-checkpoint")
        assert set(hws.values()) == {2} and len(hws) == 2
    mgr2 = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr2.load()
    for d in dirs:
        assert not (d / CLEAN_SHUTDOWN_MARKER).exists()
    assert len(mgr2.all_logs()) == 4
    for p in range(4):
        log = mgr2.get("t", p)
        assert log is not None
        assert (log.log_end_offset, log.high_watermark, log.latest_epoch()) == (2, 2, 3)
        assert [v for _, _, v in decode(log.read(0, 1000).read())] == [b"x", b"y"]
    mgr2.close()
