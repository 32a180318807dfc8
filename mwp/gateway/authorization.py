"""The Organization's Authorization Service, hosted by the gateway: capability tokens (spec 12).

Two HTTPS routes of the gateway's second listener, authorized like the Artifact routes by
the session token of a live connection (``Authorization: Bearer <token>``):

* ``POST /groups/<g>/work-items/<w>/capability-token`` ``{"leaseId", "ownershipEpoch",
  "tools", "operations", "resources"?, "data"?, "limits"?}``: a token for the session's Agent,
  answered ``201 {"token": ...}`` only when the Group Authority's view (queried; for the
  first token after a ``work.start`` this gateway forwarded, the view queried as soon as that
  start was decided, :meth:`Authorizations.prefetch`) shows the Agent as the WorkItem's
  owner, every required execution approval granted (withheld otherwise, MWP-AUT-003), and an
  active Execution Lease of this Session under the named lease and Ownership Epoch. It names
  no resource or operation the Work Contract's ``allowedResources`` do not (``AUTH_FORBIDDEN``
  otherwise: ``mwp.core.trust.resource_scope``); its limits are capped by the Work
  Contract's budget and what the ledger says remains; it
  expires at the lease's current expiry or after :data:`TOKEN_SECONDS`, whichever is first.
  A newer token for the same lease revokes the older one (the runtime asks again after a
  renewal moved the lease's expiry on).
* ``POST /groups/<g>/work-items/<w>/tool-calls`` ``{"token", "call": {"tool", "operation",
  "resources"?, "data"?, "spend"?}}``: the runtime presents its token before a tool call's
  side effect. The token is checked (:func:`~mwp.core.trust.capability_token.check`) against
  the presenter's current Session and the WorkItem's current ownership and lease (queried),
  the revocation set and what was already charged under the lease, and each resource the
  call names against the operations the contract allows on it; ``200 {"authorized": true}``
  charges the call's declared spend, a refusal is the typed error of the check.
* ``POST /groups/<g>/work-items/<w>/authorization``: the Coordinator's request, which names a
  scope and never yields a token (``mwp.gateway.authorization_requests``).

The issuing key is the Authorization Service's own (``service`` principal, registered in the
Organization's Registry on first use, so any verifier finds it there). Revocations and the
charges per lease live in this gateway process: a token is good at the gateway that issued
it (the runtime keeps one gateway connection), and ends with the lease or the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final, TypeVar
from urllib.parse import unquote

from mwp.client import Identity
from mwp.contracts.messages import authorization_service
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.capability_token import (
    DIMENSIONS,
    AuthorizationService,
    Binding,
    CapabilityToken,
    ExecutionLease,
    Grant,
    ToolCall,
    check,
    issue,
)
from mwp.core.trust.resource_scope import ResourceScope
from mwp.core.trust.service_message import TrustedKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import format_utc, parse_timestamp
from mwp.gateway.authorization_requests import AUTHORIZE_ROUTE, RequestedScopes
from mwp.gateway.hello import Session
from mwp.gateway.https import HttpRefusal, Request, Response

CLAUSES: tuple[str, ...] = (
    "MWP-AUT-001",
    "MWP-AUT-002",
    "MWP-AUT-003",
    "MWP-AUT-006",
    "MWP-WRK-014",
)

# The longest a token lives, whatever its lease ("short-lived" as Organization policy).
TOKEN_SECONDS: Final = 300
# A view queried after a ``work.start`` serves its first token this long (a presentation
# checks the view of its own time, so a lease lost meanwhile still stops the first call).
PREFETCH_SECONDS: Final = 2.0
TOKEN_ROUTE: Final = "capability-token"
TOOL_CALL_ROUTE: Final = "tool-calls"
# A request body of these routes is a token and a call: small.
MAX_BODY_BYTES: Final = 64 * 1024
# Past this many revoked tokens, or leases with charges, those whose tokens have all ended
# are forgotten (an ended token is refused as expired all the same).
KEPT: Final = 65536

Json = dict[str, Any]
_T = TypeVar("_T")
log = logging.getLogger(__name__)

# Binding refusals that mean the token's lease is over for its Agent: the WorkItem and Agent
# matched (checked first), its Session, ownership or lease did not. Its tokens are revoked.
_LOST: Final = frozenset({"session-epoch", "ownership-epoch", "lease"})


def _refusal(code: ErrorCode, message: str, reason: str) -> MwpError:
    return MwpError(code, message, diagnostic=Diagnostic("authorization", reason))


@dataclass
class _Lease:
    """What this service issued under one Execution Lease."""

    tokens: list[str] = field(default_factory=list)  # the newest last
    spent: dict[str, Decimal] = field(default_factory=dict)
    ends: str = "0001-01-01T00:00:00Z"  # the newest token's expiry


class Authorizations:
    """Issues and checks the capability tokens of one Organization's Workers."""

    def __init__(
        self,
        organization_id: str,
        work_item: Callable[[str, str], Awaitable[Json]],
        register: Callable[[Identity], Awaitable[None]],
        clock: Callable[[], datetime],
        *,
        mission: Callable[[str], Awaitable[Json]] | None = None,
        identity: Identity | None = None,
        token_seconds: int = TOKEN_SECONDS,
    ) -> None:
        self.work_item = work_item
        self.mission = mission  # the Mission view, for the Coordinator's requests
        self.requested = RequestedScopes()
        self.register = register
        self.clock = clock
        self.token_seconds = token_seconds
        self.identity = identity or Identity.generate(authorization_service(organization_id))
        self.issuer = AuthorizationService(
            self.identity.principal.id, self.identity.key_id, self.identity.key
        )
        self.trusted = TrustedKey(self.identity.key_id, self.identity.key.public_key)
        self.revoked: dict[str, str] = {}  # token ID: its expiry
        # Who else sees each issued token (an auditor's or a test's hook; never a log).
        self.observe: Callable[[CapabilityToken], None] | None = None
        self.presentations = 0  # tool calls presented (allowed or refused)
        self.leases: dict[str, _Lease] = {}
        self._registered = False
        self._lock = asyncio.Lock()
        self._prefetched: dict[tuple[str, str], tuple[float, asyncio.Task[Json]]] = {}

    async def _ensure_registered(self) -> None:
        async with self._lock:
            if not self._registered:
                await self.register(self.identity)
                self._registered = True

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While the gateway serves: the key is registered at once, in the background, so the
        first token waits for no Registry Update (a failure is retried at that token)."""

        async def register() -> None:
            try:
                await self._ensure_registered()
            except Exception:
                log.warning("registering the Authorization Service's key failed; retried later")

        task = asyncio.create_task(register())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def prefetch(self, group_id: str, work_item_id: str) -> None:
        """A ``work.start`` was just decided: query the WorkItem's view now, while its Events
        travel to the log, for the token its runtime asks for next (:data:`PREFETCH_SECONDS`)."""
        loop = asyncio.get_running_loop()

        async def query() -> Json:
            return await self.work_item(group_id, work_item_id)

        task = loop.create_task(query())
        task.add_done_callback(_observed)
        self._prefetched[(group_id, work_item_id)] = (loop.time(), task)
        for key in [k for k, (at, _) in self._prefetched.items() if at < loop.time() - 60]:
            del self._prefetched[key]

    async def _issuing_view(self, group_id: str, work_item_id: str) -> Json:
        """The view queried since the WorkItem's latest ``work.start``, if recent; else now."""
        prefetched = self._prefetched.pop((group_id, work_item_id), None)
        if prefetched is not None:
            at, task = prefetched
            if asyncio.get_running_loop().time() - at < PREFETCH_SECONDS:
                with contextlib.suppress(Exception):  # a failed prefetch: ask again
                    return await task
        return await self._view(group_id, work_item_id)

    # --- issuing -------------------------------------------------------------------------------

    async def issue(
        self, session: Session, group_id: str, work_item_id: str, request: Json
    ) -> CapabilityToken:
        """A token for ``session``'s Agent under the WorkItem's current lease (see the module
        docstring); refused while the Agent is not the owner, an approval is missing or the
        lease it names is not the current one of this Session."""
        await self._ensure_registered()
        view = await self._issuing_view(group_id, work_item_id)
        owner = view.get("owner") or {}
        if owner.get("agentId") != session.agent_id:
            raise _refusal(
                ErrorCode.AUTH_FORBIDDEN, "The Agent does not own the WorkItem.", "not-owner"
            )
        if view.get("executionGate", "not_required") != "not_required" and not view.get(
            "executionApproved"
        ):
            raise _refusal(
                ErrorCode.AUTH_FORBIDDEN,
                "The WorkItem awaits its execution approval: no token before it.",
                "awaiting-execution-approval",
            )
        lease = _current_lease(view, session, self.clock())
        if lease is None:
            raise _refusal(
                ErrorCode.WORK_LEASE_EXPIRED, "No active Execution Lease of this Session.", "lease"
            )
        if request.get("ownershipEpoch") != lease.binding.ownership_epoch:
            raise _refusal(
                ErrorCode.WORK_STALE_OWNERSHIP, "Another Ownership Epoch.", "ownership-epoch"
            )
        if request.get("leaseId") != lease.binding.lease_id:
            raise _refusal(ErrorCode.WORK_LEASE_EXPIRED, "Another Execution Lease.", "lease-id")
        grant = self.requested.narrow((group_id, work_item_id), _grant(request))
        ResourceScope.of(view["contract"]).check_grant(grant.resources, grant.operations)
        now = self.clock()
        policy_end = format_utc(now + timedelta(seconds=self.token_seconds))
        earlier = parse_timestamp(lease.expires_at).instant <= parse_timestamp(policy_end).instant
        expires = lease.expires_at if earlier else policy_end
        token = issue(
            grant,
            lease=lease,
            contract_budget=view["contract"].get("budget", {}),
            remaining=_remaining(view),
            token_id=f"urn:mwp:capability-token:{secrets.token_hex(16)}",
            issued_at=format_utc(now),
            expires_at=expires,
            issuer=self.issuer,
        )
        issued = self.leases.setdefault(lease.binding.lease_id, _Lease())
        for older in issued.tokens:  # the newest token replaces the older ones
            self._revoke(older, issued.ends)
        issued.tokens, issued.ends = [token.token_id], expires
        self._forget_ended(self.leases, lambda lease: lease.ends)
        if self.observe is not None:
            self.observe(token)
        return token

    async def request(
        self, session: Session, group_id: str, work_item_id: str, request: Json
    ) -> None:
        """The Coordinator's request for authorization of the WorkItem's Worker: a scope
        every later token for it stays within (``mwp.gateway.authorization_requests``)."""
        if self.mission is None:
            raise _refusal(
                ErrorCode.AUTH_FORBIDDEN, "This gateway takes no requests.", "no-requests"
            )
        view = await self._view(group_id, work_item_id)
        grant = _grant(request)
        ResourceScope.of(view["contract"]).check_grant(grant.resources, grant.operations)
        mission = await self.mission(group_id)
        coordinator = mission.get("coordinator") or {}
        self.requested.request(coordinator, session.agent_id, (group_id, work_item_id), grant)

    # --- checking ------------------------------------------------------------------------------

    async def present(
        self, session: Session, group_id: str, work_item_id: str, presented: Json
    ) -> None:
        """Check ``presented`` (``{"token", "call"}``) for ``session``'s Agent now; charge the
        call's declared spend under its lease when it is allowed."""
        self.presentations += 1
        token, call = presented.get("token"), _call(presented.get("call"))
        if not isinstance(token, Mapping):
            raise _refusal(ErrorCode.INVALID_COMMAND, "Present a capability token.", "no-token")
        view = await self._view(group_id, work_item_id)
        lease = _current_lease(view, session, self.clock())
        current = Binding(
            session.agent_id,
            session.session_epoch,
            str(view.get("missionId")),
            group_id,
            work_item_id,
            int(view.get("ownershipEpoch") or 0),
            "" if lease is None else lease.binding.lease_id,  # none: every token's lease ended
        )
        bound_lease = _lease_of(token)
        charged = self.leases.get(bound_lease) if bound_lease else None
        try:
            claims = check(
                token,
                presented_by=current,
                for_call=call,
                now=format_utc(self.clock()),
                revoked=self.revoked,
                trusted=self.trusted,
                issuer=self.issuer.service_id,
                spent=charged.spent if charged is not None else {},
            )
        except MwpError as refused:
            diagnostic = refused.diagnostic
            if diagnostic is not None and diagnostic.reason in _LOST and bound_lease:
                self._revoke_lease(bound_lease)  # its Agent holds that lease no longer
            raise
        ResourceScope.of(view["contract"]).check_access(call.operation, call.resources)
        known = self.leases.setdefault(claims.binding.lease_id, _Lease(ends=claims.expires_at))
        spent = known.spent
        for dimension, amount in call.spend.items():
            spent[dimension] = spent.get(dimension, Decimal(0)) + Decimal(str(amount))

    def _revoke(self, token_id: str, ends: str) -> None:
        self.revoked[token_id] = ends
        self._forget_ended(self.revoked, lambda end: end)

    def _revoke_lease(self, lease_id: str) -> None:
        issued = self.leases.pop(lease_id, None)
        if issued is not None:
            for token_id in issued.tokens:
                self._revoke(token_id, issued.ends)

    def _forget_ended(self, table: dict[str, _T], end: Callable[[_T], str]) -> None:
        """Past :data:`KEPT` entries, drop those whose tokens all ended."""
        if len(table) <= KEPT:
            return
        now = parse_timestamp(format_utc(self.clock())).instant
        for key in [k for k, v in table.items() if parse_timestamp(end(v)).instant <= now]:
            del table[key]

    async def _view(self, group_id: str, work_item_id: str) -> Json:
        """The WorkItem's view, queried now."""
        try:
            return await self.work_item(group_id, work_item_id)
        except MwpError:
            raise
        except Exception:  # the Group holds no such WorkItem
            raise _refusal(
                ErrorCode.GROUP_NOT_FOUND, "No such Group or WorkItem.", "work-item-unknown"
            ) from None


