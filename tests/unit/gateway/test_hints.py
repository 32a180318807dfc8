"""The mirror's content-free hints: in process across threads, and over UDP between processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from mwp.gateway.hints import (
    ADDRESSES_VARIABLE,
    BOARD,
    addresses,
    hint_bytes,
    listen_udp,
    parse_hint,
    publish_appended,
)


def test_only_exact_hints_are_read() -> None:
    assert parse_hint(hint_bytes("urn:g:1", 7)) == ("urn:g:1", 7, None)
    assert parse_hint(b'{"groupId": "urn:g:1", "lastSequence": 7}') == ("urn:g:1", 7, None)
    assert parse_hint(hint_bytes("urn:g:1", 7, "urn:o:1:service:group-authority")) == (
        "urn:g:1",
        7,
        "urn:o:1:service:group-authority",
    )
    for junk in (
        b"",
        b"not json",
        b'{"groupId": "urn:g:1"}',
        b'{"groupId": "urn:g:1", "lastSequence": 0}',
        b'{"groupId": "urn:g:1", "lastSequence": true}',
        b'{"groupId": "urn:g:1", "lastSequence": 1, "event": {}}',
        b'{"groupId": "urn:g:1", "groupId": "urn:g:2", "lastSequence": 1}',
        b'{"groupId": "' + b"x" * 2000 + b'", "lastSequence": 1}',
        b'{"groupId": "urn:g:1", "lastSequence": 1, "authorityId": 7}',
        b'{"groupId": "urn:g:1", "lastSequence": 1, "authorityId": ""}',
    ):
        assert parse_hint(junk) is None, junk


def test_addresses_skip_malformed_entries() -> None:
    assert addresses("127.0.0.1:7444, [::1]:9,bad,:80,host:99999") == [
        ("127.0.0.1", 7444),
        ("::1", 9),
    ]
    assert addresses(None) == []


async def test_a_hint_published_from_another_thread_reaches_the_listeners_loop() -> None:
    got: asyncio.Queue[tuple[str, int, str | None]] = asyncio.Queue()
    token = BOARD.add(
        lambda group, sequence, authority: got.put_nowait((group, sequence, authority))
    )
    try:
        await asyncio.to_thread(publish_appended, "urn:g:thread", 3, "urn:o:a")
        assert await asyncio.wait_for(got.get(), 2) == ("urn:g:thread", 3, "urn:o:a")
    finally:
        BOARD.remove(token)
    await asyncio.to_thread(publish_appended, "urn:g:thread", 4)
    await asyncio.sleep(0.05)
    assert got.empty()  # removed: no longer called


async def test_a_hint_crosses_processes_over_udp(monkeypatch: pytest.MonkeyPatch) -> None:
    got: asyncio.Queue[tuple[str, int, str | None]] = asyncio.Queue()
    async with listen_udp("127.0.0.1", 0, lambda g, s, a: got.put_nowait((g, s, a))) as (
        host,
        port,
    ):
        # Another process, as the authority worker's mirror would be.
        env = {ADDRESSES_VARIABLE: f"{host}:{port}"}
        code = (
            "from mwp.gateway.hints import publish_appended; "
            "publish_appended('urn:g:far', 9, 'urn:o:far')"
        )
        process = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", code], env=env, check=True, timeout=60
        )
        assert process.returncode == 0
        assert await asyncio.wait_for(got.get(), 5) == ("urn:g:far", 9, "urn:o:far")


def test_publishing_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADDRESSES_VARIABLE, "256.256.256.256:1")  # cannot be sent
    publish_appended("urn:g:1", 1)
