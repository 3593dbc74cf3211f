"""Every topic config and broker config of Kafka 3.9, plus those Kafka 4.x adds, as one table of data.

Each row carries what Kafka's ``ConfigDef`` knows of a config (type, default, validator, importance,
whether it is internal), where a broker may change it at run time (Kafka's ``DynamicBrokerConfig``),
the broker synonyms a topic config falls back to (``ServerTopicConfigSynonyms``), and a one-line
description of our own. The functions beside the table check a value the way ``ConfigDef.parse``
does (with Kafka's messages, which clients show) and compute what DescribeConfigs v4 reports
(``ConfigHelper.createTopicConfigEntry`` / ``createBrokerConfigEntry``). They do no I/O.

Sources, all on the mirror of apache/kafka: branch 3.9 (``AbstractKafkaConfig.CONFIG_DEF``,
``LogConfig``, ``QuotaConfigs.brokerQuotaConfigs``, ``DynamicBrokerConfig.scala``, ``ConfigHelper.scala``,
``ZkAdminManager.scala``), and trunk as of 2024-10-25 for the 4.0 additions; ``cordoned.log.dirs``
comes from KIP-1066 (Kafka 4.3), which the mirror predates.

The rows were extracted from Kafka's own ``ConfigDef`` objects; the Range bounds and default strings are
Java's ``toString`` of them, which is what DescribeConfigs and the error messages print.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from headwater.metadata.config_types import ConfigSource, ConfigType
from headwater.protocol.errors import ErrorCode, KafkaError


class Scope(Enum):
    """Where a config lives and, for a broker config, Kafka's "Dynamic Update Mode"."""

    TOPIC = "topic"
    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Unit(Enum):
    """How a broker synonym's value turns into the topic config's milliseconds (``ConfigSynonym``)."""

    MS = 1
    MINUTES = 60_000
    HOURS = 3_600_000


@dataclass(frozen=True, slots=True)
class Range:
    """``ConfigDef.Range``: inclusive bounds, either may be open."""

    low: int | float | None = None
    high: int | float | None = None


@dataclass(frozen=True, slots=True)
class OneOf:
    """``ValidString.in`` (or ``ValidList.in`` on a LIST config: each element), ``CaseInsensitiveValidString``."""

    values: tuple[str, ...]
    case_insensitive: bool = False


class Special(Enum):
    """Kafka's validators that are neither a range nor a list of values."""

    NON_EMPTY = "ConfigDef.NonEmptyString"
    NON_NULL = "ConfigDef.NonNullValidator"
    POOL_SIZE = "RemoteLogManagerConfig: -1 or at least 1"
    GZIP_LEVEL = "CompressionType.GZIP.levelValidator"
    METADATA_VERSION = "MetadataVersionValidator"
    QUORUM_VOTERS = "QuorumConfig.ControllerQuorumVotersValidator"
    QUORUM_BOOTSTRAP = "QuorumConfig.ControllerQuorumBootstrapServersValidator"
    THROTTLED_REPLICAS = "ThrottledReplicaListValidator"


