"""Kafka's controlled shutdown settings, applied by the broker.

KafkaServer.controlledShutdown (ZK mode): up to ``controlled.shutdown.max.retries`` attempts, each
at the controller the broker's metadata names, ``controlled.shutdown.retry.backoff.ms`` apart, with
no wait after the last; then "Proceeding to do an unclean shutdown". Here the controller is killed
with SIGKILL just before the other broker is stopped: its znode outlives it for the ZooKeeper
session timeout, so the stopping broker (which does not run for controller) has only the dead one
to ask.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from cluster_support import LocalCluster


def test_retries_and_backoff_are_the_configured_ones(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(2, {"controlled.shutdown.max.retries": "2",
                                  "controlled.shutdown.retry.backoff.ms": "2500"})
    controller = cluster.controller_id()
    other = next(b for b in cluster.brokers if b != controller)
    cluster.brokers[controller].kill9()
    proc = cluster.brokers[other].proc
    assert proc is not None
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    took = time.monotonic() - started
    log = cluster.brokers[other].log_path.read_text()
    attempts = [line for line in log.splitlines() if "controlled shutdown attempt" in line]
    assert [a.split("controlled shutdown attempt ")[1].split()[0] for a in attempts] == ["1", "2"], log
    assert "failed after 2 attempts" in log
    # One backoff between the two attempts, not one after the last as well.
    assert 2.5 <= took < 5.0, took
