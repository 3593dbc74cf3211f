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
import ipaddress
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO, Any, Protocol, cast

from headwater.metadata.configs import ConnectionLimits
from headwater.protocol.frame import MalformedFrameError, frame_size

log = logging.getLogger(__name__)

SCRATCH_BYTES = 64 * 1024
MAX_PENDING_REQUESTS = 64  # beyond this, stop reading until responses drain
WRITE_HIGH_WATER_BYTES = 4 * 1024 * 1024
SENDFILE_MIN_BYTES = 64 * 1024  # below this a copy costs less than asyncio's sendfile round
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
# (connection, frame, when the frame was read off the socket: time.perf_counter())
Handler = Callable[["Connection", bytearray, float], Coroutine[Any, Any, "Reply | None"]]


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
        self.ip = "?"  # the peer's address, which per-IP connection limits count
        self.last_active_s = time.monotonic()  # the least recently active goes first when over max.connections
        self._held = False  # waiting for a connection slot (max.connections): nothing is read
        self.quotas: ConnectionQuotas | None = None

    # --- asyncio protocol callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ip = str(peer[0]) if peer else "?"
        sock = transport.get_extra_info("socket")
        self._sock_fd = sock.fileno() if sock is not None else -1
        # Over TLS the kernel cannot encrypt, so fetch bytes go through the transport (no sendfile).
        self.tls = transport.get_extra_info("sslcontext") is not None
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        if self._on_open is not None:
            self._on_open(self)
        if self.quotas is not None:
            self.quotas.opened(self)

    def hold(self) -> None:
        """Read nothing until :meth:`release`: the connection waits for a slot, as a socket Kafka's
        acceptor has not taken yet waits in the listen backlog."""
        self._held = True
        self._update_reading()

    def release(self) -> None:
        self._held = False
        self._update_reading()

    def set_max_frame_bytes(self, limit: int) -> None:
        """Lower before authentication (Kafka's sasl.server.max.receive.size), the full size after."""
        self._max_frame_bytes = limit

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        return memoryview(self._scratch)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active_s = time.monotonic()
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
        task = asyncio.get_running_loop().create_task(self._handler(self, frame, time.perf_counter()))
        self._queue.append(task)
        self._queue_event.set()
        if len(self._queue) >= MAX_PENDING_REQUESTS and not self._reading_paused:
            self._reading_paused = True
            self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        if self._reading_paused or self._muted or self._held:
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
        """Write a response's parts: bytes, and ranges of segment files.

        A range under SENDFILE_MIN_BYTES is read and written with the bytes around it, so a small
        response (a follower's fetch of one produce's batches, the common case) costs one write
        instead of asyncio's sendfile, which drains the transport and registers the socket anew
        for every range. Larger ranges go zero-copy from the page cache.
        """
        transport = self.transport
        if transport is None or self.closed:
            return
        pending: list[bytes | bytearray] = []
        for part in parts:
            if isinstance(part, (bytes, bytearray)):
                pending.append(part)
                continue
            rng = cast(FileRange, part)
            if rng.length == 0:
                continue
            if self.tls or rng.length < SENDFILE_MIN_BYTES:
                pending.append(os.pread(rng.fileno, rng.length, rng.position))
                continue
            if pending:
                transport.write(b"".join(pending))
                pending = []
            # asyncio's sendfile first drains what the transport holds (so the bytes before this
            # part go out first), then waits for the socket to be writable as often as needed, so
            # a large fetch never falls back to copying.
            try:
                await asyncio.get_running_loop().sendfile(transport, cast(IO[bytes], _Fd(rng.fileno)), rng.position,
                                                          rng.length, fallback=True)
            except (ConnectionError, RuntimeError, OSError) as exc:
                self.abort(f"send failed: {exc}")
                return
            if self.closed:
                return
        if pending and not self.closed:
            transport.write(pending[0] if len(pending) == 1 else b"".join(pending))


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
                             on_open: Callable[[Connection], None] | None = None,
                             quotas: ConnectionQuotas | None = None) -> Callable[[], Any]:
    def on_close(conn: Connection) -> None:
        registry.discard(conn)
        if quotas is not None:
            quotas.closed(conn)

    def factory() -> Connection:
        conn = Connection(handler, max_frame_bytes, on_close, listener, on_open)
        conn.quotas = quotas
        registry.add(conn)
        return conn

    return factory


