"""The Organization's Knowledge Reuse Policy, hosted by the gateway: approvals for imports
(spec 13.3; MWP-WRK-028).

An Artifact of one Mission enters another only as ``artifact_import``, carrying the source's
signed manifest and a Knowledge Reuse Approval by Organization policy. The receiving Group's
Coordinator asks for both on the gateway's HTTPS listener, authorized by its live session
token like the Artifact routes:

``POST /groups/<targetGroupId>/knowledge-imports`` ``{"sourceGroupId", "contentHash"}``

* asked by anyone but the target Group's current Coordinator (or for a Group that does not
  exist): ``AUTH_FORBIDDEN``, "Only the Group's current Coordinator asks to import knowledge."
  (diagnostic ``knowledge-reuse/not-coordinator``);
* the gateway finds the manifest an ``artifact.published`` Event of the source Group's signed
  log carries and asks the policy (:mod:`mwp.core.organization.knowledge_reuse`, read from its
  file on every request, so an operator's edit counts at once) whether the source Mission may
  give content of that classification to the target Mission;
* approved: ``200 {"manifest", "approval"}``, the manifest as its producer signed it and an
  approval for that one Artifact and the target Group, signed with this service's own key
  (``service`` principal, registered in the Organization's Registry on first use, where the
  Group Authority verifies it); the Coordinator then sends the import itself;
* otherwise, whether the policy refuses, the source Group or the Artifact does not exist, or
  the source is the target: one answer on the wire, ``AUTH_FORBIDDEN`` "No reuse of this
  Artifact is approved for this Group.", no sooner than ``refusal_seconds`` after the request,
  the same work done for every source. Why (the policy's rule, ``no-rule``,
  ``no-such-artifact``, ...) is the error's protected diagnostic and a line of the gateway's
  log, never the asker's.

Nothing is recorded by asking: an approval only counts once the Group accepts the import.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, unquote

from mwp.client import Identity, new_id
from mwp.contracts.messages import knowledge_reuse_service
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.group.knowledge import sign_reuse_approval
from mwp.core.organization.knowledge_reuse import ReusePolicy, ReuseRule, approval_document
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import is_identifier, is_sha256_ref
from mwp.gateway.hello import Session
from mwp.gateway.https import HttpRefusal, Request, Response
from mwp.gateway.subscriptions import Readers

CLAUSES: tuple[str, ...] = ("MWP-WRK-028",)

ROUTE: Final = "knowledge-imports"
# Where ``mwp dev`` and ``mwp gateway`` read the policy by default, in the state folder.
POLICY_FILE: Final = "knowledge-reuse.json"
PUBLISHED_KIND: Final = "artifact.published"
MAX_BODY_BYTES: Final = 16 * 1024

Json = dict[str, Any]
log = logging.getLogger(__name__)


def _forbidden(message: str, reason: str, group_id: str) -> MwpError:
    return MwpError(
        ErrorCode.AUTH_FORBIDDEN,
        message,
        group_id=group_id,
        diagnostic=Diagnostic("knowledge-reuse", reason),
    )


def not_approved(group_id: str, reason: str = "not-approved") -> MwpError:
    """One answer on the wire for a refused reuse and a source Group or Artifact that does not
    exist; ``reason`` (the policy's rule, or why there is none) stays in the protected
    diagnostic, which never leaves the authority zone."""
    return _forbidden("No reuse of this Artifact is approved for this Group.", reason, group_id)


def read_policy(path: Path | None) -> ReusePolicy:
    """The policy in ``path``; none (approves nothing) when there is no file or it is invalid
    (said in the log: an operator's mistake must not open reuse)."""
    if path is None or not path.exists():
        return ReusePolicy()
    try:
        return ReusePolicy.from_json(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError) as error:
        log.warning("Knowledge Reuse Policy %s is invalid, nothing is approved: %s", path, error)
        return ReusePolicy()


class KnowledgeImports:
    """Approves imports for the Coordinators of one Organization's Groups."""

    def __init__(
        self,
        organization_id: str,
        readers: Readers,
        mission: Callable[[str], Awaitable[Json]],
        register: Callable[[Identity], Awaitable[None]],
        clock: Callable[[], datetime],
        *,
        policy_file: Path | None,
        refusal_seconds: float,
        identity: Identity | None = None,
    ) -> None:
        self.readers = readers
        self.mission = mission  # the Group's Mission view, queried
        self.register = register
        self.clock = clock
        self.policy_file = policy_file
        self.refusal_seconds = refusal_seconds
        self.identity = identity or Identity.generate(knowledge_reuse_service(organization_id))
        self.approved = 0  # approvals signed (a test's and an operator's count)
        self._registered = False
        self._lock = asyncio.Lock()

    async def _ensure_registered(self) -> None:
        async with self._lock:
            if not self._registered:
                await self.register(self.identity)
                self._registered = True

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While the gateway serves: the key registered at once, in the background (a failure
        is retried at the first approval)."""

        async def register() -> None:
            try:
                await self._ensure_registered()
            except Exception:
                log.warning("registering the Knowledge Reuse Policy's key failed; retried later")

        task = asyncio.create_task(register())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def approve(self, session: Session, target_group_id: str, asked: Json) -> Json:
        """``{"manifest", "approval"}`` for the import ``asked`` names, or the typed refusal
        (see the module docstring)."""
        source_group_id, content_hash = _asked(asked)
        not_before = asyncio.get_running_loop().time() + self.refusal_seconds
        target = await self._coordinated(session, target_group_id)
        manifest = await self._manifest(source_group_id, content_hash)
        policy = await asyncio.to_thread(read_policy, self.policy_file)
        if manifest is None:
            reason = "no-such-artifact"
        elif manifest["groupId"] == target_group_id:
            reason = "same-group"
        else:
            decision = policy.decide(
                str(manifest["missionId"]), str(target["missionId"]), manifest["classification"]
            )
            if decision.rule is not None:
                return await self._approved(manifest, target, decision.rule)
            reason = decision.reason
        log.info(
            "reuse of %s from Group %s into Group %s not approved: %s",
            content_hash,
            source_group_id,
            target_group_id,
            reason,
        )
        await asyncio.sleep(max(0.0, not_before - asyncio.get_running_loop().time()))
        raise not_approved(target_group_id, reason)

    async def _approved(self, manifest: Json, target: Json, rule: ReuseRule) -> Json:
        await self._ensure_registered()
        identity = self.identity
        document = approval_document(
            manifest,
            approval_id=new_id(),
            target_mission_id=str(target["missionId"]),
            target_group_id=str(target["groupId"]),
            ceiling=rule.ceiling,
            approved_by=identity.principal.to_json(),
            now=self.clock(),
            valid_seconds=rule.valid_seconds,
        )
        self.approved += 1
        log.info(
            "reuse of %s approved for Group %s under rule %s",
            manifest["contentHash"],
            target["groupId"],
            rule.name,
        )
        approval = sign_reuse_approval(document, identity.key_id, identity.key)
        return {"manifest": manifest, "approval": approval}

    async def _coordinated(self, session: Session, group_id: str) -> Json:
        """The target Group's Mission view, when the session's Agent coordinates it now."""
        try:
            view = await self.mission(group_id)
        except Exception:  # no such Group: answered as one the asker does not coordinate
            view = {}
        if (view.get("coordinator") or {}).get("agentId") != session.agent_id:
            raise _forbidden(
                "Only the Group's current Coordinator asks to import knowledge.",
                "not-coordinator",
                group_id,
            )
        return view

    async def _manifest(self, group_id: str, content_hash: str) -> Json | None:
        """The signed manifest the source Group's log published ``content_hash`` with."""
        reader = await self.readers.acquire(group_id)
        try:
            if reader.fault is not None:
                return None
            for delivered in reader.events:  # the same scan whether the Group exists or not
                if delivered.kind != PUBLISHED_KIND:
                    continue
                manifest = delivered.event["payload"].get("manifest") or {}
                if manifest.get("contentHash") == content_hash and manifest.get("groupId") == (
                    group_id
                ):
                    return dict(manifest)
            return None
        finally:
            await self.readers.release(group_id)


def _asked(body: Mapping[str, Any]) -> tuple[str, str]:
    source, digest = body.get("sourceGroupId"), body.get("contentHash")
    if set(body) != {"sourceGroupId", "contentHash"}:
        raise _invalid("The request is {sourceGroupId, contentHash}.", "request")
    if not isinstance(source, str) or not is_identifier(source):
        raise _invalid("sourceGroupId: a Group ID.", "source-group")
    if not isinstance(digest, str) or not is_sha256_ref(digest):
        raise _invalid("contentHash: a sha256: hash.", "content-hash")
    return source, digest


def _invalid(message: str, reason: str) -> MwpError:
    return MwpError(
        ErrorCode.INVALID_COMMAND, message, diagnostic=Diagnostic("knowledge-reuse", reason)
    )


# --- the route -----------------------------------------------------------------------------------


def knowledge_imports_path(group_id: str) -> str:
    return f"/groups/{quote(group_id, safe='')}/{ROUTE}"


def route_of(target: str) -> str | None:
    """The target Group ID of a knowledge-imports request; None for any other route."""
    parts = target.split("?", 1)[0].split("/")
    if len(parts) != 4 or parts[:2] != ["", "groups"] or parts[3] != ROUTE:
        return None
    try:
        group_id = unquote(parts[2], errors="strict")
    except UnicodeDecodeError:
        raise HttpRefusal(400, "A Group ID is percent-encoded UTF-8.", "group-id") from None
    if not 0 < len(group_id) <= 512:
        raise HttpRefusal(400, "A Group ID is required.", "group-id")
    return group_id


async def serve(
    service: KnowledgeImports, session: Session, request: Request, group_id: str
) -> Response:
    """Answer one request of ``session`` (already checked live)."""
    if request.method != "POST":
        raise HttpRefusal(405, "POST to ask for an import's approval.", "method")
    if request.length > MAX_BODY_BYTES:
        raise HttpRefusal(413, f"At most {MAX_BODY_BYTES} bytes.", "size")
    try:
        body = parse_bytes(await request.read_body())
    except ValueError:
        raise HttpRefusal(400, "The body is one JSON object.", "body") from None
    if not isinstance(body, dict):
        raise HttpRefusal(400, "The body is one JSON object.", "body")
    return Response(200, canonicalize(await service.approve(session, group_id, body)))
