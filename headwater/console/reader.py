"""The console's I/O: one poller thread that reads the cluster through the Kafka protocol (and the
brokers' Prometheus endpoints when given) into a snapshot, and the writes (cancel, throttle).

Pages never wait on Kafka: they read the latest snapshot, which the poller replaces every
``interval_s``. Every call has a timeout (the admin client's socket timeout), each broker is asked
in its own thread with its own connection, so a broker that is down or slow only marks its own row
and delays nothing else beyond that timeout. A fresh client per poll means a connection broken by a
broker restart is never reused.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafka.protocol.admin import (
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.reassign import (
    BROKER_THROTTLES,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    Cluster,
    ToolError,
    move_map,
    throttled_replicas,
)
from headwater.admin.security import ClientSecurity
from headwater.console import model
from headwater.console.model import (
    BrokerFacts,
    Facts,
    LogDirFacts,
    MoveMetric,
    PartitionFacts,
    QuotaFacts,
    TopicPartition,
)
from headwater.console.plan import Plan, PlanStore
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
CLIENT_ID = "headwater-console"
TOPIC_KEYS = ["min.insync.replicas", LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]
COMPLETED_KEPT = 500  # moves remembered for "completed since the page opened"
ENDING_GRACE_S = 30.0  # how long an ended move waits for the brokers' metadata to show its outcome


class WriteError(Exception):
    """A write the cluster refused or could not be asked; the message is shown on the page."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


# --- answers into facts (pure: unit-tested with stand-in responses) -----------------------------


