"""One segment: a ``.log`` file of whole RecordBatch v2 batches plus its two sparse indexes and its
aborted-transaction index (``txn_index.py``).

Invariants (checked by ``validate``): the file holds whole batches with increasing offsets, all in
``[base_offset, next_offset)``; ``size_bytes`` is the file length the log trusts (the file is never
longer after an operation returns); every offset-index entry points at the start of a batch whose
base offset is the entry's offset.

The read path never reads record bytes: it bisects the in-memory offset index and then hops batch
to batch with small ``os.pread`` calls of the batch header.

File descriptors: the index files hold none (see ``index.py``), and the ``.log`` file is opened on
first use (``fd``). The log closes the descriptor of a segment that is no longer appended to once
nothing has read it for a while (``release_fd``), so a broker holds about one descriptor per
partition, not one per segment plus two per index.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import (
    HEADER_SIZE,
    LAST_OFFSET_DELTA_POS,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    parse_header,
    scan_valid_prefix,
)
from headwater.storage.files import pread_upto, pwrite_all
from headwater.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from headwater.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
OFFSET_NAME_DIGITS = 20
# Index entries store offsets relative to the segment base as int32.
MAX_RELATIVE_OFFSET = (1 << 31) - 1
# Recovery reads the log in chunks this large (a batch larger than a chunk is read whole).
RECOVERY_CHUNK_BYTES = 8 << 20

# The first 27 bytes of a batch: enough for base offset, length and last offset delta.
HOP_BYTES = LAST_OFFSET_DELTA_POS + 4
_HOP = struct.Struct(">qi11xi")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def offset_file_name(offset: int, suffix: str) -> str:
    return f"{offset:0{OFFSET_NAME_DIGITS}d}{suffix}"


def parse_offset_name(name: str, suffix: str) -> int | None:
    """The offset ``offset_file_name`` put in ``name``, or None if it is not such a name."""
    stem = name[: -len(suffix)]
    if name.endswith(suffix) and len(stem) == OFFSET_NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, fd: int | None, size_bytes: int, suffix: str = ""
    ) -> None:
        # ``suffix`` names the files of a segment the cleaner is building (``.cleaned``, ``.swap``).
        self.directory = directory
        self.base_offset = base_offset
        self._fd = fd
        self.last_read_ms = 0  # the log's clock when a read last handed out this file; see release_fd
        self.size_bytes = size_bytes
        self.log_path = directory / offset_file_name(base_offset, LOG_SUFFIX + suffix)
        self.offset_index = OffsetIndex(directory / offset_file_name(base_offset, INDEX_SUFFIX + suffix), base_offset)
        self.time_index = TimeIndex(
            directory / offset_file_name(base_offset, TIME_INDEX_SUFFIX + suffix), base_offset
        )
        self.txn_index = TransactionIndex(
            directory / offset_file_name(base_offset, TXN_INDEX_SUFFIX + suffix), base_offset
        )
        self.next_offset = base_offset
        self.max_timestamp_ms = -1
        self.max_timestamp_offset = base_offset  # base offset of the batch holding max_timestamp_ms
        self.bytes_since_index = 0
        # Broker time of the first append, for segment.ms; None while empty.
        self.rolling_base_ms: int | None = None
        # Taken off segment.ms for this segment's time roll (segment.jitter.ms), drawn by the log
        # when the segment is created or loaded: Kafka's LogSegment.rollJitterMs.
        self.roll_jitter_ms = 0
        self.closed = False

    # ---- lifecycle -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, suffix: str = "", *, new_directory: bool = False
    ) -> LogSegment:
        """An empty segment. In a ``new_directory`` (no stale index can be there) the index files
        are created by the first sync; elsewhere they are created, or cut, empty now."""
        path = directory / offset_file_name(base_offset, LOG_SUFFIX + suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = cls(directory, base_offset, fd, 0, suffix)
        if new_directory:
            seg.offset_index.create_later()
            seg.time_index.create_later()
        else:
            seg.offset_index.create_empty()
            seg.time_index.create_empty()
            seg.txn_index.remove_stale()
        return seg

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, suffix: str = "") -> LogSegment:
        path = directory / offset_file_name(base_offset, LOG_SUFFIX + suffix)
        fd = os.open(path, os.O_RDWR)
        return cls(directory, base_offset, fd, os.fstat(fd).st_size, suffix)

    @property
    def fd(self) -> int:
        """The ``.log`` file's descriptor, opened now if it was released (or never opened)."""
        if self._fd is None:
            if self.closed:
                raise OSError(f"{self.log_path}: segment is closed")
            self._fd = os.open(self.log_path, os.O_RDWR)
        return self._fd

    @property
    def has_fd(self) -> bool:
        return self._fd is not None

    def release_fd(self) -> None:
        """Close the ``.log`` descriptor until the next use. Only for a segment that is no longer
        appended to and was fsynced; the caller makes sure no reader still holds it (``last_read_ms``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finalize_time_index(self) -> None:
        # The time index is sparse; its last entry must still hold the true maximum so a restart
        # knows the segment's largest timestamp without scanning it.
        if self.max_timestamp_ms >= 0:
            self.time_index.maybe_append(self.max_timestamp_ms, self.max_timestamp_offset)

    def fsync(self) -> None:
        if self._fd is not None:  # a released descriptor was fsynced before it was closed
            os.fsync(self._fd)
        self.sync_indexes()

    def sync_indexes(self) -> None:
        self.offset_index.sync()
        self.time_index.sync()
        self.txn_index.sync()

    def fds_to_sync(self) -> list[int]:
        """The open ``.log`` descriptor, if any (the indexes sync through ``sync_indexes``)."""
        return [self._fd] if self._fd is not None else []

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def paths(self) -> list[Path]:
        txn = [self.txn_index.path] if self.txn_index.path is not None else []
        return [self.log_path, self.offset_index.path, self.time_index.path, *txn]

    def relocate(self, directory: Path) -> None:
        """Its directory was renamed (a log moved between log dirs): the same files, new paths.
        Open descriptors stay valid; a released one reopens at the new path."""
        self.directory = directory
        self.log_path = directory / self.log_path.name
        self.offset_index.path = directory / self.offset_index.path.name
        self.time_index.path = directory / self.time_index.path.name
        if self.txn_index.path is not None:
            self.txn_index.path = directory / self.txn_index.path.name

    def rename_deleted(self, *, keep_txn_index: bool = False) -> list[Path]:
        """Rename the files with the ``.deleted`` suffix; fds stay open for readers in flight.
        ``keep_txn_index``: the transaction index file stays, now the cleaned segment's that
        replaces this one at the same base offset (see ``retention.replace_segments``)."""
        if keep_txn_index:
            self.txn_index = TransactionIndex(None, self.base_offset)
        renamed = []
        for path in self.paths():
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        self.log_path = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        self.offset_index.path = self.offset_index.path.with_name(
            self.offset_index.path.name + DELETED_SUFFIX
        )
        self.time_index.path = self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX)
        if self.txn_index.path is not None:
            self.txn_index.path = self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX)
        return renamed

    # ---- appends ---------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, int, int, int, int]],
        index_interval_bytes: int,
    ) -> None:
        """Write ``data`` at the end; ``batches`` are (position in data, size, base, last offset, max ts)."""
        start = self.size_bytes
        try:
            pwrite_all(self.fd, data, start)
        except BaseException:
            # Leave no partial batch behind (ENOSPC, EIO): the file ends where it ended before.
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            raise
        for rel, size, base, last, max_ts in batches:
            self._index_batch(start + rel, size, base, last, max_ts, index_interval_bytes)
        self.size_bytes = start + len(data)

    def _index_batch(
        self, position: int, size: int, base: int, last: int, max_ts: int, interval: int
    ) -> None:
        if max_ts > self.max_timestamp_ms:
            self.max_timestamp_ms = max_ts
            self.max_timestamp_offset = base
        if self.bytes_since_index > interval:
            self.offset_index.append(base, position)
            self.time_index.maybe_append(self.max_timestamp_ms, self.max_timestamp_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = last + 1

    def _reset_metadata(self) -> None:
        self.offset_index.clear()
        self.time_index.clear()
        self.next_offset = self.base_offset
        self.max_timestamp_ms = -1
        self.max_timestamp_offset = self.base_offset
        self.bytes_since_index = 0

    # ---- reading headers -------------------------------------------------------------------------

    def hop(self, position: int) -> tuple[int, int, int]:
        """(base offset, whole size, last offset) of the batch at ``position``."""
        data = os.pread(self.fd, HOP_BYTES, position)
        if len(data) < HOP_BYTES:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path}: short header read at {position}"
            )
        base, length, delta = _HOP.unpack(data)
        size = length + LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH or delta < 0 or position + size > self.size_bytes:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path}: bad batch header at {position}"
            )
        return base, size, base + delta

    def read_header(self, position: int) -> BatchHeader:
        data = pread_upto(self.fd, HEADER_SIZE, position)
        try:
            header = parse_header(data)
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path} at {position}: {exc}") from None
        if position + header.size > self.size_bytes:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.log_path}: batch at {position} runs past the end"
            )
        return header

    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        pos = start_position
        while pos < self.size_bytes:
            header = self.read_header(pos)
            yield pos, header
            pos += header.size

    def read_batch(self, position: int, size: int) -> bytes:
        return pread_upto(self.fd, size, position)

    def locate(self, offset: int) -> tuple[int, int, int, int] | None:
        """(position, base, size, last offset) of the first batch whose last offset >= ``offset``."""
        _, pos = self.offset_index.lookup(offset)
        end = self.size_bytes
        while pos < end:
            base, size, last = self.hop(pos)
            if last >= offset:
                return pos, base, size, last
            pos += size
        return None

    def end_position_before(self, offset: int) -> int:
        """Where the batches with base offset < ``offset`` end."""
        if offset >= self.next_offset:
            return self.size_bytes
        found = self.locate(offset)
        if found is None:
            return self.size_bytes
        pos, base, size, _ = found
        return pos if base >= offset else pos + size

    def boundary_at_or_before(self, limit_position: int, start_position: int) -> int:
        """The last batch boundary in [start_position, limit_position]."""
        pos = max(self.offset_index.floor_position(limit_position), start_position)
        while pos < self.size_bytes:
            _, size, _ = self.hop(pos)
            if pos + size > limit_position:
                break
            pos += size
        return pos

    # ---- recovery and load -----------------------------------------------------------------------

    def recover(
        self, index_interval_bytes: int, on_batch: Callable[[BatchHeader, memoryview], None] | None = None
    ) -> int:
        """Re-read the whole file with CRC checks, rebuild the indexes, cut everything after the first flaw.

        ``on_batch`` sees each valid batch (header and bytes) in order; it rebuilds what depends on the
        batches' contents (leader epochs, producer state and the transaction index, which is cleared
        here). Returns the number of bytes cut.
        """
        self._reset_metadata()
        self.txn_index.clear()
        file_size = os.fstat(self.fd).st_size
        self.size_bytes = file_size
        pos = 0
        want = RECOVERY_CHUNK_BYTES
        expected = self.base_offset
        while pos < file_size:
            buf = pread_upto(self.fd, min(max(want, RECOVERY_CHUNK_BYTES), file_size - pos), pos)
            if not buf:
                break
            want = RECOVERY_CHUNK_BYTES
            batches, valid = scan_valid_prefix(buf)
            flawed = False
            for rel, header in batches:
                if (
                    header.base_offset < expected
                    or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET
                ):
                    valid, flawed = rel, True
                    break
                self._index_batch(
                    pos + rel,
                    header.size,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    index_interval_bytes,
                )
                if on_batch is not None:
                    on_batch(header, memoryview(buf)[rel : rel + header.size])
                expected = header.last_offset + 1
            pos += valid
            if flawed:
                break
            left = len(buf) - valid
            if left == 0:
                continue
            if left < HEADER_SIZE:
                if pos + left >= file_size:
                    break  # a torn header at the end of the file
                continue  # the header straddles the chunk edge: read on from it
            try:
                header = parse_header(buf, valid)
            except CorruptRecordError:
                break
            if header.size <= left or pos + header.size > file_size:
                break  # a whole batch with a bad CRC, or a torn one at the end
            want = header.size  # the batch straddles the chunk edge: read it whole
        cut = file_size - pos
        if cut:
            os.ftruncate(self.fd, pos)
        self.size_bytes = pos
        self.finalize_time_index()
        self.offset_index.write_all()
        self.time_index.write_all()
        self.txn_index.write_all()
        return cut

    def load_and_check(self, *, txn_index: bool = True) -> None:
        """Trust the files after a clean shutdown, but check the indexes and hop over the tail.

        Raises IndexCorruptError, OSError or KafkaError when anything disagrees; the caller recovers.
        ``txn_index=False`` leaves the transaction index alone (the caller hands one over).
        """
        self._reset_metadata()
        self.size_bytes = os.fstat(self.fd).st_size
        # An empty segment may never have been synced, so its index files may not exist yet.
        empty = self.size_bytes == 0
        self.offset_index.load(self.size_bytes, missing_ok=empty)
        pos = self.offset_index.last_position()
        expected = self.offset_index.offsets[-1] if len(self.offset_index) else self.base_offset
        first = True
        while pos < self.size_bytes:
            header = self.read_header(pos)
            if (
                first and len(self.offset_index) and header.base_offset != expected
            ) or header.base_offset < expected:
                raise IndexCorruptError(
                    f"{self.log_path}: batch at {pos} has offset {header.base_offset}, expected {expected}"
                )
            first = False
            if header.max_timestamp > self.max_timestamp_ms:
                self.max_timestamp_ms = header.max_timestamp
                self.max_timestamp_offset = header.base_offset
            expected = header.last_offset + 1
            pos += header.size
        self.next_offset = expected
        self.time_index.load(self.next_offset, missing_ok=empty)
        last = self.time_index.last_entry()
        if last is not None and last[0] >= self.max_timestamp_ms:
            self.max_timestamp_ms, self.max_timestamp_offset = last
        self.bytes_since_index = self.size_bytes - self.offset_index.last_position()
        if txn_index:
            self.txn_index.load(self.next_offset)

    def rebuild_from_headers(self, index_interval_bytes: int) -> None:
        """Rebuild indexes and metadata by hopping over the batch headers (no CRC: the bytes are trusted)."""
        self._reset_metadata()
        for pos, header in self.iter_headers():
            self._index_batch(
                pos,
                header.size,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
                index_interval_bytes,
            )
        self.finalize_time_index()
        self.offset_index.write_all()
        self.time_index.write_all()

    def truncate_to(self, offset: int, index_interval_bytes: int) -> int:
        """Drop the batch holding ``offset`` and everything after it; returns bytes removed."""
        found = self.locate(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size_bytes - position
        os.ftruncate(self.fd, position)
        self.size_bytes = position
        # The sparse time index cannot say which maxima came from the cut batches, so rebuild both
        # indexes from the headers that remain. Truncation is rare (follower divergence).
        self.rebuild_from_headers(index_interval_bytes)
        self.txn_index.truncate_to(self.next_offset)
        return removed

    def retention_timestamp_ms(self) -> int:
        if self.max_timestamp_ms >= 0:
            return self.max_timestamp_ms
        # No timestamps at all: fall back to the file's age, as Kafka does.
        return int(os.fstat(self.fd).st_mtime * 1000)

    def validate(self) -> None:
        """Assert the invariants above (tests call it; it reads every header)."""
        assert os.fstat(self.fd).st_size == self.size_bytes, "file length differs from size_bytes"
        expected = self.base_offset
        positions: dict[int, int] = {}
        for pos, header in self.iter_headers():
            assert header.base_offset >= expected, f"offset went back at {pos}"
            positions[pos] = header.base_offset
            expected = header.last_offset + 1
        assert expected == self.next_offset or self.size_bytes == 0, "next_offset disagrees with the file"
        for offset, pos in zip(self.offset_index.offsets, self.offset_index.positions, strict=True):
            assert positions.get(pos) == offset, f"index entry ({offset}, {pos}) does not point at its batch"
        last = -1
        for txn in self.txn_index.entries:
            assert self.base_offset <= txn.last_offset < expected and txn.last_offset > last, f"txn index entry {txn}"
            last = txn.last_offset