Validator = Range | OneOf | Special


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    name: str
    type: ConfigType
    default: str | None  # as DescribeConfigs shows it; None for a null default
    validator: Validator | None
    importance: Importance
    scope: Scope
    doc: str
    synonyms: tuple[tuple[str, Unit], ...] = ()  # topic configs: broker configs to fall back to, in order
    internal: bool = False  # ConfigDef.defineInternal: left out of DescribeConfigs unless set
    quota: bool = False  # dynamic-only broker quota (DynamicConfig.Broker), not a KafkaConfig key
    since: str = "3.9"  # "4.0": on trunk of 2024-10-25 (the 4.0 line) and not in 3.9; "4.3": KIP-1066

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def dynamic(self) -> bool:
        return self.scope in (Scope.PER_BROKER, Scope.CLUSTER_WIDE)


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class Entry:
    """One config of a DescribeConfigs v4 result."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[Synonym, ...]
    type: ConfigType
    documentation: str | None


BOOL, STR, INT, SHORT, LONG = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG
DBL, LIST, CLS, PWD = ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
RO, PB, CW = Scope.READ_ONLY, Scope.PER_BROKER, Scope.CLUSTER_WIDE
MINUTES, HOURS = Unit.MINUTES, Unit.HOURS
NON_EMPTY, NON_NULL, POOL_SIZE, GZIP_LEVEL = Special.NON_EMPTY, Special.NON_NULL, Special.POOL_SIZE, Special.GZIP_LEVEL
METADATA_VERSION, QUORUM_VOTERS, QUORUM_BOOTSTRAP = Special.METADATA_VERSION, Special.QUORUM_VOTERS, Special.QUORUM_BOOTSTRAP
THROTTLED_REPLICAS = Special.THROTTLED_REPLICAS


def _at(low: float) -> Range:
    return Range(low, None)


def _between(low: float, high: float) -> Range:
    return Range(low, high)


def _in(*values: str) -> OneOf:
    return OneOf(values)


def _in_ci(*values: str) -> OneOf:
    return OneOf(values, case_insensitive=True)


def _t(name: str, type_: ConfigType, default: str | None, validator: Validator | None, importance: Importance,
       doc: str, *synonyms: str | tuple[str, Unit]) -> ConfigSpec:
    syn = tuple((s, Unit.MS) if isinstance(s, str) else s for s in synonyms)
    return ConfigSpec(name, type_, default, validator, importance, Scope.TOPIC, doc, syn)


def _b(scope: Scope, name: str, type_: ConfigType, default: str | None, validator: Validator | None,
       importance: Importance, doc: str, *, internal: bool = False, quota: bool = False, since: str = "3.9") -> ConfigSpec:
    return ConfigSpec(name, type_, default, validator, importance, scope, doc, internal=internal, quota=quota, since=since)


# Broker scope comes from DynamicBrokerConfig.scala (3.9): a config is dynamic when it is in AllDynamicConfigs
# (SslConfigs.RECONFIGURABLE_CONFIGS, LogCleaner.ReconfigurableConfigs, DynamicLogConfig.ReconfigurableConfigs =
# the first broker synonym of each topic config but message.format.version's, DynamicThreadPool, metric.reporters,
# DynamicListenerConfig, SocketServer.ReconfigurableConfigs, DynamicProducerStateManagerConfig,
# DynamicRemoteLogConfig), and per-broker when in PerBrokerConfigs = (SSL reconfigurables ++ DynamicListenerConfig)
# minus ClusterLevelListenerConfigs; every other KafkaConfig key is read-only (DynamicConfig.Broker.nonDynamicProps).
CATALOG: tuple[ConfigSpec, ...] = (
    # --- topic configs: LogConfig.CONFIG on 3.9, broker synonyms from ServerTopicConfigSynonyms ---
    _t("segment.bytes", INT, "1073741824", _at(14), M, "Size in bytes at which the partition's active log segment is closed and a new one started.", "log.segment.bytes"),
    _t("segment.ms", LONG, "604800000", _at(1), M, "Time after which the active segment is rolled even when it is not full, so old data can be removed or compacted.", "log.roll.ms", ("log.roll.hours", HOURS)),
    _t("segment.jitter.ms", LONG, "0", _at(0), M, "Upper bound of a random amount taken off the roll time so that many segments do not roll at once.", "log.roll.jitter.ms", ("log.roll.jitter.hours", HOURS)),
    _t("segment.index.bytes", INT, "10485760", _at(4), M, "Size in bytes preallocated for each segment's offset index file.", "log.index.size.max.bytes"),
    _t("flush.messages", LONG, "9223372036854775807", _at(1), M, "Number of messages written to a partition between forced fsyncs; the default leaves flushing to the OS.", "log.flush.interval.messages"),
    _t("flush.ms", LONG, "9223372036854775807", _at(0), M, "Time in ms between forced fsyncs of a partition's log; the default leaves flushing to the OS.", "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _t("retention.bytes", LONG, "-1", None, M, "Largest size a partition may reach before the oldest segments are deleted under the delete policy; -1 means no size limit.", "log.retention.bytes"),
    _t("retention.ms", LONG, "604800000", _at(-1), M, "How long records are kept before their segments are deleted under the delete policy; -1 keeps them forever.", "log.retention.ms", ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS)),
    _t("max.message.bytes", INT, "1048588", _at(0), M, "Largest record batch, after compression, that the topic accepts.", "message.max.bytes"),
    _t("index.interval.bytes", INT, "4096", _at(0), M, "Number of log bytes between two entries of the offset index.", "log.index.interval.bytes"),
    _t("delete.retention.ms", LONG, "86400000", _at(0), M, "How long tombstones stay in a compacted topic before the cleaner may drop them.", "log.cleaner.delete.retention.ms"),
    _t("min.compaction.lag.ms", LONG, "0", _at(0), M, "Shortest time a record stays uncompacted in a compacted topic.", "log.cleaner.min.compaction.lag.ms"),
    _t("max.compaction.lag.ms", LONG, "9223372036854775807", _at(1), M, "Longest time a record may wait before its segment becomes eligible for compaction.", "log.cleaner.max.compaction.lag.ms"),
    _t("file.delete.delay.ms", LONG, "60000", _at(0), M, "Delay before a segment file marked for deletion is removed from disk.", "log.segment.delete.delay.ms"),
    _t("min.cleanable.dirty.ratio", DBL, "0.5", _between(0, 1), M, "Share of uncleaned log, from 0 to 1, that makes a compacted partition eligible for cleaning.", "log.cleaner.min.cleanable.ratio"),
    _t("cleanup.policy", LIST, "delete", _in("compact", "delete"), M, "What happens to old segments: delete them, compact them by key, or both.", "log.cleanup.policy"),
    _t("unclean.leader.election.enable", BOOL, "false", None, M, "Whether a replica outside the ISR may become leader as a last resort, at the risk of losing records.", "unclean.leader.election.enable"),
    _t("min.insync.replicas", INT, "1", _at(1), M, "Fewest in-sync replicas that must have a write before an acks=all produce succeeds.", "min.insync.replicas"),
    _t("compression.type", STR, "producer", _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), M, "Compression the topic stores batches with; producer keeps whatever codec the producer used.", "compression.type"),
    _t("compression.gzip.level", INT, "-1", GZIP_LEVEL, M, "Compression level used when the topic's compression type is gzip.", "compression.gzip.level"),
    _t("compression.lz4.level", INT, "9", _between(1, 17), M, "Compression level used when the topic's compression type is lz4.", "compression.lz4.level"),
    _t("compression.zstd.level", INT, "3", _between(-131072, 22), M, "Compression level used when the topic's compression type is zstd.", "compression.zstd.level"),
    _t("preallocate", BOOL, "false", None, M, "Whether a new segment file is allocated at full size on disk when it is created.", "log.preallocate"),
    _t("message.format.version", STR, "3.0-IV1", METADATA_VERSION, M, "Deprecated record format version; ignored once the inter-broker protocol is 3.0 or later.", "log.message.format.version"),
    _t("message.timestamp.type", STR, "CreateTime", _in("CreateTime", "LogAppendTime"), M, "Whether record timestamps come from the producer (CreateTime) or are set by the broker on append (LogAppendTime).", "log.message.timestamp.type"),
    _t("message.timestamp.difference.max.ms", LONG, "9223372036854775807", _at(0), M, "Deprecated largest allowed gap between a record's CreateTime timestamp and the broker's clock.", "log.message.timestamp.difference.max.ms"),
    _t("message.timestamp.before.max.ms", LONG, "9223372036854775807", _at(0), M, "How far a CreateTime timestamp may lie in the past, relative to the broker's clock, before the record is refused.", "log.message.timestamp.before.max.ms"),
    _t("message.timestamp.after.max.ms", LONG, "9223372036854775807", _at(0), M, "How far a CreateTime timestamp may lie in the future, relative to the broker's clock, before the record is refused.", "log.message.timestamp.after.max.ms"),
    _t("leader.replication.throttled.replicas", LIST, "", THROTTLED_REPLICAS, M, "Replicas, as partition:broker pairs or *, whose replication traffic is throttled on the leader side."),
    _t("follower.replication.throttled.replicas", LIST, "", THROTTLED_REPLICAS, M, "Replicas, as partition:broker pairs or *, whose replication traffic is throttled on the follower side."),
    _t("message.downconversion.enable", BOOL, "true", None, L, "Whether the broker converts records to an older format for consumers that fetch with an old version.", "log.message.downconversion.enable"),
    _t("remote.storage.enable", BOOL, "false", None, M, "Whether the topic's segments are copied to tiered (remote) storage."),
    _t("local.retention.ms", LONG, "-2", _at(-2), M, "How long segments stay on local disk when tiered storage is on; -2 means use retention.ms.", "log.local.retention.ms"),
    _t("local.retention.bytes", LONG, "-2", _at(-2), M, "Largest local size of a partition when tiered storage is on; -2 means use retention.bytes.", "log.local.retention.bytes"),
    _t("remote.log.copy.disable", BOOL, "false", None, M, "Stops copying new segments to remote storage, leaving the remote data read-only."),
    _t("remote.log.delete.on.disable", BOOL, "false", None, M, "Allows turning tiered storage off for the topic, deleting its remote data."),
    # --- broker configs: AbstractKafkaConfig.CONFIG_DEF on 3.9 (KafkaConfig.configDef), in its order ---
    _b(RO, "remote.log.storage.system.enable", BOOL, "false", None, M, "Turns on the broker's tiered storage machinery."),
    _b(RO, "remote.log.storage.manager.impl.prefix", STR, "rsm.config.", NON_EMPTY, M, "Prefix of the properties handed to the remote storage manager plugin."),
    _b(RO, "remote.log.metadata.manager.impl.prefix", STR, "rlmm.config.", NON_EMPTY, M, "Prefix of the properties handed to the remote log metadata manager plugin."),
    _b(RO, "remote.log.storage.manager.class.name", STR, None, NON_EMPTY, M, "Class name of the plugin that stores segments remotely."),
    _b(RO, "remote.log.storage.manager.class.path", STR, None, None, M, "Extra class path the remote storage manager plugin is loaded from."),
    _b(RO, "remote.log.metadata.manager.class.name", STR, "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", NON_EMPTY, M, "Class name of the plugin that keeps remote segment metadata."),
    _b(RO, "remote.log.metadata.manager.class.path", STR, None, None, M, "Extra class path the remote log metadata manager plugin is loaded from."),
    _b(RO, "remote.log.metadata.manager.listener.name", STR, None, NON_EMPTY, M, "Local listener the remote log metadata manager connects through."),
    _b(RO, "remote.log.metadata.custom.metadata.max.bytes", INT, "128", _at(0), L, "Largest custom metadata, in bytes, a remote storage plugin may attach to a segment."),
    _b(CW, "remote.log.index.file.cache.total.size.bytes", LONG, "1073741824", _at(1), L, "Local disk space for caching index files fetched from remote storage."),
    _b(RO, "remote.log.manager.thread.pool.size", INT, "10", _at(1), M, "Deprecated size of the thread pool for remote copy, index fetch and cleanup tasks."),
    _b(RO, "remote.log.manager.copier.thread.pool.size", INT, "-1", POOL_SIZE, M, "Threads that copy segments to remote storage; -1 falls back to the general pool size."),
    _b(RO, "remote.log.manager.expiration.thread.pool.size", INT, "-1", POOL_SIZE, M, "Threads that delete expired remote segments; -1 falls back to the general pool size."),
    _b(RO, "remote.log.manager.task.interval.ms", LONG, "30000", _at(1), L, "Period of the remote log manager's copy and cleanup tasks."),
    _b(RO, "remote.log.manager.task.retry.backoff.ms", LONG, "500", _at(1), L, "First wait before a failed remote log task is retried.", internal=True),
    _b(RO, "remote.log.manager.task.retry.backoff.max.ms", LONG, "30000", _at(1), L, "Longest wait between retries of a failed remote log task.", internal=True),
    _b(RO, "remote.log.manager.task.retry.jitter", DBL, "0.2", _between(0, 0.5), L, "Random jitter factor applied to the remote task retry backoff.", internal=True),
    _b(RO, "remote.log.reader.threads", INT, "10", _at(1), M, "Threads that serve reads from remote storage."),
    _b(RO, "remote.log.reader.max.pending.tasks", INT, "100", _at(1), M, "Queue length of remote read tasks before fetches fail."),
    _b(CW, "log.local.retention.ms", LONG, "-2", _at(-2), M, "Broker default for how long segments stay locally when tiered storage is on; -2 means use the retention time."),
    _b(CW, "log.local.retention.bytes", LONG, "-2", _at(-2), M, "Broker default for the local size of a tiered partition; -2 means use the retention size."),
    _b(CW, "remote.log.manager.copy.max.bytes.per.second", LONG, "9223372036854775807", _at(1), M, "Broker-wide cap on bytes copied to remote storage per second."),
    _b(RO, "remote.log.manager.copy.quota.window.num", INT, "11", _at(1), M, "Number of samples kept for the remote copy quota."),
    _b(RO, "remote.log.manager.copy.quota.window.size.seconds", INT, "1", _at(1), M, "Length in seconds of each remote copy quota sample."),
    _b(CW, "remote.log.manager.fetch.max.bytes.per.second", LONG, "9223372036854775807", _at(1), M, "Broker-wide cap on bytes read from remote storage per second."),
    _b(RO, "remote.log.manager.fetch.quota.window.num", INT, "11", _at(1), M, "Number of samples kept for the remote fetch quota."),
    _b(RO, "remote.log.manager.fetch.quota.window.size.seconds", INT, "1", _at(1), M, "Length in seconds of each remote fetch quota sample."),
    _b(CW, "remote.fetch.max.wait.ms", INT, "500", _at(1), M, "Longest time the broker waits for a remote read before answering a fetch."),
    _b(RO, "zookeeper.connect", STR, None, None, H, "ZooKeeper connection string (host:port list with optional chroot) the broker registers in."),
    _b(RO, "zookeeper.session.timeout.ms", INT, "18000", None, H, "ZooKeeper session timeout of the broker."),
    _b(RO, "zookeeper.connection.timeout.ms", INT, None, None, H, "Time allowed to connect to ZooKeeper; unset means the session timeout."),
    _b(RO, "zookeeper.set.acl", BOOL, "false", None, H, "Whether the broker writes secure ACLs on the ZooKeeper nodes it creates."),
    _b(RO, "zookeeper.max.in.flight.requests", INT, "10", _at(1), H, "Unacknowledged ZooKeeper requests the client sends before blocking."),
    _b(RO, "zookeeper.ssl.client.enable", BOOL, "false", None, M, "Whether the ZooKeeper client connects over TLS."),
    _b(RO, "zookeeper.clientCnxnSocket", STR, None, None, M, "ZooKeeper client socket implementation, usually the Netty one for TLS."),
    _b(RO, "zookeeper.ssl.keystore.location", STR, None, None, M, "Keystore file for the ZooKeeper TLS client certificate."),
    _b(RO, "zookeeper.ssl.keystore.password", PWD, None, None, M, "Password of the ZooKeeper TLS keystore."),
    _b(RO, "zookeeper.ssl.keystore.type", STR, None, None, M, "File format of the ZooKeeper TLS keystore."),
    _b(RO, "zookeeper.ssl.truststore.location", STR, None, None, M, "Truststore file for ZooKeeper TLS."),
    _b(RO, "zookeeper.ssl.truststore.password", PWD, None, None, M, "Password of the ZooKeeper TLS truststore."),
    _b(RO, "zookeeper.ssl.truststore.type", STR, None, None, M, "File format of the ZooKeeper TLS truststore."),
    _b(RO, "zookeeper.ssl.protocol", STR, "TLSv1.2", None, L, "TLS protocol used towards ZooKeeper."),
    _b(RO, "zookeeper.ssl.enabled.protocols", LIST, None, None, L, "TLS protocols enabled towards ZooKeeper."),
    _b(RO, "zookeeper.ssl.cipher.suites", LIST, None, None, L, "Cipher suites enabled towards ZooKeeper."),
    _b(RO, "zookeeper.ssl.endpoint.identification.algorithm", STR, "HTTPS", None, L, "Hostname verification towards ZooKeeper; HTTPS turns it on."),
    _b(RO, "zookeeper.ssl.crl.enable", BOOL, "false", None, L, "Whether certificate revocation lists are checked on ZooKeeper TLS."),
    _b(RO, "zookeeper.ssl.ocsp.enable", BOOL, "false", None, L, "Whether OCSP is used on ZooKeeper TLS."),
    _b(RO, "broker.id.generation.enable", BOOL, "true", None, M, "Whether a broker without broker.id gets one generated from ZooKeeper."),
    _b(RO, "reserved.broker.max.id", INT, "1000", _at(0), M, "Highest broker id that may be set by hand; generated ids start above it."),
    _b(RO, "broker.id", INT, "-1", None, H, "Id of this broker; -1 asks for a generated id."),
    _b(CW, "message.max.bytes", INT, "1048588", _at(0), H, "Broker default for the largest record batch a topic accepts."),
    _b(CW, "num.io.threads", INT, "8", _at(1), H, "Threads that handle requests, including disk I/O."),
    _b(RO, "num.replica.alter.log.dirs.threads", INT, None, None, H, "Threads that move replicas between log directories; unset means one per directory."),
    _b(CW, "background.threads", INT, "10", _at(1), H, "Threads for assorted background tasks."),
    _b(RO, "request.timeout.ms", INT, "30000", None, H, "How long the broker's own clients wait for a response."),
    _b(RO, "socket.connection.setup.timeout.ms", LONG, "10000", None, M, "How long the broker's own clients wait for a connection to be set up."),
    _b(RO, "socket.connection.setup.timeout.max.ms", LONG, "30000", None, M, "Upper bound of the growing connection setup timeout of the broker's clients."),
    _b(RO, "authorizer.class.name", STR, "", NON_NULL, L, "Class of the authorizer; empty turns authorization off."),
    _b(RO, "early.start.listeners", STR, None, None, H, "Listeners started before the authorizer has finished loading."),
    _b(RO, "broker.rack", STR, None, None, M, "Rack of the broker, used for rack-aware replica placement."),
    _b(RO, "controlled.shutdown.max.retries", INT, "3", None, M, "How many times a controlled shutdown is retried."),
    _b(RO, "controlled.shutdown.retry.backoff.ms", LONG, "5000", None, M, "Wait between controlled shutdown attempts."),
    _b(RO, "controlled.shutdown.enable", BOOL, "true", None, M, "Whether the broker moves its leaderships away before stopping."),
    _b(RO, "delete.topic.enable", BOOL, "true", None, H, "Whether topics can be deleted."),
    _b(CW, "compression.type", STR, "producer", _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), H, "Broker default compression for topics; producer keeps the producer's codec."),
    _b(CW, "compression.gzip.level", INT, "-1", GZIP_LEVEL, M, "Broker default gzip level."),
    _b(CW, "compression.lz4.level", INT, "9", _between(1, 17), M, "Broker default lz4 level."),
    _b(CW, "compression.zstd.level", INT, "3", _between(-131072, 22), M, "Broker default zstd level."),
    _b(RO, "max.incremental.fetch.session.cache.slots", INT, "1000", _at(0), M, "Most incremental fetch sessions the broker keeps."),
    _b(RO, "fetch.max.bytes", INT, "57671680", _at(1024), M, "Most bytes the broker returns for one fetch request."),
    _b(RO, "max.request.partition.size.limit", INT, "2000", _at(1), M, "Most partitions served in one request."),
    _b(RO, "unstable.api.versions.enable", BOOL, "false", None, H, "Advertises API versions still under development; for tests only.", internal=True),
    _b(RO, "unstable.feature.versions.enable", BOOL, "false", None, H, "Allows feature versions still under development; for tests only.", internal=True),
    _b(RO, "metadata.log.max.record.bytes.between.snapshots", LONG, "20971520", _at(1), H, "KRaft: log bytes after the latest snapshot that trigger a new snapshot."),
    _b(RO, "metadata.log.max.snapshot.interval.ms", LONG, "3600000", _at(0), H, "KRaft: longest time before committed records are snapshotted."),
    _b(RO, "process.roles", LIST, "", _in("broker", "controller"), H, "KRaft roles of the node (broker, controller); empty means ZooKeeper mode."),
    _b(RO, "node.id", INT, "-1", None, H, "KRaft node id of this process."),
    _b(RO, "initial.broker.registration.timeout.ms", INT, "60000", None, M, "KRaft: time allowed for the first registration with the controller quorum."),
    _b(RO, "broker.heartbeat.interval.ms", INT, "2000", None, M, "KRaft: time between broker heartbeats."),
    _b(RO, "broker.session.timeout.ms", INT, "9000", None, M, "KRaft: how long a broker lease lasts without heartbeats."),
    _b(RO, "controller.listener.names", STR, None, None, H, "KRaft: listeners used by the controller."),
    _b(RO, "sasl.mechanism.controller.protocol", STR, "GSSAPI", None, H, "SASL mechanism used to talk to KRaft controllers."),
    _b(RO, "metadata.log.dir", STR, None, None, H, "KRaft: directory of the metadata log."),
    _b(RO, "metadata.log.segment.bytes", INT, "1073741824", _at(12), H, "KRaft: size of a metadata log segment."),
    _b(RO, "metadata.log.segment.min.bytes", INT, "8388608", _at(12), H, "KRaft: smallest allowed metadata log segment; for tests only.", internal=True),
    _b(RO, "metadata.log.segment.ms", LONG, "604800000", None, H, "KRaft: time before a metadata log segment is rolled."),
    _b(RO, "metadata.max.retention.bytes", LONG, "104857600", None, H, "KRaft: combined size of metadata log and snapshots before old ones are removed."),
    _b(RO, "metadata.max.retention.ms", LONG, "604800000", None, H, "KRaft: how long old metadata log segments and snapshots are kept."),
    _b(RO, "metadata.max.idle.interval.ms", INT, "500", _at(0), L, "KRaft: how often the active controller writes a no-op record."),
    _b(RO, "server.max.startup.time.ms", LONG, "9223372036854775807", _at(0), M, "Longest wait for the server to start; for tests only.", internal=True),
    _b(RO, "zookeeper.metadata.migration.enable", BOOL, "false", None, H, "Turns on the ZooKeeper to KRaft migration."),
    _b(RO, "eligible.leader.replicas.enable", BOOL, "false", None, H, "Turns on eligible leader replicas (KIP-966)."),
    _b(RO, "zookeeper.metadata.migration.min.batch.size", INT, "200", _at(1), M, "Soft minimum batch size when migrating ZooKeeper metadata to KRaft.", internal=True),
    _b(PB, "listeners", STR, "PLAINTEXT://:9092", None, H, "Addresses and listener names the broker accepts connections on."),
    _b(PB, "advertised.listeners", STR, None, None, H, "Addresses published for clients when they differ from listeners."),
    _b(PB, "listener.security.protocol.map", STR, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, L, "Security protocol of each listener name."),
    _b(RO, "control.plane.listener.name", STR, None, None, H, "Listener used for controller-to-broker traffic."),
    _b(RO, "socket.send.buffer.bytes", INT, "102400", None, H, "SO_SNDBUF of server sockets; -1 means the OS default."),
    _b(RO, "socket.receive.buffer.bytes", INT, "102400", None, H, "SO_RCVBUF of server sockets; -1 means the OS default."),
    _b(RO, "socket.request.max.bytes", INT, "104857600", _at(1), H, "Largest request the socket server reads."),
    _b(RO, "socket.listen.backlog.size", INT, "50", _at(1), M, "Pending connection backlog of server sockets."),
    _b(CW, "max.connections.per.ip", INT, "2147483647", _at(0), M, "Most connections allowed from one address."),
    _b(CW, "max.connections.per.ip.overrides", STR, "", None, M, "Per-host or per-address overrides of the connection limit, as host:count pairs."),
    _b(CW, "max.connections", INT, "2147483647", _at(0), M, "Most connections the broker allows at once."),
    _b(CW, "max.connection.creation.rate", INT, "2147483647", _at(0), M, "Most new connections accepted per second."),
    _b(RO, "connections.max.idle.ms", LONG, "600000", None, M, "Time after which idle connections are closed."),
    _b(RO, "connection.failed.authentication.delay.ms", INT, "100", _at(0), L, "Delay before closing a connection whose authentication failed."),
    _b(RO, "queued.max.requests", INT, "500", _at(1), H, "Requests queued for the I/O threads before network threads block."),
    _b(RO, "queued.max.request.bytes", LONG, "-1", None, M, "Bytes of queued requests before no more are read; -1 means no limit."),
    _b(CW, "num.network.threads", INT, "3", _at(1), H, "Threads per listener that read requests and send responses."),
    _b(RO, "controller.socket.timeout.ms", INT, "30000", None, M, "Socket timeout of controller-to-broker channels."),
    _b(RO, "default.replication.factor", INT, "1", None, M, "Replication factor of topics created without one."),
    _b(RO, "replica.lag.time.max.ms", LONG, "30000", None, H, "Time after which a follower that has not caught up is dropped from the ISR."),
    _b(RO, "replica.socket.timeout.ms", INT, "30000", None, H, "Socket timeout of replica fetch requests."),
    _b(RO, "replica.socket.receive.buffer.bytes", INT, "65536", None, H, "Socket receive buffer of replica fetchers."),
    _b(RO, "replica.fetch.max.bytes", INT, "1048576", _at(0), M, "Bytes a follower tries to fetch per partition."),
    _b(RO, "replica.fetch.wait.max.ms", INT, "500", None, H, "Longest wait of a follower fetch request."),
    _b(RO, "replica.fetch.backoff.ms", INT, "1000", _at(0), M, "Sleep after a partition error in a fetcher."),
    _b(RO, "replica.fetch.min.bytes", INT, "1", None, H, "Bytes a follower fetch waits for before returning."),
    _b(RO, "replica.fetch.response.max.bytes", INT, "10485760", _at(0), M, "Bytes a follower fetch response may hold in total."),
    _b(CW, "num.replica.fetchers", INT, "1", None, H, "Fetcher threads per source broker."),
    _b(RO, "replica.high.watermark.checkpoint.interval.ms", LONG, "5000", None, H, "How often high watermarks are written to disk."),
    _b(RO, "fetch.purgatory.purge.interval.requests", INT, "1000", None, M, "Requests between purges of the fetch purgatory."),
    _b(RO, "producer.purgatory.purge.interval.requests", INT, "1000", None, M, "Requests between purges of the produce purgatory."),
    _b(RO, "delete.records.purgatory.purge.interval.requests", INT, "1", None, M, "Requests between purges of the delete-records purgatory."),
    _b(CW, "auto.leader.rebalance.enable", BOOL, "true", None, H, "Whether leadership is moved back to preferred replicas automatically."),
    _b(CW, "leader.imbalance.per.broker.percentage", INT, "10", None, H, "Share of non-preferred leaders per broker, in percent, that triggers a rebalance."),
    _b(CW, "leader.imbalance.check.interval.seconds", LONG, "300", _at(1), H, "How often leader imbalance is checked."),
    _b(RO, "unclean.leader.election.interval.ms", LONG, "300000", _at(1), M, "How often the controller looks for leaderless partitions to elect unclean leaders for.", internal=True),
    _b(CW, "unclean.leader.election.enable", BOOL, "false", None, H, "Broker default for electing a leader outside the ISR as a last resort."),
    _b(RO, "security.inter.broker.protocol", STR, "PLAINTEXT", _in("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), M, "Security protocol between brokers."),
    _b(RO, "inter.broker.protocol.version", STR, "3.9-IV0", METADATA_VERSION, M, "Inter-broker protocol version the broker speaks."),
    _b(RO, "inter.broker.listener.name", STR, None, None, M, "Listener used between brokers."),
    _b(RO, "replica.selector.class", STR, None, None, M, "Class that picks the preferred read replica for consumers."),
    _b(RO, "group.min.session.timeout.ms", INT, "6000", None, M, "Shortest session timeout a classic group member may ask for."),
    _b(RO, "group.max.session.timeout.ms", INT, "1800000", None, M, "Longest session timeout a classic group member may ask for."),
    _b(RO, "group.initial.rebalance.delay.ms", INT, "3000", None, M, "Wait for more members before the first rebalance of a new group."),
    _b(RO, "group.max.size", INT, "2147483647", _at(1), M, "Most members of a classic group."),
    _b(RO, "group.coordinator.rebalance.protocols", LIST, "classic", _in("consumer", "classic", "share", "unknown"), M, "Group protocols the coordinator accepts."),
    _b(RO, "group.coordinator.threads", INT, "1", _at(1), M, "Threads of the new group coordinator."),
    _b(RO, "group.coordinator.append.linger.ms", INT, "10", _at(0), M, "How long the group coordinator batches writes before flushing."),
    _b(RO, "group.coordinator.new.enable", BOOL, "false", None, M, "Turns on the new group coordinator.", internal=True),
    _b(RO, "offset.metadata.max.bytes", INT, "4096", None, H, "Largest metadata string of an offset commit."),
    _b(RO, "offsets.load.buffer.size", INT, "5242880", _at(1), H, "Read batch size when loading offsets into the cache."),
    _b(RO, "offsets.topic.replication.factor", SHORT, "3", _at(1), H, "Replication factor of the offsets topic."),
    _b(RO, "offsets.topic.num.partitions", INT, "50", _at(1), H, "Partition count of the offsets topic."),
    _b(RO, "offsets.topic.segment.bytes", INT, "104857600", _at(1), H, "Segment size of the offsets topic."),
    _b(RO, "offsets.topic.compression.codec", INT, "0", None, H, "Compression codec id used for the offsets topic."),
    _b(RO, "offsets.retention.minutes", INT, "10080", _at(1), H, "How long committed offsets of an empty group are kept."),
    _b(RO, "offsets.retention.check.interval.ms", LONG, "600000", _at(1), H, "How often stale offsets are looked for."),
    _b(RO, "offsets.commit.timeout.ms", INT, "5000", _at(1), H, "Longest wait for an offset commit to be replicated."),
    _b(RO, "offsets.commit.required.acks", SHORT, "-1", None, H, "Deprecated acks required for an offset commit."),
    _b(RO, "group.consumer.session.timeout.ms", INT, "45000", _at(1), M, "Session timeout of consumer-protocol group members."),
    _b(RO, "group.consumer.min.session.timeout.ms", INT, "45000", _at(1), M, "Shortest session timeout for consumer-protocol members."),
    _b(RO, "group.consumer.max.session.timeout.ms", INT, "60000", _at(1), M, "Longest session timeout for consumer-protocol members."),
    _b(RO, "group.consumer.heartbeat.interval.ms", INT, "5000", _at(1), M, "Heartbeat interval given to consumer-protocol members."),
    _b(RO, "group.consumer.min.heartbeat.interval.ms", INT, "5000", _at(1), M, "Shortest heartbeat interval for consumer-protocol members."),
    _b(RO, "group.consumer.max.heartbeat.interval.ms", INT, "15000", _at(1), M, "Longest heartbeat interval for consumer-protocol members."),
    _b(RO, "group.consumer.max.size", INT, "2147483647", _at(1), M, "Most members of a consumer-protocol group."),
    _b(RO, "group.consumer.assignors", LIST, "org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor", None, M, "Server-side assignor classes; the first is the default."),
    _b(RO, "group.consumer.migration.policy", STR, "disabled", _in_ci("DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL"), M, "Whether classic groups may be converted to the consumer protocol and back.", internal=True),
    _b(RO, "group.share.session.timeout.ms", INT, "45000", _at(1), M, "Session timeout of share group members."),
    _b(RO, "group.share.min.session.timeout.ms", INT, "45000", _at(1), M, "Shortest session timeout for share group members."),
    _b(RO, "group.share.max.session.timeout.ms", INT, "60000", _at(1), M, "Longest session timeout for share group members."),
    _b(RO, "group.share.heartbeat.interval.ms", INT, "5000", _at(1), M, "Heartbeat interval given to share group members."),
    _b(RO, "group.share.min.heartbeat.interval.ms", INT, "5000", _at(1), M, "Shortest heartbeat interval for share group members."),
    _b(RO, "group.share.max.heartbeat.interval.ms", INT, "15000", _at(1), M, "Longest heartbeat interval for share group members."),
    _b(RO, "group.share.max.size", SHORT, "200", _between(10, 1000), M, "Most members of a share group."),
    _b(CW, "log.cleaner.threads", INT, "1", _at(0), M, "Background threads that compact logs."),
    _b(CW, "log.cleaner.io.max.bytes.per.second", DBL, "1.7976931348623157E308", None, M, "Cap on the cleaner's combined read and write bytes per second."),
    _b(CW, "log.cleaner.dedupe.buffer.size", LONG, "134217728", None, M, "Memory for the cleaner's key deduplication across all threads."),
    _b(CW, "log.cleaner.io.buffer.size", INT, "524288", _at(0), M, "Memory for the cleaner's I/O buffers across all threads."),
    _b(CW, "log.cleaner.io.buffer.load.factor", DBL, "0.9", None, M, "How full the dedupe buffer may get."),
    _b(CW, "log.cleaner.backoff.ms", LONG, "15000", _at(0), M, "Sleep when no log needs cleaning."),
    _b(CW, "log.cleaner.min.cleanable.ratio", DBL, "0.5", _between(0, 1), M, "Broker default share of dirty log that makes a partition cleanable."),
    _b(RO, "log.cleaner.enable", BOOL, "true", None, M, "Whether the log cleaner runs."),
    _b(CW, "log.cleaner.delete.retention.ms", LONG, "86400000", _at(0), M, "Broker default for how long tombstones are kept."),
    _b(CW, "log.cleaner.min.compaction.lag.ms", LONG, "0", _at(0), M, "Broker default for the shortest time a record stays uncompacted."),
    _b(CW, "log.cleaner.max.compaction.lag.ms", LONG, "9223372036854775807", _at(1), M, "Broker default for the longest time a record waits for compaction."),
    _b(RO, "num.partitions", INT, "1", _at(1), M, "Partition count of topics created without one."),
    _b(RO, "log.dir", STR, "/tmp/kafka-logs", None, H, "Log directory used when log.dirs is not set."),
    _b(RO, "log.dirs", STR, None, None, H, "Comma-separated log directories; unset means log.dir."),
    _b(CW, "log.segment.bytes", INT, "1073741824", _at(14), H, "Broker default segment size."),
    _b(CW, "log.roll.ms", LONG, None, None, H, "Broker default roll time in ms; unset means log.roll.hours."),
    _b(RO, "log.roll.hours", INT, "168", _at(1), H, "Broker default roll time in hours, used when log.roll.ms is unset."),
    _b(CW, "log.roll.jitter.ms", LONG, None, None, H, "Broker default roll jitter in ms; unset means log.roll.jitter.hours."),
    _b(RO, "log.roll.jitter.hours", INT, "0", _at(0), H, "Broker default roll jitter in hours, used when log.roll.jitter.ms is unset."),
    _b(CW, "log.retention.ms", LONG, None, None, H, "Broker default retention time in ms; unset means log.retention.minutes; -1 keeps data forever."),
    _b(RO, "log.retention.minutes", INT, None, None, H, "Broker default retention in minutes, used when log.retention.ms is unset."),
    _b(RO, "log.retention.hours", INT, "168", None, H, "Broker default retention in hours, used when neither ms nor minutes are set."),
    _b(CW, "log.retention.bytes", LONG, "-1", None, H, "Broker default size limit of a partition; -1 means none."),
    _b(RO, "log.retention.check.interval.ms", LONG, "300000", _at(1), M, "How often logs are checked for segments to delete."),
    _b(CW, "log.cleanup.policy", LIST, "delete", _in("compact", "delete"), M, "Broker default cleanup policy (delete, compact)."),
    _b(CW, "log.index.size.max.bytes", INT, "10485760", _at(4), M, "Broker default offset index size."),
    _b(CW, "log.index.interval.bytes", INT, "4096", _at(0), M, "Broker default bytes between offset index entries."),
    _b(CW, "log.flush.interval.messages", LONG, "9223372036854775807", _at(1), H, "Broker default messages between forced fsyncs."),
    _b(CW, "log.segment.delete.delay.ms", LONG, "60000", _at(0), H, "Broker default delay before a deleted segment file is removed."),
    _b(RO, "log.flush.scheduler.interval.ms", LONG, "9223372036854775807", None, H, "How often the flusher checks for logs to fsync; also the default flush interval."),
    _b(CW, "log.flush.interval.ms", LONG, None, None, H, "Broker default time between forced fsyncs; unset means log.flush.scheduler.interval.ms."),
    _b(RO, "log.flush.offset.checkpoint.interval.ms", INT, "60000", _at(0), H, "How often the recovery point checkpoint is written."),
    _b(RO, "log.flush.start.offset.checkpoint.interval.ms", INT, "60000", _at(0), H, "How often the log start offset checkpoint is written."),
    _b(CW, "log.preallocate", BOOL, "false", None, M, "Broker default for preallocating segment files."),
    _b(CW, "num.recovery.threads.per.data.dir", INT, "1", _at(1), H, "Threads per log directory for recovery at startup and flushing at shutdown."),
    _b(RO, "auto.create.topics.enable", BOOL, "true", None, H, "Whether unknown topics are created on first use."),
    _b(CW, "min.insync.replicas", INT, "1", _at(1), H, "Broker default for the fewest in-sync replicas an acks=all write needs."),
    _b(RO, "log.message.format.version", STR, "3.0-IV1", METADATA_VERSION, M, "Deprecated broker default record format version."),
    _b(CW, "log.message.timestamp.type", STR, "CreateTime", _in("CreateTime", "LogAppendTime"), M, "Broker default timestamp type (CreateTime or LogAppendTime)."),
    _b(CW, "log.message.timestamp.difference.max.ms", LONG, "9223372036854775807", _at(0), M, "Deprecated broker default largest gap between a record timestamp and the broker clock."),
    _b(CW, "log.message.timestamp.before.max.ms", LONG, "9223372036854775807", _at(0), M, "Broker default for how far in the past a CreateTime timestamp may be."),
    _b(CW, "log.message.timestamp.after.max.ms", LONG, "9223372036854775807", _at(0), M, "Broker default for how far in the future a CreateTime timestamp may be."),
    _b(RO, "create.topic.policy.class.name", CLS, None, None, L, "Class that vets topic creation requests."),
    _b(RO, "alter.config.policy.class.name", CLS, None, None, L, "Class that vets config change requests."),
    _b(CW, "log.message.downconversion.enable", BOOL, "true", None, L, "Broker default for converting records down for old consumers."),
    _b(RO, "log.dir.failure.timeout.ms", LONG, "30000", _at(1), L, "KRaft: time after which a broker that cannot report a failed log directory shuts down."),
    _b(RO, "log.initial.task.delay.ms", LONG, "30000", _at(0), L, "Delay before the log manager's first background tasks; for tests only.", internal=True),
    _b(RO, "group.share.enable", BOOL, "false", None, M, "Turns on share groups.", internal=True),
    _b(RO, "group.share.delivery.count.limit", INT, "5", _between(2, 10), M, "Delivery attempts of a record to a share group."),
    _b(RO, "group.share.record.lock.duration.ms", INT, "30000", _between(1000, 60000), M, "How long a share group member holds a record it acquired."),
    _b(RO, "group.share.min.record.lock.duration.ms", INT, "15000", _between(1000, 30000), M, "Shortest record lock duration for share groups."),
    _b(RO, "group.share.max.record.lock.duration.ms", INT, "60000", _between(30000, 3600000), M, "Longest record lock duration for share groups."),
    _b(RO, "group.share.max.groups", SHORT, "10", _between(1, 100), M, "Most share groups."),
    _b(RO, "group.share.partition.max.record.locks", INT, "200", _between(100, 10000), M, "Most record locks per share partition."),
    _b(RO, "transaction.state.log.min.isr", INT, "2", _at(1), H, "min.insync.replicas of the transaction state topic."),
    _b(RO, "transaction.state.log.load.buffer.size", INT, "5242880", _at(1), H, "Read batch size when loading transaction state."),
    _b(RO, "transaction.state.log.replication.factor", SHORT, "3", _at(1), H, "Replication factor of the transaction state topic."),
    _b(RO, "transaction.state.log.num.partitions", INT, "50", _at(1), H, "Partition count of the transaction state topic."),
    _b(RO, "transaction.state.log.segment.bytes", INT, "104857600", _at(1), H, "Segment size of the transaction state topic."),
    _b(CW, "transaction.partition.verification.enable", BOOL, "true", None, L, "Whether the broker checks that a partition was added to the transaction before accepting transactional writes."),
    _b(CW, "producer.id.expiration.ms", INT, "86400000", _at(1), L, "How long an idle producer id is kept by partition leaders."),
    _b(RO, "producer.id.expiration.check.interval.ms", INT, "600000", _at(1), L, "How often expired producer ids are removed.", internal=True),
    _b(RO, "transactional.id.expiration.ms", INT, "604800000", _at(1), H, "How long an idle transactional id is kept by the coordinator."),
    _b(RO, "transaction.max.timeout.ms", INT, "900000", _at(1), H, "Longest transaction timeout a producer may ask for."),
    _b(RO, "transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", _at(1), L, "How often timed-out transactions are aborted."),
    _b(RO, "transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000", _at(1), L, "How often expired transactional ids are removed."),
    _b(RO, "controller.quorum.voters", LIST, "", QUORUM_VOTERS, H, "KRaft: static voter set as id@host:port entries."),
    _b(RO, "controller.quorum.bootstrap.servers", LIST, "", QUORUM_BOOTSTRAP, H, "KRaft: host:port entries used to find the controller quorum."),
    _b(RO, "controller.quorum.election.timeout.ms", INT, "1000", None, H, "KRaft: time without a leader before an election starts."),
    _b(RO, "controller.quorum.fetch.timeout.ms", INT, "2000", None, H, "KRaft: time without a successful fetch before a voter becomes candidate."),
    _b(RO, "controller.quorum.election.backoff.max.ms", INT, "1000", None, H, "KRaft: longest backoff before a new election."),
    _b(RO, "controller.quorum.append.linger.ms", INT, "25", None, M, "KRaft: how long the leader batches writes before flushing."),
    _b(RO, "controller.quorum.request.timeout.ms", INT, "2000", None, M, "KRaft: request timeout between quorum members."),
    _b(RO, "controller.quorum.retry.backoff.ms", INT, "20", None, L, "KRaft: wait before retrying a failed quorum request."),
    _b(RO, "metrics.num.samples", INT, "2", _at(1), L, "Samples kept to compute each metric."),
    _b(RO, "metrics.sample.window.ms", LONG, "30000", _at(1), L, "Length of one metrics sample window."),
    _b(CW, "metric.reporters", LIST, "", None, L, "Classes that receive the broker's metrics."),
    _b(RO, "metrics.recording.level", STR, "INFO", None, L, "Highest recording level of metrics."),
    _b(RO, "auto.include.jmx.reporter", BOOL, "true", None, L, "Deprecated switch that adds the JMX reporter even if not listed."),
    _b(RO, "kafka.metrics.reporters", LIST, "", None, L, "Classes that receive the broker's Yammer metrics."),
    _b(RO, "kafka.metrics.polling.interval.secs", INT, "10", _at(1), L, "Polling interval for the Yammer metrics reporters."),
    _b(RO, "telemetry.max.bytes", INT, "1048576", _at(1), L, "Largest client telemetry payload the broker accepts."),
    _b(RO, "quota.window.num", INT, "11", _at(1), L, "Samples kept for client quotas."),
    _b(RO, "replication.quota.window.num", INT, "11", _at(1), L, "Samples kept for replication quotas."),
    _b(RO, "alter.log.dirs.replication.quota.window.num", INT, "11", _at(1), L, "Samples kept for log directory move quotas."),
    _b(RO, "controller.quota.window.num", INT, "11", _at(1), L, "Samples kept for controller mutation quotas."),
    _b(RO, "quota.window.size.seconds", INT, "1", _at(1), L, "Length of one client quota sample."),
    _b(RO, "replication.quota.window.size.seconds", INT, "1", _at(1), L, "Length of one replication quota sample."),
    _b(RO, "alter.log.dirs.replication.quota.window.size.seconds", INT, "1", _at(1), L, "Length of one log directory move quota sample."),
    _b(RO, "controller.quota.window.size.seconds", INT, "1", _at(1), L, "Length of one controller mutation quota sample."),
    _b(RO, "client.quota.callback.class", CLS, None, None, L, "Class that computes client quota limits."),
    _b(RO, "connections.max.reauth.ms", LONG, "0", None, M, "Longest session lifetime before a client must re-authenticate; 0 means no limit."),
    _b(RO, "sasl.server.max.receive.size", INT, "524288", None, M, "Largest message accepted before and during SASL authentication."),
    _b(RO, "security.providers", STR, None, None, L, "Classes that register security providers."),
    _b(PB, "principal.builder.class", CLS, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", None, M, "Class that builds the principal of a connection."),
    _b(PB, "ssl.client.auth", STR, "none", _in("required", "requested", "none"), M, "Whether the broker requires, requests or ignores client certificates."),
    _b(RO, "ssl.principal.mapping.rules", STR, "DEFAULT", None, L, "Rules that map certificate names to short principal names."),
    _b(RO, "ssl.allow.dn.changes", BOOL, "false", None, L, "Whether a reloaded certificate may change its distinguished name."),
    _b(RO, "ssl.allow.san.changes", BOOL, "false", None, L, "Whether a reloaded certificate may change its subject alternative names."),
    _b(PB, "ssl.protocol", STR, "TLSv1.3", None, M, "TLS protocol used to create the SSL context."),
    _b(PB, "ssl.provider", STR, None, None, M, "Security provider for TLS; unset means the JVM default."),
    _b(PB, "ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", None, M, "TLS protocols enabled on connections."),
    _b(PB, "ssl.keystore.type", STR, "JKS", None, M, "File format of the keystore."),
    _b(PB, "ssl.keystore.location", STR, None, None, M, "Keystore file."),
    _b(PB, "ssl.keystore.password", PWD, None, None, M, "Password of the keystore."),
    _b(PB, "ssl.key.password", PWD, None, None, M, "Password of the private key."),
    _b(PB, "ssl.keystore.key", PWD, None, None, M, "Private key given inline."),
    _b(PB, "ssl.keystore.certificate.chain", PWD, None, None, M, "Certificate chain given inline."),
    _b(PB, "ssl.truststore.type", STR, "JKS", None, M, "File format of the truststore."),
    _b(PB, "ssl.truststore.location", STR, None, None, M, "Truststore file."),
    _b(PB, "ssl.truststore.password", PWD, None, None, M, "Password of the truststore."),
    _b(PB, "ssl.truststore.certificates", PWD, None, None, M, "Trusted certificates given inline."),
    _b(PB, "ssl.keymanager.algorithm", STR, "SunX509", None, M, "Key manager algorithm for TLS."),
    _b(PB, "ssl.trustmanager.algorithm", STR, "PKIX", None, M, "Trust manager algorithm for TLS."),
    _b(PB, "ssl.endpoint.identification.algorithm", STR, "https", None, L, "Hostname verification algorithm; empty turns it off."),
    _b(PB, "ssl.secure.random.implementation", STR, None, None, L, "SecureRandom implementation used for TLS."),
    _b(PB, "ssl.cipher.suites", LIST, "", None, M, "Cipher suites enabled on TLS connections."),
    _b(PB, "ssl.engine.factory.class", CLS, None, None, L, "Class that creates SSL engines."),
    _b(PB, "sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", None, M, "SASL mechanism used between brokers."),
    _b(PB, "sasl.enabled.mechanisms", LIST, "GSSAPI", None, M, "SASL mechanisms the broker accepts."),
    _b(RO, "sasl.server.callback.handler.class", CLS, None, None, M, "Callback handler class for SASL on the server side."),
    _b(PB, "sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", None, M, "Rules that map Kerberos principals to short names."),
    _b(PB, "sasl.jaas.config", PWD, None, None, M, "JAAS login settings given inline."),
    _b(RO, "sasl.client.callback.handler.class", CLS, None, None, M, "Callback handler class for SASL on the client side."),
    _b(RO, "sasl.login.class", CLS, None, None, M, "Login class for SASL."),
    _b(RO, "sasl.login.callback.handler.class", CLS, None, None, M, "Callback handler class for SASL login."),
    _b(PB, "sasl.kerberos.service.name", STR, None, None, M, "Kerberos principal name the broker runs as."),
    _b(PB, "sasl.kerberos.kinit.cmd", STR, "/usr/bin/kinit", None, M, "Path of the kinit command."),
    _b(PB, "sasl.kerberos.ticket.renew.window.factor", DBL, "0.8", None, M, "Share of the ticket lifetime after which renewal is attempted."),
    _b(PB, "sasl.kerberos.ticket.renew.jitter", DBL, "0.05", None, M, "Random jitter added to the Kerberos renewal time."),
    _b(PB, "sasl.kerberos.min.time.before.relogin", LONG, "60000", None, M, "Sleep between Kerberos refresh attempts."),
    _b(PB, "sasl.login.refresh.window.factor", DBL, "0.8", None, M, "Share of the credential lifetime after which the login is refreshed."),
    _b(PB, "sasl.login.refresh.window.jitter", DBL, "0.05", None, M, "Random jitter added to the login refresh time."),
    _b(PB, "sasl.login.refresh.min.period.seconds", SHORT, "60", None, M, "Shortest wait between login refreshes, in seconds."),
    _b(PB, "sasl.login.refresh.buffer.seconds", SHORT, "300", None, M, "Time kept before credential expiry when refreshing, in seconds."),
    _b(RO, "sasl.login.connect.timeout.ms", INT, None, None, L, "Connect timeout towards the external login provider (OAUTHBEARER)."),
    _b(RO, "sasl.login.read.timeout.ms", INT, None, None, L, "Read timeout towards the external login provider (OAUTHBEARER)."),
    _b(RO, "sasl.login.retry.backoff.max.ms", LONG, "10000", None, L, "Longest wait between login attempts to the external provider."),
    _b(RO, "sasl.login.retry.backoff.ms", LONG, "100", None, L, "First wait between login attempts to the external provider."),
    _b(RO, "sasl.oauthbearer.scope.claim.name", STR, "scope", None, L, "Name of the JWT claim that holds the scope."),
    _b(RO, "sasl.oauthbearer.sub.claim.name", STR, "sub", None, L, "Name of the JWT claim that holds the subject."),
    _b(RO, "sasl.oauthbearer.token.endpoint.url", STR, None, None, M, "Token endpoint of the OAuth/OIDC provider."),
    _b(RO, "sasl.oauthbearer.jwks.endpoint.url", STR, None, None, M, "Where the OAuth/OIDC provider's signing keys are fetched from."),
    _b(RO, "sasl.oauthbearer.jwks.endpoint.refresh.ms", LONG, "3600000", None, L, "How often the signing key cache is refreshed."),
    _b(RO, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LONG, "100", None, L, "First wait between attempts to fetch the signing keys."),
    _b(RO, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LONG, "10000", None, L, "Longest wait between attempts to fetch the signing keys."),
    _b(RO, "sasl.oauthbearer.clock.skew.seconds", INT, "30", None, L, "Clock difference allowed between the identity provider and the broker."),
    _b(RO, "sasl.oauthbearer.expected.audience", LIST, None, None, L, "Audiences a token must be issued for."),
    _b(RO, "sasl.oauthbearer.expected.issuer", STR, None, None, L, "Issuer a token must come from."),
    _b(RO, "delegation.token.master.key", PWD, None, None, M, "Deprecated alias of delegation.token.secret.key."),
    _b(RO, "delegation.token.secret.key", PWD, None, None, M, "Secret used to create and check delegation tokens."),
    _b(RO, "delegation.token.max.lifetime.ms", LONG, "604800000", _at(1), M, "Longest lifetime of a delegation token, renewals included."),
    _b(RO, "delegation.token.expiry.time.ms", LONG, "86400000", _at(1), M, "Validity of a delegation token before it must be renewed."),
    _b(RO, "delegation.token.expiry.check.interval.ms", LONG, "3600000", _at(1), L, "How often expired delegation tokens are removed."),
    _b(RO, "password.encoder.secret", PWD, None, None, M, "Secret used to encrypt dynamically set passwords."),
    _b(RO, "password.encoder.old.secret", PWD, None, None, M, "Previous secret, used to re-encrypt dynamic passwords after a secret change."),
    _b(RO, "password.encoder.keyfactory.algorithm", STR, None, None, L, "Key factory algorithm for encrypting dynamic passwords."),
    _b(RO, "password.encoder.cipher.algorithm", STR, "AES/CBC/PKCS5Padding", None, L, "Cipher for encrypting dynamic passwords."),
    _b(RO, "password.encoder.key.length", INT, "128", _at(8), L, "Key length for encrypting dynamic passwords."),
    _b(RO, "password.encoder.iterations", INT, "4096", _at(1024), L, "Iteration count for encrypting dynamic passwords."),
    # --- dynamic-only broker quotas: QuotaConfigs.brokerQuotaConfigs() (DynamicConfig.Broker), not in KafkaConfig ---
    _b(CW, "leader.replication.throttled.rate", LONG, "9223372036854775807", _at(0), M, "Bytes per second allowed for throttled replicas on the leader side.", quota=True),
    _b(CW, "follower.replication.throttled.rate", LONG, "9223372036854775807", _at(0), M, "Bytes per second allowed for throttled replicas on the follower side.", quota=True),
    _b(CW, "replica.alter.log.dirs.io.max.bytes.per.second", LONG, "9223372036854775807", _at(0), M, "Bytes per second allowed for moving replicas between log directories of this broker.", quota=True),
    # --- added on trunk after 3.9 (mirror trunk of 2024-10-25, the 4.0 line); 3.9 keeps its own values for the rest ---
    _b(CW, "remote.list.offsets.request.timeout.ms", LONG, "30000", _at(1), M, "Longest wait for a list-offsets lookup in remote storage.", since="4.0"),
    _b(RO, "share.fetch.max.fetch.records", INT, "2147483647", None, H, "Most records one share fetch request may return.", internal=True, since="4.0"),
    _b(RO, "share.fetch.purgatory.purge.interval.requests", INT, "1000", None, M, "Requests between purges of the share fetch purgatory.", since="4.0"),
    _b(RO, "share.coordinator.state.topic.num.partitions", INT, "50", _at(1), H, "Partition count of the share group state topic.", since="4.0"),
    _b(RO, "share.coordinator.state.topic.replication.factor", SHORT, "3", _at(1), H, "Replication factor of the share group state topic.", since="4.0"),
    _b(RO, "share.coordinator.state.topic.min.isr", SHORT, "2", _at(1), H, "min.insync.replicas of the share group state topic.", since="4.0"),
    _b(RO, "share.coordinator.state.topic.segment.bytes", INT, "104857600", _at(1), H, "Segment size of the share group state topic.", since="4.0"),
    _b(RO, "share.coordinator.threads", INT, "1", _at(1), M, "Threads of the share coordinator.", since="4.0"),
    _b(RO, "share.coordinator.snapshot.update.records.per.snapshot", INT, "500", _at(0), M, "Update records written between two snapshot records of share state.", since="4.0"),
    _b(RO, "share.coordinator.load.buffer.size", INT, "5242880", _at(1), H, "Read batch size when loading share group state.", since="4.0"),
    _b(RO, "share.coordinator.state.topic.compression.codec", INT, "0", None, H, "Compression codec id used for the share group state topic.", since="4.0"),
    _b(RO, "share.coordinator.append.linger.ms", INT, "10", _at(0), M, "How long the share coordinator batches writes before flushing.", since="4.0"),
    _b(RO, "share.coordinator.write.timeout.ms", INT, "5000", _at(1), H, "Longest wait for a share state write to be replicated.", since="4.0"),
    # KIP-1066 (Kafka 4.3); not on the mirror: type, default and per-broker mode from the KIP, importance assumed
    _b(PB, "cordoned.log.dirs", LIST, "", None, M, "Log directories of this broker that take no new partitions; * cordons them all.", since="4.3"),
)

DYNAMIC_HERE_ONLY = frozenset({"auto.leader.rebalance.enable", "leader.imbalance.per.broker.percentage",
                               "leader.imbalance.check.interval.seconds"})
"""Read only at start by Kafka 3.9, cluster-wide dynamic here: the controller reads them from the
cluster-wide broker configs whenever they change, so an operator can pause the rebalance without a restart."""

TOPIC_CONFIGS: dict[str, ConfigSpec] = {s.name: s for s in CATALOG if s.scope is Scope.TOPIC}
BROKER_CONFIGS: dict[str, ConfigSpec] = {s.name: s for s in CATALOG if s.scope is not Scope.TOPIC}

# DynamicBrokerConfig.DynamicSecurityConfigs (= SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only with a listener prefix.
LISTENER_ONLY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates",
})
# DynamicBrokerConfig.ClusterLevelListenerConfigs: listener-prefixed, yet settable at the cluster default.
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# DynamicBrokerConfig.ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<config>
LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                              "sasl.server.callback.handler.class", "connections.max.reauth.ms")
# MetadataVersion.VERSIONS on 3.9 ("*" marks the versions after LATEST_PRODUCTION, which have no short alias).
METADATA_VERSIONS: tuple[str, ...] = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2",
    "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1",
    "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1",
    "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1",
    "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4",
    "3.8-IV0", "3.9-IV0", "4.0-IV0*", "4.0-IV1*",
)
_IBP: dict[str, str] = {v.rstrip("*"): v.rstrip("*") for v in METADATA_VERSIONS}
_IBP.update({v.split("-")[0]: v for v in METADATA_VERSIONS if not v.endswith("*")})  # release -> latest production

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)", re.DOTALL)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # ConfigDef.COMMA_WITH_WHITESPACE
_JAVA_SPACE = "".join(chr(c) for c in range(33))
_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}

Parsed = bool | int | float | str | list[str]


# --- values as Java prints and parses them -----------------------------------------------------------


def _java_double(x: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else ``d.dddE[-]n``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return ("-" if sign else "") + f"{text[0]}.{text[1:] or '0'}E{len(digits) - 1 + int(exp)}"


def _java_str(v: object) -> str:
    """``String.valueOf`` of a parsed value, as ``ConfigException`` puts it in "Invalid value ..."."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _java_double(v)
    if isinstance(v, list):
        return "[" + ", ".join(v) + "]"
    return str(v)


