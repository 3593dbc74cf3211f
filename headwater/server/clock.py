"""The broker's wall clock in milliseconds since the epoch: Kafka's unit for timestamps, and the
``now_ms`` the cores are handed. One definition, so the whole shell reads the same clock."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
