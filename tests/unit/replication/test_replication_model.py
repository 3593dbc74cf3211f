"""The test log's epoch cache answers like the storage's LeaderEpochCache."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _replication_model import ModelLog
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.storage.epochs import LeaderEpochCache

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 6)),
        st.tuples(st.just("assign"), st.integers(0, 6)),
        st.tuples(st.just("truncate"), st.integers(0, 30)),
    ),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(ops)
def test_model_epoch_cache_matches_storage(steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = LeaderEpochCache(Path(tmp) / "leader-epoch-checkpoint")
        model = ModelLog()
        for op, arg in steps:
            if op == "append":
                epoch = max(arg, model.latest_epoch() or 0)
                model.append(epoch)
                cache.assign(epoch, model.log_end_offset - 1)
            elif op == "assign":
                model.assign_epoch(arg, model.log_end_offset)
                cache.assign(arg, model.log_end_offset)
            else:
                if arg < model.log_end_offset:
                    model.truncate_to(arg)
                    cache.truncate_from_end(arg)
            assert model.epochs == cache.entries
            for epoch in range(-1, 8):
                assert model.end_offset_for_epoch(epoch) == cache.end_offset_for(epoch, model.log_end_offset)