def _java_trim(s: str) -> str:
    return s.strip(_JAVA_SPACE)  # String.trim: every char up to U+0020


def _invalid(name: str, value: object, message: str) -> KafkaError:
    # ConfigException(name, value, message)
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {_java_str(value)} for configuration {name}: {message}")


def _parse(name: str, type_: ConfigType, value: str) -> Parsed:
    """``ConfigDef.parseType`` of a string."""
    s = _java_trim(value)
    if type_ is ConfigType.BOOLEAN:
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise _invalid(name, value, "Expected value to be either true or false")
    if type_ in _BITS:
        limit = 1 << (_BITS[type_] - 1)
        if _INTEGER.fullmatch(s) and -limit <= int(s) < limit:
            return int(s)
        raise _invalid(name, value, f"Not a number of type {type_.name}")
    if type_ is ConfigType.DOUBLE:
        if _DOUBLE.fullmatch(s):
            return float(s.rstrip("fFdD"))
        raise _invalid(name, value, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        return _LIST_SEPARATOR.split(s) if s else []
    if type_ is ConfigType.CLASS and not _JAVA_CLASS.fullmatch(s):
        raise _invalid(name, value, f"Class {value} could not be found.")  # Utils.loadClass; no JVM to ask here
    return s


def _format(v: Parsed) -> str:
    """``ConfigDef.convertToString``."""
    if isinstance(v, list):
        return ",".join(v)
    return _java_str(v)


def _num(x: float) -> str:
    return _java_str(float(x)) if isinstance(x, float) else str(x)


def metadata_version(value: str) -> str | None:
    """``MetadataVersion.fromVersionString(value).version()``, or None when Kafka would refuse it."""
    parts = value.split(".")
    while parts and not parts[-1]:
        parts.pop()  # String.split drops trailing empty strings
    n = 3 if value.startswith("0.") else 2
    return _IBP.get(value if n >= len(parts) else ".".join(parts[:n]))


def _check_special(name: str, kind: Special, v: Parsed) -> None:
    if kind is Special.NON_EMPTY and v == "":
        raise _invalid(name, v, "String must be non-empty")
    if kind is Special.POOL_SIZE and isinstance(v, int) and (v < -1 or v == 0):
        raise _invalid(name, v, "Value can be -1 or greater than 0")
    if kind is Special.GZIP_LEVEL and isinstance(v, int) and (v > 9 or (v < 1 and v != -1)):
        raise _invalid(name, v, "Value must be between 1 and 9 or equal to -1")
    if kind is Special.METADATA_VERSION and metadata_version(str(v)) is None:
        raise _invalid(name, v, f"Version {v} is not a valid version")
    if kind is Special.THROTTLED_REPLICAS and isinstance(v, list):
        items = [_java_trim(e) for e in v]
        if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", e) for e in items) or "".join(items) == "*"):
            raise _invalid(name, v, f"{name} must be the literal '*' or a list of replicas in the following format: "
                                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    if kind in (Special.QUORUM_VOTERS, Special.QUORUM_BOOTSTRAP) and isinstance(v, list):
        for entry in v:
            _check_quorum_entry(name, kind, entry)


def _check_quorum_entry(name: str, kind: Special, entry: str) -> None:
    # QuorumConfig.parseVoterConnections / parseBootstrapServer; these messages carry no "Invalid value" prefix.
    voters = kind is Special.QUORUM_VOTERS
    form = "`{id}@{host}:{port}`." if voters else '"{host}:{port}"'
    address = entry
    if voters:
        parts = entry.split("@")
        while parts and not parts[-1]:
            parts.pop()
        if len(parts) != 2:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid configuration value for {name}. Each entry should be in the form {form}")
        if not (_INTEGER.fullmatch(parts[0]) and -(1 << 31) <= int(parts[0]) < (1 << 31)):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Failed to parse voter ID as an integer from {parts[0]}")
        address = parts[1]
    match = _HOST_PORT.fullmatch(address)  # Utils.getHost / getPort / validHostPattern
    if match is None or not _HOST.fullmatch(match.group(1)):
        what = "host name"
    elif int(match.group(2)) >= 1 << 31:
        what = "host port"  # Kafka's Integer.parseInt would throw NumberFormatException here
    else:
        return
    where = f"entry {entry}" if voters else entry
    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Failed to parse {what} from {where} for the configuration {name}. "
                                               f"Each entry should be in the form {form}")


def _check(spec: ConfigSpec, value: str, name: str | None = None) -> Parsed:
    """Parse ``value`` as ``spec`` and run its validator (``ConfigDef.parseValue``); return the parsed value."""
    name = name or spec.name
    v = _parse(name, spec.type, value)
    rule = spec.validator
    if isinstance(rule, Range) and isinstance(v, (int, float)) and not isinstance(v, bool):
        if rule.low is not None and v < rule.low:
            raise _invalid(name, v, f"Value must be at least {_num(rule.low)}")
        if rule.high is not None and v > rule.high:
            raise _invalid(name, v, f"Value must be no more than {_num(rule.high)}")
    elif isinstance(rule, OneOf):
        for item in v if isinstance(v, list) else [str(v)]:
            if rule.case_insensitive and item.upper() not in rule.values:
                raise _invalid(name, item, "String must be one of (case insensitive): " + ", ".join(rule.values))
            if not rule.case_insensitive and item not in rule.values:
                raise _invalid(name, item, "String must be one of: " + ", ".join(rule.values))
    elif isinstance(rule, Special):
        _check_special(name, rule, v)
    return v


def normalize(spec: ConfigSpec, value: str) -> str:
    """The value as Kafka stores and reports it once parsed (trimmed, ``1, 2`` -> ``1,2``, ``TRUE`` -> ``true``)."""
    try:
        return _format(_check(spec, value))
    except KafkaError:
        return value


# --- validation --------------------------------------------------------------------------------------


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise INVALID_CONFIG as Kafka's ``LogConfig.validate`` would for one topic config.

    An unknown name is ``InvalidConfigurationException("Unknown topic config name: ...")``
    (``LogConfig.validateNames``). ``None`` (an IncrementalAlterConfigs DELETE) is never refused: Kafka's
    ``ConfigAdminManager.prepareIncrementalConfigs`` just drops the key before validating what is left.
    """
    if value is None:
        return
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    _check(spec, value)


def validate_topic_configs(configs: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> None:
    """A topic's whole override set, then the rules between keys that ``LogConfig.validate`` applies in ZooKeeper
    mode (``validateValues`` and ``validateNoInvalidRemoteStorageConfigsInZK``); ``defaults`` are the values
    the broker would use for keys the topic does not set (Kafka's ``extractLogConfigMap``)."""
    for name, value in configs.items():
        validate_topic_config(name, value)
    merged = {**{k: s.default or "" for k, s in TOPIC_CONFIGS.items()}, **(defaults or {}), **configs}
    low = int(normalize(TOPIC_CONFIGS["min.compaction.lag.ms"], merged["min.compaction.lag.ms"]))
    high = int(normalize(TOPIC_CONFIGS["max.compaction.lag.ms"], merged["max.compaction.lag.ms"]))
    if low > high:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})")
    if any(normalize(TOPIC_CONFIGS[k], merged[k]) == "true" for k in ("remote.log.delete.on.disable", "remote.log.copy.disable")):
        raise KafkaError(ErrorCode.INVALID_CONFIG, "It is invalid to set `remote.log.delete.on.disable` or "
                                                   "`remote.log.copy.disable` under Zookeeper's mode.")


