"""Content-free hints that a Group's log grew: ``(groupId, lastSequence, authorityId)``.

The mirror activity (the log's only writer) calls :func:`publish_appended` after each appended
batch. A hint says only "read this Group's log again"; it carries no Event, so a lost, late or
forged hint changes nothing but when a reader looks, and the log stays the only truth. It
names the Group Authority whose key signs the log, so that a gateway of another Organization
sharing the authority worker or its hint addresses ignores it instead of reading a log it
cannot verify. A hint without one (from a mirror older than that member) is read as before.

* **In process** (a gateway beside the authority worker): :data:`BOARD` calls every listener on
  its own event loop (the mirror runs in a worker thread, so through
  ``loop.call_soon_threadsafe``).
* **Across processes**: each address in the environment variable :data:`ADDRESSES_VARIABLE`
  (``HOST:PORT[,HOST:PORT...]``, set in the authority worker's environment) gets the hint as one
  UDP datagram, the JCS bytes of ``{"groupId": ..., "lastSequence": ..., "authorityId": ...}``
  (``authorityId`` optional); a gateway receives
  them with :func:`listen_udp`. The channel is meant for the authority zone's own hosts (bind it
  to loopback or a private interface): anyone who can reach it can only make a reader look early.

Publishing never raises: a hint that cannot be sent is dropped.

This module imports nothing of the gateway's server, so the mirror can use it cheaply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from typing import Final

from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

log = logging.getLogger(__name__)

ADDRESSES_VARIABLE: Final = "MWP_GATEWAY_HINTS"
MAX_HINT_BYTES: Final = 1024

# (group_id, last_sequence, authority_id): the Group Authority Principal ID, None if unsaid.
Listener = Callable[[str, int, str | None], None]


class HintBoard:
    """Listeners of this process, each on its own event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[int, tuple[asyncio.AbstractEventLoop, Listener]] = {}
        self._next = 0

    def add(self, listener: Listener) -> int:
        """Call ``listener(group_id, last_sequence, authority_id)`` on the running loop for
        every hint."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._next += 1
            self._listeners[self._next] = (loop, listener)
            return self._next

    def remove(self, token: int) -> None:
        with self._lock:
            self._listeners.pop(token, None)

    def publish(self, group_id: str, last_sequence: int, authority_id: str | None = None) -> None:
        """Hand the hint to every listener (from any thread)."""
        with self._lock:
            listeners = list(self._listeners.values())
        for loop, listener in listeners:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its gateway is gone
                loop.call_soon_threadsafe(listener, group_id, last_sequence, authority_id)


BOARD: Final = HintBoard()


def hint_bytes(group_id: str, last_sequence: int, authority_id: str | None = None) -> bytes:
    hint: dict[str, object] = {"groupId": group_id, "lastSequence": last_sequence}
    if authority_id is not None:
        hint["authorityId"] = authority_id
    return canonicalize(hint)


def parse_hint(data: bytes) -> tuple[str, int, str | None] | None:
    """A datagram's hint, or None for anything else (ignored, never answered)."""
    if len(data) > MAX_HINT_BYTES:
        return None
    try:
        value = parse_bytes(data)
    except JsonSyntaxError:
        return None
    if not isinstance(value, dict) or set(value) - {"authorityId"} != {"groupId", "lastSequence"}:
        return None
    group_id, sequence = value["groupId"], value["lastSequence"]
    authority_id = value.get("authorityId")
    if not _identifier(group_id) or (authority_id is not None and not _identifier(authority_id)):
        return None
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1:
        return None
    return group_id, sequence, authority_id


def _identifier(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 512


def addresses(text: str | None) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT...]``; malformed entries are skipped."""
    found: list[tuple[str, int]] = []
    for item in (text or "").split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            found.append((host.strip("[]"), int(port)))
    return found


def publish_appended(group_id: str, last_sequence: int, authority_id: str | None = None) -> None:
    """The mirror's call after appending a batch: in process, and to every configured address."""
    try:
        BOARD.publish(group_id, last_sequence, authority_id)
        targets = addresses(os.environ.get(ADDRESSES_VARIABLE))
        if not targets:
            return
        data = hint_bytes(group_id, last_sequence, authority_id)
        for host, port in targets:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.sendto(data, (host, port))
    except Exception:  # a hint is an optimisation: never fail the mirror over one
        log.warning("a log hint for %s could not be published", group_id, exc_info=True)


class _HintProtocol(asyncio.DatagramProtocol):
    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def datagram_received(self, data: bytes, addr: object) -> None:
        hint = parse_hint(data)
        if hint is not None:
            self.listener(*hint)


@contextlib.asynccontextmanager
async def listen_udp(host: str, port: int, listener: Listener) -> AsyncIterator[tuple[str, int]]:
    """Receive hints on ``host:port`` (0: a free port) while open; yields the bound address."""
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _HintProtocol(listener), local_addr=(host, port)
    )
    try:
        sockname = transport.get_extra_info("sockname")
        yield str(sockname[0]), int(sockname[1])
    finally:
        transport.close()
