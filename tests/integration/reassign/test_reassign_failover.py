"""Reassignment through failures, on real processes: kill -9 of the active controller in each of the
phases U, A and B of the ``002`` seed and right after it wrote a cancel, kill -9 of a target broker
while it copies, a removed replica's broker down when the move ends, a cancel while copying, and a
paused controller holding a reassignment request. One 5-broker cluster is shared; each test moves its own topic from two brokers to two others,
none of them the controller, under a live acks=all producer, and checks the end state: replicas =
target, no adding/removing replicas, ISR = target, the removed replicas' directories gone, and every
acknowledged message readable, once.

How each phase is caught on real processes:

* U and B last a few milliseconds: each is one controller decision, written to ZooKeeper (as one
  multi, or a few in a row) and then sent to the brokers. Every broker reaches ZooKeeper through a
  ``ZkGate`` (a relay in this process), and the controller's gate stops at the write of the phase:
  either the write never reaches ZooKeeper, or it does and the answer never comes back (so no
  request follows it). The controller is killed right there; the test checks what ZooKeeper and the
  brokers' disks hold at that moment before it lets the cluster go on.
* A lasts as long as the copy: a follower throttle slows it to a crawl, and is lifted after the
  failover.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, ZkGate, pause, resume, run_cli, start_cluster, wait_for
from reassign_support import (
    LiveProducer,
    check_acked,
    clear_throttle,
    dir_bytes,
    partition_dirs,
    produce_bulk,
    read_topic,
    set_throttle,
    wait_moved,
    zk_assignment,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.reassign import Cluster

SLOW_BYTES_PER_S = 100_000  # the throttle that keeps a move copying while the test acts
# A throttled follower still takes up to 1 MiB per fetch (the throttle charges a response after it
# is read, then waits the debt off), so a partition to be caught mid-copy holds several MiB.
SLOW_PARTITION_BYTES = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("reassign-failover"), 5, {
        # Removed replicas' files go at once, so the test sees their directories disappear.
        "log.segment.delete.delay.ms": "0", "file.delete.delay.ms": "0",
    }, zk_gates=True)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def producers() -> Iterator[list[LiveProducer]]:
    """Producers a test started; whatever happens, they stop at teardown."""
    started: list[LiveProducer] = []
    try:
        yield started
    finally:
        for p in started:
            p.halt()


def live_producer(producers: list[LiveProducer], cluster: LocalCluster, topic: str, rate_per_s: float = 500) -> LiveProducer:
    producer = LiveProducer(cluster.bootstrap, topic, rate_per_s=rate_per_s)
    producers.append(producer)
    producer.start()
    return producer


def roles(cluster: LocalCluster) -> tuple[int, list[int]]:
    """(the controller, the other brokers): moves use only the others, so killing the controller kills
    no replica and the test sees the controller's failover alone."""
    for broker in cluster.brokers.values():  # an earlier test that failed half way may have left one down
        if not broker.alive:
            cluster.gates[broker.broker_id].disarm()
            broker.start()
    cluster.wait_registered(set(cluster.brokers))
    controller = cluster.controller_id()
    return controller, sorted(b for b in cluster.brokers if b != controller)


def create(cluster: LocalCluster, topic: str, assignment: list[list[int]]) -> None:
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
            "--replica-assignment", ",".join(":".join(map(str, r)) for r in assignment),
            "--config", "min.insync.replicas=2")
    wait_for(lambda: len([line for line in cluster.describe() if line.topic == topic and line.full]) == len(assignment),
             60, f"{topic} online with full ISRs")


def write_plan(cluster: LocalCluster, topic: str, targets: dict[int, list[int]]) -> Path:
    path = cluster.data_dir / f"plan-{topic}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(targets.items())]}))
    return path


def after_kill(cluster: LocalCluster, controller: int) -> None:
    """The killed controller's successor is elected; the killed broker comes back (through an open gate)."""
    cluster.wait_new_controller(controller, timeout_s=60)
    cluster.gates[controller].disarm()
    cluster.restart(controller)


