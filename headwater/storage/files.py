"""Small durable-file helpers: whole writes, exact reads, atomic replacement, directory fsync."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """Write all of ``data`` at ``position``; regular files rarely write short, but they may."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def pread_upto(fd: int, length: int, position: int) -> bytes:
    """Read ``length`` bytes at ``position``, fewer only at end of file."""
    data = os.pread(fd, length, position)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a create, rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file, whole.

    ``durable=False`` skips both fsyncs: a process crash still leaves one whole file, but after an
    operating system crash the old one may come back. For files the caller makes durable later.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


OPEN_FILES_WANTED = 131_072
"""The open-file limit a broker asks for when it may raise the hard limit (root): about one
descriptor per partition plus sockets, with room for 100,000 partitions."""
_NR_OPEN = Path("/proc/sys/fs/nr_open")


def raise_open_file_limit(wanted: int = OPEN_FILES_WANTED) -> tuple[int, int]:
    """Raise RLIMIT_NOFILE as far as this process may; returns the new (soft, hard) limits.

    The soft limit goes up to the hard one (any process may do that; many systems start processes
    at a soft 1,024). A process that may raise the hard limit too (root) takes it up to ``wanted``,
    capped by the kernel's ``fs.nr_open``. Failures leave the limits as they were.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            ceiling = int(_NR_OPEN.read_text().strip())
        except (OSError, ValueError):
            ceiling = wanted
        target = min(wanted, ceiling)
        if target > hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
                return target, target
            except (ValueError, OSError):
                pass  # not privileged: stay within the hard limit
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard
