"""Responses with file ranges reach the client whole and in request order, whether the socket takes
a range at once or fills up on the way (asyncio's sendfile then waits for it), and when a later
request is answered first: Kafka's clients match responses to requests by their order on a
connection, so a range overtaken by the next response's bytes would be read as garbage."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from headwater.server.connection import Connection, Reply


@dataclass
class Range:
    fileno: int
    position: int
    length: int


def _frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhi", 1, 12, correlation_id)
    return struct.pack(">i", len(body)) + body


def test_ranges_small_and_larger_than_the_socket_buffer_arrive_whole_and_in_order(tmp_path: Path) -> None:
    data = os.urandom(8 * 1024 * 1024)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    # correlation id -> (header, file range): 8 MiB (more than a socket buffer), 1 MiB from an offset, 100 KiB
    answers = {1: (b"first", Range(fd, 0, len(data))), 2: (b"second", Range(fd, 12345, 1 << 20)),
               3: (b"third", Range(fd, 4096, 100 * 1024))}

    async def handler(_conn: Connection, frame: bytearray, _arrived: float) -> Reply:
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        header, rng = answers[correlation_id]
        if correlation_id == 1:
            await asyncio.sleep(0.05)  # the later requests finish first; their answers must wait
        return Reply([header, rng])

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(handler, 1 << 20, lambda _c: None), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # make the broker's socket fill up
        client.sendall(_frame(1) + _frame(2) + _frame(3))
        expected = sum(len(h) + r.length for h, r in answers.values())

        def read_slowly() -> bytes:
            got = bytearray()
            while len(got) < expected:
                chunk = client.recv(256 * 1024)
                assert chunk, "connection closed early"
                got += chunk
            return bytes(got)

        try:
            return await asyncio.wait_for(loop.run_in_executor(None, read_slowly), 30)
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    try:
        got = asyncio.run(scenario())
    finally:
        os.close(fd)
    want = b"".join(header + data[r.position:r.position + r.length] for header, r in answers.values())
    assert len(got) == len(want)
    assert got == want
