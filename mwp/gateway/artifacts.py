"""Artifacts through the gateway: read and upload by Group, for the Group's members only.

An Artifact belongs to a Group when the Group's log publishes it (an ``artifact.published``
Event's manifest names its content hash) or when a Worker of the Group uploaded it through
the gateway, which leaves an empty marker ``artifacts/groups/<sha256 of the Group ID>/<content
hex>`` beside the content in the authority's store. The content itself stays content-addressed
(:class:`~mwp.stores.artifacts.ArtifactStore`), stored once whatever the Groups.

* **read**: the Agent must hold a live (provisional or active) Membership in the Group at the
  reader's head, and the Artifact must belong to the Group. The bytes are re-hashed before they
  leave: a stored object that no longer matches its hash is an ``INTERNAL_ERROR``, never bytes.
* **upload**: the Agent must hold an active ``worker`` Membership; the body is bounded, stored
  content-addressed (a declared hash, if any, must match) and marked as the Group's.

A Group the Agent may not see, a Group that does not exist and an Artifact the Group does not
hold get one answer (the same code, message and members), no sooner than ``refusal_seconds``
after the request, as SUBSCRIBE's refusals: the same work is done for every Group ID.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.group.knowledge import IMPORTED_KIND
from mwp.core.wire.jcs import canonicalize
from mwp.gateway.hello import Session
from mwp.gateway.https import OCTETS, HttpRefusal, Request, Response
from mwp.gateway.subscriptions import GroupReader, Readers
from mwp.stores.artifacts import (
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactStore,
    StoredContent,
    hex_of,
)
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-MSN-012", "MWP-WRK-024", "MWP-WRK-027")

GROUP_PREFIX: Final = "artifacts/groups/"
# The largest upload one request may carry (held in memory while it is hashed).
MAX_ARTIFACT_BYTES: Final = 32 * 1024 * 1024
PUBLISHED_KIND: Final = "artifact.published"
SESSION_HEADER: Final = "authorization"
BEARER: Final = "Bearer "


def group_marker(group_id: str, content_hash: str) -> str:
    """The key marking ``content_hash`` as uploaded for ``group_id`` (Group IDs are URIs: they
    are hashed so that any ID makes one path segment)."""
    group_hex = hashlib.sha256(group_id.encode("utf-8")).hexdigest()
    return f"{GROUP_PREFIX}{group_hex}/{hex_of(content_hash)}"


def not_held(group_id: str) -> MwpError:
    # One answer for an unknown Group, a Group the Agent may not see and an unknown Artifact.
    return MwpError(
        ErrorCode.GROUP_NOT_FOUND,
        "No such Group or Artifact.",
        group_id=group_id,
        diagnostic=Diagnostic("gateway", "artifact-unknown"),
    )


def _tampered(group_id: str) -> MwpError:
    return MwpError(
        ErrorCode.INTERNAL_ERROR,
        "The stored Artifact failed its integrity check.",
        group_id=group_id,
        retryable=False,
        diagnostic=Diagnostic("gateway", "artifact-tampered"),
    )


def _content_hash(text: str) -> str:
    try:
        hex_of(text)
    except ValueError:
        raise HttpRefusal(400, "An Artifact is named by its sha256: hash.", "hash") from None
    return text


class ArtifactGate:
    """The decisions: who may read or upload which Artifact of which Group."""

    def __init__(
        self,
        readers: Readers,
        store: ObjectStore,
        *,
        refusal_seconds: float,
        max_bytes: int = MAX_ARTIFACT_BYTES,
    ) -> None:
        self.readers = readers
        self.store = store
        self.artifacts = ArtifactStore(store)
        self.refusal_seconds = refusal_seconds
        self.max_bytes = max_bytes

    async def read(self, agent_id: str, group_id: str, content_hash: str) -> bytes:
        """The content, verified against its hash."""
        not_before = asyncio.get_running_loop().time() + self.refusal_seconds
        reader = await self.readers.acquire(group_id)
        try:
            allowed = reader.fault is None and reader.timeline.membership(agent_id) is not None
            held = await asyncio.to_thread(self._held, reader, group_id, content_hash)
        finally:
            await self.readers.release(group_id)
        if not (allowed and held):
            await self._refuse_after(not_before)
            raise not_held(group_id)
        try:
            return await asyncio.to_thread(self.artifacts.get, content_hash)
        except ArtifactNotFound:  # marked or published, but the content is not stored
            await self._refuse_after(not_before)
            raise not_held(group_id) from None
        except ArtifactIntegrityError:
            raise _tampered(group_id) from None

    async def upload(
        self, agent_id: str, group_id: str, data: bytes, declared: str | None = None
    ) -> StoredContent:
        """Store ``data`` for ``group_id`` (the Agent an active Worker of it)."""
        not_before = asyncio.get_running_loop().time() + self.refusal_seconds
        if len(data) > self.max_bytes:
            raise HttpRefusal(413, f"An Artifact may have at most {self.max_bytes} bytes.", "size")
        content_hash = "sha256:" + hashlib.sha256(data).hexdigest()
        if declared is not None and declared != content_hash:
            raise MwpError(
                ErrorCode.PROTOCOL_VIOLATION,
                "The body does not have the declared content hash.",
                group_id=group_id,
                diagnostic=Diagnostic("gateway", "declared-hash-mismatch"),
            )
        reader = await self.readers.acquire(group_id)
        try:
            membership = None if reader.fault else reader.timeline.membership(agent_id)
        finally:
            await self.readers.release(group_id)
        if membership is None:
            await self._refuse_after(not_before)
            raise not_held(group_id)
        if membership != ("worker", "active"):
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                "Only an active Worker of the Group uploads its Artifacts.",
                group_id=group_id,
                diagnostic=Diagnostic("gateway", "artifact-upload-role"),
            )
        try:
            stored = await asyncio.to_thread(self.artifacts.put, data)
        except ArtifactIntegrityError:  # a different object already sits under this hash
            raise _tampered(group_id) from None
        await asyncio.to_thread(self.store.put_if_absent, group_marker(group_id, content_hash), b"")
        return stored

    async def cited_events(self, agent_id: str, group_id: str, package_id: str) -> bytes:
        """``{"events": [...]}``: the Events the Context Package ``package_id`` of the Group
        cites, as its log holds them (signed), when the Agent was given the package (MWP-MSN-012:
        a late joiner retrieves the Events its package cites). Otherwise the answer is the
        same as for a Group that does not exist."""
        not_before = asyncio.get_running_loop().time() + self.refusal_seconds
        reader = await self.readers.acquire(group_id)
        try:
            cited = None if reader.fault else reader.timeline.cited_by(package_id)
            shown = cited is not None and all(reader.timeline.may_see(agent_id, n) for n in cited)
            events = [reader.entry(n).event for n in sorted(cited or ())] if shown else None
        finally:
            await self.readers.release(group_id)
        if events is None:
            await self._refuse_after(not_before)
            raise not_held(group_id)
        return canonicalize({"events": events})

    def _held(self, reader: GroupReader, group_id: str, content_hash: str) -> bool:
        """Whether the Group holds the content: published in it, uploaded for it, or named
        by one of its Work Contracts as an input (the Coordinator handed it to the item)."""
        for delivered in reader.events:  # every Group does this same scan, member or not
            if content_hash in _named(delivered.kind, delivered.event["payload"]):
                return True
        return self.store.exists(group_marker(group_id, content_hash))

    @staticmethod
    async def _refuse_after(not_before: float) -> None:
        await asyncio.sleep(max(0.0, not_before - asyncio.get_running_loop().time()))


def _named(kind: str, payload: dict[str, Any]) -> list[str]:
    """The content hashes an Event of the Group names as its content."""
    if kind in (PUBLISHED_KIND, IMPORTED_KIND):  # an import brings another Group's content
        return [str((payload.get("manifest") or {}).get("contentHash"))]
    if kind == "work.authorized":
        return list((payload.get("workItem") or {}).get("contract", {}).get("inputArtifacts", []))
    if kind == "work.contract.revised":
        return list((payload.get("contract") or {}).get("inputArtifacts", []))
    return []


class ArtifactRoutes:
    """The HTTPS routes, each authorized by the ``sessionToken`` of a HELLO on a live
    connection (``Authorization: Bearer <token>``):

    * ``GET /groups/<groupId>/artifacts/<sha256:...>``: the bytes;
    * ``POST /groups/<groupId>/artifacts``: upload, answered ``201`` with
      ``{"contentHash", "sizeBytes"}``;
    * ``PUT /groups/<groupId>/artifacts/<sha256:...>``: upload under a declared hash;
    * ``GET /groups/<groupId>/context-packages/<contextPackageId>/events``: the signed
      Events a Context Package the Agent was given cites (:meth:`ArtifactGate.cited_events`);
    * ``GET /agent-card``: ``{"agentCard": ...}``, the session Agent's own current card.

    The Group ID is one percent-encoded path segment.
    """

    def __init__(
        self,
        gate: ArtifactGate,
        session_of: Callable[[str], Awaitable[Session]],
        agent_card: Callable[[str], Awaitable[dict[str, Any] | None]],
    ):
        self.gate = gate
        self.session_of = session_of
        self.agent_card = agent_card

    async def __call__(self, request: Request) -> Response:
        if request.target.split("?", 1)[0] == AGENT_CARD_PATH:
            session = await self._session(request)
            if request.method != "GET":
                raise HttpRefusal(405, "GET the Agent Card.", "method")
            card = await self.agent_card(session.agent_id)
            return Response(200, canonicalize({"agentCard": card}))
        group_id, content_hash = _route(request.target)
        session = await self._session(request)
        if isinstance(content_hash, Cited):
            if request.method != "GET":
                raise HttpRefusal(405, "GET the Events a Context Package cites.", "method")
            body = await self.gate.cited_events(session.agent_id, group_id, content_hash.package)
            return Response(200, body)
        if request.method == "GET" and content_hash is not None:
            data = await self.gate.read(session.agent_id, group_id, content_hash)
            return Response(200, data, OCTETS, {"MWP-Content-Hash": content_hash})
        if (request.method, content_hash is None) in (("POST", True), ("PUT", False)):
            body = await request.read_body()
            stored = await self.gate.upload(session.agent_id, group_id, body, content_hash)
            answer = {"contentHash": stored.content_hash, "sizeBytes": stored.size_bytes}
            return Response(201, canonicalize(answer))
        raise HttpRefusal(405, "GET an Artifact; POST or PUT one to upload.", "method")

    async def _session(self, request: Request) -> Session:
        return await self.session(request, self.session_of)

    @staticmethod
    async def session(request: Request, session_of: Callable[[str], Awaitable[Session]]) -> Session:
        """The live session whose token authorizes ``request`` (the gateway's other routes
        are authorized the same way)."""
        authorization = request.headers.get(SESSION_HEADER, "")
        if not authorization.startswith(BEARER):
            raise MwpError(
                ErrorCode.AUTH_REQUIRED,
                "Authorize with the session token of a HELLO.",
                diagnostic=Diagnostic("session", "no-token"),
            )
        return await session_of(authorization[len(BEARER) :].strip())


# The session's own Agent Card, as the Registry holds it now (an agent outside the authority
# zone learns the card version it serves from it).
AGENT_CARD_PATH = "/agent-card"


def artifacts_path(group_id: str, content_hash: str | None = None) -> str:
    from urllib.parse import quote

    path = f"/groups/{quote(group_id, safe='')}/artifacts"
    return path if content_hash is None else f"{path}/{content_hash}"


@dataclass(frozen=True)
class Cited:
    """The route to the Events a Context Package cites."""

    package: str


def cited_events_path(group_id: str, package_id: str) -> str:
    from urllib.parse import quote

    return (
        f"/groups/{quote(group_id, safe='')}/context-packages/{quote(package_id, safe='')}/events"
    )


def _route(target: str) -> tuple[str, str | Cited | None]:
    """The Group and the Artifact's content hash (or None: an upload), or the Group and the
    Context Package whose cited Events are asked for."""
    path = target.split("?", 1)[0]
    parts = path.split("/")
    if (
        len(parts) == 6
        and parts[:2] == ["", "groups"]
        and parts[3:6:2] == ["context-packages", "events"]
    ):
        return _group(parts[2]), Cited(_group(parts[4]))
    # ["", "groups", <groupId>, "artifacts"] or with a fifth part, the content hash
    if len(parts) not in (4, 5) or parts[:2] != ["", "groups"] or parts[3] != "artifacts":
        raise HttpRefusal(404, "No such route.", "route")
    return _group(parts[2]), _content_hash(parts[4]) if len(parts) == 5 else None


def _group(segment: str) -> str:
    try:
        group_id = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise HttpRefusal(400, "A Group ID is percent-encoded UTF-8.", "group-id") from None
    if not group_id or len(group_id) > 512:
        raise HttpRefusal(400, "A Group ID is required.", "group-id")
    return group_id
