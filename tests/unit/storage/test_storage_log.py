from __future__ import annotations

from collections.abc import Callable

import pytest
from _storage_batches import decode, make_batch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import PartitionLog

OpenLog = Callable[..., PartitionLog]


def test_append_read_round_trip(open_log: OpenLog) -> None:
    log = open_log()
    r1 = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=0, now_ms=1)
    r2 = log.append_as_leader(make_batch([b"d"]), leader_epoch=0, now_ms=2)
    assert (r1.base_offset, r1.last_offset, r2.base_offset, r2.last_offset) == (0, 2, 3, 3)
    assert log.log_end_offset == 4
    res = log.read(0, 1 << 20)
    assert [(o, v) for o, _, v in decode(res.read())] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert res.size_bytes == log.size_bytes
    # from the middle of the first batch: the whole batch comes back
    assert [o for o, _, _ in decode(log.read(1, 1 << 20).read())] == [0, 1, 2, 3]
    assert [o for o, _, _ in decode(log.read(3, 1 << 20).read())] == [3]
    assert log.read(4, 1 << 20).slices == []
    log.validate_state()


def test_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), 0, 1)
    with pytest.raises(KafkaError) as e:
        log.read(2, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError):
        log.read(-1, 100)
