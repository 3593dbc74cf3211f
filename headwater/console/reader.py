"""The console's I/O: one poller thread that reads the cluster through the Kafka protocol (and the
brokers' Prometheus endpoints when given) into a snapshot, and the writes (cancel, throttle, the
Plan page's, self-healing on or off).

Pages never wait on Kafka: they read the latest snapshot, which the poller replaces every
``interval_s``. Every call has a timeout (the admin client's socket timeout), each broker is asked
in its own thread with its own connection, so a broker that is down or slow only marks its own row
and delays nothing else beyond that timeout. A fresh client per poll means a connection broken by a
broker restart is never reused.
"""

from __future__ import annotations

import json
import logging
import re
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kafka.protocol.admin import (
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.reassign import (
    BROKER_THROTTLES,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    Cluster,
    Ongoing,
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
    StatusKey,
    TopicPartition,
)
from headwater.console.plan import DEFAULT_SPARK_MASTER, Plan, PlanStore, SparkPlanner
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.error_messages import exception_text
from headwater.protocol.errors import ErrorCode
from headwater.protocol.frame import read_unsigned_varint

log = logging.getLogger(__name__)
CLIENT_ID = "headwater-console"
TOPIC_KEYS = ["min.insync.replicas", LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]
COMPLETED_KEPT = 500  # moves remembered for "completed since the page opened"
ENDING_GRACE_S = 30.0  # how long an ended move waits for the brokers' metadata to show its outcome
# The most of a core the console spends, averaged over a poll and the wait after it: a read that cost
# more CPU (everything changing at once in a large cluster) is followed by a longer wait, so the next
# update comes later than --interval instead of the console taking a core. With 10,000 partitions
# moving and their answers unchanged a poll costs about 0.08 s and --interval 1 holds.
POLL_CPU_SHARE = 0.08


class WriteError(Exception):
    """A write the cluster refused or could not be asked; the message is shown on the page."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


# --- answers into facts (pure: unit-tested with stand-in responses) -----------------------------


def metadata_facts(resp: Any, facts: Facts, memo: dict[str, tuple[Any, Any]] | None = None) -> None:
    """With ``memo`` (topic name -> (its answer, its partitions), replaced by this answer's), a topic
    whose answer is the very object of the last call keeps its partitions (``AnswerCache`` reuses
    the topics whose bytes did not change)."""
    facts.cluster_id = resp.cluster_id
    facts.controller_id = resp.controller_id
    facts.brokers = {b.node_id: BrokerFacts(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
    kept: dict[str, tuple[Any, Any]] = {}
    for t in resp.topics:
        if t.error_code:
            facts.errors.append(f"Metadata for topic {t.name}: {_error_name(t.error_code)}")
            continue
        last = memo.get(t.name) if memo is not None else None
        if last is not None and last[0] is t:
            parts = last[1]
        else:
            parts = {p.partition_index: PartitionFacts(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                                       tuple(getattr(p, "offline_replicas", None) or ()))
                     for p in t.partitions}
        facts.topics[t.name] = parts
        kept[t.name] = (t, parts)
    if memo is not None:
        memo.clear()
        memo.update(kept)


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


def default_config_values(resp: Any) -> dict[str, str | None]:
    """The configs set on the cluster-wide default broker entity, from its DescribeConfigs answer."""
    for r in resp.results:
        if r.error_code:
            raise AdminError(r.error_message or _error_name(r.error_code))
    return config_values(resp).get("", {})


_MOVE_FIELDS = {"headwater_reassignment_bytes_to_move": "bytes_to_move", "headwater_reassignment_bytes_moved": "bytes_moved",
                "headwater_reassignment_rate_bytes_per_second": "rate", "headwater_reassignment_eta_seconds": "eta_s"}
_TOKENS = "headwater_controller_mutation_remaining_tokens"
_STATUS = "status"
# One sample line of the text format: name, the labels between braces (quoted values may hold braces
# and escapes), the value. Only the names the console reads; every other line is skipped by the scan.
_SAMPLE = re.compile(
    r'^(headwater_reassignment_(?:bytes_to_move|bytes_moved|rate_bytes_per_second|eta_seconds)'
    r'|headwater_controller_mutation_remaining_tokens'
    r'|headwater_reassignment_throttle_(?:rate_bytes_per_second|reason|produce_p99_ms|follower_lag_ms|cpu_pressure)'
    r'|headwater_self_healing_(?:enabled|dry_run|threshold_seconds|moves_in_flight|next_action_seconds'
    r'|dead_broker_seconds|offline_dir_seconds|actions_total))'
    r'\{((?:[^"}\n]|"(?:[^"\\\n]|\\.)*")*)\}[ \t]+([^ \t\n]+)', re.M)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")


def _labels(body: str) -> dict[str, str]:
    out = {}
    for name, value in _LABEL.findall(body):
        out[name] = _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value) if "\\" in value else value
    return out


class MetricsParser:
    """``headwater_reassignment_*``, ``headwater_controller_mutation_remaining_tokens`` and
    ``headwater_self_healing_*`` from one broker's Prometheus text.

    With 10,000 moves a broker's page has 40,000 and more samples of them and changes every second,
    though only in the few lines of the moves that copied: prometheus_client's parser took about
    8 s of CPU a poll for 1,000 moves. The parser keeps the last page's lines and reads only the
    lines that came or went since (a set difference), each with one regular expression; labels are
    parsed once per distinct label text."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._lines: set[str] = set()
        self._parsed: dict[str, tuple[str, Any, float]] = {}  # our lines: (field or _TOKENS, key, value)
        self._fields: dict[tuple[str, int, int, str], dict[str, float]] = {}
        self._moves: dict[tuple[str, int, int, str], MoveMetric] = {}
        self._tokens: dict[tuple[str, str], float] = {}
        # The throttle in force and self-healing: a few samples a broker, by ``model.StatusKey``.
        self.status: dict[StatusKey, float] = {}
        self._keys: dict[str, tuple[str, int, int, str] | None] = {}

    def _key(self, body: str) -> tuple[str, int, int, str] | None:
        if body in self._keys:
            return self._keys[body]
        lb = _labels(body)
        key: tuple[str, int, int, str] | None
        try:
            key = (lb["topic"], int(lb["partition"]), int(lb["replica"]), lb["role"])
        except (KeyError, ValueError):
            key = None
        self._keys[body] = key
        return key

    def _parse(self, line: str) -> tuple[str, Any, float] | None:
        m = _SAMPLE.match(line)
        if m is None:
            return None
        name, body, raw = m.groups()
        try:
            value = float(raw)
        except ValueError:
            return None
        if name == _TOKENS:
            lb = _labels(body)
            return _TOKENS, (lb.get("user", ""), lb.get("client_id", "")), value
        if name not in _MOVE_FIELDS:
            lb = _labels(body)
            other = model.STATUS_LABELS.get(name)
            return _STATUS, (name, lb.get("broker", ""), lb.get(other, "") if other else ""), value
        key = self._key(body)
        return None if key is None else (_MOVE_FIELDS[name], key, value)

    def parse(self, text: str) -> tuple[dict[tuple[str, int, int, str], MoveMetric], dict[tuple[str, str], float]]:
        """The moves' metrics and the buckets' tokens on this page (the parser's own maps: read, not kept)."""
        if text == self._text:
            return self._moves, self._tokens
        lines = set(text.split("\n"))
        gone, came = self._lines - lines, lines - self._lines
        dirty: set[tuple[str, int, int, str]] = set()
        for line in gone:
            parsed = self._parsed.pop(line, None)
            if parsed is None:
                continue
            field_name, key, _value = parsed
            if field_name == _TOKENS:
                self._tokens.pop(key, None)
            elif field_name == _STATUS:
                self.status.pop(key, None)
            else:
                self._fields.get(key, {}).pop(field_name, None)
                dirty.add(key)
        for line in came:
            parsed = self._parse(line)
            if parsed is None:
                continue
            self._parsed[line] = parsed
            field_name, key, value = parsed
            if field_name == _TOKENS:
                self._tokens[key] = value
            elif field_name == _STATUS:
                self.status[key] = value
            else:
                self._fields.setdefault(key, {})[field_name] = value
                dirty.add(key)
        for key in dirty:
            v = self._fields.get(key)
            if v:
                self._moves[key] = MoveMetric(v.get("bytes_to_move", -1), v.get("bytes_moved", 0), v.get("rate", 0),
                                              v.get("eta_s", -1))
            else:
                self._fields.pop(key, None)
                self._moves.pop(key, None)
        if len(self._keys) > 2 * len(self._moves) + 1024:
            self._keys = {}  # moves that ended: forget their label texts
        self._text, self._lines = text, lines
        return self._moves, self._tokens


def parse_metrics(text: str) -> dict[tuple[str, int, int, str], MoveMetric]:
    """``headwater_reassignment_{bytes_to_move,bytes_moved,rate_bytes_per_second,eta_seconds}``."""
    return dict(MetricsParser().parse(text)[0])


def parse_tokens(text: str) -> dict[tuple[str, str], float]:
    """(user, client id) -> ``headwater_controller_mutation_remaining_tokens`` (KIP-599's bucket; only
    the controller has buckets, so the other brokers' endpoints give none)."""
    return dict(MetricsParser().parse(text)[1])


def parse_status(text: str) -> dict[StatusKey, float]:
    """The reassignment throttle in force and self-healing's samples (``model.StatusKey`` -> value)."""
    parser = MetricsParser()
    parser.parse(text)
    return dict(parser.status)


def quota_facts(resp: Any) -> list[QuotaFacts]:
    if resp.error_code:
        raise AdminError(resp.error_message or _error_name(resp.error_code))
    return [QuotaFacts(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                       {v.key: float(v.value) for v in entry.values}) for entry in resp.entries or []]


# --- answers that did not change ----------------------------------------------------------------

# Metadata, DescribeConfigs, DescribeLogDirs, DescribeClientQuotas, ListPartitionReassignments,
# DescribeCluster: the reads of every poll. With 10,000 partitions (moving) kafka-python takes about
# 0.1 s to decode one Metadata or ListPartitionReassignments answer, and from one second to the next
# those answers are mostly the very same bytes.
_CACHED_APIS = frozenset({3, 32, 35, 46, 48, 60})
_INT32 = struct.Struct(">i")
T = TypeVar("T")


class AnswerCache:
    """The last answer to each request (by broker and the request's bytes): the bytes that came
    back and what they decoded to. An answer with the same bytes is the same answer: it is not
    decoded again, and the poller keeps what it built from it (``Poller._memo``)."""

    def __init__(self) -> None:
        # Each key is used by one thread at a time (one per broker), so plain dict operations do.
        self._last: dict[tuple[Any, ...], tuple[bytes, Any]] = {}
        self._segments: dict[tuple[Any, ...], TopicSegments] = {}

    def get(self, key: tuple[Any, ...], body: bytes) -> Any:
        last = self._last.get(key)
        return last[1] if last is not None and last[0] == body else None

    def put(self, key: tuple[Any, ...], body: bytes, resp: Any) -> None:
        self._last[key] = (body, resp)

    def segments(self, key: tuple[Any, ...]) -> TopicSegments:
        """The last answer's topics to this request, for decoding only those that changed."""
        found = self._segments.get(key)
        if found is None:
            found = self._segments[key] = TopicSegments()
        return found


class CachingClient(AdminClient):
    """The admin client, decoding an answer only when its bytes differ from the last answer to the
    same request from the same broker (``AnswerCache``); every other request as the client does."""

    def __init__(self, bootstrap: str, answers: AnswerCache, **kwargs: Any) -> None:
        super().__init__(bootstrap, **kwargs)
        self._answers = answers

    def _roundtrip(self, conn: Any, request: Any, version: int) -> Any:
        if request.API_KEY not in _CACHED_APIS or version != request.API_VERSION:
            return super()._roundtrip(conn, request, version)
        correlation_id = next(self._correlation)
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        try:
            key = (conn.sock.getpeername(), request.API_KEY, version, bytes(request.encode(header=False)))
            conn.sock.sendall(request.encode(header=True, framed=True))
            size = _INT32.unpack(self._recv_exact(conn.sock, 4))[0]
            payload = self._recv_exact(conn.sock, size)
        except OSError as exc:
            raise AdminError(f"request failed: {exc}") from None
        if size < 4 or _INT32.unpack_from(payload)[0] != correlation_id:
            raise AdminError("response out of order")
        body = payload[4:]  # after the correlation id: the same bytes mean the same answer
        resp = self._answers.get(key, body)
        if resp is None:
            response_cls = request.header.get_response_class()
            resp = self._answers.segments(key).decode(response_cls, request.API_KEY, version, payload) \
                if request.API_KEY in TopicSegments.SUPPORTED else None
            if resp is None:
                resp = response_cls.decode(payload, version=version, header=True)
            self._answers.put(key, body, resp)
        return resp


def ongoing_facts(resp: Any, memo: dict[str, tuple[Any, Any]] | None = None) -> dict[TopicPartition, Ongoing]:
    """ListPartitionReassignments, as ``reassign.Cluster.ongoing`` reads it. With ``memo``, as in
    ``metadata_facts``: a topic whose answer is the same object keeps its moves' objects."""
    if resp.error_code:
        raise ToolError(exception_text(resp.error_code, resp.error_message))
    out: dict[TopicPartition, Ongoing] = {}
    kept: dict[str, tuple[Any, Any]] = {}
    for t in resp.topics:
        last = memo.get(t.name) if memo is not None else None
        if last is not None and last[0] is t:
            moves = last[1]
        else:
            moves = {(t.name, p.partition_index): Ongoing(list(p.replicas), list(p.adding_replicas),
                                                          list(p.removing_replicas)) for p in t.partitions}
        out.update(moves)
        kept[t.name] = (t, moves)
    if memo is not None:
        memo.clear()
        memo.update(kept)
    return out


# --- decoding only the topics that changed --------------------------------------------------------

def _compact_string_end(data: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = read_unsigned_varint(data, pos)
    if n == 0:
        return None, pos
    return bytes(data[pos:pos + n - 1]).decode(), pos + n - 1


class TopicSegments:
    """Decodes a Metadata (v12) or ListPartitionReassignments (v0) answer topic by topic: a topic
    whose bytes are those it had in the last answer (the same name, the same bytes up to the end of
    its struct) is the last answer's object, and only the others are decoded, with kafka-python's
    own decoder for one topic. With 10,000 partitions that change a few at a time (moves ending),
    decoding all of them took about 0.1 s a poll for each of the two. Anything unexpected (another
    version, tagged fields in use) gives None: the caller decodes the whole answer as usual."""

    SUPPORTED = {3: 12, 46: 0}  # API key -> the version whose fields before the topics it walks

    def __init__(self) -> None:
        self._last: dict[str, tuple[bytes, Any]] = {}

    def decode(self, response_cls: Any, api_key: int, version: int, payload: bytes) -> Any:
        if self.SUPPORTED.get(api_key) != version:
            return None
        try:
            return self._decode(response_cls, api_key, version, payload)
        except Exception:  # a shape this walker does not know: the whole decode is the answer
            log.debug("topic-by-topic decode failed; decoding the whole answer", exc_info=True)
            return None

    def _decode(self, response_cls: Any, api_key: int, version: int, payload: bytes) -> Any:
        pos = 4  # correlation id
        tags, pos = read_unsigned_varint(payload, pos)  # response header v1's tagged fields
        if tags:
            return None
        pos += 4  # throttle_time_ms
        if api_key == 46:
            pos += 2  # error_code
            _message, pos = _compact_string_end(payload, pos)
        else:
            brokers_field = next(f for f in response_cls._struct.untagged_fields(version) if f.name == "brokers")
            decode_broker = brokers_field.array_of.compiled_decode_from(version, compact=True, tagged=True)
            n, pos = read_unsigned_varint(payload, pos)
            for _ in range(max(0, n - 1)):
                _broker, pos = decode_broker(memoryview(payload), pos)
            _cluster_id, pos = _compact_string_end(payload, pos)
            pos += 4  # controller_id
        topics_at = pos
        topics_field = next(f for f in response_cls._struct.untagged_fields(version) if f.name == "topics")
        decode_topic = topics_field.array_of.compiled_decode_from(version, compact=True, tagged=True)
        n, pos = read_unsigned_varint(payload, pos)
        if n == 0:
            return None  # a null array: nothing to split
        view = memoryview(payload)
        topics: list[Any] = []
        segments: dict[str, tuple[bytes, Any]] = {}
        for _ in range(n - 1):
            name, _end = _compact_string_end(payload, pos + (2 if api_key == 3 else 0))  # Metadata: error_code first
            last = self._last.get(name or "")
            if last is not None and payload.startswith(last[0], pos):
                topic, end = last[1], pos + len(last[0])
            else:
                topic, end = decode_topic(view, pos)
            segments[name or ""] = (payload[pos:end], topic)
            topics.append(topic)
            pos = end
        # The rest of the answer (header, the fields before the topics, the tags after them), with an
        # empty topics array, through the usual decoder; then the topics.
        rest = payload[:topics_at] + b"\x01" + payload[pos:]
        resp = response_cls.decode(rest, version=version, header=True)
        if resp.topics != []:
            return None
        resp.topics = topics
        self._last = segments
        return resp


class SnapshotJson:
    """The snapshot as JSON text, exactly ``json.dumps(snapshot)``, made of the texts of its parts:
    a move row, a topic or the health lists that the page models carried over from the last poll
    (the same object: ``model.ModelCache``) keeps its text. With 10,000 moves the snapshot is 5.5 MB
    and ``json.dumps`` took 0.07 s of CPU for every update of every open page."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the event loop and Starlette's worker threads both ask
        self._of: object = None
        self._text = ""
        self._texts: dict[int, tuple[object, str]] = {}  # by id, with the object itself (so the id stays its)

    def _part(self, value: object, texts: dict[int, tuple[object, str]]) -> str:
        hit = self._texts.get(id(value))
        text = hit[1] if hit is not None and hit[0] is value else json.dumps(value)
        texts[id(value)] = (value, text)
        return text

    def _rows(self, rows: list[Any], texts: dict[int, tuple[object, str]]) -> str:
        return "[" + ", ".join(self._part(r, texts) for r in rows) + "]"

    def text(self, snapshot: dict[str, Any]) -> str:
        with self._lock:
            if snapshot is self._of:
                return self._text
            texts: dict[int, tuple[object, str]] = {}
            items = []
            for key, value in snapshot.items():
                if key == "topics" and isinstance(value, list):
                    encoded = self._rows(value, texts)
                elif key == "health" and isinstance(value, dict):
                    encoded = self._part(value, texts)
                elif key == "reassignments" and isinstance(value, dict):
                    encoded = "{" + ", ".join(
                        f"{json.dumps(k)}: {self._rows(v, texts) if k == 'moves' and isinstance(v, list) else json.dumps(v)}"
                        for k, v in value.items()) + "}"
                else:
                    encoded = json.dumps(value)
                items.append(f"{json.dumps(key)}: {encoded}")
            self._text, self._of, self._texts = "{" + ", ".join(items) + "}", snapshot, texts
            return self._text


# --- the poller ---------------------------------------------------------------------------------


class Poller:
    def __init__(self, bootstrap: str, security: ClientSecurity, client_id: str = CLIENT_ID,
                 metrics_urls: Iterable[str] = (), timeout_s: float = 5.0, interval_s: float = 1.0,
                 read_only: bool = False, spark_master: str = DEFAULT_SPARK_MASTER) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.client_id = client_id
        self.metrics_urls = list(metrics_urls)
        self._metrics_parsers = {url: MetricsParser() for url in self.metrics_urls}  # one per endpoint: its cache
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.read_only = read_only
        self.rates = model.RateTracker()
        self._answers = AnswerCache()  # answers that come back byte for byte are not decoded again
        self._memos: dict[object, tuple[Any, Any]] = {}  # what was built from those answers
        self._topic_memos: dict[str, dict[str, tuple[Any, Any]]] = {}  # and from their topics
        self._model = model.ModelCache()  # page rows whose inputs did not change
        self._json = SnapshotJson()
        self.snapshot: dict[str, Any] = {"taken_at": None, "errors": ["waiting for the first answer"],
                                         "brokers": [], "topics": [], "health": {}, "reassignments": {}}
        self.version = 0
        self._known: dict[int, str] = {}  # broker addresses seen: a bootstrap broker that is down is not needed
        self._in_flight: list[dict[str, Any]] = []  # the last poll's moves
        self._in_flight_of: object = None  # and the ongoing map they came from
        self._completed: list[dict[str, Any]] = []
        self.facts: Facts | None = None  # the last poll's answers: what the Plan page plans on
        self.plans = PlanStore()
        self.spark = SparkPlanner(spark_master)  # no session until a plan needs Spark
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
        self.spark.stop()

    def _run(self) -> None:
        cycle_cpu = 0.0  # the process's CPU over the last poll and the wait after it (event streams too)
        while not self._stop.is_set():
            started, cpu_at_start = time.monotonic(), time.process_time()
            try:
                self.poll_once()
            except Exception as exc:  # the page must keep working whatever one poll hits
                log.exception("console poll failed")
                self.snapshot = {**self.snapshot, "errors": [f"poll failed: {exc}"]}
                self.version += 1
            spent = max(cycle_cpu, time.process_time() - cpu_at_start)
            self._stop.wait(max(0.0, max(self.interval_s, spent / POLL_CPU_SHARE) - (time.monotonic() - started)))
            cycle_cpu = time.process_time() - cpu_at_start

    def snapshot_json(self) -> str:
        """``json.dumps(self.snapshot)``, reusing the text of the rows that did not change (``SnapshotJson``)."""
        return self._json.text(self.snapshot)

    def client(self, bootstrap: str | None = None) -> AdminClient:
        return CachingClient(bootstrap or self._bootstrap_list(), self._answers, client_id=self.client_id,
                             timeout_s=self.timeout_s, security=self.security)

    def _memo(self, kind: object, resp: Any, build: Callable[[Any], T]) -> T:
        """``build(resp)``, or what it gave last time for this very answer (``AnswerCache``)."""
        last = self._memos.get(kind)
        if last is not None and last[0] is resp:
            value: T = last[1]
            return value
        value = build(resp)
        self._memos[kind] = (resp, value)
        return value

    def _bootstrap_list(self) -> str:
        given = [a.strip() for a in self.bootstrap.split(",") if a.strip()]
        addresses = [*given, *sorted(set(self._known.values()) - set(given))]
        # Brokers that did not answer the last poll go last: a stopped one accepts the connection and
        # never answers, so asking it first would cost every poll's Metadata the whole timeout.
        silent = {self._known.get(b) for b in (self.facts.broker_errors if self.facts is not None else {})}
        return ",".join(sorted(addresses, key=lambda a: a in silent))  # stable: the given order otherwise

    # --- one poll --------------------------------------------------------------------------------

    def gather(self) -> Facts:
        facts = Facts(taken_at=time.time())
        with self.client() as client:
            try:
                meta = client.refresh()
            except AdminError as exc:
                facts.errors.append(f"Metadata: {exc}")
                return facts

            def from_metadata(resp: Any) -> tuple[Any, ...]:
                f = Facts(taken_at=facts.taken_at)
                metadata_facts(resp, f, self._topic_memos.setdefault("metadata", {}))
                return f.cluster_id, f.controller_id, f.brokers, f.topics, f.errors

            # The same topics object while the answer is the same: the page models reuse their rows.
            facts.cluster_id, facts.controller_id, facts.brokers, facts.topics, errors = \
                self._memo("metadata", meta, from_metadata)
            facts.errors.extend(errors)
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
                listed = client.send_to_controller(ListPartitionReassignmentsRequest,
                                                   dict(timeout_ms=30000, topics=None), lambda r: [r.error_code])
                facts.ongoing = self._memo("ongoing", listed,
                                           lambda r: ongoing_facts(r, self._topic_memos.setdefault("ongoing", {})))
            except (AdminError, ToolError) as exc:
                facts.errors.append(f"ListPartitionReassignments: {exc}")
            R = DescribeConfigsRequest.DescribeConfigsResource
            if facts.topics:
                try:
                    resp = client.send(DescribeConfigsRequest, dict(
                        resources=[R(resource_type=RESOURCE_TOPIC, resource_name=t, configuration_keys=TOPIC_KEYS)
                                   for t in sorted(facts.topics)],
                        include_synonyms=False, include_documentation=False), node_id=node)
                    facts.topic_configs = self._memo("topic-configs", resp, config_values)
                except AdminError as exc:
                    facts.errors.append(f"DescribeConfigs (topics): {exc}")
            try:
                # The cluster-wide default entity (resource name ""): self-healing's configs as set.
                resp = client.send(DescribeConfigsRequest, dict(
                    resources=[R(resource_type=RESOURCE_BROKER, resource_name="",
                                 configuration_keys=list(model.HEALING_CONFIGS))],
                    include_synonyms=False, include_documentation=False), node_id=node)
                facts.healing_configs = self._memo("default-configs", resp, default_config_values)
            except AdminError as exc:
                facts.healing_config_error = f"DescribeConfigs (<default> broker): {exc}"
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
            facts.tokens, facts.status = {}, {}
        for scraped in metrics:
            found, tokens, status, error = scraped.result()
            facts.move_metrics.update(found)
            assert facts.tokens is not None and facts.status is not None
            facts.tokens.update(tokens)
            facts.status.update(status)  # each sample names its broker: the endpoints' samples do not collide
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
                # At most v3: v4 adds the disk's total and usable bytes, which the console does not
                # show and which change with any write to the disk, so no two answers were the same.
                dirs = self._memo(("log-dirs", bf.node_id),
                                  client.send(DescribeLogDirsRequest, dict(topics=None), max_version=3), log_dir_facts)
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
                                         dict[StatusKey, float], str | None]:
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                text = resp.read().decode()
            parser = self._metrics_parsers[url]
            moves, tokens = parser.parse(text)
            return moves, tokens, parser.status, None
        except Exception as exc:  # a metrics endpoint down loses rates, ETAs, tokens and its broker's status
            return {}, {}, {}, f"metrics {url}: {exc}"

    def poll_once(self) -> None:
        facts = self.gather()
        cache = self._model
        sizes = cache.sizes_for(facts)
        self.rates.observe_moves(time.monotonic(), facts.ongoing or {}, sizes)
        moves = model.moves_model(facts, self.rates, sizes, cache)
        self._track(facts, moves)
        self.facts = facts
        self.snapshot = {
            "taken_at": facts.taken_at,
            "cluster_id": facts.cluster_id,
            "controller": facts.controller_id,
            "errors": facts.errors,
            "read_only": self.read_only,
            "metrics": bool(self.metrics_urls),
            "brokers": model.brokers_model(facts, cache),
            "health": model.health(facts, cache),
            "topics": model.topics_model(facts, sizes, cache),
            "reassignments": {
                "available": facts.ongoing is not None,
                "moves": moves,
                "overall": model.overall(moves),
                "throttle": {**model.throttle_model(facts), "in_force": model.throttles_in_force(facts)},
                "completed": list(self._completed),
            },
            "heatmap": model.heatmap_model(facts, sizes, cache),
            "quotas": model.quotas_model(facts.quotas, facts.tokens, facts.quota_error),
            "self_healing": model.self_healing_model(facts),
            "plan": {"execution": self._execution_model(facts)},
        }
        self.version += 1

    def _track(self, facts: Facts, moves: list[dict[str, Any]]) -> None:
        """Moves that left the controller's list since the last poll become "completed since"."""
        if facts.ongoing is None or (not facts.topics and facts.errors):
            return  # no answer: nothing is known to have ended
        now = facts.taken_at
        if facts.ongoing is not self._in_flight_of:  # the same map (the same answer) has the same moves
            for m in self._in_flight:
                if (m["topic"], m["partition"]) not in facts.ongoing:
                    self._completed.append({**m, "ended_at": now, "outcome": "ending"})
        self._in_flight, self._in_flight_of = moves, facts.ongoing
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

    def set_self_healing(self, enable: bool) -> list[str]:
        """``headwater configs --entity-type brokers --entity-default --alter --add-config
        self.healing.enable=true|false``: IncrementalAlterConfigs (SET) of the cluster-wide default
        broker entity, sent to a bootstrap broker as the tool sends it."""
        value = "true" if enable else "false"
        A = IncrementalAlterConfigsRequest.AlterConfigsResource
        with self.client() as client:
            try:
                resp = client.send(IncrementalAlterConfigsRequest, dict(resources=[A(
                    resource_type=RESOURCE_BROKER, resource_name="",
                    configs=[A.AlterableConfig(name=model.HEALING_ENABLE, config_operation=OP_SET, value=value)])],
                    validate_only=False))
            except AdminError as exc:
                raise WriteError(str(exc)) from None
        result = resp.responses[0]
        if result.error_code:
            raise WriteError(result.error_message or _error_name(result.error_code))
        return [f"{model.HEALING_ENABLE}={value} on the cluster default (the <default> broker entity)"]

    # --- the Plan page ---------------------------------------------------------------------------------

    def _execution_model(self, facts: Facts) -> dict[str, Any] | None:
        from headwater.console.plan import execution_model

        plan, started = self._executed if self._executed else (None, None)
        return execution_model(plan, started, facts, self._exec_log, self._elected)

    def make_plan(self, goal: object, brokers: object, throttle: float | None = None,
                  engine: object = "auto") -> dict[str, Any]:
        """Plan on the last poll's answers (in-process or Spark engine); raises PlannerError."""
        from headwater.console.plan import make_plan, parse_goal
        from headwater.planner.errors import PlannerError

        facts = self.facts
        if facts is None:
            raise PlannerError("the console has not read the cluster yet")
        g, ids = parse_goal(goal, brokers)
        plan = make_plan(facts, g, ids, throttle, engine, self.spark)
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
