"""A run's capability token in gateway mode: obtained from the gateway's Authorization
Service, held in this process's memory only, checked locally and presented for each tool call.

:class:`TokenHolder` is the run's :class:`~mwp.agent.execution.ToolAuthorizer`. Before a tool
call's side effect it

1. obtains a token for the run's current Execution Lease when it holds none, or when the one
   it holds ends within :data:`REFRESH_SECONDS` (a token ends no later than the lease did when
   it was issued, so after a renewal moved the lease on the next call obtains a fresh one; the
   gateway revokes the older);
2. checks the call against the token's claims here
   (:func:`~mwp.core.trust.capability_token.check_claims`: binding, expiry, tool and
   operation, declared spend against what this run presented under it), refusing a call
   outside the token with its typed :class:`~mwp.core.errors.MwpError` before anything runs;
3. presents the token with the call to the gateway, which checks it again against the
   presenter's current Session, ownership and lease, its revocations and what it charged.

While the run is offline (spec 11.5) a reversible call is checked here only
(:meth:`TokenHolder.authorize_offline`), against the token the run already holds: no token,
an expired one or a call outside it is refused, as online.

A declared tool is presented under its name; a function passed to ``ctx.tool`` instead of a
declared tool's name under :data:`INLINE_TOOL`. A call's operation is :data:`INVOKE`, or the
operation of the ``access`` it declares on the resources it names; the token is asked for
every resource and operation the Work Contract allows (``mwp.core.trust.resource_scope``),
and each call is checked pair by pair against the contract by the run (before anything
runs) and again by the gateway.

The token never leaves this object: it is not in the activity's input or
result, nor in any Command, Event, Artifact, Message or log line (its ``repr`` shows no
signature).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final
from urllib.parse import urlsplit

from mwp.agent.actions import INLINE_TOOL
from mwp.agent.context import ResourceAccess
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.gateway_link import ROUTE_ANSWER_SECONDS, ROUTE_TRIES
from mwp.agent.gateway_views import UnknownWorkItemError
from mwp.agent.offline import Disconnected
from mwp.contracts.agent import ExecutionOrder
from mwp.contracts.errors import RemoteMwpError
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.resource_usage import ResourceUsage
from mwp.core.trust.capability_token import (
    Binding,
    CapabilityToken,
    ToolCall,
    check_claims,
)
from mwp.core.trust.resource_scope import INVOKE, ResourceScope
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import format_utc, parse_timestamp
from mwp.gateway.authorization import token_path, tool_call_path
from mwp.gateway.https import request

CLAUSES: tuple[str, ...] = ("MWP-AUT-002", "MWP-WRK-014")

# A token ending sooner than this is replaced before the next call.
REFRESH_SECONDS: Final = 1.0
_MAX_ANSWER_BYTES: Final = 64 * 1024

Json = dict[str, Any]


def _operation(access: ResourceAccess | None) -> str:
    return INVOKE if access is None else access.operation


def _utc_now() -> datetime:
    return datetime.now(UTC)


class TokenHolder:
    """The capability token of one run (see the module docstring)."""

    def __init__(
        self,
        connection: GatewayConnection,
        order: ExecutionOrder,
        tools: Iterable[str],
        *,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._connection = connection
        self._order = order
        self._tools = sorted({*tools, INLINE_TOOL})
        self._clock = clock
        self._token: CapabilityToken | None = None
        self._spent: dict[str, Decimal] = {}  # presented under the current lease
        self._spent_lease: str | None = None
        self.obtained = 0  # how many tokens this run obtained
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"TokenHolder({self._order.work_item_id!r}, {self._token!r})"

    async def authorize(
        self, tool: str, cost: ResourceUsage, lease_id: str, access: ResourceAccess | None = None
    ) -> None:
        """Allow one call of ``tool`` declaring ``cost`` under ``lease_id``, or refuse it."""
        if self._spent_lease != lease_id:
            self._spent, self._spent_lease = {}, lease_id
        token = await self._current(lease_id)
        spend = self._checked(token, tool, cost, lease_id, access)
        wire_call: Json = {"tool": tool, "operation": _operation(access), "spend": cost.delta()}
        if access is not None:
            wire_call["resources"] = sorted(set(access.resources))
        path = tool_call_path(self._order.group_id, self._order.work_item_id)
        try:
            await self._post(path, {"token": token.to_json(), "call": wire_call}, 200)
        except RemoteMwpError as refused:
            # A concurrent call replaced the token meanwhile (the gateway revoked this one):
            # present the newer one, once.
            newer = self._token
            if refused.code is not ErrorCode.AUTH_FORBIDDEN or newer is None or newer is token:
                raise
            await self._post(path, {"token": newer.to_json(), "call": wire_call}, 200)
        self._count(spend)

    def authorize_offline(
        self, tool: str, cost: ResourceUsage, lease_id: str, access: ResourceAccess | None = None
    ) -> None:
        """Allow one reversible call while the Group is unreachable, under the token held."""
        token = self._token
        if token is None or self._spent_lease != lease_id:
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                "no capability token for this lease is held: tool calls wait for the Group",
            )
        self._count(self._checked(token, tool, cost, lease_id, access))

    def _checked(
        self,
        token: CapabilityToken,
        tool: str,
        cost: ResourceUsage,
        lease_id: str,
        access: ResourceAccess | None,
    ) -> dict[str, Decimal]:
        """The call's declared spend, once the token's claims allow it here."""
        spend = {d: Decimal(str(v)) for d, v in cost.delta().items() if d != "currency"}
        o = self._order
        presenter = Binding(
            o.agent_id,
            o.session_epoch,
            o.mission_id,
            o.group_id,
            o.work_item_id,
            o.ownership_epoch,
            lease_id,
        )
        check_claims(
            token.claims,
            presented_by=presenter,
            for_call=ToolCall(
                tool,
                _operation(access),
                resources=frozenset(() if access is None else access.resources),
                spend=spend,
                currency=cost.currency,
            ),
            now=format_utc(self._clock()),
            spent=self._spent,
        )
        return spend

    def _count(self, spend: dict[str, Decimal]) -> None:
        for dimension, amount in spend.items():
            self._spent[dimension] = self._spent.get(dimension, Decimal(0)) + amount

    async def _current(self, lease_id: str) -> CapabilityToken:
        async with self._lock:  # concurrent calls share one new token
            return await self._current_locked(lease_id)

    async def _current_locked(self, lease_id: str) -> CapabilityToken:
        token = self._token
        if token is not None:
            claims = token.claims
            ends = parse_timestamp(claims.expires_at).instant
            soon = format_utc(self._clock() + timedelta(seconds=REFRESH_SECONDS))
            if claims.binding.lease_id == lease_id and parse_timestamp(soon).instant < ends:
                return token
        o = self._order
        scope = self._scope()
        asked = {
            "leaseId": lease_id,
            "ownershipEpoch": o.ownership_epoch,
            "tools": self._tools,
            "operations": sorted(scope.operations),
            "resources": sorted(scope.resources),
        }
        path = token_path(o.group_id, o.work_item_id)
        answer = await self._post(path, asked, 201, tries=ROUTE_TRIES)  # a new token each time
        self._token = CapabilityToken(answer["token"])
        self.obtained += 1
        return self._token

    def _scope(self) -> ResourceScope:
        """What the Work Contract lets the run touch, from the WorkItem's delivered view (a
        run has read it before its first call; unknown, the token names no resource)."""
        o = self._order
        try:
            view = self._connection.current().group(o.group_id).work_item(o.work_item_id)
        except UnknownWorkItemError:
            return ResourceScope(frozenset())
        return ResourceScope.of(view["contract"])

    async def _post(self, path: str, body: Json, expected: int, *, tries: int = 1) -> Json:
        """POST ``body`` to a route; a tool call is presented once (a second could be charged
        twice), a token asked for again on a new connection when no answer came."""
        for attempt in range(tries):
            try:
                return await self._posted(path, body, expected)
            except Disconnected:
                if attempt == tries - 1:
                    raise
        raise AssertionError("unreachable")

    async def _posted(self, path: str, body: Json, expected: int) -> Json:
        link = self._connection.current()
        client = link.client
        if client.session_token is None:
            raise RuntimeError("the gateway link has not authenticated")
        url = urlsplit(link.artifacts_url)
        if url.hostname is None or url.port is None:
            raise ValueError(f"not an https://HOST:PORT address: {link.artifacts_url!r}")
        try:
            response = await request(
                url.hostname,
                url.port,
                client.context,
                "POST",
                path,
                headers={
                    "Authorization": f"Bearer {client.session_token}",
                    "Content-Type": "application/json",
                },
                body=canonicalize(body),
                max_body=_MAX_ANSWER_BYTES,
                answer_seconds=ROUTE_ANSWER_SECONDS,
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise Disconnected(f"{type(exc).__name__}: {exc}") from exc
        answer = parse_bytes(response.body)
        if not isinstance(answer, dict):
            raise ValueError("the gateway's answer is not a JSON object")
        if response.status != expected:
            raise RemoteMwpError(answer)
        return answer
