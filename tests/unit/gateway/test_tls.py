"""TLS 1.3 only, on a real loopback connection; the development CA and its key files."""

from __future__ import annotations

import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from mwp.gateway.tls import (
    CA_KEY,
    certificate_hash_of_file,
    client_context,
    development_certificates,
    server_context,
)


async def echo(websocket: ServerConnection) -> None:
    async for message in websocket:
        await websocket.send(message)


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    paths = development_certificates(tmp_path / "tls")
    context = server_context(paths.server_cert, paths.server_key)
    async with serve(echo, "127.0.0.1", 0, ssl=context) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"wss://127.0.0.1:{port}", paths.ca_cert


def test_private_keys_are_owner_only_and_kept_across_calls(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    paths = development_certificates(folder)
    for key in (paths.server_key, folder / CA_KEY):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    first = certificate_hash_of_file(paths.server_cert)
    again = development_certificates(folder)
    assert again == paths and certificate_hash_of_file(again.server_cert) == first


def test_the_server_context_allows_tls_1_3_only(tmp_path: Path) -> None:
    paths = development_certificates(tmp_path)
    context = server_context(paths.server_cert, paths.server_key)
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3


async def test_a_client_trusting_the_ca_speaks_tls_1_3(tls_server: tuple[str, Path]) -> None:
    uri, ca = tls_server
    async with connect(uri, ssl=client_context(ca)) as websocket:
        await websocket.send("hello")
        assert await websocket.recv() == "hello"
        assert websocket.transport.get_extra_info("ssl_object").version() == "TLSv1.3"


async def test_a_tls_1_2_only_client_cannot_connect(tls_server: tuple[str, Path]) -> None:
    uri, ca = tls_server
    old = ssl.create_default_context(cafile=ca)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    # The server answers the ClientHello with a protocol_version alert and closes: the
    # client sees the alert or the reset, depending on which it reads first.
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        async with connect(uri, ssl=old, open_timeout=5):
            pass
    async with connect(uri, ssl=client_context(ca)):  # the server is still serving
        pass


async def test_a_client_trusting_another_ca_refuses_the_server(
    tls_server: tuple[str, Path], tmp_path: Path
) -> None:
    uri, _ = tls_server
    other = development_certificates(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        async with connect(uri, ssl=client_context(other.ca_cert), open_timeout=5):
            pass
