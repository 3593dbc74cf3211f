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
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from headwater.security.sasl import SaslClient, SaslError

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0


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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Any, int]] = {}
        self._correlation = itertools.count(1)
        self._read_task: asyncio.Task[None] | None = None
        self._connect_lock = asyncio.Lock()
        self.closed = False

    async def _ensure(self) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, limit=64 * 1024 * 1024, ssl=self.security.ssl_context),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:
                raise ChannelError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
            if self.security.mechanism is not None:
                try:
                    await asyncio.wait_for(self._authenticate(reader, writer), CONNECT_TIMEOUT_S)
                except (OSError, TimeoutError, asyncio.IncompleteReadError, SaslError) as exc:
                    writer.close()
                    raise ChannelError(f"SASL authentication to {self.host}:{self.port} failed: {exc!r}") from None
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop(reader))
            return writer

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Any,
                        version: int) -> Any:
        request.with_header(correlation_id=next(self._correlation), client_id=self.client_id)
        writer.write(request.encode(header=True, framed=True))
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        return request.header.get_response_class().decode(await reader.readexactly(size), version=version, header=True)

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 before the channel carries anything else."""
        assert self.security.mechanism is not None
        client = SaslClient(self.security.mechanism, self.security.username, self.security.password)
        hs = await self._exchange(reader, writer, SaslHandshakeRequest(version=1, mechanism=client.mechanism), 1)
        if hs.error_code != 0:
            raise SaslError(f"handshake error {hs.error_code}; the peer enables {hs.mechanisms}")
        token: bytes | None = client.initial()
        while token is not None:
            resp = await self._exchange(reader, writer, SaslAuthenticateRequest(version=1, auth_bytes=token), 1)
            if resp.error_code != 0:
                raise SaslError(f"error {resp.error_code}: {resp.error_message}")
            token = client.respond(bytes(resp.auth_bytes))

    async def request(self, request: Any, version: int, timeout_s: float = 30.0) -> Any:
        """Send a kafka-python request object (or a ``control_wire.EncodedRequest``, which frames like
        one) at ``version``; return the decoded response."""
        if self.closed:
            raise ChannelError("channel closed")
        writer = await self._ensure()
        correlation_id = next(self._correlation)
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (fut, request.header.get_response_class(), version)
        try:
            writer.write(request.encode(header=True, framed=True))
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            self._fail_all(ChannelError(f"request to {self.host}:{self.port} timed out"))
            raise ChannelError(f"request to {self.host}:{self.port} timed out") from None
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
                correlation_id = _SIZE.unpack_from(payload, 0)[0]
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue
                fut, response_cls, version = entry
                try:
                    resp = response_cls.decode(payload, version=version, header=True)
                except Exception as exc:
                    if not fut.done():
                        fut.set_exception(ChannelError(f"undecodable response: {exc}"))
                    continue
                if not fut.done():
                    fut.set_result(resp)
        except (asyncio.IncompleteReadError, OSError) as exc:
            self._fail_all(ChannelError(f"connection to {self.host}:{self.port} lost: {exc}"))
        except asyncio.CancelledError:
            self._fail_all(ChannelError("channel closed"))
            raise

    def _fail_all(self, exc: Exception) -> None:
        for fut, _cls, _v in self._pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    def close(self) -> None:
        self.closed = True
        if self._read_task is not None:
            self._read_task.cancel()
        if self._writer is not None:
            self._writer.close()
            self._writer = None


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
