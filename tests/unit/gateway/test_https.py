"""The gateway's small HTTP/1.1: request heads and bodies read within their bounds, anything
else refused with a typed error object; the Artifact routes' paths."""

from __future__ import annotations

import asyncio

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.models import validate_document
from mwp.core.wire.strict_json import parse_bytes
from mwp.gateway.artifacts import _route, artifacts_path, group_marker, not_held
from mwp.gateway.https import (
    HttpRefusal,
    Request,
    Response,
    _serve_one,
    error_response,
    read_request,
)

DIGEST = "sha256:" + "ab" * 32


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=16 * 1024)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_a_request_with_a_body_is_read_exactly() -> None:
    request = await read_request(
        reader_of(b"PUT /x HTTP/1.1\r\nContent-Length: 5\r\nAuthorization: Bearer t\r\n\r\nhello+"),
        max_body=10,
    )
    assert (request.method, request.target) == ("PUT", "/x")
    assert await request.read_body() == b"hello"
    assert request.headers["authorization"] == "Bearer t"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"PUT /x HTTP/1.1\r\nContent-Length: 11\r\n\r\n" + b"x" * 11, 413),
        (b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
        (b"GET /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"GET x HTTP/1.1\r\n\r\n", 400),
        (b"GET /x HTTP/2\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nno colon\r\n\r\n", 400),
        (b"GET /\xff HTTP/1.1\r\n\r\n", 400),
    ],
)
async def test_what_the_server_does_not_speak_is_refused(data: bytes, status: int) -> None:
    with pytest.raises(HttpRefusal) as refused:
        await read_request(reader_of(data), max_body=10)
    assert refused.value.status == status
    assert refused.value.code == ErrorCode.PROTOCOL_VIOLATION


async def test_an_oversized_head_is_refused_unread() -> None:
    with pytest.raises(HttpRefusal) as refused:
        await read_request(reader_of(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n"), 10)
    assert refused.value.status == 400


class Written:
    """The writer side of a served connection: what was sent, and whether it was closed."""

    def __init__(self) -> None:
        self.data = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        pass


async def test_a_route_that_does_not_answer_in_time_gets_a_typed_error() -> None:
    async def never(request: Request) -> Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    written = Written()
    request = b"PUT /groups/g/artifacts HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
    await asyncio.wait_for(_serve_one(never, 10, reader_of(request), written, 0.1), 2)  # type: ignore[arg-type]
    head, _, body = written.data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 500 ") and written.closed
    error = parse_bytes(body)
    validate_document("error.schema.json", error)
    assert error["code"] == "INTERNAL_ERROR" and error["retryable"] is True


def test_error_bodies_are_error_objects_without_diagnostics() -> None:
    response = error_response(not_held("urn:mwp:group:g"))
    assert response.status == 404
    body = parse_bytes(response.body)
    validate_document("error.schema.json", body)
    assert body["code"] == "GROUP_NOT_FOUND" and "diagnostic" not in body
    unavailable = error_response(MwpError(ErrorCode.INTERNAL_ERROR, "down"))
    assert unavailable.status == 500


def test_routes_carry_any_group_id_as_one_segment() -> None:
    group_id = "urn:mwp:group:a/b?c#d"
    assert _route(artifacts_path(group_id, DIGEST)) == (group_id, DIGEST)
    assert _route(artifacts_path(group_id)) == (group_id, None)
    for bad in (
        "/groups/g/artifacts/md5:00",
        "/groups//artifacts",
        "/other",
        "/groups/%ff/artifacts",
    ):
        with pytest.raises(HttpRefusal):
            _route(bad)


def test_a_groups_marker_names_the_group_and_the_content() -> None:
    one, other = group_marker("urn:g:1", DIGEST), group_marker("urn:g:2", DIGEST)
    assert one != other and one.endswith("/" + "ab" * 32)
    assert one.startswith("artifacts/groups/") and one.count("/") == 3
