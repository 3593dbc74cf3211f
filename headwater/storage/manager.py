"""All partition logs of a broker, spread over one or more log directories.

Layout of a log directory (Kafka's)::

    <log dir>/
      .kafka_cleanshutdown                written by close(), removed by load()
      recovery-point-offset-checkpoint    per partition: offsets below it were fsynced
      log-start-offset-checkpoint         per partition: the log start offset
      replication-offset-checkpoint       per partition: the high watermark
      <topic>-<partition>/                one PartitionLog
      <topic>-<partition>.<uuid hex>-delete/   a deleted partition, removed by tick()
      <topic>-<partition>.<uuid hex>-future/   a future log: the partition moving here from another
                                          log dir of this broker (AlterReplicaLogDirs)

Rules: a partition lives in exactly one log dir; new partitions go to the online dir holding the
fewest, leaving out cordoned dirs (KIP-1066) unless every one is. An I/O error in any log of a dir (the disk is full, failing or gone) takes the whole dir
offline, as Kafka's LogDirFailureChannel does: the manager records it, the broker calls
``take_offline`` and from then on that dir's partitions are neither served nor created until the
broker restarts; the other dirs carry on. The clean-shutdown marker exists only while no broker has the logs open, so finding it on load
means every file was flushed and closed, and recovery can trust the files.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from headwater.storage.config import LogConfig
from headwater.storage.files import fsync_dir, raise_open_file_limit
from headwater.storage.log import SEND_GRACE_MS, PartitionLog

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_DELETED_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")


class DuplicatePartitionError(KafkaError):
    """One partition in two log dirs: the layout is wrong, start-up stops (as Kafka's does)."""


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(
        self, log_dirs: list[Path], default_config: LogConfig, *, clock_ms: Callable[[], int]
    ) -> None:
        if not log_dirs:
            raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, "at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._clock_ms = clock_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._checkpointed: dict[Path, dict[tuple[str, int], int]] = {}  # what checkpoint() last wrote
        # (due time, log whose fds close then, renamed directory)
        self._deleted_dirs: list[tuple[int, PartitionLog | None, Path]] = []
        self._loaded = False
        self.offline_dirs: set[Path] = set()
        # KIP-1066: dirs that take no new partition (cordoned.log.dirs); their logs keep serving.
        self.cordoned_dirs: frozenset[Path] = frozenset()
        self._offline_partitions: dict[tuple[str, int], Path] = {}
        self._failed_dirs: list[Path] = []  # failed, not yet taken offline
        self._failed_lock = threading.Lock()  # logs report failures from flush threads too
        # Called (from whichever thread saw it) when a dir first fails; the broker schedules
        # take_offline on its loop.
        self.on_dir_failure: Callable[[Path], None] | None = None

    # ---- load ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Open every partition directory in every log dir, recovering those not shut down cleanly."""
        soft, hard = raise_open_file_limit()
        log.info("open-file limit: %d (hard %d)", soft, hard)
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir)
            except (OSError, KafkaError) as exc:
                if isinstance(exc, DuplicatePartitionError) or (
                        isinstance(exc, KafkaError) and exc.code != ErrorCode.KAFKA_STORAGE_ERROR):
                    raise  # a layout error, not a failing disk: the operator must look
                # Kafka starts with the dirs it can read and reports the others offline.
                log.error("log dir %s failed to load, offline: %s", log_dir, exc)
                self.take_offline(log_dir)
        if not self.online_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "no log dir could be loaded")
        self._loaded = True
        self.checkpoint()

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = read_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if _DELETED_DIR.match(child.name):
                # A delete that a restart interrupted: nothing can be reading it now.
                shutil.rmtree(child, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(child.name)
            if m is None:
                continue
            key = (m["topic"], int(m["partition"]))
            if key in self._logs:
                raise DuplicatePartitionError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"partition {key[0]}-{key[1]} exists in both {self._dir_of[key]} and {log_dir}",
                )
            self._logs[key] = PartitionLog(
                key[0],
                key[1],
                child,
                self._config_for(key[0]),
                clock_ms=self._clock_ms,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_starts.get(key, 0),
                high_watermark=high_watermarks.get(key, 0),
                clean_shutdown=clean,
            )
            self._watch(self._logs[key], log_dir)
            self._dir_of[key] = log_dir
        if clean:
            # From here on the files change again; a crash before close() must trigger recovery.
            marker.unlink()
            fsync_dir(log_dir)

    # ---- partitions ------------------------------------------------------------------------------

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition's log is in a dir that failed: KAFKA_STORAGE_ERROR until the broker restarts."""
        return (topic, partition) in self._offline_partitions

    def cordon(self, dirs: list[Path]) -> None:
        """These log dirs take no new partition from now on (and no others are cordoned)."""
        self.cordoned_dirs = frozenset(Path(d) for d in dirs)

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        if config is not None:
            self.update_config(topic, config)
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        if key in self._offline_partitions:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{topic}-{partition} is in the offline log dir {self._offline_partitions[key]}")
        online = self.online_dirs
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log dir is offline")
        counts = self._dir_counts()
        # Kafka's LogManager.nextLogDirs: the uncordoned dir holding the fewest (ties go to the first
        # listed); when every one is cordoned (the controller placed it before it learnt), the first.
        open_dirs = [d for d in online if d not in self.cordoned_dirs] or online[:1]
        log_dir = min(open_dirs, key=lambda d: counts[d])
        log_dir.mkdir(parents=True, exist_ok=True)
        directory = log_dir / partition_dir_name(topic, partition)
        try:
            # The new directory's entry in log_dir is made durable by the log's first flush.
            created = PartitionLog(
                topic, partition, directory, self._config_for(topic), clock_ms=self._clock_ms
            )
        except (OSError, KafkaError) as exc:
            if isinstance(exc, KafkaError) and exc.code != ErrorCode.KAFKA_STORAGE_ERROR:
                raise
            # The partition stays tied to this dir (offline with it): created again in another dir, it
            # would exist twice once this one is back, and a restart would refuse to load either.
            self._offline_partitions[key] = log_dir
            self._io_failed(log_dir, exc)
            if isinstance(exc, KafkaError):
                raise
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"creating {directory}: {exc}") from exc
        self._watch(created, log_dir)
        self._logs[key] = created
        self._dir_of[key] = log_dir
        return created

    def delete(self, topic: str, partition: int) -> None:
        """Rename the partition dir to ``<topic>-<p>.<uuid hex>-delete``; tick() removes it later.

        Its fds stay open until then, for fetches still sending from it.
        """
        key = (topic, partition)
        plog = self._logs.pop(key, None)
        if plog is None:
            return
        log_dir = self._dir_of.pop(key)
        target = log_dir / f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            plog.directory.rename(target)
            fsync_dir(log_dir)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"deleting {plog.directory}: {exc}") from exc
        due = self._clock_ms() + plog.config.file_delete_delay_ms
        self._deleted_dirs.append((due, plog, target))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def _dir_counts(self) -> dict[Path, int]:
        if len(self.log_dirs) == 1:
            return {self.log_dirs[0]: len(self._logs)}  # no need to count 10,000 partitions one by one
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return counts

    def update_config(self, topic: str, config: LogConfig) -> None:
        # Called for every replica a LeaderAndIsr creates: with nothing changed, it must not visit
        # every log of the broker (10,000 partitions created at once would cost 10,000 squared).
        if self._topic_configs.get(topic) == config:
            return
        self._topic_configs[topic] = config
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.config = config

    def log_dir_of(self, log: PartitionLog) -> Path:
        return self._dir_of[(log.topic, log.partition)]

    # ---- failed dirs -----------------------------------------------------------------------------

    def _watch(self, plog: PartitionLog, log_dir: Path) -> None:
        plog.on_io_error = lambda exc: self._io_failed(log_dir, exc)

    def _io_failed(self, log_dir: Path, exc: BaseException) -> None:
        with self._failed_lock:
            if log_dir in self.offline_dirs or log_dir in self._failed_dirs:
                return
            self._failed_dirs.append(log_dir)
        log.error("I/O error in log dir %s, taking it offline: %s", log_dir, exc)
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir)

    def report_io_error(self, log_dir: Path, exc: BaseException) -> None:
        """An I/O error in ``log_dir`` met outside a log's own methods (the cleaner's files)."""
        self._io_failed(log_dir, exc)

    def failed_dirs(self) -> list[Path]:
        """Dirs that failed and are not offline yet (the broker takes them offline)."""
        with self._failed_lock:
            return list(self._failed_dirs)

    def take_offline(self, log_dir: Path) -> list[tuple[str, int]]:
        """Close every log of ``log_dir`` and forget it until restart; return its partitions.

        Nothing is flushed or deleted: the files stay as they are for recovery after a restart."""
        with self._failed_lock:
            if log_dir in self.offline_dirs:
                return []
            self.offline_dirs.add(log_dir)
            if log_dir in self._failed_dirs:
                self._failed_dirs.remove(log_dir)
        keys = [key for key, d in self._dir_of.items() if d == log_dir]
        for key in keys:
            plog = self._logs.pop(key)
            del self._dir_of[key]
            self._offline_partitions[key] = log_dir
            plog.close_without_flush()
        doomed = [d for d in self._deleted_dirs if d[2].parent == log_dir]
        self._deleted_dirs = [d for d in self._deleted_dirs if d[2].parent != log_dir]
        for _, plog_or_none, _path in doomed:
            if plog_or_none is not None:
                plog_or_none.close_without_flush()
        return keys

    # ---- background work -------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three offset checkpoints of every log dir, each atomically."""
        self.write_checkpoints(self.checkpoint_contents())

    def checkpoint_contents(self) -> list[tuple[Path, Path, dict[tuple[str, int], int]]]:
        """(log dir, checkpoint file, offsets) of each checkpoint that changed since it was last
        written: read where the logs live (the event loop), written by ``write_checkpoints``
        anywhere. A file whose offsets did not change is left alone: a broker with 10,000 idle
        partitions otherwise rewrote (and fsynced) 30,000 lines every 5 s."""
        out = []
        for log_dir in self.online_dirs:
            logs = [p for key, p in self._logs.items() if self._dir_of[key] == log_dir]
            for name, offsets in (
                (RECOVERY_POINT_CHECKPOINT, {(p.topic, p.partition): p.recovery_point for p in logs}),
                (LOG_START_OFFSET_CHECKPOINT, {(p.topic, p.partition): p.log_start_offset for p in logs}),
                (REPLICATION_OFFSET_CHECKPOINT, {(p.topic, p.partition): p.high_watermark for p in logs}),
            ):
                path = log_dir / name
                if self._checkpointed.get(path) != offsets:
                    out.append((log_dir, path, offsets))
        return out

    def write_checkpoints(self, contents: list[tuple[Path, Path, dict[tuple[str, int], int]]]) -> None:
        """Write what ``checkpoint_contents`` returned; safe on a worker thread (files only)."""
        failed: set[Path] = set()
        for log_dir, path, offsets in contents:
            if log_dir in failed:
                continue
            try:
                write_offsets(path, offsets)
                self._checkpointed[path] = offsets
            except OSError as exc:
                # The other dirs' checkpoints still get written; this one goes offline.
                failed.add(log_dir)
                self._io_failed(log_dir, exc)

    def rolled_logs(self) -> list[PartitionLog]:
        """Logs that rolled a segment since their last flush (read on the event loop)."""
        return [p for p in self._logs.values() if p.flush_due]

    def logs_to_flush(self, now_ms: int) -> list[PartitionLog]:
        """Logs the housekeeping flushes now (read on the event loop, flushed by ``flush_logs``):
        those that rolled since their last flush, and those whose flush.ms says their unflushed
        data has waited long enough (Kafka's LogManager.flushDirtyLogs)."""
        return [p for p in self._logs.values() if p.flush_due or p.flush_by_time_due(now_ms)]

    @staticmethod
    def flush_logs(logs: list[PartitionLog]) -> None:
        """Flush ``logs`` (``rolled_logs``) on a worker thread: the fsyncs a roll left for later.
        A log whose dir fails is reported by the log itself; the others are still flushed."""
        for plog in logs:
            with contextlib.suppress(KafkaError):
                plog.flush()

    def tick(self, now_ms: int, *, enforce_retention: bool = True) -> None:
        """Retention (when asked), and removal of files whose delete delay has passed. Cheap when idle.

        The broker asks for retention only every ``log.retention.check.interval.ms``, as Kafka
        does, so records produced with old timestamps are not deleted the moment they arrive.
        """
        for plog in self._logs.values():
            try:
                if enforce_retention:
                    plog.enforce_retention(now_ms)
                plog.delete_expired_files(now_ms)
                plog.release_idle_files(now_ms)
            except (KafkaError, OSError):
                # One failing partition must not stop retention for the others; it is retried next tick.
                log.exception("retention failed for %s-%d", plog.topic, plog.partition)
        if self._deleted_dirs and min(t for t, _, _ in self._deleted_dirs) <= now_ms:
            # A fetch may still be sending from a log deleted just after it was read (SEND_GRACE_MS).
            def ready(d: tuple[int, PartitionLog | None, Path]) -> bool:
                return d[0] <= now_ms and (d[1] is None or now_ms - d[1].last_read_ms >= SEND_GRACE_MS)

            due = [d for d in self._deleted_dirs if ready(d)]
            self._deleted_dirs = [d for d in self._deleted_dirs if not ready(d)]
            for _, doomed, path in due:
                self._remove_deleted(doomed, path)

    @staticmethod
    def _remove_deleted(plog: PartitionLog | None, path: Path) -> None:
        if plog is not None:
            plog.close_without_flush()
        shutil.rmtree(path, ignore_errors=True)

    def flush(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def close(self) -> None:
        """Flush and close every log, checkpoint, then write the clean-shutdown marker."""
        for plog in self._logs.values():
            try:
                plog.close()
            except KafkaError as exc:
                if exc.code != ErrorCode.KAFKA_STORAGE_ERROR:
                    raise
                plog.close_without_flush()  # its dir failed (recorded by the log): recovery at start-up
        for _, doomed, path in self._deleted_dirs:
            self._remove_deleted(doomed, path)
        self._deleted_dirs = []
        self.checkpoint()
        # A dir that failed is not marked clean: its logs were not flushed and need recovery.
        for log_dir in self.online_dirs:
            if log_dir in self.failed_dirs():
                continue
            try:
                (log_dir / CLEAN_SHUTDOWN_MARKER).touch()
                fsync_dir(log_dir)
            except OSError as exc:
                log.error("could not mark %s as shut down cleanly: %s", log_dir, exc)
