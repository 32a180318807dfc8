"""A deliberately small HTTP/1.1 over TLS 1.3 for the gateway's Artifact routes.

The WebSocket library reads no request bodies, so Artifacts have their own listener with the
gateway's TLS context. Only what the routes need is spoken: one request per connection
(``Connection: close``), a body only with ``Content-Length`` (``Transfer-Encoding`` is
refused), bounded request heads, bodies and read times. Everything else is refused with a
typed MWP error object as the JSON body, never a stack trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.wire.jcs import canonicalize
from mwp.gateway.frames import now_text

log = logging.getLogger(__name__)

MAX_HEAD_BYTES: Final = 16 * 1024
HEAD_SECONDS: Final = 10.0
BODY_SECONDS: Final = 60.0
# A route's whole answer, its body read included: past this the request gets a retryable
# error object instead of waiting on (a wait inside a route must never hold a request for ever).
ROUTE_SECONDS: Final = BODY_SECONDS + 30.0
# Sending the answer to a peer that does not read it.
SEND_SECONDS: Final = 60.0
# A refused request's unread body, up to this much, is read and dropped before the connection
# closes: closing over unread bytes resets it, and the peer could lose the answer.
DISCARD_BYTES: Final = 1024 * 1024
DISCARD_SECONDS: Final = 2.0
JSON: Final = "application/json"
OCTETS: Final = "application/octet-stream"

_REASONS: Final = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

_STATUS_OF_CODE: Final = {
    ErrorCode.GROUP_NOT_FOUND: 404,
    ErrorCode.AUTH_REQUIRED: 401,
    ErrorCode.AUTH_STALE_SESSION: 401,
    ErrorCode.AUTH_FORBIDDEN: 403,
    ErrorCode.INTERNAL_ERROR: 500,
}


@dataclass
class Request:
    """A request whose body is read only when a route asks for it (after it authorized the
    request: an anonymous peer never makes the server buffer a body)."""

    method: str
    target: str
    headers: Mapping[str, str]  # lower-case names
    length: int = 0
    reader: asyncio.StreamReader | None = None
    _body: bytes | None = None

    async def read_body(self) -> bytes:
        if self._body is None:
            self._body = b""
            if self.length and self.reader is not None:
                async with asyncio.timeout(BODY_SECONDS):
                    self._body = await self.reader.readexactly(self.length)
        return self._body


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: Mapping[str, str] = field(default_factory=dict)


class HttpRefusal(MwpError):  # noqa: N818 (reads like the condition it is)
    """A request refused before any route saw it, with its HTTP status."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(
            ErrorCode.PROTOCOL_VIOLATION, message, diagnostic=Diagnostic("https", reason)
        )
        self.status = status


def error_response(error: MwpError) -> Response:
    """The error object (``error.schema.json``) as the body; the status follows the code."""
    status = getattr(error, "status", None) or _STATUS_OF_CODE.get(error.code, 400)
    return Response(int(status), canonicalize(error.to_wire(now_text())))


Handler = Callable[[Request], Awaitable[Response]]


