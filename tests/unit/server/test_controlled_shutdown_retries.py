"""A controlled shutdown that finds no controller waits and asks again.

Kafka's ZK-mode ``KafkaServer.controlledShutdown``: each of ``controlled.shutdown.max.retries``
attempts looks the controller up in the metadata cache; when there is none ("No controller present
in the metadata cache") or its broker registration is missing, the attempt fails like one the
controller refused, and the broker sleeps ``controlled.shutdown.retry.backoff.ms`` and tries again.
A controller elected meanwhile (a UpdateMetadata names it) then moves the leadership.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.server.cluster import ClusterMember

BACKOFF_MS = 200


def run(controllers: list[int], addresses: dict[int, tuple[str, int] | None],
        monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], float]:
    """Stop a broker whose metadata names ``controllers[i]`` as the controller at attempt i; return
    the controllers it sent ControlledShutdown to, and how long it took."""
    image = SimpleNamespace(controller_id=-1)
    config = SimpleNamespace(broker_id=1, controlled_shutdown_enable=True, controlled_shutdown_max_retries=len(controllers),
                             controlled_shutdown_retry_backoff_ms=BACKOFF_MS)
    broker = SimpleNamespace(config=config, image=image, broker_address=addresses.get)
    member = ClusterMember(broker=broker, connect="", session_timeout_ms=6000)  # type: ignore[arg-type]
    asked: list[int] = []
    attempt = iter(controllers)

    async def send_to_controller(_req: Any, _version: int, timeout_s: float = 30.0) -> Any:
        asked.append(image.controller_id)
        return SimpleNamespace(error_code=0, remaining_partitions=[])

    member.send_to_controller = send_to_controller  # type: ignore[method-assign]

    real_sleep = asyncio.sleep

    async def sleep_then_next_view(seconds: float) -> None:
        await real_sleep(seconds)
        image.controller_id = next(attempt)

    image.controller_id = next(attempt)
    monkeypatch.setattr(asyncio, "sleep", sleep_then_next_view)
    started = time.monotonic()
    asyncio.run(member._controlled_shutdown())
    return asked, time.monotonic() - started


def test_no_controller_known_is_retried_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    asked, took = run([-1, 2, 2], {2: ("127.0.0.1", 9092)}, monkeypatch)
    assert asked == [2]  # the second attempt reached the controller elected meanwhile
    assert took >= BACKOFF_MS / 1000


def test_a_controller_without_an_address_is_retried_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    asked, _took = run([3, 2, 2], {2: ("127.0.0.1", 9092), 3: None}, monkeypatch)
    assert asked == [2]
