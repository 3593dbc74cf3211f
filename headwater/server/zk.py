"""The broker's ZooKeeper session: kazoo underneath, asyncio on top.

kazoo runs its own I/O thread. Every operation here uses kazoo's asynchronous calls and hands the
result back to the event loop, so the broker never blocks on ZooKeeper and many operations are in
flight at once (creating 10,000 partition states is 10,000 pipelined requests, not 10,000 round
trips). Watches fire in kazoo's thread and are re-delivered on the loop.

Controller fencing is Kafka's: a fenced write is one ZooKeeper multi of
``check(/controller_epoch, version)`` and the write. When the check fails the controller has been
replaced and :class:`ControllerMovedError` is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import EXCEPTIONS, BadVersionError, NodeExistsError, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import (
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE

from headwater.metadata import zk as znodes

log = logging.getLogger(__name__)
PATHS = znodes.PATHS


class DuplicateRegistrationError(RuntimeError):
    """``/brokers/ids/<id>`` belongs to another live session."""


class ControllerMovedError(Exception):
    """A fenced write failed its epoch check: another controller has been elected since."""


# Kafka's secure ACLs (zookeeper.set.acl=true): the creating identity may do everything, the world
# may read; credentials and broker configs are not world-readable.
SECURE_ACL: list[ACL] = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
PRIVATE_ACL: list[ACL] = list(CREATOR_ALL_ACL)
PRIVATE_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")


def acl_for(path: str) -> list[ACL]:
    private = any(path == p or path.startswith(p + "/") for p in PRIVATE_PATHS)
    return PRIVATE_ACL if private else SECURE_ACL


class ZooKeeper:
    def __init__(self, connect: str, session_timeout_ms: int, loop: asyncio.AbstractEventLoop, *,
                 digest: str | None = None, secure_acls: bool = False) -> None:
        """``digest`` (``user:password``) authenticates the session with ZooKeeper's digest scheme;
        ``secure_acls`` gives every znode this session creates Kafka's secure ACLs."""
        self._loop = loop
        self.secure_acls = secure_acls
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  auth_data=[("digest", digest)] if digest else None,
                                  default_acl=SECURE_ACL if secure_acls else None)
        self._on_session_lost: list[Callable[[], None]] = []
        self._multi_read = True  # until the server says it has none (ZooKeeper < 3.6)
        self.client.add_listener(self._state_listener)

    # --- session ----------------------------------------------------------------------------------

    async def start(self, timeout_s: float = 30.0) -> None:
        await self._loop.run_in_executor(None, lambda: self.client.start(timeout=timeout_s))

    async def stop(self) -> None:
        def shutdown() -> None:
            self.client.stop()
            self.client.close()

        await self._loop.run_in_executor(None, shutdown)

    @property
    def session_id(self) -> int:
        sid = self.client.client_id
        return int(sid[0]) if sid else -1

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        """``callback`` runs on the loop when the session expires (ephemeral nodes are gone)."""
        self._on_session_lost.append(callback)

    def _state_listener(self, state: str) -> None:
        if state == KazooState.LOST:
            for cb in self._on_session_lost:
                self._loop.call_soon_threadsafe(cb)

    # --- async adapters -----------------------------------------------------------------------------

    def _wrap(self, async_result: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()

        def done(result: Any) -> None:
            try:
                value = result.get_nowait()
            except Exception as exc:
                self._loop.call_soon_threadsafe(_set_exception, fut, exc)
            else:
                self._loop.call_soon_threadsafe(_set_result, fut, value)

        async_result.rawlink(done)
        return fut

    def _wrap_many(self, starts: list[Callable[[], Any]]) -> asyncio.Future[list[Any]]:
        """Start every call at once (kazoo pipelines them on its one connection) and resolve with all
        results, in order, each a value or the exception it raised.

        The loop is woken once for the whole batch, not once per call: reading 10,000 partition
        states one future at a time costs more in wake-ups than ZooKeeper takes to answer them.
        """
        fut: asyncio.Future[list[Any]] = self._loop.create_future()
        results: list[Any] = [None] * len(starts)
        if not starts:
            fut.set_result(results)
            return fut
        remaining = [len(starts)]
        lock = threading.Lock()

        def collector(i: int) -> Callable[[Any], None]:
            def done(result: Any) -> None:
                try:
                    results[i] = result.get_nowait()
                except Exception as exc:
                    results[i] = exc
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    self._loop.call_soon_threadsafe(_set_result, fut, results)
            return done

        for i, start in enumerate(starts):
            start().rawlink(collector(i))
        return fut

    async def _read_many(self, op: int, paths: Sequence[str]) -> list[Any]:
        """One result per path (a value, or the ZooKeeper exception of that path), read with
        ``multiRead`` in chunks of READ_CHUNK, the chunks pipelined.

        kazoo's connection thread sends one request and reads one response per turn of its select
        loop, so 10,000 separate gets take seconds even pipelined; 10 multiReads take one turn each.
        A server older than 3.6 has no multiRead: then every path is its own request.
        """
        if not paths:
            return []
        chunks = [tuple(paths[i:i + READ_CHUNK]) for i in range(0, len(paths), READ_CHUNK)]
        if self._multi_read:
            results = await self._wrap_many([functools.partial(self._multi_read_async, op, c) for c in chunks])
            if not any(isinstance(r, UnimplementedError) for r in results):
                out: list[Any] = []
                for r in results:
                    if isinstance(r, Exception):
                        raise r
                    out.extend(r)
                return out
            self._multi_read = False
            log.info("ZooKeeper has no multiRead; reading znodes one request each")
        single = self.client.get_async if op == _GET_DATA else self.client.get_children_async
        return await self._wrap_many([functools.partial(single, p) for p in paths])

    def _multi_read_async(self, op: int, paths: tuple[str, ...]) -> Any:
        result = self.client.handler.async_result()
        self.client._call(_MultiRead(tuple((op, p) for p in paths)), result)
        return result

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """``get`` of every path, read in bulk; None for a missing node."""
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for r in await self._read_many(_GET_DATA, paths):
            if isinstance(r, NoNodeError):
                out.append(None)
            elif isinstance(r, Exception):
                raise r
            else:
                out.append((r[0], r[1]))
        return out

    async def children_many(self, paths: Sequence[str]) -> list[list[str]]:
        """``children`` of every path, read in bulk; [] for a missing node."""
        out: list[list[str]] = []
        for r in await self._read_many(_GET_CHILDREN, paths):
            if isinstance(r, NoNodeError):
                out.append([])
            elif isinstance(r, Exception):
                raise r
            else:
                out.append(list(r))
        return out

    async def exists_many(self, paths: Sequence[str]) -> list[bool]:
        return [found is not None for found in await self.get_many(paths)]

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            data, stat = await self._wrap(self.client.get_async(path))
        except NoNodeError:
            return None
        return data, stat

    async def children(self, path: str) -> list[str]:
        try:
            return list(await self._wrap(self.client.get_children_async(path)))
        except NoNodeError:
            return []

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
                     make_parents: bool = False) -> str:
        acl = acl_for(path) if self.secure_acls else None
        return str(await self._wrap(self.client.create_async(path, data, acl=acl, ephemeral=ephemeral, sequence=sequence,
                                                             makepath=make_parents)))

    async def ensure(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.create(path, b"", make_parents=True)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._wrap(self.client.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._wrap(self.client.delete_async(path, version))

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """Call ``callback(children)`` on the loop now and after every change (kazoo re-arms the watch)."""

        def on_change(children: list[str]) -> None:
            self._loop.call_soon_threadsafe(callback, list(children))

        self.client.ChildrenWatch(path, on_change)

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None:
        """Call ``callback(data, stat)`` on the loop now and after every change; (None, None) once deleted."""

        def on_change(data: bytes | None, stat: ZnodeStat | None, *_event: Any) -> None:
            self._loop.call_soon_threadsafe(callback, data, stat)

        self.client.DataWatch(path, on_change)

    # --- Kafka's protocols on top ---------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        await asyncio.gather(*(self.ensure(p) for p in PATHS.TOP_LEVEL))

    async def register_broker(self, broker_id: int, data: bytes) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; return the broker epoch (its czxid).

        A node left by this client's own earlier session (a fast restart within the session timeout)
        is replaced; one held by another live session means a second broker with our id: refuse.
        """
        path = PATHS.broker(broker_id)
        for _ in range(3):
            try:
                await self.create(path, data, ephemeral=True)
            except NodeExistsError:
                existing = await self.get(path)
                if existing is None:
                    continue
                _data, stat = existing
                if stat.ephemeralOwner == self.session_id:
                    return int(stat.czxid)
                raise DuplicateRegistrationError(
                    f"broker id {broker_id} is already registered by another ZooKeeper session "
                    f"(0x{stat.ephemeralOwner:x}); is another broker running with broker.id={broker_id}?"
                ) from None
            found = await self.get(path)
            if found is not None:
                return int(found[1].czxid)
        raise RuntimeError(f"could not register broker {broker_id}")

    async def elect_controller(self, broker_id: int, now_ms: int) -> tuple[int, int] | None:
        """Kafka's ``registerControllerAndIncrementControllerEpoch``.

        Returns (controller epoch, /controller_epoch znode version) when this broker won, else None.
        """
        current = await self.get(PATHS.CONTROLLER_EPOCH)
        if current is None:
            with contextlib.suppress(NodeExistsError):
                await self.create(PATHS.CONTROLLER_EPOCH, znodes.encode_controller_epoch(0))
            current = await self.get(PATHS.CONTROLLER_EPOCH)
            if current is None:
                return None
        epoch = znodes.decode_controller_epoch(current[0])
        version = current[1].version
        txn = self.client.transaction()
        txn.create(PATHS.CONTROLLER, znodes.encode_controller(broker_id, now_ms), ephemeral=True)
        txn.set_data(PATHS.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch + 1), version)
        results = await self._wrap(txn.commit_async())
        if not any(isinstance(r, Exception) for r in results):
            return epoch + 1, int(results[1].version)
        # Maybe our own earlier attempt went through before a connection loss: accept it then.
        holder = await self.get(PATHS.CONTROLLER)
        now_epoch = await self.get(PATHS.CONTROLLER_EPOCH)
        if holder is not None and now_epoch is not None and znodes.decode_controller(holder[0]).broker_id == broker_id \
                and znodes.decode_controller_epoch(now_epoch[0]) == epoch + 1:
            return epoch + 1, int(now_epoch[1].version)
        return None

    async def fenced(self, epoch_version: int, ops: list[tuple[str, str, bytes | None, int]]) -> list[Any]:
        """Run ``ops`` ((op, path, data, version) with op create/set/delete) in one multi after
        ``check(/controller_epoch, epoch_version)``. Raises ControllerMovedError if the check fails,
        or the first failing op's error."""
        txn = self.client.transaction()
        txn.check(PATHS.CONTROLLER_EPOCH, epoch_version)
        for op, path, data, version in ops:
            if op == "create":
                txn.create(path, data or b"", acl=acl_for(path) if self.secure_acls else None)
            elif op == "set":
                txn.set_data(path, data or b"", version)
            elif op == "delete":
                txn.delete(path, version)
            else:
                raise ValueError(f"unknown op {op}")
        results = await self._wrap(txn.commit_async())
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(f"controller epoch version is no longer {epoch_version}")
        for r in results:
            if isinstance(r, Exception) and not _is_rollback(r):
                raise r
        return list(results[1:])


_GET_DATA = 4  # ZooKeeper's OpCode.getData
_GET_CHILDREN = 8  # OpCode.getChildren
_ERROR = -1  # OpCode.error: the op's result is an error code
READ_CHUNK = 1000
"""Reads per multiRead: 1,000 partition states answer in about 150 KB, far below jute.maxbuffer."""


class _MultiRead:
    """ZooKeeper's ``multiRead`` (OpCode 22, ZooKeeper 3.6+), in kazoo's request protocol.

    Unlike a write multi it is not atomic: each op answers on its own, a missing node with an
    error result for that op only. Request: per op a MultiHeader(type, done=false, err=-1) and the
    op's path and watch flag, then MultiHeader(-1, true, -1). Response: per op a MultiHeader and
    the GetData (data, stat), GetChildren (children) or error (code) body, then a done header.
    """

    type = 22

    def __init__(self, operations: tuple[tuple[int, str], ...]) -> None:
        self.operations = operations

    def serialize(self) -> bytearray:
        b = bytearray()
        for op, path in self.operations:
            b += multiheader_struct.pack(op, False, -1)
            b += write_string(path)
            b.append(0)  # no watch
        b += multiheader_struct.pack(-1, True, -1)
        return b

    def deserialize(self, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == _GET_DATA:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == _GET_CHILDREN:
                count = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(data, offset)
                    children.append(child)
                results.append(children)
            elif header.type == _ERROR:
                code = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead: unexpected result type {header.type}")
            header, offset = MultiHeader.deserialize(data, offset)
        if len(results) != len(self.operations):
            raise ValueError(f"multiRead: {len(results)} results for {len(self.operations)} ops")
        return results

    def __repr__(self) -> str:
        return f"MultiRead({len(self.operations)} ops)"


def _is_rollback(exc: Exception) -> bool:
    # In a failed multi, ops that did not fail themselves report RolledBack / RuntimeInconsistency.
    return type(exc).__name__ in ("RolledBackError", "RuntimeInconsistency")


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Any], exc: Exception) -> None:
    if not fut.done():
        fut.set_exception(exc)


def zookeeper_security(props: dict[str, str]) -> tuple[str | None, bool]:
    """(digest credentials, secure ACLs) from the broker's config: ``zookeeper.set.acl``, and the
    identity from ``zookeeper.digest=user:password`` or the ``Client`` section of the JAAS file named
    by ``java.security.auth.login.config`` (its username and password, used with the digest scheme).
    Secure ACLs without an identity would lock every broker out, so that is refused, as Kafka does."""
    secure = props.get("zookeeper.set.acl", "false").strip().lower() == "true"
    digest = props.get("zookeeper.digest")
    if digest is None and "java.security.auth.login.config" in props:
        digest = _jaas_client_digest(props["java.security.auth.login.config"])
    if digest is not None and (":" not in digest or not digest.split(":", 1)[0]):
        raise ValueError("zookeeper.digest must be user:password")
    if secure and digest is None:
        raise ValueError("zookeeper.set.acl=true needs an identity: zookeeper.digest=user:password or a JAAS "
                         "Client section (java.security.auth.login.config)")
    return digest, secure


def _jaas_client_digest(path: str) -> str:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"java.security.auth.login.config: cannot read {path}: {exc.strerror}") from None
    m = re.search(r"\bClient\s*\{(.*?)\}\s*;", text, re.S)
    if m is None:
        raise ValueError(f"{path} has no Client {{ ... }}; section")
    options = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', m.group(1)))
    if "username" not in options or "password" not in options:
        raise ValueError(f"the Client section of {path} needs username=\"...\" and password=\"...\"")
    return f"{options['username']}:{options['password']}"