def _base_name(name: str) -> str | None:
    match = _LISTENER_CONFIG.fullmatch(name)
    return match.group(1) if match else None


def _dynamic_def(name: str) -> ConfigSpec | None:
    """The config ``DynamicConfig.Broker`` would parse ``name`` (or its listener-stripped base) as."""
    spec = BROKER_CONFIGS.get(_base_name(name) or name)
    return spec if spec is not None and spec.dynamic else None


def _per_broker_only(name: str) -> bool:
    """``DynamicBrokerConfig.perBrokerConfigs``: in PerBrokerConfigs, or listener-prefixed and not cluster-level."""
    base = _base_name(name)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    spec = BROKER_CONFIGS.get(name)
    return spec is not None and spec.scope is Scope.PER_BROKER


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def validate_dynamic_broker_update(props: Mapping[str, str | None], *, per_broker: bool,
                                   allow_custom: bool = True) -> None:
    """What ``DynamicBrokerConfig.validateConfigs`` (3.9) refuses in an AlterConfigs /
    IncrementalAlterConfigs BROKER resource, in its order. ``per_broker`` is False for the cluster default
    (an empty resource name). ``None`` values (deletes) are dropped first, as Kafka does.

    Kafka throws ``ConfigException`` and ``ZkAdminManager.alterConfigs`` / ``incrementalAlterConfigs``
    answer ``InvalidConfigurationException`` (INVALID_CONFIG, 40) with the message prefixed by
    ``Invalid config value for resource ConfigResource(type=BROKER, name='<id>'): `` (see
    :func:`alter_error_message`). Names Kafka does not know are custom configs, which ZooKeeper-mode Kafka
    accepts (``DynamicConfig.Broker.validate`` runs with ``customPropsAllowed = true``); pass
    ``allow_custom=False`` to refuse them with the text Kafka uses for unknown quota entity configs.
    """
    names = [k for k, v in props.items() if v is not None]
    fixed = [k for k in names if k in BROKER_CONFIGS and not BROKER_CONFIGS[k].dynamic]
    if fixed:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    bare = [k for k in names if k in LISTENER_ONLY_CONFIGS]
    if bare:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "These security configs can be dynamically updated only per-listener "
                                                   f"using the listener prefix: {_scala_set(bare)}")
    custom = [k for k in names if k not in BROKER_CONFIGS and (_base_name(k) or k) not in BROKER_CONFIGS]
    if custom and not allow_custom:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"requirement failed: Unknown Dynamic Configuration: {_scala_set(custom)}.")
    for name in names:
        spec = _dynamic_def(name)
        value = props[name]
        if spec is not None and value is not None:
            _check(spec, value, _base_name(name) or name)
    if not per_broker:
        local = [k for k in names if _per_broker_only(k)]
        if local:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Cannot update these configs at default cluster level, "
                                                       f"broker id must be specified: {_scala_set(local)}")


