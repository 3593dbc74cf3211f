"""What the controller's fast paths at 10,000 partitions must keep exactly as the slow ones were.

The partition state znode is written and read with a direct format and one regex (a failover
reads and writes one per partition); the bytes and values must be those of the JSON path.
"""

from __future__ import annotations

import json

import pytest

from headwater.metadata import zk
from headwater.metadata.zk import PartitionStateZNode


@pytest.mark.parametrize("state", [
    PartitionStateZNode(1, 7, (1, 2), 3, 0),
    PartitionStateZNode(-1, 0, (3,), 12, 1),
    PartitionStateZNode(1002, 2**31 - 1, (1002, 7, 99), 0, 0),
])
def test_partition_state_bytes_equal_the_json_encoding(state: PartitionStateZNode) -> None:
    data = zk.encode_partition_state(state)
    assert data == json.dumps(zk.partition_state_json(state), separators=(",", ":")).encode()
    assert zk.decode_partition_state("t", 0, data) == state


@pytest.mark.parametrize("data", [
    b'{"leader":1,"controller_epoch":3,"version":1,"isr":[1,2],"leader_epoch":7}',   # other key order
    b'{"controller_epoch": 3, "leader": 1, "version": 1, "leader_epoch": 7, "isr": [1, 2]}',  # spaces
    b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2],"leader_recovery_state":0}',
])
def test_other_spellings_of_a_state_decode_the_same(data: bytes) -> None:
    assert zk.decode_partition_state("t", 0, data) == PartitionStateZNode(1, 7, (1, 2), 3, 0)


@pytest.mark.parametrize("data", [
    b'{"controller_epoch":3,"leader":1,"version":2,"leader_epoch":7,"isr":[1,2]}',
    b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}x',
    b'{"controller_epoch":3,"leader":"1","version":1,"leader_epoch":7,"isr":[1,2]}',
])
def test_malformed_states_are_still_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        zk.decode_partition_state("t", 0, data)