class ConnectionQuotas:
    """Kafka's ``ConnectionQuotas`` (``SocketServer.scala``, 3.9) for the connections of every listener.

    * ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, by host name or address): a
      connection from an address that already has that many is closed at once, logged as Kafka's acceptor
      logs it ("Rejected connection from ..., address already has the configured maximum of N connections.").
    * ``max.connections`` (and ``listener.name.<l>.max.connections``): past the limit a new connection
      waits, unread, until another closes, as Kafka's acceptor stops accepting (the socket waits in the
      listen backlog). The inter-broker listener, when there are several, is not held by the broker-wide
      limit; connections of the other listeners are then closed, least recently active first, until the
      count is back within it, as Kafka's processors do (``closeExcessConnections``); lowering the limit
      closes the excess the same way.

    ``max.connection.creation.rate`` (KIP-612) is not applied."""

    def __init__(self, inter_broker_listener: str | None = None, listener_count: int = 1) -> None:
        self._inter_broker = inter_broker_listener if listener_count > 1 else None  # Kafka's protectedListener
        self._limits = ConnectionLimits()
        self._per_address: dict[str, int] = {}  # max.connections.per.ip.overrides, host names resolved
        self._by_ip: collections.Counter[str] = collections.Counter()
        self._by_listener: collections.Counter[str | None] = collections.Counter()
        self._admitted: set[Connection] = set()
        self._waiting: collections.deque[Connection] = collections.deque()

    @property
    def total(self) -> int:
        """Connections counted against the limits (one being closed counts until it is gone)."""
        return len(self._admitted)

    def configure(self, limits: ConnectionLimits) -> None:
        """New limits (a dynamic config change): waiting connections that now fit are taken, and
        connections over a lowered ``max.connections`` are closed."""
        if limits == self._limits:
            return
        per_address: dict[str, int] = {}
        for host, count in limits.per_ip_overrides.items():
            try:  # InetAddress.getByName: an address as is, a name resolved (once, here)
                address = str(ipaddress.ip_address(host)) if _is_address(host) else socket.gethostbyname(host)
            except (OSError, ValueError) as exc:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, exc)
                continue
            per_address[address] = count
        self._limits, self._per_address = limits, per_address
        log.info("connection limits: max.connections=%d, max.connections.per.ip=%d, overrides=%s, per listener=%s",
                 limits.max_connections, limits.per_ip, dict(limits.per_ip_overrides), dict(limits.per_listener))
        self._take_waiting()
        self._close_excess()

    def opened(self, conn: Connection) -> None:
        if self._slot_available(conn.listener):
            self._admit(conn)
        else:
            conn.hold()
            self._waiting.append(conn)

    def closed(self, conn: Connection) -> None:
        if conn in self._admitted:
            self._admitted.discard(conn)
            self._by_ip[conn.ip] -= 1
            if self._by_ip[conn.ip] <= 0:
                del self._by_ip[conn.ip]
            self._by_listener[conn.listener] -= 1
            self._take_waiting()
        elif conn in self._waiting:
            self._waiting.remove(conn)

    def _slot_available(self, listener: str | None) -> bool:
        """Kafka's ``connectionSlotAvailable``."""
        if self._by_listener[listener] >= self._limits.per_listener.get(listener or "", _INT_MAX):
            return False
        return listener == self._inter_broker or self.total < self._limits.max_connections

    def _admit(self, conn: Connection) -> None:
        limit = self._per_address.get(_normal(conn.ip), self._limits.per_ip)
        if self._by_ip[conn.ip] >= limit:
            log.info("Rejected connection from /%s, address already has the configured maximum of %d connections.",
                     conn.ip, limit)
            conn.abort("too many connections", quiet=True)
            return
        self._admitted.add(conn)
        self._by_ip[conn.ip] += 1
        self._by_listener[conn.listener] += 1
        self._close_excess()

    def _take_waiting(self) -> None:
        while self._waiting and self._slot_available(self._waiting[0].listener):
            conn = self._waiting.popleft()
            if not conn.closed:
                conn.release()
                self._admit(conn)

    def _close_excess(self) -> None:
        open_conns = [c for c in self._admitted if not c.closed]  # those being closed are as good as gone
        excess = len(open_conns) - self._limits.max_connections
        if excess <= 0:
            return
        others = sorted((c for c in open_conns if c.listener != self._inter_broker), key=lambda c: c.last_active_s)
        for conn in others[:excess]:
            conn.abort(f"over max.connections ({self._limits.max_connections})")


_INT_MAX = (1 << 31) - 1


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _normal(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip
