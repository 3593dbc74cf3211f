"""The poller without a cluster: which broker each poll asks first."""

from __future__ import annotations

from console_fakes import cluster_facts

from headwater.admin.security import PLAINTEXT
from headwater.console.reader import Poller


def test_a_broker_that_did_not_answer_is_asked_last() -> None:
    poller = Poller("h:9001, h:9002", PLAINTEXT)
    try:
        assert poller._bootstrap_list() == "h:9001,h:9002"
        facts = cluster_facts()
        poller._known = {b.node_id: f"{b.host}:{b.port}" for b in facts.brokers.values()}
        poller.facts = facts
        # Registered brokers beyond the given ones are asked too, after them.
        assert poller._bootstrap_list() == "h:9001,h:9002,h:9003,h:9004"
        # Broker 1 timed out in the last poll (stopped: it accepts connections and never answers).
        facts.broker_errors = {1: "request failed: timed out"}
        assert poller._bootstrap_list() == "h:9002,h:9003,h:9004,h:9001"
        facts.broker_errors = {1: "timed out", 3: "cannot connect"}
        assert poller._bootstrap_list() == "h:9002,h:9004,h:9001,h:9003"
        assert poller.client().bootstrap[0] == ("h", 9002)  # what the next poll's Metadata tries first
    finally:
        poller.stop()
