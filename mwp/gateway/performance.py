"""The Registry's performance records (spec 8, MWP-IDN-004), kept on the authority side from
every Group log of the Organization and served to its Coordinators through the gateway.

:class:`RegistryPerformance` is a projection, never a source of truth: it reads each Group's
signed log in the object store (verified as every delivery is: six stages against the
Registry evidence, accepted by the Organization's Group Authority, hash-chained, in order)
after the position it reached, and feeds the Events to the pure
:class:`~mwp.core.organization.performance.PerformanceLedger` (idempotent by Event ID) and to
each Group's :class:`~mwp.gateway.visibility.MembershipTimeline`. It holds nothing the logs do
not say, so it is rebuilt from them whenever its process starts (on the first request), and
no workflow changes for it. When asked, it reads at once the Groups whose logs the mirror's
hints say grew, looks for new Groups in the store's listing every ``refresh_seconds`` at most,
and reads every known Group again every ``safety_net_seconds`` (hints can be lost), as the
gateway's readers do. A Group whose first Event another Authority accepted is another
Organization's and is not read again.

Served as ``GET /registry/performance/<agentId>[?capability=<id@version>]`` on the gateway's
HTTPS listener, authorized by a live session's token like the Artifact routes, to an agent
holding a live Coordinator Membership in one of the Organization's Groups (anyone else:
``AUTH_FORBIDDEN``). The answer counts every outcome Organization-wide but cites only the
Events the asker may see in Groups it is a member of (its Membership's visibility spans), so
no other Group's Events leak. An unknown agent and an agent without a record get the same
answer: no records, or zero counts for the capability asked about.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qs, quote, unquote

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.log.cursor import Cursor
from mwp.core.organization.performance import (
    Outcome,
    PerformanceLedger,
    PerformanceRecord,
    record_of,
)
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.wire.jcs import canonicalize
from mwp.gateway.hello import Session
from mwp.gateway.https import HttpRefusal, Request, Response
from mwp.gateway.visibility import MembershipTimeline
from mwp.log.delivery import subscribe
from mwp.log.whole_history import WholeGroupHistory
from mwp.stores.objects import ObjectStore

CLAUSES: tuple[str, ...] = ("MWP-IDN-004",)

log = logging.getLogger(__name__)

PERFORMANCE_PREFIX: Final = "/registry/performance/"
# New Groups are looked for in the store's listing at most this often (hinted ones are read
# at once); every known Group is read again after the safety net.
REFRESH_SECONDS: Final = 1.0
SAFETY_NET_SECONDS: Final = 30.0
_GROUPS: Final = "groups/"


def performance_path(agent_id: str, capability: str | None = None) -> str:
    path = PERFORMANCE_PREFIX + quote(agent_id, safe="")
    return path if capability is None else f"{path}?capability={quote(capability, safe='')}"


@dataclass
class _Log:
    """How far one Group's log was read, and who may see which of its Events."""

    cursor: Cursor | None = None
    # Context Packages show nothing here (no Event IDs are kept): a citation needs a span.
    timeline: MembershipTimeline = field(default_factory=lambda: MembershipTimeline(_no_id))
    fault: bool = False


def _no_id(sequence: int) -> str | None:
    return None


def _due(last: float | None, now: float, seconds: float) -> bool:
    return last is None or now - last >= seconds