def metadata_facts(resp: Any, facts: Facts) -> None:
    facts.cluster_id = resp.cluster_id
    facts.controller_id = resp.controller_id
    facts.brokers = {b.node_id: BrokerFacts(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
    for t in resp.topics:
        if t.error_code:
            facts.errors.append(f"Metadata for topic {t.name}: {_error_name(t.error_code)}")
            continue
        facts.topics[t.name] = {
            p.partition_index: PartitionFacts(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                              tuple(getattr(p, "offline_replicas", None) or ()))
            for p in t.partitions}


def cluster_facts(resp: Any, facts: Facts) -> None:
    """DescribeCluster: the brokers and controller as the answering broker knows them."""
    if resp.error_code:
        facts.errors.append(f"DescribeCluster: {resp.error_message or _error_name(resp.error_code)}")
        return
    facts.cluster_id = resp.cluster_id
    facts.controller_id = resp.controller_id
    facts.brokers = {b.broker_id: BrokerFacts(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers}


def log_dir_facts(resp: Any) -> list[LogDirFacts]:
    out = []
    for d in resp.results:
        sizes = {(t.name, p.partition_index): p.partition_size for t in d.topics for p in t.partitions}
        out.append(LogDirFacts(d.log_dir, _error_name(d.error_code) if d.error_code else None, sizes))
    return out


def config_values(resp: Any) -> dict[str, dict[str, str | None]]:
    """resource name -> {config: value} of a DescribeConfigs answer (resources in error left out)."""
    return {r.resource_name: {c.name: c.value for c in r.configs} for r in resp.results if not r.error_code}


def parse_metrics(text: str) -> dict[tuple[str, int, int, str], MoveMetric]:
    """``headwater_reassignment_{bytes_to_move,bytes_moved,rate_bytes_per_second,eta_seconds}``."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {"headwater_reassignment_bytes_to_move": "bytes_to_move", "headwater_reassignment_bytes_moved": "bytes_moved",
              "headwater_reassignment_rate_bytes_per_second": "rate", "headwater_reassignment_eta_seconds": "eta_s"}
    values: dict[tuple[str, int, int, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            field_name = wanted.get(sample.name)
            if field_name is None:
                continue
            lb = sample.labels
            key = (lb["topic"], int(lb["partition"]), int(lb["replica"]), lb["role"])
            values.setdefault(key, {})[field_name] = float(sample.value)
    return {k: MoveMetric(v.get("bytes_to_move", -1), v.get("bytes_moved", 0), v.get("rate", 0), v.get("eta_s", -1))
            for k, v in values.items()}


def parse_tokens(text: str) -> dict[tuple[str, str], float]:
    """(user, client id) -> ``headwater_controller_mutation_remaining_tokens`` (KIP-599's bucket; only
    the controller has buckets, so the other brokers' endpoints give none)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "headwater_controller_mutation_remaining_tokens":
                out[(sample.labels.get("user", ""), sample.labels.get("client_id", ""))] = float(sample.value)
    return out


def quota_facts(resp: Any) -> list[QuotaFacts]:
    if resp.error_code:
        raise AdminError(resp.error_message or _error_name(resp.error_code))
    return [QuotaFacts(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                       {v.key: float(v.value) for v in entry.values}) for entry in resp.entries or []]


# --- the poller ---------------------------------------------------------------------------------


class Poller:
    def __init__(self, bootstrap: str, security: ClientSecurity, client_id: str = CLIENT_ID,
                 metrics_urls: Iterable[str] = (), timeout_s: float = 5.0, interval_s: float = 1.0,
                 read_only: bool = False) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.client_id = client_id
        self.metrics_urls = list(metrics_urls)
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.read_only = read_only
        self.rates = model.RateTracker()
        self.snapshot: dict[str, Any] = {"taken_at": None, "errors": ["waiting for the first answer"],
                                         "brokers": [], "topics": [], "health": {}, "reassignments": {}}
        self.version = 0
        self._known: dict[int, str] = {}  # broker addresses seen: a bootstrap broker that is down is not needed
        self._in_flight: dict[TopicPartition, dict[str, Any]] = {}
        self._completed: list[dict[str, Any]] = []
        self.facts: Facts | None = None  # the last poll's answers: what the Plan page plans on
        self.plans = PlanStore()
        self._executed: tuple[Plan, float] | None = None
        self._exec_log: list[str] = []
        self._elected: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="console-broker")

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="console-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s * 3)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Exception as exc:  # the page must keep working whatever one poll hits
                log.exception("console poll failed")
                self.snapshot = {**self.snapshot, "errors": [f"poll failed: {exc}"]}
                self.version += 1
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def client(self, bootstrap: str | None = None) -> AdminClient:
        return AdminClient(bootstrap or self._bootstrap_list(), client_id=self.client_id, timeout_s=self.timeout_s,
                           security=self.security)

    def _bootstrap_list(self) -> str:
        return ",".join([self.bootstrap, *sorted(set(self._known.values()) - set(self.bootstrap.split(",")))])

    # --- one poll --------------------------------------------------------------------------------

    def gather(self) -> Facts:
        facts = Facts(taken_at=time.time())
        with self.client() as client:
            try:
                metadata_facts(client.refresh(), facts)
            except AdminError as exc:
                facts.errors.append(f"Metadata: {exc}")
                return facts
            # Not the first bootstrap address (it may be the broker that is down): a registered one.
            node = facts.controller_id if facts.controller_id in facts.brokers else min(facts.brokers, default=None)
            try:
                cluster_facts(client.send(DescribeClusterRequest, dict(include_cluster_authorized_operations=False),
                                          node_id=node), facts)
            except AdminError as exc:
                facts.errors.append(f"DescribeCluster: {exc}")  # Metadata's brokers stand
            self._known = {b.node_id: f"{b.host}:{b.port}" for b in facts.brokers.values()}
            brokers = dict(facts.brokers)
            per_broker = {b: self._pool.submit(self._ask_broker, bf) for b, bf in brokers.items()}
            metrics = [self._pool.submit(self._scrape, url) for url in self.metrics_urls]
            try:
                facts.ongoing = Cluster(client).ongoing()
            except (AdminError, ToolError) as exc:
                facts.errors.append(f"ListPartitionReassignments: {exc}")
            if facts.topics:
                R = DescribeConfigsRequest.DescribeConfigsResource
                try:
                    resp = client.send(DescribeConfigsRequest, dict(
                        resources=[R(resource_type=RESOURCE_TOPIC, resource_name=t, configuration_keys=TOPIC_KEYS)
                                   for t in sorted(facts.topics)],
                        include_synonyms=False, include_documentation=False), node_id=node)
                    facts.topic_configs = config_values(resp)
                except AdminError as exc:
                    facts.errors.append(f"DescribeConfigs (topics): {exc}")
            try:
                # Every entity (no filter component, not strict); only the Quotas page shows a failure.
                facts.quotas = quota_facts(client.send(DescribeClientQuotasRequest, dict(components=[], strict=False),
                                                       node_id=node))
            except AdminError as exc:
                facts.quota_error = f"DescribeClientQuotas: {exc}"
        for b, future in per_broker.items():
            dirs, configs, latency, error = future.result()
            if dirs is not None:
                facts.log_dirs[b] = dirs
            if configs is not None:
                facts.broker_configs[b] = configs
            facts.latency_ms[b] = latency
            if error:
                facts.broker_errors[b] = error
        if self.metrics_urls:
            facts.tokens = {}
        for scraped in metrics:
            found, tokens, error = scraped.result()
            facts.move_metrics.update(found)
            assert facts.tokens is not None
            facts.tokens.update(tokens)
            if error:
                facts.errors.append(error)
        return facts

    def _ask_broker(self, bf: BrokerFacts) -> tuple[list[LogDirFacts] | None, dict[str, str | None] | None,
                                                    float, str | None]:
        """DescribeLogDirs and the throttle rates (DescribeConfigs, which a broker answers for itself)."""
        started = time.monotonic()
        dirs: list[LogDirFacts] | None = None
        configs: dict[str, str | None] | None = None
        try:
            with self.client(f"{bf.host}:{bf.port}") as client:
                dirs = log_dir_facts(client.send(DescribeLogDirsRequest, dict(topics=None)))
                R = DescribeConfigsRequest.DescribeConfigsResource
                resp = client.send(DescribeConfigsRequest, dict(
                    resources=[R(resource_type=RESOURCE_BROKER, resource_name=str(bf.node_id),
                                 configuration_keys=list(model.THROTTLE_RATES))],
                    include_synonyms=False, include_documentation=False))
                configs = config_values(resp).get(str(bf.node_id), {})
        except AdminError as exc:
            return dirs, configs, (time.monotonic() - started) * 1000, str(exc)
        except Exception as exc:  # an answer we could not decode must not take the poll down
            return dirs, configs, (time.monotonic() - started) * 1000, f"{type(exc).__name__}: {exc}"
        return dirs, configs, (time.monotonic() - started) * 1000, None

    def _scrape(self, url: str) -> tuple[dict[tuple[str, int, int, str], MoveMetric], dict[tuple[str, str], float],
                                         str | None]:
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                text = resp.read().decode()
            return parse_metrics(text), parse_tokens(text), None
        except Exception as exc:  # a metrics endpoint down only loses rates, ETAs and tokens
            return {}, {}, f"metrics {url}: {exc}"

    def poll_once(self) -> None:
        facts = self.gather()
        self.rates.observe(time.monotonic(), model.copied_bytes(facts))
        moves = model.moves_model(facts, self.rates)
        self._track(facts, moves)
        self.facts = facts
        self.snapshot = {
            "taken_at": facts.taken_at,
            "cluster_id": facts.cluster_id,
            "controller": facts.controller_id,
            "errors": facts.errors,
            "read_only": self.read_only,
            "metrics": bool(self.metrics_urls),
            "brokers": model.brokers_model(facts),
            "health": model.health(facts),
            "topics": model.topics_model(facts),
            "reassignments": {
                "available": facts.ongoing is not None,
                "moves": moves,
                "overall": model.overall(moves),
                "throttle": model.throttle_model(facts),
                "completed": list(self._completed),
            },
            "heatmap": model.heatmap_model(facts),
            "quotas": model.quotas_model(facts.quotas, facts.tokens, facts.quota_error),
            "plan": {"execution": self._execution_model(facts)},
        }
        self.version += 1

    def _track(self, facts: Facts, moves: list[dict[str, Any]]) -> None:
        """Moves that left the controller's list since the last poll become "completed since"."""
        if facts.ongoing is None or (not facts.topics and facts.errors):
            return  # no answer: nothing is known to have ended
        now = facts.taken_at
        current = {(m["topic"], m["partition"]): m for m in moves}
        for tp, m in self._in_flight.items():
            if tp not in current:
                self._completed.append({**m, "ended_at": now, "outcome": "ending"})
        self._in_flight = current
        for entry in self._completed:
            if entry["outcome"] == "ending" and now - entry["ended_at"] < ENDING_GRACE_S:
                pf = facts.topics.get(entry["topic"], {}).get(entry["partition"])
                entry["outcome"] = model.outcome(entry, None if pf is None else pf.replicas)
                if entry["outcome"] == "completed":
                    entry["share"], entry["copied"] = 1.0, entry["total"]
        del self._completed[:-COMPLETED_KEPT]

    # --- writes ------------------------------------------------------------------------------------

    def cancel(self, partitions: Iterable[TopicPartition] | None) -> dict[str, str | None]:
        """AlterPartitionReassignments with null replicas: each partition returns to its original
        replicas. ``None``: every move in flight. Returns partition -> error (None: cancelled)."""
        with self.client() as client:
            cluster = Cluster(client)
            try:
                ongoing = cluster.ongoing()
                targets = {tp: None for tp in (ongoing if partitions is None else partitions)}
                if not targets:
                    return {}
                results = cluster.alter(targets)
            except (AdminError, ToolError) as exc:
                raise WriteError(str(exc)) from None
        return {f"{t}-{p}": (None if code == 0 else (msg or _error_name(code))) for (t, p), (code, msg) in results.items()}

    def set_throttle(self, rate: int | None) -> list[str]:
        """The reassignment throttle as ``reassign --execute --throttle`` sets it: the topics' leader
        and follower throttled-replica lists for the moves in flight, and the leader and follower
        rates on the brokers they involve. ``None`` removes the rates from every broker. Returns
        what was done, one line each."""
        done: list[str] = []
        with self.client() as client:
            cluster = Cluster(client)
            try:
                brokers = cluster.brokers()
                if rate is None:
                    for b in sorted(brokers):
                        cluster.alter_configs(RESOURCE_BROKER, str(b), [(k, OP_DELETE, None) for k in BROKER_THROTTLES[:2]])
                    done.append(f"throttle removed from brokers {','.join(map(str, sorted(brokers)))}")
                    return done
                ongoing = cluster.ongoing()
                current = cluster.assignments({t for t, _p in ongoing}) if ongoing else {}
                moves = move_map(ongoing, current, {})
                for topic, (leader, follower) in sorted(throttled_replicas(moves).items()):
                    cluster.alter_configs(RESOURCE_TOPIC, topic, [(LEADER_THROTTLED_REPLICAS, OP_SET, leader),
                                                                  (FOLLOWER_THROTTLED_REPLICAS, OP_SET, follower)])
                    done.append(f"topic {topic}: throttled replicas leader {leader or '-'}, follower {follower or '-'}")
                involved = sorted({b for s, d in moves.values() for b in (*s, *d)} & set(brokers)) or sorted(brokers)
                for b in involved:
                    cluster.alter_configs(RESOURCE_BROKER, str(b), [(k, OP_SET, str(rate)) for k in BROKER_THROTTLES[:2]])
                done.append(f"throttle {rate} B/s on brokers {','.join(map(str, involved))}")
            except (AdminError, ToolError) as exc:
                raise WriteError("; ".join([*done, str(exc)])) from None
        return done


    # --- the Plan page ---------------------------------------------------------------------------------

    def _execution_model(self, facts: Facts) -> dict[str, Any] | None:
        from headwater.console.plan import execution_model

        plan, started = self._executed if self._executed else (None, None)
        return execution_model(plan, started, facts, self._exec_log, self._elected)

    def make_plan(self, goal: object, brokers: object, throttle: float | None = None) -> dict[str, Any]:
        """Plan on the last poll's answers (the planner's in-process engine); raises PlannerError."""
        from headwater.console.plan import make_plan, parse_goal
        from headwater.planner.errors import PlannerError

        facts = self.facts
        if facts is None:
            raise PlannerError("the console has not read the cluster yet")
        g, ids = parse_goal(goal, brokers)
        plan = make_plan(facts, g, ids, throttle)
        self.plans.add(plan)
        return plan.view

    def execute_plan(self, plan: Plan, throttle: int) -> list[str]:
        """``headwater reassign --execute --throttle`` with the plan: the topics' throttled-replica
        lists and the brokers' rates, then AlterPartitionReassignments. Refused when the cluster no
        longer has the replicas the plan started from. Returns what the tool printed."""
        from headwater.admin.reassign import execute
        from headwater.console.plan import stale_partitions

        lines: list[str] = []
        with self.client() as client:
            cluster = Cluster(client)
            try:
                stale = stale_partitions(plan, cluster.assignments({t for t, _p in plan.basis}))
                if stale:
                    raise WriteError(f"the cluster changed since the plan ({', '.join(stale[:5])}"
                                     f"{' …' if len(stale) > 5 else ''}): plan again")
                execute(cluster, plan.targets, False, throttle, lines.append)
            except (AdminError, ToolError) as exc:
                raise WriteError("\n".join([*lines, str(exc)])) from None
        self._executed, self._exec_log, self._elected = (plan, time.time()), lines, None
        return lines

    def elect_preferred(self, plan: Plan) -> list[str]:
        """Once the plan's moves are done: ``reassign --verify`` (which removes the throttle when no
        move is left), then ElectLeaders (PREFERRED) for the plan's partitions, as
        ``headwater leader-election --election-type PREFERRED`` sends it."""
        from headwater.admin.leader_election import ElectionError, elect
        from headwater.admin.reassign import verify

        lines: list[str] = []
        with self.client() as client:
            cluster = Cluster(client)
            try:
                if any(tp in plan.targets for tp in cluster.ongoing()):
                    raise WriteError("the plan's moves are still in flight: elect once they are done")
                verify(cluster, plan.targets, False, lines.append)
                elect(client, "PREFERRED", set(plan.targets), lines.append)
            except (AdminError, ToolError, ElectionError) as exc:
                raise WriteError("\n".join([*lines, str(exc)])) from None
        self._elected = {"at": time.time(), "log": [line for line in lines if line]}
        self._exec_log = [*self._exec_log, *lines]
        return lines
