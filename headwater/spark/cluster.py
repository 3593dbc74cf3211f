"""Driver-side questions to the cluster: which partitions exist, and where their logs begin and end.

Only the Spark driver asks these (when planning a batch or a micro-batch), so one admin client
per reader is enough. Requests that fail with a retriable error (a leader moving during a
reassignment, a broker restarting) are asked again a bounded number of times; what still fails
becomes a ``TopicSourceError`` that says which broker, topic or partition is the problem.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from headwater.spark.errors import TopicSourceError
from headwater.spark.options import EARLIEST, LATEST, OffsetBound, TopicPartition

log = logging.getLogger("headwater.spark")

_T = TypeVar("_T")

# Topics whose names start with "__" are the cluster's own (offsets, transactions); a pattern
# subscription never picks them up, as in the Java consumer's default.
_INTERNAL_PREFIX = "__"


def client_logger() -> logging.Logger:
    """Where librdkafka's own log lines go (instead of raw stderr)."""
    return logging.getLogger("headwater.spark.client")


def isolation_is_committed(config: Mapping[str, str]) -> bool:
    return config.get("isolation.level", "read_uncommitted") == "read_committed"


class Cluster:
    """Metadata and offsets, asked through librdkafka's admin client."""

    def __init__(
        self,
        config: Mapping[str, str],
        *,
        timeout_ms: int,
        retries: int,
        retry_interval_ms: int,
    ) -> None:
        self._bootstrap = config["bootstrap.servers"]
        self._timeout_s = timeout_ms / 1000
        self._retries = retries
        self._retry_interval_s = retry_interval_ms / 1000
        self._committed = isolation_is_committed(config)
        admin_config: dict[str, Any] = {
            k: v
            for k, v in config.items()
            if k not in ("isolation.level", "fetch.max.bytes", "max.partition.fetch.bytes")
        }
        admin_config["logger"] = client_logger()
        self._admin = AdminClient(admin_config)

    def _retry(self, what: str, call: Callable[[], _T]) -> _T:
        last: Exception | None = None
        for attempt in range(self._retries):
            try:
                return call()
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                retriable = (
                    not isinstance(err, KafkaError)
                    or err.retriable()
                    or err.code()
                    in (
                        KafkaError._TRANSPORT,
                        KafkaError._TIMED_OUT,
                        KafkaError._ALL_BROKERS_DOWN,
                        KafkaError.NOT_LEADER_FOR_PARTITION,
                        KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                    )
                )
                last = exc
                if not retriable:
                    break
                log.warning("%s failed (attempt %d of %d): %s", what, attempt + 1, self._retries, exc)
                if attempt + 1 < self._retries:
                    time.sleep(self._retry_interval_s)
        raise TopicSourceError(
            f"{what} failed against kafka.bootstrap.servers={self._bootstrap} after "
            f"{self._retries} attempt(s) of {self._timeout_s:g} s: {last}"
        )

    def topics(self) -> dict[str, list[int]]:
        """Every topic in the cluster with its partition numbers, sorted.

        Always asks for all topics: naming one topic in a Metadata request lets a broker with
        auto.create.topics.enable create it, and a read must never create what it reads.
        """

        def call() -> dict[str, list[int]]:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
            result: dict[str, list[int]] = {}
            for name, topic in metadata.topics.items():
                if topic.error is not None and topic.error.code() != KafkaError.NO_ERROR:
                    if topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue
                    raise KafkaException(topic.error)
                result[name] = sorted(topic.partitions)
            return result

        return self._retry("listing topics", call)

    def resolve(
        self,
        *,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        assigned: Iterable[TopicPartition] = (),
        missing_ok: bool = False,
    ) -> list[TopicPartition]:
        """The partitions a subscription covers right now.

        A named topic (or assigned partition) that does not exist is an error, unless
        ``missing_ok``: then it is left out, for a stream to decide what its absence means.
        """
        existing = self.topics()
        if pattern is not None:
            regex = re.compile(pattern)
            return sorted(
                TopicPartition(name, p)
                for name, partitions in existing.items()
                if regex.fullmatch(name) and not name.startswith(_INTERNAL_PREFIX)
                for p in partitions
            )
        assigned = list(assigned)
        if assigned:
            if missing_ok:
                return sorted(tp for tp in assigned if tp.partition in existing.get(tp.topic, ()))
            for tp in assigned:
                if tp.topic not in existing:
                    raise TopicSourceError(f"topic {tp.topic!r} does not exist (option assign)")
                if tp.partition not in existing[tp.topic]:
                    raise TopicSourceError(
                        f"partition {tp.partition} of topic {tp.topic!r} does not exist (the topic has "
                        f"partitions {existing[tp.topic]}; option assign)"
                    )
            return sorted(assigned)
        result: list[TopicPartition] = []
        for name in topics:
            if name not in existing and missing_ok:
                continue
            if name not in existing:
                raise TopicSourceError(
                    f"topic {name!r} does not exist on kafka.bootstrap.servers={self._bootstrap} "
                    "(option subscribe)"
                )
            result.extend(TopicPartition(name, p) for p in existing[name])
        return sorted(result)

    def _list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec], what: str
    ) -> dict[TopicPartition, tuple[int, int]]:
        if not specs:
            return {}

        def call() -> dict[TopicPartition, tuple[int, int]]:
            request = {ClientTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}
            kwargs: dict[str, object] = {"request_timeout": self._timeout_s}
            if self._committed:
                from confluent_kafka import IsolationLevel

                kwargs["isolation_level"] = IsolationLevel.READ_COMMITTED
            futures = self._admin.list_offsets(request, **kwargs)
            result: dict[TopicPartition, tuple[int, int]] = {}
            for client_tp, future in futures.items():
                info = future.result()
                result[TopicPartition(client_tp.topic, client_tp.partition)] = (info.offset, info.timestamp)
            return result

        return self._retry(what, call)

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The first offset still in each partition's log (the log start offset)."""
        spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        found = self._list_offsets({tp: spec for tp in partitions}, "listing earliest offsets")
        return {tp: offset for tp, (offset, _) in found.items()}

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset after the last readable record (high watermark, or LSO for read_committed)."""
        spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        found = self._list_offsets({tp: spec for tp in partitions}, "listing latest offsets")
        return {tp: offset for tp, (offset, _) in found.items()}

    def for_timestamps(self, timestamps_ms: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is at or after the time; None where there is none."""
        found = self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps_ms.items()},
            "listing offsets by timestamp",
        )
        return {tp: (offset if offset >= 0 else None) for tp, (offset, _) in found.items()}