def _head(data: bytes) -> tuple[str, str, dict[str, str]]:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise HttpRefusal(400, "The request head is not ASCII.", "head-not-ascii") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not parts[1].startswith("/"):
        raise HttpRefusal(400, "Not an HTTP/1.1 request line.", "request-line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        name = name.strip().lower()
        if not sep or not name or name != name.strip() or " " in name:
            raise HttpRefusal(400, "A malformed header line.", "header-line")
        if name in headers:  # no header this server reads may repeat (smuggling, confusion)
            raise HttpRefusal(400, "A repeated header.", "header-repeated")
        headers[name] = value.strip()
    return parts[0], parts[1], headers


async def read_request(reader: asyncio.StreamReader, max_body: int) -> Request:
    try:
        async with asyncio.timeout(HEAD_SECONDS):
            data = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise HttpRefusal(400, "The request head is too large.", "head-too-large") from None
    method, target, headers = _head(data[:-4])
    if "transfer-encoding" in headers:
        raise HttpRefusal(411, "Send the body with a Content-Length.", "transfer-encoding")
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit() or len(length_text) > 15:
        raise HttpRefusal(400, "An invalid Content-Length.", "content-length")
    length = int(length_text)
    if length > max_body:
        raise HttpRefusal(413, f"A body may have at most {max_body} bytes.", "body-too-large")
    return Request(method, target, headers, length, reader)


def _response_bytes(response: Response) -> bytes:
    head = [
        f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Status')}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Cache-Control: no-store",
        "Connection: close",
        *(f"{name}: {value}" for name, value in response.headers.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + response.body


async def _discard(request: Request) -> None:
    if request.reader is None or request._body is not None or request.length > DISCARD_BYTES:
        return
    with contextlib.suppress(TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        async with asyncio.timeout(DISCARD_SECONDS):
            remaining = request.length
            while remaining > 0:
                chunk = await request.reader.read(min(remaining, 64 * 1024))
                if not chunk:
                    return
                remaining -= len(chunk)


async def _answer(handler: Handler, request: Request, route_seconds: float) -> Response:
    bound = asyncio.timeout(route_seconds)
    try:
        async with bound:
            return await handler(request)
    except MwpError as exc:
        return error_response(exc)
    except Exception:
        if bound.expired():
            log.error("%s %s: no answer within %s s", request.method, request.target, route_seconds)
            reason = "route-timeout"
        else:
            log.exception("serving %s %s failed", request.method, request.target)
            reason = "route-failed"
        return error_response(
            MwpError(
                ErrorCode.INTERNAL_ERROR,
                "The authority zone could not be reached.",
                retryable=True,
                diagnostic=Diagnostic("https", reason),
            )
        )


async def _serve_one(
    handler: Handler,
    max_body: int,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    route_seconds: float = ROUTE_SECONDS,
) -> None:
    request: Request | None = None
    try:
        try:
            request = await read_request(reader, max_body)
        except HttpRefusal as exc:
            response = error_response(exc)
        else:
            response = await _answer(handler, request, route_seconds)
        writer.write(_response_bytes(response))
        async with asyncio.timeout(SEND_SECONDS):
            await writer.drain()
        if request is not None:
            await _discard(request)
    except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError):
        pass  # the peer went away, sent a partial request or was too slow: nothing to answer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
            async with asyncio.timeout(2):
                await writer.wait_closed()


async def start_server(
    handler: Handler, host: str, port: int, context: ssl.SSLContext, *, max_body: int
) -> asyncio.Server:
    """Serve ``handler`` on ``host:port`` (0: a free port) over ``context``'s TLS."""
    return await asyncio.start_server(
        lambda r, w: _serve_one(handler, max_body, r, w),
        host,
        port,
        ssl=context,
        limit=MAX_HEAD_BYTES,
    )


# --- the client's side -----------------------------------------------------------------------


async def request(
    url_host: str,
    port: int,
    context: ssl.SSLContext,
    method: str,
    target: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    max_body: int,
    timeout: float = 30.0,
    answer_seconds: float | None = None,
) -> Response:
    """One request on its own TLS connection; the response (body bounded by ``max_body``).
    ``answer_seconds`` bounds the connection's handshakes and, once the request is sent, the
    wait for the response's head (``TimeoutError``), within the whole request's ``timeout``."""
    async with asyncio.timeout(timeout):
        async with asyncio.timeout(answer_seconds):  # the TCP and TLS handshakes
            reader, writer = await asyncio.open_connection(
                url_host, port, ssl=context, limit=MAX_HEAD_BYTES
            )
        try:
            shown = f"[{url_host}]" if ":" in url_host else url_host
            head = [f"{method} {target} HTTP/1.1", f"Host: {shown}:{port}", "Connection: close"]
            head += [f"{name}: {value}" for name, value in (headers or {}).items()]
            if body or method in ("POST", "PUT"):
                head.append(f"Content-Length: {len(body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body)
            await writer.drain()
            async with asyncio.timeout(answer_seconds):
                data = await reader.readuntil(b"\r\n\r\n")
            status_line, _, rest = data[:-4].decode("ascii").partition("\r\n")
            status = int(status_line.split(" ")[1])
            found: dict[str, str] = {}
            for line in rest.split("\r\n"):
                name, _, value = line.partition(":")
                found[name.strip().lower()] = value.strip()
            length = int(found.get("content-length", "0"))
            if length > max_body:
                raise ValueError(f"a response body of {length} bytes is over the bound")
            content = await reader.readexactly(length) if length else b""
            return Response(status, content, found.get("content-type", ""), found)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