def finish(cluster: LocalCluster, producer: LiveProducer, topic: str, partitions: int) -> None:
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    assert producer.count() > 0
    check_acked(read_topic(cluster.bootstrap, topic, partitions), producer.acked,
                "librdkafka's epoch bumps:\n" + "\n".join(producer.eos_log.bumps()[-40:]))


def test_controller_killed_in_phase_u(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    """Killed once U (RS = TRS + (ORS - TRS), AR, RR) is in ZooKeeper and before any broker heard of it:
    the controller never learns that its write was made, so it sends no LeaderAndIsr."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "phase-u"
    create(cluster, topic, [[a, b], [b, a]])
    producer = live_producer(producers, cluster, topic)
    wait_for(lambda: producer.count() > 200, 30, "acknowledged messages")
    tripped = cluster.gates[controller].arm(ZkGate.path_bytes(f"/brokers/topics/{topic}"), hold="response")
    targets = {0: [c, d], 1: [d, c]}
    outcome: list[object] = []

    def alter() -> None:
        try:
            with AdminClient(cluster.bootstrap, timeout_s=60) as client:
                outcome.append(Cluster(client).alter({(topic, p): r for p, r in targets.items()}))
        except AdminError as exc:  # the controller died with the request: the answer is lost
            outcome.append(exc)

    requester = threading.Thread(target=alter, daemon=True)
    requester.start()
    assert tripped.wait(30), "the controller never wrote the reassignment"
    cluster.brokers[controller].kill9()
    # What the dead controller left (no other controller can act before its session expires): U in
    # the topic znode (for partition 0 at least: a controller may write partitions one by one), and
    # no new replica anywhere, since no LeaderAndIsr went out.
    held = zk_assignment(cluster, topic)
    assert (held[0].replicas, held[0].adding, held[0].removing) == ([c, d, a, b], [c, d], [a, b]), held
    assert (held[1].replicas, held[1].adding, held[1].removing) in (([b, a], [], []), ([d, c, b, a], [d, c], [b, a])), held
    assert not [path for p in targets for x in (c, d) for path in partition_dirs(cluster, x, topic, p)]
    after_kill(cluster, controller)
    requester.join(60)
    assert outcome and isinstance(outcome[0], AdminError), f"the request was answered by a dead controller: {outcome}"
    # The operator's tool saw its request fail, and sends it again: the new controller has resumed
    # what ZooKeeper holds (the same target again changes nothing) and starts what it does not.
    with AdminClient(cluster.bootstrap, timeout_s=60) as client:
        results = Cluster(client).alter({(topic, p): r for p, r in targets.items()})
    assert results == {(topic, 0): (0, None), (topic, 1): (0, None)}, results
    wait_moved(cluster, topic, targets, removed={0: [a, b], 1: [a, b]})
    finish(cluster, producer, topic, 2)


def test_controller_killed_in_phase_a(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    """Killed while the new replicas copy (A: TRS not within the ISR); the next controller resumes A."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "phase-a"
    create(cluster, topic, [[a, b], [b, a]])
    produce_bulk(cluster.bootstrap, topic, 2 * SLOW_PARTITION_BYTES)
    producer = live_producer(producers, cluster, topic, rate_per_s=50)
    set_throttle(cluster, topic, f"0:{c},0:{d},1:{c},1:{d}", [c, d], SLOW_BYTES_PER_S)
    targets = {0: [c, d], 1: [d, c]}
    epochs = {p: st["leader_epoch"] for p, st in cluster.partition_states(topic).items()}
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
            "--reassignment-json-file", str(write_plan(cluster, topic, targets)))

    def copying() -> bool:
        states = cluster.partition_states(topic)
        return all(states[p]["leader_epoch"] > epochs[p] for p in targets) and any(
            dir_bytes(path) > 0 for b in (c, d) for p in targets for path in partition_dirs(cluster, b, topic, p))

    wait_for(copying, 30, "phase A: epochs bumped, the new replicas copying")
    cluster.brokers[controller].kill9()
    states, assignment = cluster.partition_states(topic), zk_assignment(cluster, topic)
    for p, target in targets.items():
        assert assignment[p].adding == target and not set(target) <= set(states[p]["isr"]), (assignment, states)
    after_kill(cluster, controller)
    # Still copying under the new controller; lifting the throttle lets it finish.
    assert "still in progress" in run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--verify",
                                          "--reassignment-json-file", str(write_plan(cluster, topic, targets)))
    clear_throttle(cluster, topic, [c, d])
    wait_moved(cluster, topic, targets, removed={0: [a, b], 1: [a, b]})
    finish(cluster, producer, topic, 2)


