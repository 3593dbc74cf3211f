"""One client connection: frames in, responses out, in request order.

Reading uses ``asyncio.BufferedProtocol``: small frames are cut out of a fixed scratch buffer, and
a large frame (a produce request) gets a buffer of its exact size that the kernel reads straight
into, so a 1 MiB batch is not copied on its way in. Responses are written in the order requests
arrived, as Kafka requires, even when a later request finishes first. Record bytes of a fetch go
to the socket with ``os.sendfile`` as long as the socket takes them, and through the transport
otherwise.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import struct
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO, Any, Protocol, cast

from headwater.protocol.frame import MalformedFrameError, frame_size

log = logging.getLogger(__name__)

SCRATCH_BYTES = 64 * 1024
MAX_PENDING_REQUESTS = 64  # beyond this, stop reading until responses drain
WRITE_HIGH_WATER_BYTES = 4 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FileRange(Protocol):
    fileno: int
    position: int
    length: int


class Sized(Protocol):
    @property
    def length(self) -> int: ...


# Response parts: bytes, or file ranges (anything with fileno, position and length) to sendfile.
Parts = Sequence["bytes | bytearray | Sized"]


@dataclass(frozen=True, slots=True)
class Reply:
    """A response, and how long to stop reading this connection after sending it (quota throttling)."""

    parts: Parts
    mute_ms: int = 0
    close: bool = False  # close the connection once this is sent (a failed SASL authentication)


# A handler result: a reply, or None when the request gets no response (acks=0).
Handler = Callable[["Connection", bytearray], Coroutine[Any, Any, "Reply | None"]]


class Connection(asyncio.BufferedProtocol):
    def __init__(self, handler: Handler, max_frame_bytes: int, on_close: Callable[[Connection], None],
                 listener: str | None = None, on_open: Callable[[Connection], None] | None = None) -> None:
        self._handler = handler
        self._max_frame_bytes = max_frame_bytes
        self.listener = listener  # the listener name this client came in on (Metadata answers with its endpoints)
        self._on_open = on_open
        self.tls = False
        self.sasl: Any = None  # the SASL session on a SASL listener (headwater.security.sasl.SaslSession)
        self._on_close = on_close
        self._scratch = bytearray(SCRATCH_BYTES)
        self._filled = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._queue: collections.deque[asyncio.Task[Reply | None]] = collections.deque()
        self._queue_event = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._reading_paused = False  # too many requests in flight
        self._muted = False  # a quota throttle is being served
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Who is on the other end, as the authorizer and the audit log name it: "User:ANONYMOUS"
        # until a SASL exchange or a TLS client certificate says otherwise.
        self.principal = "User:ANONYMOUS"
        self.closed = False
        self._writer: asyncio.Task[None] | None = None
        self._sock_fd = -1

    # --- asyncio protocol callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        self._sock_fd = sock.fileno() if sock is not None else -1
        # Over TLS the kernel cannot encrypt, so fetch bytes go through the transport (no sendfile).
        self.tls = transport.get_extra_info("sslcontext") is not None
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        if self._on_open is not None:
            self._on_open(self)

    def set_max_frame_bytes(self, limit: int) -> None:
        """Lower before authentication (Kafka's sasl.server.max.receive.size), the full size after."""
        self._max_frame_bytes = limit

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        return memoryview(self._scratch)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                self._dispatch(frame)
            return
        self._filled += nbytes
        try:
            self._cut_frames()
        except MalformedFrameError as exc:
            self.abort(f"malformed frame: {exc}")

    def _cut_frames(self) -> None:
        pos = 0
        buf = self._scratch
        while self._filled - pos >= 4:
            size = frame_size(buf[pos : pos + 4], self._max_frame_bytes)
            start = pos + 4
            if self._filled - start >= size:
                self._dispatch(buf[start : start + size])
                pos = start + size
                if self.closed:
                    return
                continue
            if size > SCRATCH_BYTES - 4:
                # Large frame: give it its own buffer and let the kernel fill the rest of it.
                self._big = bytearray(size)
                have = self._filled - start
                self._big[:have] = buf[start : self._filled]
                self._big_filled = have
                pos = self._filled
            break
        if pos:
            remaining = self._filled - pos
            buf[:remaining] = buf[pos : self._filled]
            self._filled = remaining

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for task in self._queue:
            task.cancel()
        self._queue.clear()
        self._queue_event.set()
        self._writable.set()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- requests and responses ---------------------------------------------------------------

    def _dispatch(self, frame: bytearray) -> None:
        if self.closed:
            return
        task = asyncio.get_running_loop().create_task(self._handler(self, frame))
        self._queue.append(task)
        self._queue_event.set()
        if len(self._queue) >= MAX_PENDING_REQUESTS and not self._reading_paused:
            self._reading_paused = True
            self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        if self._reading_paused or self._muted:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def _mute(self, mute_ms: int) -> None:
        """Kafka's channel muting: after a throttled response, read nothing more from this client for a while."""
        self._muted = True
        self._update_reading()

        def unmute() -> None:
            self._muted = False
            self._update_reading()

        asyncio.get_running_loop().call_later(mute_ms / 1000, unmute)

    def abort(self, reason: str, *, quiet: bool = False) -> None:
        """Close this connection only, with a log line saying why (unless the caller logged it already)."""
        if self.closed:
            return
        if not quiet:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    async def _write_loop(self) -> None:
        while not self.closed:
            if not self._queue:
                self._queue_event.clear()
                await self._queue_event.wait()
                continue
            task = self._queue[0]
            try:
                reply = await task
            except asyncio.CancelledError:
                return
            except Exception as exc:  # a handler bug must not take the broker down
                log.exception("request handler failed")
                self.abort(f"internal error: {exc!r}")
                return
            if self.closed or not self._queue:
                return  # the connection went away while this request was being answered
            self._queue.popleft()
            if self._reading_paused and len(self._queue) < MAX_PENDING_REQUESTS // 2:
                self._reading_paused = False
                self._update_reading()
            if reply is None or self.closed:
                continue
            await self._send(reply.parts)
            if reply.close:
                self.closed = True
                if self.transport is not None:
                    self.transport.close()  # close() sends what is buffered first
                return
            if reply.mute_ms > 0:
                self._mute(reply.mute_ms)
            if self.transport is not None and self.transport.get_write_buffer_size() > WRITE_HIGH_WATER_BYTES:
                await self._writable.wait()

    async def _send(self, parts: Parts) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        for part in parts:
            if self.closed:
                return
            if isinstance(part, (bytes, bytearray)):
                transport.write(part)
                continue
            rng = cast(FileRange, part)
            if rng.length == 0:
                continue
            if self.tls:
                transport.write(os.pread(rng.fileno, rng.length, rng.position))
                continue
            # Zero-copy from the page cache. asyncio's sendfile first drains what the transport
            # holds (so the bytes before this part go out first), then waits for the socket to be
            # writable as often as needed, so a large fetch never falls back to copying.
            try:
                await asyncio.get_running_loop().sendfile(transport, cast(IO[bytes], _Fd(rng.fileno)), rng.position,
                                                          rng.length, fallback=True)
            except (ConnectionError, RuntimeError, OSError) as exc:
                self.abort(f"send failed: {exc}")
                return


class _Fd:
    """The file object asyncio's sendfile wants, over an fd the storage owns (never closed here).

    asyncio seeks it after sending; the storage reads and writes with pread/pwrite, so the shared
    file position means nothing to it.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self._fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def read(self, n: int = -1) -> bytes:
        return os.read(self._fd, n)

    def readinto(self, buf: Any) -> int:
        return os.readv(self._fd, [buf])


# The connection whose request is being handled: each request runs in its own task, so this is per request.
current_connection: ContextVar[Connection | None] = ContextVar("current_connection", default=None)


def serve_connection_factory(handler: Handler, max_frame_bytes: int, registry: set[Connection],
                             listener: str | None = None,
                             on_open: Callable[[Connection], None] | None = None) -> Callable[[], Any]:
    def factory() -> Connection:
        conn = Connection(handler, max_frame_bytes, registry.discard, listener, on_open)
        registry.add(conn)
        return conn

    return factory