def _observed(task: asyncio.Task[Json]) -> None:
    """Retrieve a prefetch's failure (asked again at the token), so none goes unreported."""
    if not task.cancelled():
        task.exception()


def _current_lease(
    view: Mapping[str, Any], session: Session, now: datetime
) -> ExecutionLease | None:
    """The WorkItem's active Execution Lease when ``session`` holds it and it has not run out
    by ``now`` (a view may be older than the lease's end)."""
    lease = view.get("executionLease")
    if (
        view.get("state") != "active"
        or not isinstance(lease, Mapping)
        or lease.get("state") != "active"
        or lease.get("holderAgentId") != session.agent_id
        or lease.get("sessionEpoch") != session.session_epoch
        or not parse_timestamp(format_utc(now)).instant
        < parse_timestamp(str(lease.get("expiresAt"))).instant
    ):
        return None
    binding = Binding(
        session.agent_id,
        session.session_epoch,
        str(view["missionId"]),
        str(view["groupId"]),
        str(view["workItemId"]),
        int(lease["ownershipEpoch"]),
        str(lease["leaseId"]),
    )
    return ExecutionLease(binding, str(lease["expiresAt"]))


def _lease_of(token: Mapping[str, Any]) -> str | None:
    body = token.get("body")
    lease_id = body.get("leaseId") if isinstance(body, Mapping) else None
    return lease_id if isinstance(lease_id, str) else None


