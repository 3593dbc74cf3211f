"""Random sequences of appends, rolls, truncations, reopens and crashes against a simple model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _storage_batches import CODEC_NONE, CODEC_ZSTD, decode, make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.storage import LogConfig, PartitionLog

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=150)

append_op = st.tuples(
    st.just("append"),
    st.lists(st.integers(1, 4), min_size=1, max_size=3),  # records per batch, batches per request
    st.integers(0, 250),  # value size
    st.sampled_from([CODEC_NONE, CODEC_ZSTD]),
)
ops = st.lists(
    st.one_of(
        append_op,
        append_op,
        append_op,
        st.tuples(st.just("roll")),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("truncate"), st.just(0.0)),  # exactly at the log start
        st.tuples(st.just("delete_before"), st.floats(0, 1)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash")),
        st.tuples(st.just("read"), st.floats(0, 1), st.integers(0, 900)),
    ),
    max_size=30,
)


class Model:
    def __init__(self) -> None:
        self.batches: list[tuple[int, list[bytes]]] = []  # (base offset, values)
        self.start = 0
        self.end = 0

    def records_from(self, offset: int) -> list[tuple[int, bytes]]:
        out = []
        for base, values in self.batches:
            if base + len(values) > offset:
                out.extend((base + i, v) for i, v in enumerate(values))
        return out

    def batch_containing(self, offset: int) -> int:
        for i, (base, values) in enumerate(self.batches):
            if base <= offset < base + len(values):
                return i
        raise AssertionError(offset)


def check(log: PartitionLog, model: Model) -> None:
    log.validate_state()
    assert (log.log_start_offset, log.log_end_offset) == (model.start, model.end)
    got = [(o, v) for o, _, v in decode(log.read(model.start, 1 << 30).read())]
    assert got == model.records_from(model.start)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_matches_model(operations: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"

        def open_log(**kw: object) -> PartitionLog:
            return PartitionLog("t", 0, directory, CONFIG, clock_ms=lambda: 0, **kw)  # type: ignore[arg-type]

        log = open_log()
        model = Model()
        counter = 0
        try:
            for op in operations:
                kind = op[0]
                if kind == "append":
                    sizes, value_size, codec = op[1], op[2], op[3]
                    records = bytearray()
                    request: list[list[bytes]] = []
                    for n in sizes:  # type: ignore[attr-defined]
                        values = [
                            k.to_bytes(4, "big") + bytes(value_size) for k in range(counter, counter + n)
                        ]
                        counter += n
                        request.append(values)
                        records += make_batch(values, compression=codec)  # type: ignore[arg-type]
                    res = log.append_as_leader(records, 0, 0)
                    assert res.base_offset == model.end
                    for values in request:
                        model.batches.append((model.end, values))
                        model.end += len(values)
                    assert res.last_offset == model.end - 1
                elif kind == "roll":
                    log.roll()
                elif kind == "truncate" and model.end > model.start:
                    target = model.start + int(op[1] * (model.end - model.start))  # type: ignore[operator]
                    if target < model.end:
                        i = model.batch_containing(target)
                        cut = model.batches[i][0]
                        log.truncate_to(target)
                        del model.batches[i:]
                        model.end = cut
                        if cut < model.start:  # the batch holding the log start went too
                            model.start = cut
                elif kind == "delete_before" and model.end > model.start:
                    log.high_watermark = model.end
                    target = model.start + int(op[1] * (model.end - model.start))  # type: ignore[operator]
                    log.delete_records_before(target)
                    model.start = max(model.start, target)
                    model.batches = [(b, v) for b, v in model.batches if b + len(v) > model.start]
                elif kind == "reopen":
                    hw, start = log.high_watermark, log.log_start_offset
                    log.close()
                    log = open_log(clean_shutdown=True, high_watermark=hw, log_start_offset=start)
                elif kind == "crash":
                    start = log.log_start_offset
                    log.close_without_flush()
                    log = open_log(recovery_point=0, log_start_offset=start)
                elif kind == "read" and model.end > model.start:
                    fetch = model.start + int(op[1] * (model.end - model.start))  # type: ignore[operator]
                    fetch = min(fetch, model.end - 1)
                    max_bytes = op[2]
                    res = log.read(fetch, max_bytes)  # type: ignore[arg-type]
                    got = [(o, v) for o, _, v in decode(res.read())]
                    expected = model.records_from(fetch)
                    assert got == expected[: len(got)] and got
                    assert res.size_bytes <= max(max_bytes, res.slices[0].length)  # type: ignore[operator]
                check(log, model)
        finally:
            log.close()
