"""The Coordinator's request for authorization (spec 12; MWP-AUT-002).

The Coordinator MAY request authorization for a WorkItem's Worker, but MUST NOT obtain, copy
or forward the Worker's credential. So its request names only the scope of the step it
planned (tools, operations, resources, limits), never a token: ``POST
/groups/<g>/work-items/<w>/authorization`` by the Group's current Coordinator is answered
``202 {"workItemId", "requested": true}``, and every token issued later for that WorkItem,
to its owner only, allows no more than the request (its sets intersected, each limit the
least). A request from anyone but the current Coordinator (``AUTH_FORBIDDEN``,
``authorization/not-coordinator``), or naming a resource or operation outside the Work
Contract (``resource-scope/...``), changes nothing. The latest request replaces the earlier
ones; requests live in the gateway process, as its revocations do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Final

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.capability_token import Grant

CLAUSES: tuple[str, ...] = ("MWP-AUT-002",)

AUTHORIZE_ROUTE: Final = "authorization"


@dataclass
class RequestedScopes:
    """The scope the Coordinator last requested, per (Group, WorkItem)."""

    scopes: dict[tuple[str, str], Grant] = field(default_factory=dict)

    def request(
        self, coordinator: Mapping[str, Any], agent_id: str, key: tuple[str, str], grant: Grant
    ) -> None:
        """Record ``grant`` for ``key`` when ``agent_id`` is the Group's current Coordinator
        (``coordinator``: the Mission view's)."""
        if coordinator.get("agentId") != agent_id:
            raise MwpError(
                ErrorCode.AUTH_FORBIDDEN,
                "Only the Group's current Coordinator requests authorization.",
                diagnostic=Diagnostic("authorization", "not-coordinator"),
            )
        self.scopes[key] = grant

    def narrow(self, key: tuple[str, str], asked: Grant) -> Grant:
        """``asked`` within what the Coordinator requested for ``key`` (unchanged without a
        request)."""
        requested = self.scopes.get(key)
        if requested is None:
            return asked
        limits: dict[str, Decimal] = {}
        for dimension in {*asked.limits, *requested.limits}:
            bounds = [
                Decimal(str(g.limits[dimension]))
                for g in (asked, requested)
                if dimension in g.limits
            ]
            limits[dimension] = min(bounds)
        return replace(
            asked,
            tools=asked.tools & requested.tools,
            resources=asked.resources & requested.resources,
            data=asked.data & requested.data,
            operations=asked.operations & requested.operations,
            limits=limits,
        )