def test_controller_killed_in_phase_b_before_writing_it(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    """Killed as it writes B (the ISR now covers TRS: new leader, RR out of the ISR, RS = TRS), with the
    write never reaching ZooKeeper: the leader's AlterPartition goes unanswered, it retries with the
    next controller, and that one runs B from what ZooKeeper holds."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "phase-b-unwritten"
    create(cluster, topic, [[a, b]])
    produce_bulk(cluster.bootstrap, topic, 500_000)
    producer = live_producer(producers, cluster, topic)
    # The topic znode is written twice for this partition: with U, then with B's final RS.
    tripped = cluster.gates[controller].arm(ZkGate.path_bytes(f"/brokers/topics/{topic}"), nth=2, hold="request")
    targets = {0: [c, d]}
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
            "--reassignment-json-file", str(write_plan(cluster, topic, targets)))
    assert tripped.wait(60), "the controller never wrote the final assignment"
    cluster.brokers[controller].kill9()
    held = zk_assignment(cluster, topic)[0]
    assert (held.replicas, held.adding, held.removing) == ([c, d, a, b], [c, d], [a, b]), held
    after_kill(cluster, controller)
    wait_moved(cluster, topic, targets, removed={0: [a, b]})
    finish(cluster, producer, topic, 1)


def test_controller_killed_in_phase_b_after_writing_it(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    """Killed once B's final RS = TRS is in ZooKeeper, before any broker heard of it: no LeaderAndIsr
    moved the leader, no StopReplica reached the removed replicas. The next controller sees nothing
    to reassign; the removed replicas learn from its metadata that they are no longer replicas."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "phase-b-written"
    create(cluster, topic, [[a, b]])
    produce_bulk(cluster.bootstrap, topic, 500_000)
    producer = live_producer(producers, cluster, topic)
    tripped = cluster.gates[controller].arm(ZkGate.path_bytes(f"/brokers/topics/{topic}"), nth=2, hold="response")
    targets = {0: [c, d]}
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
            "--reassignment-json-file", str(write_plan(cluster, topic, targets)))
    assert tripped.wait(60), "the controller never wrote the final assignment"
    cluster.brokers[controller].kill9()
    held = wait_for(lambda: (lambda h: h if not h.adding else None)(zk_assignment(cluster, topic)[0]), 5,
                    "the final assignment in ZooKeeper")
    assert (held.replicas, held.adding, held.removing) == ([c, d], [], []), held
    assert all(partition_dirs(cluster, x, topic, 0) for x in (a, b)), "a removed replica was told before the kill"
    after_kill(cluster, controller)
    wait_moved(cluster, topic, targets, removed={0: [a, b]})
    finish(cluster, producer, topic, 1)