def validate_broker_config(name: str, value: str | None, *, dynamic: bool, per_broker: bool = True,
                           allow_custom: bool = True) -> None:
    """One broker config. ``dynamic=True``: an AlterConfigs change, checked as
    :func:`validate_dynamic_broker_update` does. ``dynamic=False``: a static (server.properties) value,
    parsed as ``KafkaConfig`` would; names Kafka does not define are passed through as Kafka does."""
    if dynamic:
        validate_dynamic_broker_update({name: value}, per_broker=per_broker, allow_custom=allow_custom)
        return
    spec = BROKER_CONFIGS.get(name) or BROKER_CONFIGS.get(_base_name(name) or "")
    if spec is not None and value is not None:
        _check(spec, value, name)


def alter_error_message(resource_type: str, resource_name: str, message: str) -> str:
    """The text ``ZkAdminManager`` answers a ``ConfigException`` with in (Incremental)AlterConfigs."""
    return f"Invalid config value for resource ConfigResource(type={resource_type}, name='{resource_name}'): {message}"


# --- effective values and DescribeConfigs -------------------------------------------------------------


def broker_config_synonyms(name: str, *, match_listener_override: bool = True) -> list[str]:
    """``DynamicBrokerConfig.brokerConfigSynonyms``: the names that set the same broker config, in precedence."""
    # Kafka's four cases are the topic synonym groups with more than one name; a group answers for its first name
    # and for its unit-converted ones (log.roll.hours, ...), not for log.flush.scheduler.interval.ms.
    for spec in TOPIC_CONFIGS.values():
        group = [s for s, _unit in spec.synonyms]
        if name in group and len(group) > 1 and (name == group[0] or spec.synonyms[group.index(name)][1] is not Unit.MS):
            return group
    base = _base_name(name)
    if base is not None and match_listener_override:
        return [name, next((m for m in LISTENER_MECHANISM_CONFIGS if base.endswith(m)), base)]
    return [name]


