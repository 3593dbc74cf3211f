"""Seeded random runs of the coordinator: members join, sync, heartbeat, commit, leave and go silent,
writes fail, the partition is unloaded and reloaded from what was committed, time jumps.

After every step ``validate_state()`` runs (in ``Harness.send``) and no request is answered twice;
at the end, once every member has gone and time has passed, every request has been answered
(nothing waits forever), and the committed offsets read back after a reload are the last ones
acknowledged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from group_harness import Harness

from headwater.coordinator import events as ev
from headwater.protocol.errors import ErrorCode

GROUP = "g"
PROTOCOLS = (("range", b"r"), ("roundrobin", b"rr"))


@dataclass
class Client:
    name: str
    member_id: str = ""
    generation: int = -1
    instance_id: str | None = None


def run(seed: int, steps: int = 250) -> None:
    rng = random.Random(seed)
    h = Harness(auto_commit=False)
    clients = [Client(f"c{i}", instance_id=f"i{i}" if i % 2 else None) for i in range(4)]
    sent: list[int] = []
    joins: dict[int, Client] = {}  # JoinGroup token -> the client that sent it, until answered
    acked: dict[int, int] = {}  # partition of topic t -> last acknowledged commit
    commits: dict[int, tuple[int, int]] = {}  # token -> (partition, offset)
    next_offset = 0
    partition = h.coord.partition_of(GROUP)
    for _ in range(steps):
        c = rng.choice(clients)
        action = rng.random()
        if action < 0.25:
            t = h.join(GROUP, c.member_id, instance_id=c.instance_id, session_ms=rng.choice([500, 2000]),
                       rebalance_ms=rng.choice([1000, 3000]), protocols=PROTOCOLS, client=c.name)
            sent.append(t)
            joins[t] = c
        elif action < 0.40:
            assignments = tuple((o.member_id, b"x") for o in clients if o.member_id) if rng.random() < 0.7 else ()
            sent.append(h.sync(GROUP, c.generation, c.member_id, assignments, instance_id=c.instance_id))
        elif action < 0.55:
            h.heartbeat(GROUP, c.generation, c.member_id, c.instance_id)
        elif action < 0.65:
            next_offset += 1
            p = rng.randrange(3)
            generation = c.generation if rng.random() < 0.8 else -1
            t = h.commit(GROUP, {("t", p): next_offset}, generation, c.member_id if generation >= 0 else "")
            sent.append(t)
            commits[t] = (p, next_offset)
        elif action < 0.70:
            t = h.token()
            h.send(ev.LeaveGroup(t, GROUP, ((c.member_id, c.instance_id),)))
            sent.append(t)
            c.member_id, c.generation = "", -1
        elif action < 0.80:
            h.commit_appends(ErrorCode.NONE if rng.random() < 0.85 else ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif action < 0.97:
            h.advance(rng.choice([10, 100, 400, 1500]))
        else:
            # Leadership moves away and comes back: pending writes fail, the log is read again.
            h.pending_appends.clear()
            h.send(ev.Unloaded(partition))
            h.send(ev.LoadStarted(partition, 1))
            h.send(ev.LoadFinished(partition, 1, tuple(h.log)))
        # Clients learn from their answers.
        for t, cl in list(joins.items()):
            r = h.reply(t)
            if r is None:
                continue
            del joins[t]
            assert isinstance(r, ev.JoinResult)
            if r.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                cl.member_id, cl.generation = r.member_id, r.generation
        for t, (p, o) in list(commits.items()):
            r = h.reply(t)
            if r is not None:
                del commits[t]
                assert isinstance(r, ev.PartitionResults)
                if r.partitions[0][2] == ErrorCode.NONE:
                    acked[p] = o
    # Drain: everyone leaves, writes complete, time passes.
    for cl in clients:
        if cl.member_id:
            h.send(ev.LeaveGroup(h.token(), GROUP, ((cl.member_id, cl.instance_id),)))
    for _ in range(10):
        h.commit_appends()
        h.advance(2000)
    h.commit_appends()
    unanswered = [t for t in sent if t not in h.replies]
    assert not unanswered, f"seed {seed}: requests never answered: {unanswered}"
    for t, (p, o) in commits.items():
        r = h.reply(t)
        assert isinstance(r, ev.PartitionResults)
        if r.partitions[0][2] == ErrorCode.NONE:
            acked[p] = o
    # A reload from the committed log gives every partition its last acknowledged commit.
    h.send(ev.Unloaded(partition))
    h.send(ev.LoadStarted(partition, 2))
    h.send(ev.LoadFinished(partition, 2, tuple(h.log)))
    got = {o.partition: o.offset for o in h.fetch(GROUP).offsets}
    assert got == acked, f"seed {seed}: {got} != {acked}"


@pytest.mark.parametrize("seed", range(60))
def test_random_runs(seed: int) -> None:
    run(seed)