def resolve_bound(
    cluster: Cluster,
    bound: OffsetBound,
    partitions: Iterable[TopicPartition],
    *,
    name: str,
    missing_timestamp_means_latest: bool,
) -> dict[TopicPartition, int]:
    """Concrete offsets for one end of a read, for the given partitions.

    ``name`` is the option the bound came from, used in error messages. A timestamp that no
    record reaches means "after the last record" when ``missing_timestamp_means_latest``; otherwise
    it is an error (``startingOffsetsByTimestampStrategy=error``, Spark's default).
    """
    partitions = sorted(partitions)
    if bound.strict:
        named = bound.timestamps_ms if bound.timestamps_ms else bound.offsets
        unnamed = [tp for tp in partitions if tp not in named]
        if unnamed:
            listed = ", ".join(f"{tp.topic}-{tp.partition}" for tp in unnamed)
            raise TopicSourceError(f"option {name} must give every partition read; missing: {listed}")
    requested: dict[TopicPartition, int] = {}
    if bound.timestamp_ms is not None or bound.timestamps_ms:
        times = {
            tp: bound.timestamp_ms if bound.timestamp_ms is not None else bound.timestamps_ms[tp]
            for tp in partitions
        }
        found = cluster.for_timestamps(times)
        for tp in partitions:
            offset = found.get(tp)
            if offset is None:
                if not missing_timestamp_means_latest:
                    raise TopicSourceError(
                        f"{tp.topic}-{tp.partition} has no record at or after timestamp {times[tp]} ms "
                        f"(option {name}); set startingOffsetsByTimestampStrategy=latest to start after its last record"
                    )
                requested[tp] = LATEST
            else:
                requested[tp] = offset
    else:
        for tp in partitions:
            requested[tp] = bound.offsets.get(tp, bound.default)
    earliest_needed = [tp for tp, offset in requested.items() if offset == EARLIEST]
    latest_needed = [tp for tp, offset in requested.items() if offset == LATEST]
    requested.update(cluster.earliest(earliest_needed))
    requested.update(cluster.latest(latest_needed))
    return requested