def test_target_broker_killed_mid_copy_resumes_when_it_returns(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    _controller, (a, b, c, d) = roles(cluster)
    topic = "target-killed"
    create(cluster, topic, [[a, b]])
    produce_bulk(cluster.bootstrap, topic, SLOW_PARTITION_BYTES)
    producer = live_producer(producers, cluster, topic, rate_per_s=50)
    set_throttle(cluster, topic, f"0:{c},0:{d}", [c, d], SLOW_BYTES_PER_S)
    targets = {0: [c, d]}
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
            "--reassignment-json-file", str(write_plan(cluster, topic, targets)))
    copy = cluster.data_dir / f"broker-{c}-logs" / f"{topic}-0"
    wait_for(lambda: dir_bytes(copy) > 200_000, 30, f"broker {c} copying")
    cluster.brokers[c].kill9()
    copied = dir_bytes(copy)
    # Nothing completes without it: the move waits (and the rest of the cluster keeps serving).
    wait_for(lambda: c not in cluster.metadata()[1], 30, f"broker {c} gone from the cluster")
    assert zk_assignment(cluster, topic)[0].adding == [c, d]
    # An operator follows it with the tool's live view (a separate process; no terminal, so plain lines).
    plan = write_plan(cluster, topic, targets)
    watch = subprocess.Popen([sys.executable, "-m", "headwater", "reassign", "--bootstrap-server", cluster.bootstrap,
                              "--verify", "--watch", "--reassignment-json-file", str(plan)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        wait_for(lambda: any("Progress: 0/1 partitions completed; 2 replicas copying" in x for x in lines), 30,
                 "the watch showing the move in progress")
        run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
                "--entity-name", topic, "--delete-config", "follower.replication.throttled.replicas")
        cluster.restart(c)
        # It goes on from what it had: the copy made before the kill is still there.
        after = dir_bytes(copy)
        assert after >= copied, (f"{copied} bytes copied before the kill, {after} after the restart; files: "
                                 f"{sorted(str(p.relative_to(copy.parent)) for p in copy.parent.glob(copy.name + '*/*'))}")
        wait_moved(cluster, topic, targets, removed={0: [a, b]})
        assert watch.wait(60) == 0, "".join(lines)
        reader.join(10)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    output = "".join(lines)
    assert f"Partition {topic}-0: completed" in output, output
    assert "Progress: 1/1 partitions completed" in output, output
    assert f"Reassignment of partition {topic}-0 is completed." in output, output
    clear_throttle(cluster, topic, [c, d])
    finish(cluster, producer, topic, 1)


def test_removed_replica_down_during_the_move_is_deleted_when_it_returns(cluster: LocalCluster) -> None:
    """A removed replica whose broker is down when the move ends never gets its StopReplica (Kafka's
    ZooKeeper controller leaves such a log on disk for good); it is deleted when the broker returns and
    learns from the controller's metadata that it is no longer a replica."""
    _controller, (a, b, c, d) = roles(cluster)
    topic = "removed-while-down"
    create(cluster, topic, [[a, b]])
    acked = produce_bulk(cluster.bootstrap, topic, 1_000_000)
    cluster.brokers[a].kill9()
    wait_for(lambda: a not in cluster.metadata()[1], 30, f"broker {a} gone from the cluster")
    targets = {0: [c, d]}
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
            "--reassignment-json-file", str(write_plan(cluster, topic, targets)))
    wait_for(lambda: zk_assignment(cluster, topic)[0].replicas == [c, d], 60, "the move to end without broker a")
    assert partition_dirs(cluster, a, topic, 0), f"broker {a} was down: its replica should still be on disk"
    cluster.restart(a)
    wait_moved(cluster, topic, targets, removed={0: [a, b]})
    check_acked(read_topic(cluster.bootstrap, topic, 1), acked)


def test_cancel_while_copying_restores_the_original_replicas(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    _controller, (a, b, c, d) = roles(cluster)
    topic = "cancelled-copy"
    create(cluster, topic, [[a, b], [b, a]])
    produce_bulk(cluster.bootstrap, topic, 2 * SLOW_PARTITION_BYTES)
    producer = live_producer(producers, cluster, topic, rate_per_s=50)
    targets = {0: [c, d], 1: [d, c]}
    plan = write_plan(cluster, topic, targets)
    # The tool sets the same throttle below, but does not wait for the brokers to apply it.
    set_throttle(cluster, topic, f"0:{c},0:{d},1:{c},1:{d}", [c, d], SLOW_BYTES_PER_S)
    out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan),
                  "--throttle", str(SLOW_BYTES_PER_S))
    assert f"The inter-broker throttle limit was set to {SLOW_BYTES_PER_S} B/s" in out
    # Throttled on both sides, each new replica gets its first MiB in turn: one of them copying is enough.
    wait_for(lambda: any(dir_bytes(path) > 0 for b in (c, d) for p in targets
                         for path in partition_dirs(cluster, b, topic, p)), 30, "the new replicas copying")
    assert len(zk_assignment(cluster, topic)[0].adding) == 2
    out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--cancel", "--reassignment-json-file", str(plan))
    # ReassignPartitionsCommand.cancelAssignment (Kafka 3.9): "reassignment" + "s" for more than one.
    assert f"Successfully cancelled partition reassignments for: {topic}-0,{topic}-1" in out
    assert f"Clearing topic-level throttles on topic {topic}" in out
    # Back to the original replicas, in their original order; the copies are deleted.
    wait_moved(cluster, topic, {0: [a, b], 1: [b, a]}, removed={0: [c, d], 1: [c, d]})
    config = cluster.zk_json(f"/config/topics/{topic}")
    assert config is not None and not any("throttled" in k for k in config[0].get("config", {})), config
    finish(cluster, producer, topic, 2)