def usable_dynamic_configs(props: Mapping[str, str], *, per_broker: bool) -> dict[str, str]:
    """What ``DynamicBrokerConfig.fromPersistentProps`` keeps of a /config/brokers/<id> (``per_broker``) or
    /config/brokers/<default> znode: values that parse, no read-only configs, no bare SSL store configs, and at
    the default level no per-broker ones."""
    kept: dict[str, str] = {}
    for name, value in props.items():
        spec = _dynamic_def(name)
        if spec is not None:
            try:
                _check(spec, value, name)
            except KafkaError:
                continue
        fixed = name in BROKER_CONFIGS and not BROKER_CONFIGS[name].dynamic
        if not fixed and name not in LISTENER_ONLY_CONFIGS and (per_broker or not _per_broker_only(name)):
            kept[name] = value
    return kept


def _merge(static_props: Mapping[str, str], *overrides: Mapping[str, str]) -> dict[str, str]:
    """``DynamicBrokerConfig.overrideProps``: each override replaces the key and drops its synonyms."""
    merged = dict(static_props)
    for props in overrides:
        for name, value in props.items():
            for synonym in broker_config_synonyms(name, match_listener_override=False):
                merged.pop(synonym, None)
            merged[name] = value
    return merged


def _broker_value(name: str, merged: Mapping[str, str]) -> Parsed | None:
    """The parsed value ``KafkaConfig`` would hold for a broker config (its default when unset or unparsable)."""
    spec = BROKER_CONFIGS[name]
    for raw in ([merged[name]] if name in merged else []) + ([spec.default] if spec.default is not None else []):
        try:
            return _check(spec, raw)
        except KafkaError:
            continue
    return None


