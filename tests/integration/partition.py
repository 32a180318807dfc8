"""A network partition between an agent and its gateway, for the integration tests: a TCP
forwarder the agent connects through (TLS passes through it untouched). :meth:`cut` drops
every connection and stops listening, so the agent can reach nothing; :meth:`heal` listens
again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Partition:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target>`` until cut."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def heal(self) -> None:
        self._server = await asyncio.start_server(
            self._forward, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._pipes):
            writer.transport.abort()
        self._pipes.clear()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self._pipes |= {writer, upstream}
        await asyncio.gather(
            pipe(reader, upstream), pipe(upstream_reader, writer), return_exceptions=True
        )
        self._pipes -= {writer, upstream}


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` into ``writer`` until it ends, then close ``writer``."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.close()


@contextlib.asynccontextmanager
async def partitioned(*targets: int) -> AsyncIterator[list[Partition]]:
    """One healed :class:`Partition` per target port, cut when the block ends."""
    partitions = [Partition(target) for target in targets]
    for partition in partitions:
        await partition.heal()
    try:
        yield partitions
    finally:
        for partition in partitions:
            await partition.cut()