def test_reassignment_request_held_by_a_paused_controller_is_redirected(cluster: LocalCluster) -> None:
    """A controller paused (think GC, a stalled VM) with an AlterPartitionReassignments in its socket is
    replaced; when it resumes it must answer NOT_CONTROLLER, so the client sends the request to the new
    controller, rather than drop the connection with the request unanswered."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "paused-controller"
    create(cluster, topic, [[a, b]])
    targets = {0: [c, d]}
    outcome: list[object] = []

    def alter() -> None:
        try:
            with AdminClient(cluster.bootstrap, timeout_s=60) as client:
                client.refresh()
                outcome.append(Cluster(client).alter({(topic, p): r for p, r in targets.items()}))
        except AdminError as exc:
            outcome.append(exc)

    pause(cluster.pid(controller))
    try:
        requester = threading.Thread(target=alter, daemon=True)
        requester.start()
        cluster.wait_new_controller(controller, timeout_s=60)
    finally:
        resume(cluster.pid(controller))
    requester.join(90)
    assert outcome == [{(topic, 0): (0, None)}], outcome
    wait_moved(cluster, topic, targets, removed={0: [a, b]})


def test_controller_killed_after_writing_a_cancel(cluster: LocalCluster, producers: list[LiveProducer]) -> None:
    """Killed once a cancel (RS back to the original replicas) is in ZooKeeper and before any broker
    heard of it: the copies never get their StopReplica, and their brokers delete them when the next
    controller's metadata no longer lists them."""
    controller, (a, b, c, d) = roles(cluster)
    topic = "cancel-then-kill"
    create(cluster, topic, [[a, b]])
    produce_bulk(cluster.bootstrap, topic, SLOW_PARTITION_BYTES)
    producer = live_producer(producers, cluster, topic, rate_per_s=50)
    set_throttle(cluster, topic, f"0:{c},0:{d}", [c, d], SLOW_BYTES_PER_S)
    plan = write_plan(cluster, topic, {0: [c, d]})
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    wait_for(lambda: any(dir_bytes(path) > 0 for x in (c, d) for path in partition_dirs(cluster, x, topic, 0)), 30,
             "a new replica copying")
    # The topic znode is written with U, then with the cancel.
    tripped = cluster.gates[controller].arm(ZkGate.path_bytes(f"/brokers/topics/{topic}"), nth=1, hold="response")
    requester = threading.Thread(target=lambda: _cancel_quietly(cluster, topic), daemon=True)
    requester.start()
    assert tripped.wait(30), "the controller never wrote the cancel"
    cluster.brokers[controller].kill9()
    held = wait_for(lambda: (lambda h: h if not h.adding else None)(zk_assignment(cluster, topic)[0]), 5,
                    "the cancel in ZooKeeper")
    assert (held.replicas, held.adding, held.removing) == ([a, b], [], []), held
    assert any(partition_dirs(cluster, x, topic, 0) for x in (c, d)), "a copy was told to stop before the kill"
    after_kill(cluster, controller)
    requester.join(60)
    wait_moved(cluster, topic, {0: [a, b]}, removed={0: [c, d]})
    clear_throttle(cluster, topic, [c, d])
    finish(cluster, producer, topic, 1)


def _cancel_quietly(cluster: LocalCluster, topic: str) -> None:
    with contextlib.suppress(AdminError), AdminClient(cluster.bootstrap, timeout_s=60) as client:
        Cluster(client).alter({(topic, 0): None})  # the controller dies with it: no answer
