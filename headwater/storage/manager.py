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

A move between log dirs (Kafka's KIP-113) keeps a partition's current log where it is and fills a
future log in the target dir; ``replace_current_with_future`` swaps them with two renames. The
current goes first, to ``<topic>-<partition>.<the future's id>-delete``, then the future takes the
plain name. A kill between the two leaves that ``-delete`` dir, the future and no current log: a
load then promotes the future, which was complete when the swap began (Kafka renames the future
first and refuses to start on the two copies a crash there leaves). Every other future loads as a
future, and the broker resumes its move.
"""

from __future__ import annotations

import contextlib
import functools
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
_DELETED_DIR = re.compile(r"^.+-\d+\.(?P<id>[0-9a-f]{32})-delete$")
FUTURE_DIR_SUFFIX = "-future"
_FUTURE_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.(?P<id>[0-9a-f]{32})-future$")


class DuplicatePartitionError(KafkaError):
    """One partition in two log dirs: the layout is wrong, start-up stops (as Kafka's does)."""


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def future_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """Kafka's ``UnifiedLog.logFutureDirName``: ``<topic>-<partition>.<unique id>-future``."""
    return f"{topic}-{partition}.{unique_id}{FUTURE_DIR_SUFFIX}"


def remove_files(removals: list[Callable[[], None]]) -> None:
    """Run file removals ``LogManager.housekeep`` returned; one that fails (its dir gone offline)
    does not stop the rest."""
    for removal in removals:
        try:
            removal()
        except OSError:
            log.exception("removing a deleted log file failed")


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
        # Future logs (moves between log dirs) and their dirs; a partition has at most one.
        self._future: dict[tuple[str, int], PartitionLog] = {}
        self._future_dir_of: dict[tuple[str, int], Path] = {}
        # Kafka's preferredLogDirs: where AlterReplicaLogDirs wants a replica not created here yet.
        self._preferred_dirs: dict[tuple[str, int], Path] = {}
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
        swapped = self._swap_ids()
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir, set(swapped.values()))
            except (OSError, KafkaError) as exc:
                if isinstance(exc, DuplicatePartitionError) or (
                        isinstance(exc, KafkaError) and exc.code != ErrorCode.KAFKA_STORAGE_ERROR):
                    raise  # a layout error, not a failing disk: the operator must look
                # Kafka starts with the dirs it can read and reports the others offline.
                log.error("log dir %s failed to load, offline: %s", log_dir, exc)
                self.take_offline(log_dir)
        if not self.online_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "no log dir could be loaded")
        self._finish_interrupted_swaps(swapped)
        self._loaded = True
        self.checkpoint()

    def _load_dir(self, log_dir: Path, keep: set[Path]) -> None:
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
                if child not in keep:
                    shutil.rmtree(child, ignore_errors=True)
                continue
            future = _FUTURE_DIR.match(child.name)
            if future is not None:
                self._load_future(child, (future["topic"], int(future["partition"])), log_dir, clean,
                                  recovery_points, log_starts, high_watermarks)
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

    def _load_future(self, child: Path, key: tuple[str, int], log_dir: Path, clean: bool,
                     recovery_points: dict[tuple[str, int], int], log_starts: dict[tuple[str, int], int],
                     high_watermarks: dict[tuple[str, int], int]) -> None:
        if key in self._future:
            raise DuplicatePartitionError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"future logs of {key[0]}-{key[1]} exist in both {self._future_dir_of[key]} and {log_dir}",
            )
        # Within one log dir a partition is either current or future, so the dir's checkpoints
        # (keyed by partition) hold the future's offsets.
        plog = PartitionLog(key[0], key[1], child, self._config_for(key[0]), clock_ms=self._clock_ms,
                            recovery_point=recovery_points.get(key, 0), log_start_offset=log_starts.get(key, 0),
                            high_watermark=high_watermarks.get(key, 0), clean_shutdown=clean)
        self._watch(plog, log_dir)
        self._future[key] = plog
        self._future_dir_of[key] = log_dir

    def _swap_ids(self) -> dict[str, Path]:
        """The ``-delete`` dirs (by id) that share their id with a future log, read before any dir
        is loaded: the current log renamed by a swap that a kill interrupted. Such a dir stays
        until its future is promoted, in case the future's dir cannot be loaded this time."""
        deleted: dict[str, Path] = {}
        futures: set[str] = set()
        for log_dir in self.log_dirs:
            with contextlib.suppress(OSError):  # an unreadable dir goes offline in _load_dir
                for child in log_dir.iterdir():
                    if m := _DELETED_DIR.match(child.name):
                        deleted[m["id"]] = child
                    elif m := _FUTURE_DIR.match(child.name):
                        futures.add(m["id"])
        return {i: path for i, path in deleted.items() if i in futures}

    def _finish_interrupted_swaps(self, swapped: dict[str, Path]) -> None:
        for key, plog in list(self._future.items()):
            m = _FUTURE_DIR.match(plog.directory.name)
            if m is None or m["id"] not in swapped or key in self._logs or key in self._offline_partitions:
                continue
            log_dir = self._future_dir_of.pop(key)
            del self._future[key]
            with plog.flushes_held():
                plog.rename_dir(log_dir / partition_dir_name(*key))
            fsync_dir(log_dir)
            self._logs[key] = plog
            self._dir_of[key] = log_dir
            shutil.rmtree(swapped[m["id"]], ignore_errors=True)
            log.warning("%s-%d: finished the move to %s that a restart interrupted", key[0], key[1], log_dir)

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
        preferred = self._preferred_dirs.pop(key, None)  # satisfied now, as Kafka drops it
        if preferred in online:
            log_dir = preferred
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
        self._preferred_dirs.pop(key, None)
        self.delete_future(topic, partition)  # Kafka's Partition.delete drops both logs
        plog = self._logs.pop(key, None)
        if plog is None:
            return
        self._retire(plog, self._dir_of.pop(key), uuid.uuid4().hex)

    def _retire(self, plog: PartitionLog, log_dir: Path, unique_id: str) -> None:
        target = log_dir / f"{partition_dir_name(plog.topic, plog.partition)}.{unique_id}{DELETE_DIR_SUFFIX}"
        try:
            plog.directory.rename(target)
            fsync_dir(log_dir)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"deleting {plog.directory}: {exc}") from exc
        due = self._clock_ms() + plog.config.file_delete_delay_ms
        self._deleted_dirs.append((due, plog, target))

    # ---- moves between log dirs (KIP-113) ------------------------------------------------------

    def find_dir(self, path: str) -> Path:
        """The configured log dir named ``path`` (as configured or absolute), Kafka's
        ``LogManager.isLogDirOnline`` check: LOG_DIR_NOT_FOUND for any other path."""
        for d in self.log_dirs:
            if path in (str(d), str(d.absolute())):
                return d
        raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Log dir {path} is not found in the config.")

    def set_preferred_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Where a replica not created yet goes when it is (Kafka's ``maybeUpdatePreferredLogDir``:
        nothing to remember if its current or future log is there already)."""
        key = (topic, partition)
        if self._dir_of.get(key) != log_dir and self._future_dir_of.get(key) != log_dir:
            self._preferred_dirs[key] = log_dir

    def get_future(self, topic: str, partition: int) -> PartitionLog | None:
        return self._future.get((topic, partition))

    def future_logs(self) -> list[PartitionLog]:
        return list(self._future.values())

    def future_dir_of(self, plog: PartitionLog) -> Path:
        return self._future_dir_of[(plog.topic, plog.partition)]

    def create_future(self, topic: str, partition: int, log_dir: Path) -> PartitionLog:
        """An empty future log of a hosted partition in ``log_dir`` (Kafka's ``getOrCreateLog`` with
        ``isFuture``): refused while any log dir is offline, so that no partition ever gets future
        logs in two dirs, and never in the dir of its current log."""
        key = (topic, partition)
        existing = self._future.get(key)
        if existing is not None:
            return existing
        if self.offline_dirs:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Can not create log for {topic}-{partition} because "
                             f"log directories {','.join(map(str, sorted(self.offline_dirs)))} are offline")
        if self._dir_of.get(key) == log_dir:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Can not create the future log for {topic}-{partition} in the current log directory")
        directory = log_dir / future_dir_name(topic, partition, uuid.uuid4().hex)
        try:
            created = PartitionLog(topic, partition, directory, self._config_for(topic), clock_ms=self._clock_ms)
        except OSError as exc:
            self._io_failed(log_dir, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"creating {directory}: {exc}") from exc
        self._watch(created, log_dir)
        self._future[key] = created
        self._future_dir_of[key] = log_dir
        self._preferred_dirs.pop(key, None)
        log.info("created future log of %s-%d in %s", topic, partition, log_dir)
        return created

    def delete_future(self, topic: str, partition: int) -> None:
        """Drop a move: its future log is renamed ``-delete`` and removed later, like a deleted log."""
        key = (topic, partition)
        plog = self._future.pop(key, None)
        if plog is not None:
            self._retire(plog, self._future_dir_of.pop(key), uuid.uuid4().hex)

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog | None:
        """Swap in a caught-up future log (Kafka's ``replaceCurrentWithFutureLog``); the new current
        log, or None while a flush of either log runs on another thread (try again shortly).

        Two renames, the current first (see the module's notes), each followed by an fsync of its
        log dir, so the second can never be on disk without the first. The old log's descriptors
        stay open for reads in flight until ``file.delete.delay.ms`` has passed, as a deleted one's.
        """
        key = (topic, partition)
        source, dest = self._logs[key], self._future[key]
        source_dir, dest_dir = self._dir_of[key], self._future_dir_of[key]
        m = _FUTURE_DIR.match(dest.directory.name)
        assert m is not None, dest.directory
        name = partition_dir_name(topic, partition)
        with source.flushes_held() as source_held, dest.flushes_held() as dest_held:
            if not (source_held and dest_held):
                return None
            source_path = source.directory
            source.rename_dir(source_dir / f"{name}.{m['id']}{DELETE_DIR_SUFFIX}")
            try:
                fsync_dir(source_dir)
                dest.rename_dir(dest_dir / name)
                fsync_dir(dest_dir)
            except (OSError, KafkaError):
                with contextlib.suppress(OSError, KafkaError):  # the current stays where it was
                    source.rename_dir(source_path)
                raise
        # The high watermark and epochs the current log reached in memory (Kafka copies the high
        # watermark; an epoch begun at the log end without a batch yet would be missing).
        dest.high_watermark = source.high_watermark
        newest = dest.latest_epoch()
        for epoch, start in source.epochs.entries:
            if newest is None or epoch > newest:
                dest.epochs.assign(epoch, start)
        self._logs[key], self._dir_of[key] = dest, dest_dir
        del self._future[key], self._future_dir_of[key]
        self._deleted_dirs.append((self._clock_ms() + source.config.file_delete_delay_ms, source, source.directory))
        log.info("%s-%d: the future log in %s replaced the current log in %s", topic, partition, dest_dir, source_dir)
        return dest

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
        for (t, _), plog in [*self._logs.items(), *self._future.items()]:
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
        # Future logs there stop (their moves with them); their files stay, as Kafka's
        # removeFutureLocalReplica(deleteFromLogDir = false) leaves them.
        for key in [key for key, d in self._future_dir_of.items() if d == log_dir]:
            del self._future_dir_of[key]
            self._future.pop(key).close_without_flush()
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
            logs += [p for key, p in self._future.items() if self._future_dir_of[key] == log_dir]
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
        return [p for p in [*self._logs.values(), *self._future.values()] if p.flush_due]

    def logs_to_flush(self, now_ms: int) -> list[PartitionLog]:
        """Logs the housekeeping flushes now (read on the event loop, flushed by ``flush_logs``):
        those that rolled since their last flush, and those whose flush.ms says their unflushed
        data has waited long enough (Kafka's LogManager.flushDirtyLogs)."""
        return [p for p in [*self._logs.values(), *self._future.values()]
                if p.flush_due or p.flush_by_time_due(now_ms)]

    @staticmethod
    def flush_logs(logs: list[PartitionLog]) -> None:
        """Flush ``logs`` (``rolled_logs``) on a worker thread: the fsyncs a roll left for later.
        A log whose dir fails is reported by the log itself; the others are still flushed."""
        for plog in logs:
            with contextlib.suppress(KafkaError):
                plog.flush()

    def tick(self, now_ms: int, *, enforce_retention: bool = True) -> None:
        """``housekeep``, and its removals run here."""
        remove_files(self.housekeep(now_ms, enforce_retention=enforce_retention))

    def housekeep(self, now_ms: int, *, enforce_retention: bool = True) -> list[Callable[[], None]]:
        """Retention (when asked), and the files whose delete delay has passed, taken from the logs.
        Cheap when idle. Returns their removal for the caller to run, as Kafka removes them on a
        scheduler thread: unlinking a file frees its pages, which took 60-80 ms per 256 MiB of a
        removed replica on tmpfs, and on the broker's event loop that was a stall of every request.

        The broker asks for retention only every ``log.retention.check.interval.ms``, as Kafka
        does, so records produced with old timestamps are not deleted the moment they arrive.
        """
        removals: list[Callable[[], None]] = []
        for plog in self._logs.values():
            try:
                if enforce_retention:
                    plog.enforce_retention(now_ms)
                removals += plog.take_expired_files(now_ms)
                plog.release_idle_files(now_ms)
            except (KafkaError, OSError):
                # One failing partition must not stop retention for the others; it is retried next tick.
                log.exception("retention failed for %s-%d", plog.topic, plog.partition)
        for plog in self._future.values():
            # A future log gets no retention of its own: its log start follows the current log's.
            with contextlib.suppress(KafkaError, OSError):
                removals += plog.take_expired_files(now_ms)
                plog.release_idle_files(now_ms)
        if self._deleted_dirs and min(t for t, _, _ in self._deleted_dirs) <= now_ms:
            # A fetch may still be sending from a log deleted just after it was read (SEND_GRACE_MS).
            def ready(d: tuple[int, PartitionLog | None, Path]) -> bool:
                return d[0] <= now_ms and (d[1] is None or now_ms - d[1].last_read_ms >= SEND_GRACE_MS)

            due = [d for d in self._deleted_dirs if ready(d)]
            self._deleted_dirs = [d for d in self._deleted_dirs if not ready(d)]
            removals += [functools.partial(self._remove_deleted, doomed, path) for _, doomed, path in due]
        return removals

    @staticmethod
    def _remove_deleted(plog: PartitionLog | None, path: Path) -> None:
        if plog is not None:
            plog.close_without_flush()
        shutil.rmtree(path, ignore_errors=True)

    def flush(self) -> None:
        for plog in [*self._logs.values(), *self._future.values()]:
            plog.flush()

    def close(self) -> None:
        """Flush and close every log, checkpoint, then write the clean-shutdown marker."""
        for plog in [*self._logs.values(), *self._future.values()]:
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