def merged_broker_props(static_props: Mapping[str, str], dynamic_broker: Mapping[str, str],
                        dynamic_default: Mapping[str, str]) -> dict[str, str]:
    """The broker's properties once ``DynamicBrokerConfig`` laid the usable dynamic levels over the static
    ones: per broker over cluster default over ``server.properties``."""
    return _merge(static_props, usable_dynamic_configs(dynamic_default, per_broker=False),
                  usable_dynamic_configs(dynamic_broker, per_broker=True))


def broker_value(name: str, merged: Mapping[str, str]) -> Parsed | None:
    """The value ``KafkaConfig`` holds for a broker config of :func:`merged_broker_props` (its default when
    unset or unparsable; None for a config without a default that is not set)."""
    return _broker_value(name, merged)


def parse_list(value: str) -> list[str]:
    """A LIST config's value as ``ConfigDef.parseType`` reads it: trimmed, split at commas (and the
    whitespace around them), empty entries kept."""
    s = _java_trim(value)
    return _LIST_SEPARATOR.split(s) if s else []


def _topic_default(spec: ConfigSpec, merged: Mapping[str, str]) -> str | None:
    """The value a topic without an override gets from the broker (``KafkaConfig.extractLogConfigMap``):
    the first synonym that is set, else the first with a default, times its unit (``logRetentionTimeMillis``,
    ``logRollTimeMillis``, ``logFlushIntervalMs``); topic-only configs keep their own default."""
    if not spec.synonyms:
        return spec.default
    chosen = next((s for s in spec.synonyms if s[0] in merged and _broker_value(s[0], merged) is not None), None)
    chosen = chosen or next((s for s in spec.synonyms if BROKER_CONFIGS[s[0]].default is not None), spec.synonyms[0])
    value = _broker_value(chosen[0], merged)
    if value is None:
        return spec.default
    if isinstance(value, int) and not isinstance(value, bool) and chosen[1] is not Unit.MS:
        value *= chosen[1].value
    if spec.name == "retention.ms" and isinstance(value, int) and value < 0:
        value = -1  # KafkaConfig.logRetentionTimeMillis
    if spec.name == "message.format.version":
        value = metadata_version(str(value)) or str(value)  # logMessageFormatVersion.version
    return _format(value)


