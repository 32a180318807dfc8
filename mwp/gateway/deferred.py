"""A gateway that listens at once and serves its Organization as soon as it exists.

`mwp dev` starts before `mwp registry init` has created the Organization and its registry
service key, so its gateway binds its listeners at start and builds the real
:class:`~mwp.gateway.server.Gateway` on the first connection that finds the Organization set
up (``load`` returns it). Until then a WebSocket is closed with code 1013 (try again later)
and an Artifact request gets a retryable ``INTERNAL_ERROR``: no frame is read, nothing is
decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable

from websockets.asyncio.server import ServerConnection

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.gateway.https import Request, Response, start_server
from mwp.gateway.server import Gateway, GatewayOptions, websocket_server

TRY_AGAIN_LATER = 1013
NOT_SET_UP = "no Organization yet: run mwp registry init"


class DeferredGateway:
    def __init__(
        self,
        load: Callable[[], Gateway | None],
        ssl_context: ssl.SSLContext,
        options: GatewayOptions | None = None,
    ) -> None:
        self.load = load
        self.ssl_context = ssl_context
        self.options = options or GatewayOptions()
        self.gateway: Gateway | None = None
        self.address: tuple[str, int] | None = None
        self.artifact_address: tuple[str, int] | None = None
        self._lock = asyncio.Lock()
        self._resources: contextlib.AsyncExitStack | None = None

    @contextlib.asynccontextmanager
    async def listening(self, host: str, port: int, artifact_port: int) -> AsyncIterator[None]:
        """Bind both listeners now (0: free ports; read :attr:`address`,
        :attr:`artifact_address`)."""
        # Entered first so that it closes last: the real gateway's readers and hints outlive
        # every connection the listeners still serve while they close.
        async with contextlib.AsyncExitStack() as resources, contextlib.AsyncExitStack() as stack:
            self._resources = resources
            server = await stack.enter_async_context(
                websocket_server(self.serve, host, port, self.ssl_context)
            )
            name = server.sockets[0].getsockname()
            self.address = (str(name[0]), int(name[1]))
            https = await start_server(
                self.routes,
                host,
                artifact_port,
                self.ssl_context,
                max_body=self.options.max_artifact_bytes,
            )
            stack.push_async_callback(_closed, https)
            name = https.sockets[0].getsockname()
            self.artifact_address = (str(name[0]), int(name[1]))
            yield

    async def resolve(self) -> Gateway | None:
        """The real gateway, built once the Organization exists."""
        async with self._lock:
            if self.gateway is None and self._resources is not None:
                gateway = self.load()
                if gateway is not None:
                    await self._resources.enter_async_context(gateway.running())
                    self.gateway = gateway
            return self.gateway

    async def serve(self, websocket: ServerConnection) -> None:
        gateway = await self.resolve()
        if gateway is None:
            await websocket.close(TRY_AGAIN_LATER, NOT_SET_UP)
            return
        await gateway.serve(websocket)

    async def routes(self, request: Request) -> Response:
        gateway = await self.resolve()
        if gateway is None:
            raise MwpError(
                ErrorCode.INTERNAL_ERROR,
                "The gateway has no Organization yet.",
                retryable=True,
                diagnostic=Diagnostic("gateway", "not-set-up"),
            )
        return await gateway.routes(request)


async def _closed(server: asyncio.Server) -> None:
    server.close()
    await server.wait_closed()
