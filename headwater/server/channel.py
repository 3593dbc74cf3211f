"""Broker-to-broker connections: the controller's channel to each broker, follower fetchers, and
AlterPartition to the controller.

One :class:`BrokerChannel` per (destination, purpose), as Kafka keeps separate connections so a
slow fetch never delays a LeaderAndIsr. Requests are pipelined and matched to responses by
correlation id; a connection error fails the requests in flight and the next request reconnects.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from headwater.security.sasl import SaslClient, SaslError

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0
SCRATCH_BYTES = 64 * 1024


class ChannelError(Exception):
    """The destination could not be reached, or the connection broke with requests in flight."""


@dataclass(frozen=True)
class ChannelSecurity:
    """How this broker connects to its peers: the inter-broker listener's TLS and SASL settings."""

    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None  # SASL mechanism, None without SASL
    username: str = ""
    password: str = ""


PLAINTEXT = ChannelSecurity()


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, security: ChannelSecurity = PLAINTEXT) -> None:
        self.security = security
        self.host = host
        self.port = port
        self.client_id = client_id
        self._transport: asyncio.Transport | None = None
        self._reader: _ResponseReader | None = None  # the current connection's; a closed one's callbacks are ignored
        self._pending: dict[int, tuple[asyncio.Future[Any], Callable[[bytes | bytearray], Any]]] = {}
        self._correlation = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self.closed = False

    async def _ensure(self) -> asyncio.Transport:
        async with self._connect_lock:
            if self._transport is not None and not self._transport.is_closing():
                return self._transport
            loop = asyncio.get_running_loop()
            reader = self._reader = _ResponseReader(self)
            try:
                transport, _protocol = await asyncio.wait_for(
                    loop.create_connection(lambda: reader, self.host, self.port, ssl=self.security.ssl_context),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:
                raise ChannelError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
            assert isinstance(transport, asyncio.Transport)
            if self.security.mechanism is not None:
                try:
                    await asyncio.wait_for(self._authenticate(transport), CONNECT_TIMEOUT_S)
                except (ChannelError, TimeoutError, SaslError) as exc:
                    transport.close()
                    raise ChannelError(f"SASL authentication to {self.host}:{self.port} failed: {exc!r}") from None
            self._transport = transport
            return transport

    async def _authenticate(self, transport: asyncio.Transport) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 before the channel carries anything else."""
        assert self.security.mechanism is not None
        client = SaslClient(self.security.mechanism, self.security.username, self.security.password)
        hs = await self._round_trip(transport, SaslHandshakeRequest(version=1, mechanism=client.mechanism), 1, None)
        if hs.error_code != 0:
            raise SaslError(f"handshake error {hs.error_code}; the peer enables {hs.mechanisms}")
        token: bytes | None = client.initial()
        while token is not None:
            resp = await self._round_trip(transport, SaslAuthenticateRequest(version=1, auth_bytes=token), 1, None)
            if resp.error_code != 0:
                raise SaslError(f"error {resp.error_code}: {resp.error_message}")
            token = client.respond(bytes(resp.auth_bytes))

    async def request(self, request: Any, version: int, timeout_s: float = 30.0,
                      decode: Callable[[bytes | bytearray], Any] | None = None) -> Any:
        """Send a kafka-python request object (or a ``control_wire.EncodedRequest``, which frames like
        one) at ``version``; return the decoded response: by the codec library, or by ``decode``,
        which is given the response frame (header included)."""
        if self.closed:
            raise ChannelError("channel closed")
        transport = await self._ensure()
        return await self._round_trip(transport, request, version, decode, timeout_s)

    async def _round_trip(self, transport: asyncio.Transport, request: Any, version: int,
                          decode: Callable[[bytes | bytearray], Any] | None, timeout_s: float = CONNECT_TIMEOUT_S) -> Any:
        correlation_id = next(self._correlation)
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        if decode is None:
            response_cls = request.header.get_response_class()

            def decode(frame: bytes | bytearray) -> Any:
                return response_cls.decode(frame, version=version, header=True)

        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = (fut, decode)
        # A timer on the future itself rather than asyncio.wait_for, which costs a follower a
        # task's worth of futures and callbacks per fetch.
        timer = loop.call_later(timeout_s, self._time_out, fut)
        try:
            transport.write(request.encode(header=True, framed=True))
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(correlation_id, None)

    def _time_out(self, fut: asyncio.Future[Any]) -> None:
        if not fut.done():  # the connection is in an unknown state: everything in flight fails
            self._fail_all(ChannelError(f"request to {self.host}:{self.port} timed out"))

    def _on_frame(self, frame: bytes | bytearray) -> None:
        if len(frame) < 4:
            self._fail_all(ChannelError(f"response from {self.host}:{self.port} shorter than its header"))
            return
        entry = self._pending.get(_SIZE.unpack_from(frame, 0)[0])
        if entry is None:
            return
        fut, decode = entry
        try:
            resp = decode(frame)
        except Exception as exc:
            if not fut.done():
                fut.set_exception(ChannelError(f"undecodable response: {exc}"))
            return
        if not fut.done():
            fut.set_result(resp)

    def _on_lost(self, reader: _ResponseReader, exc: Exception | None) -> None:
        if reader is self._reader:
            self._fail_all(ChannelError(f"connection to {self.host}:{self.port} lost: {exc or 'closed by the peer'}"))

    def _fail_all(self, exc: Exception) -> None:
        for fut, _decode in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        if self._transport is not None:
            self._transport.close()
        self._transport = None
        self._reader = None

    def close(self) -> None:
        self.closed = True
        self._fail_all(ChannelError("channel closed"))


class _ResponseReader(asyncio.BufferedProtocol):
    """Cuts a channel's byte stream into response frames. Small frames are cut from one scratch
    buffer; a large one (a follower's fetch of megabytes) gets a buffer of its own size that the
    kernel fills directly, so its records are never copied on the way in."""

    def __init__(self, channel: BrokerChannel) -> None:
        self._channel = channel
        self._scratch = bytearray(SCRATCH_BYTES)
        self._filled = 0
        self._big: bytearray | None = None
        self._big_filled = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        return memoryview(self._scratch)[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                self._channel._on_frame(frame)
            return
        self._filled += nbytes
        buf = self._scratch
        pos = 0
        while self._filled - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0:
                self._channel._on_lost(self, ChannelError("a response frame of negative size"))
                return
            start = pos + 4
            if self._filled - start >= size:
                self._channel._on_frame(bytes(buf[start:start + size]))
                pos = start + size
                continue
            if size > SCRATCH_BYTES - 4:
                self._big = bytearray(size)
                have = self._filled - start
                self._big[:have] = buf[start:self._filled]
                self._big_filled = have
                pos = self._filled
            break
        if pos:
            remaining = self._filled - pos
            buf[:remaining] = buf[pos:self._filled]
            self._filled = remaining

    def eof_received(self) -> bool | None:
        return None  # close the transport: the peer sends nothing more

    def connection_lost(self, exc: Exception | None) -> None:
        self._channel._on_lost(self, exc)


class ChannelPool:
    """One channel per key (a broker, or a broker and a purpose). A broker that comes back on
    another address gets a new channel, and the old one is closed rather than left connected."""

    def __init__(self, security: ChannelSecurity = PLAINTEXT) -> None:
        self._security = security
        self._channels: dict[Hashable, BrokerChannel] = {}

    def get(self, key: Hashable, host: str, port: int, client_id: str) -> BrokerChannel:
        ch = self._channels.get(key)
        if ch is None or (ch.host, ch.port) != (host, port):
            if ch is not None:
                ch.close()
            ch = self._channels[key] = BrokerChannel(host, port, client_id, self._security)
        return ch

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