class RegistryPerformance:
    """Every Worker's performance records, from all the Organization's Group logs."""

    def __init__(
        self,
        store: ObjectStore,
        evidence: Callable[[], Awaitable[RegistryEvidence]],
        authority: Principal,
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        safety_net_seconds: float = SAFETY_NET_SECONDS,
    ) -> None:
        self.store = store
        self.evidence = evidence
        self.authority = authority
        self.refresh_seconds = refresh_seconds
        self.safety_net_seconds = safety_net_seconds
        self.ledger = PerformanceLedger()
        self._logs: dict[str, _Log] = {}
        self._foreign: set[str] = set()
        self._hinted: set[str] = set()
        self._listed_at: float | None = None
        self._reread_at: float | None = None
        self._lock = asyncio.Lock()

    def hint(self, group_id: str) -> None:
        """The Group's log grew: read it at the next request."""
        self._hinted.add(group_id)

    async def refresh(self) -> None:
        """Read what the logs hold beyond the positions reached."""
        async with self._lock:
            now = asyncio.get_running_loop().time()
            groups, self._hinted = self._hinted, set()
            if _due(self._listed_at, now, self.refresh_seconds):
                self._listed_at = now
                known = self._logs.keys() | self._foreign
                groups |= set(await asyncio.to_thread(self._list)) - known
            if _due(self._reread_at, now, self.safety_net_seconds):
                self._reread_at = now
                for found in self._logs.values():
                    found.fault = False  # read again: the fault may have passed
                groups |= self._logs.keys()
            if not groups - self._foreign:
                return
            evidence = await self.evidence()
            for group_id in sorted(groups - self._foreign):
                await self._read(group_id, evidence)

    def _list(self) -> list[str]:
        """The Groups with a log in the store (over-long IDs are stored hashed: not listed)."""
        names = self.store.list_folders(_GROUPS)
        return [unquote(name) for name in names if "%3A" in name]

    async def _read(self, group_id: str, evidence: RegistryEvidence) -> None:
        found = self._logs.get(group_id)
        if found is None:
            first = await asyncio.to_thread(WholeGroupHistory(self.store, group_id).get, 1)
            if first is None:
                return  # not started: nothing to derive yet
            if (first.event.get("acceptedBy") or {}).get("id") != self.authority.id:
                self._foreign.add(group_id)
                return
            found = self._logs[group_id] = _Log()
        if found.fault:
            return
        events = subscribe(
            self.store,
            group_id,
            evidence,
            after=found.cursor,
            authority=self.authority,
            follow=False,
            log=WholeGroupHistory(self.store, group_id),
        )
        try:
            async for delivered in events:
                found.timeline.evolve(delivered.event)
                self.ledger.evolve(delivered.event)
                found.cursor = delivered.cursor
        except MwpError as exc:  # an unverifiable entry: nothing after it is taken
            log.warning("performance records: the log of %s stops at a fault: %s", group_id, exc)
            found.fault = True
        finally:
            events.close()

    # --- reading the records --------------------------------------------------------------

    def is_coordinator(self, agent_id: str) -> bool:
        """Whether the agent holds a live Coordinator Membership in one of the Groups."""
        return any(
            (found.timeline.membership(agent_id) or ("",))[0] == "coordinator"
            for found in self._logs.values()
        )

    def records(
        self, agent_id: str, capability: str | None = None, *, reader: str | None = None
    ) -> list[PerformanceRecord]:
        """The agent's records (one capability's, or each it has one for); Events cited only
        where ``reader`` may see them (None: the authority zone's operator, who sees all)."""

        def visible(outcome: Outcome) -> bool:
            if reader is None:
                return True
            found = self._logs.get(outcome.group_id)
            return found is not None and found.timeline.may_see(reader, outcome.sequence)

        ledger = self.ledger
        capabilities = [capability] if capability is not None else ledger.capabilities(agent_id)
        return [record_of(ledger.outcomes(agent_id, c), agent_id, c, visible) for c in capabilities]


# --- the HTTPS route ---------------------------------------------------------------------------


def is_performance_route(target: str) -> bool:
    return target.split("?", 1)[0].startswith(PERFORMANCE_PREFIX)


async def serve(records: RegistryPerformance, session: Session, request: Request) -> Response:
    """``GET /registry/performance/<agentId>[?capability=...]`` for a Coordinator's session."""
    if request.method != "GET":
        raise HttpRefusal(405, "GET a performance record.", "method")
    agent_id, capability = _parsed(request.target)
    await records.refresh()
    if not records.is_coordinator(session.agent_id):
        raise MwpError(
            ErrorCode.AUTH_FORBIDDEN,
            "Only a Coordinator of the Organization reads performance records.",
            diagnostic=Diagnostic("registry", "performance-not-coordinator"),
        )
    found = records.records(agent_id, capability, reader=session.agent_id)
    body = {"agentId": agent_id, "records": [r.to_json() for r in found]}
    return Response(200, canonicalize(body))


def _parsed(target: str) -> tuple[str, str | None]:
    path, _, query = target.partition("?")
    segment = path[len(PERFORMANCE_PREFIX) :]
    with contextlib.suppress(UnicodeDecodeError):
        agent_id = unquote(segment, errors="strict")
        wanted = parse_qs(query, errors="strict").get("capability")
        if agent_id and "/" not in segment and len(agent_id) <= 512:
            capability = wanted[-1] if wanted else None
            if capability is None or _capability(capability):
                return agent_id, capability
    raise HttpRefusal(400, "Name one agent, and a capability as id@version.", "performance-request")


def _capability(text: str) -> bool:
    name, at, version = text.partition("@")
    return bool(name and at and version) and len(text) <= 256
