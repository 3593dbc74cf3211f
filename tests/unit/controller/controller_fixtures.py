"""Builders shared by the controller unit tests: snapshots, an elected controller, running an event."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TypeVar

from headwater.controller.controller import Controller, ControllerConfig
from headwater.controller.effects import BrokerRequest, ControllerResult
from headwater.controller.events import ControllerElected, Event
from headwater.controller.znodes import (
    LeaderIsr,
    LiveBroker,
    ReplicaAssignment,
    TopicPartition,
    TopicRecord,
    ZkSnapshot,
)
from headwater.metadata.image import BrokerInfo

R = TypeVar("R", bound=BrokerRequest)

EPOCH_VERSION = 7


def reg(broker: int, epoch: int | None = None, rack: str | None = None) -> LiveBroker:
    return LiveBroker(broker, 100 + broker if epoch is None else epoch, BrokerInfo(broker, f"b{broker}", 9090 + broker, rack))


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


def snapshot(
    brokers: Iterable[int] = (1, 2, 3),
    topics: Mapping[str, Mapping[int, tuple[int, ...]]] | None = None,
    states: Mapping[TopicPartition, tuple[int, int, tuple[int, ...], int]] | None = None,
    configs: Mapping[str, Mapping[str, str]] | None = None,
    to_delete: Iterable[str] = (),
) -> ZkSnapshot:
    """``states``: (leader, leader_epoch, isr, partition_epoch) per partition."""
    topic_map = {
        name: TopicRecord(name, uuid.UUID(int=i + 1), {p: ReplicaAssignment(r) for p, r in parts.items()})
        for i, (name, parts) in enumerate(sorted((topics or {}).items()))
    }
    state_map = {t: LeaderIsr(leader, le, isr, 1, pe) for t, (leader, le, isr, pe) in (states or {}).items()}
    return ZkSnapshot({b: reg(b) for b in brokers}, topic_map, {k: dict(v) for k, v in (configs or {}).items()},
                      state_map, frozenset(to_delete))


def elect(snap: ZkSnapshot, *, broker_id: int = 1, epoch: int = 2, config: ControllerConfig | None = None
          ) -> tuple[Controller, ControllerResult]:
    ctl = Controller(broker_id, config)
    result = run(ctl, ControllerElected(epoch, EPOCH_VERSION, snap))
    return ctl, result


def run(ctl: Controller, event: Event) -> ControllerResult:
    """What a shell does when every write succeeds: apply them in order; then check the cache.

    The shell reads ``result.requests`` after applying the writes; here they are also built before,
    and must come out the same."""
    result = ctl.handle(event)
    before = result.build() if result.build is not None else None
    for write in result.writes:
        ctl.apply(write)
    ctl.validate_state()
    if before is not None:
        assert result.requests == before, "requests built after the writes differ from those built before"
    return result


def requests(result: ControllerResult, kind: type[R]) -> dict[int, R]:
    out: dict[int, R] = {}
    for req in result.requests:
        if isinstance(req, kind):
            assert req.broker_id not in out, f"two {kind.__name__} to broker {req.broker_id} in one result"
            out[req.broker_id] = req
    return out