def _type_of(name: str) -> ConfigType | None:
    """``KafkaConfig.configType``: the exact name, else what its synonyms (listener base) are."""
    for candidate in [name, *broker_config_synonyms(name)]:
        spec = BROKER_CONFIGS.get(candidate)
        if spec is not None:
            return spec.type
    return None


def _synonyms(primary: str, names: list[str], sensitive: bool, levels: list[tuple[ConfigSource, Mapping[str, str]]]) -> list[Synonym]:
    """``ConfigHelper.configSynonyms``: every level's value of every name, then everything before ``primary``
    dropped (so a topic whose broker value comes only from e.g. log.retention.hours reports DEFAULT_CONFIG)."""
    found = [Synonym(n, None if sensitive else m[n], source) for source, m in levels for n in names if n in m]
    while found and found[0].name != primary:
        found.pop(0)
    return found


# DynamicBrokerConfig.staticDefaultConfigs: KafkaConfig's non-null defaults as strings
_DEFAULTS = {s.name: s.default for s in BROKER_CONFIGS.values() if s.default is not None and not s.quota}


def _levels(dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
            static_props: Mapping[str, str]) -> list[tuple[ConfigSource, Mapping[str, str]]]:
    return [(ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker), (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default),
            (ConfigSource.STATIC_BROKER_CONFIG, static_props), (ConfigSource.DEFAULT_CONFIG, _DEFAULTS)]


def describe_topic(topic_overrides: Mapping[str, str], dynamic_broker: Mapping[str, str],
                   dynamic_default: Mapping[str, str], static_props: Mapping[str, str]) -> list[Entry]:
    """Every topic config as DescribeConfigs v4 reports it (``ConfigHelper.createTopicConfigEntry``, 3.9).

    ``dynamic_broker`` and ``dynamic_default`` are the /config/brokers/<id> and /config/brokers/<default>
    znodes as stored; what Kafka would ignore of them is dropped here (:func:`usable_dynamic_configs`)."""
    dyn = usable_dynamic_configs(dynamic_broker, per_broker=True)
    dflt = usable_dynamic_configs(dynamic_default, per_broker=False)
    merged = _merge(static_props, dflt, dyn)
    levels = _levels(dyn, dflt, static_props)
    out: list[Entry] = []
    for spec in TOPIC_CONFIGS.values():
        value = normalize(spec, topic_overrides[spec.name]) if spec.name in topic_overrides else _topic_default(spec, merged)
        synonyms = []
        if spec.synonyms:
            primary = spec.synonyms[0][0]
            synonyms = _synonyms(primary, broker_config_synonyms(primary), False, levels)
        if spec.name in topic_overrides:
            synonyms.insert(0, Synonym(spec.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(Entry(spec.name, value, source, False, False, tuple(synonyms), spec.type, spec.doc))
    for name in sorted(set(topic_overrides) - set(TOPIC_CONFIGS)):  # unknown type: treated as sensitive
        out.append(Entry(name, None, ConfigSource.DYNAMIC_TOPIC_CONFIG, False, True,
                         (Synonym(name, None, ConfigSource.DYNAMIC_TOPIC_CONFIG),), ConfigType.UNKNOWN, None))
    return out


def _broker_entry(name: str, raw: Parsed | None, per_broker: bool,
                  levels: list[tuple[ConfigSource, Mapping[str, str]]]) -> Entry:
    """``ConfigHelper.createBrokerConfigEntry``."""
    type_ = _type_of(name)
    sensitive = type_ is None or type_ is ConfigType.PASSWORD  # KafkaConfig.maybeSensitive
    value = None if sensitive or raw is None else raw if isinstance(raw, str) else _format(raw)
    synonyms = [s for s in _synonyms(name, broker_config_synonyms(name), sensitive, levels)
                if per_broker or s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    spec = BROKER_CONFIGS.get(name)
    read_only = spec is None or spec.quota or not spec.dynamic  # !DynamicBrokerConfig.AllDynamicConfigs.contains
    return Entry(name, value, source, read_only, sensitive, tuple(synonyms), type_ or ConfigType.UNKNOWN,
                 spec.doc if spec else None)


def describe_broker(broker_id: int | None, dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
                    static_props: Mapping[str, str]) -> list[Entry]:
    """Broker configs as DescribeConfigs v4 reports them (``ConfigHelper.describeConfigs``, 3.9).

    ``broker_id`` None is the cluster-default resource (empty name): only what /config/brokers/<default>
    sets, with only DYNAMIC_DEFAULT_BROKER_CONFIG synonyms. Otherwise every non-internal config plus every
    other key that is set (``allConfigs``: originals ++ nonInternalValues); a key Kafka does not know has
    no type, so it is reported sensitive with no value, as Kafka does. The caller checks that ``broker_id``
    is this broker's (Kafka: INVALID_REQUEST "Unexpected broker id, ...")."""
    dyn = usable_dynamic_configs(dynamic_broker, per_broker=True)
    dflt = usable_dynamic_configs(dynamic_default, per_broker=False)
    levels = _levels(dyn, dflt, static_props)
    if broker_id is None:
        return [_broker_entry(name, value, False, levels) for name, value in dflt.items()]
    merged = _merge(static_props, dflt, dyn)
    known = [s.name for s in BROKER_CONFIGS.values() if not s.internal and not s.quota]
    out = [_broker_entry(name, _broker_value(name, merged), True, levels) for name in known]
    # the rest of originals (internal, quota, listener-prefixed and custom keys) as the strings they were set to
    return out + [_broker_entry(name, merged[name], True, levels) for name in sorted(set(merged) - set(known))]