def _remaining(view: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the ledger says the WorkItem may still consume (nothing recorded: no cap but the
    contract's)."""
    remaining = (view.get("resourceUsage") or {}).get("remaining") or {}
    return {d: Decimal(str(remaining[d])) for d in DIMENSIONS if d in remaining}


def _names(value: Any, what: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _refusal(ErrorCode.INVALID_COMMAND, f"{what} is a list of names.", what)
    return frozenset(value)


def _grant(request: Mapping[str, Any]) -> Grant:
    limits = request.get("limits") or {}
    if not isinstance(limits, Mapping):
        raise _refusal(ErrorCode.INVALID_COMMAND, "limits is an object.", "limits")
    return Grant(
        tools=_names(request.get("tools"), "tools"),
        resources=_names(request.get("resources"), "resources"),
        data=_names(request.get("data"), "data"),
        operations=_names(request.get("operations"), "operations"),
        limits=dict(limits),
    )


def _call(value: Any) -> ToolCall:
    if not isinstance(value, Mapping):
        raise _refusal(ErrorCode.INVALID_COMMAND, "Present the call.", "no-call")
    tool, operation, spend = value.get("tool"), value.get("operation"), value.get("spend") or {}
    if not isinstance(tool, str) or not isinstance(operation, str):
        raise _refusal(ErrorCode.INVALID_COMMAND, "A call names its tool and operation.", "call")
    if not isinstance(spend, Mapping):
        raise _refusal(ErrorCode.INVALID_COMMAND, "spend is an object.", "spend")
    return ToolCall(
        tool,
        operation,
        _names(value.get("resources"), "resources"),
        _names(value.get("data"), "data"),
        {k: v for k, v in spend.items() if k != "currency"},
        _currency(spend.get("currency")),
    )


def _currency(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _refusal(ErrorCode.INVALID_COMMAND, "spend.currency is a code.", "currency")
    return value


# --- the routes ----------------------------------------------------------------------------------


def token_path(group_id: str, work_item_id: str) -> str:
    return _work_item_path(group_id, work_item_id) + TOKEN_ROUTE


def authorization_path(group_id: str, work_item_id: str) -> str:
    return _work_item_path(group_id, work_item_id) + AUTHORIZE_ROUTE


def tool_call_path(group_id: str, work_item_id: str) -> str:
    return _work_item_path(group_id, work_item_id) + TOOL_CALL_ROUTE


def _work_item_path(group_id: str, work_item_id: str) -> str:
    from urllib.parse import quote

    return f"/groups/{quote(group_id, safe='')}/work-items/{quote(work_item_id, safe='')}/"


def route_of(target: str) -> tuple[str, str, str] | None:
    """``(groupId, workItemId, route)`` of an authorization route; None for any other."""
    parts = target.split("?", 1)[0].split("/")
    if (
        len(parts) != 6
        or parts[:2] != ["", "groups"]
        or parts[3] != "work-items"
        or parts[5] not in (TOKEN_ROUTE, TOOL_CALL_ROUTE, AUTHORIZE_ROUTE)
    ):
        return None
    try:
        group_id, work_item_id = (unquote(p, errors="strict") for p in (parts[2], parts[4]))
    except UnicodeDecodeError:
        raise HttpRefusal(400, "IDs are percent-encoded UTF-8.", "id") from None
    if not (0 < len(group_id) <= 512 and 0 < len(work_item_id) <= 512):
        raise HttpRefusal(400, "A Group and a WorkItem ID are required.", "id")
    return group_id, work_item_id, parts[5]


async def serve(
    service: Authorizations,
    session: Session,
    request: Request,
    route: tuple[str, str, str],
) -> Response:
    """Answer one authorization request of ``session`` (already checked live)."""
    if request.method != "POST":
        raise HttpRefusal(405, "POST to the authorization routes.", "method")
    if request.length > MAX_BODY_BYTES:
        raise HttpRefusal(413, f"At most {MAX_BODY_BYTES} bytes.", "size")
    try:
        body = parse_bytes(await request.read_body())
    except ValueError:
        raise HttpRefusal(400, "The body is one JSON object.", "body") from None
    if not isinstance(body, dict):
        raise HttpRefusal(400, "The body is one JSON object.", "body")
    group_id, work_item_id, name = route
    if name == TOKEN_ROUTE:
        token = await service.issue(session, group_id, work_item_id, body)
        return Response(201, canonicalize({"token": token.to_json()}))
    if name == AUTHORIZE_ROUTE:
        await service.request(session, group_id, work_item_id, body)
        return Response(202, canonicalize({"workItemId": work_item_id, "requested": True}))
    await service.present(session, group_id, work_item_id, body)
    return Response(200, canonicalize({"authorized": True}))
