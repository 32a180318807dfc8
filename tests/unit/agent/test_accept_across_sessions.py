"""An offer acceptance (or schedule disclosure) the AgentWorkflow decided under one Session and
retried by the process of the next, after a ``--replace`` restart while the activity was in
flight: it is signed under the Session of the connection it goes through, so the gateway takes
it instead of refusing it as stale on every attempt, leaving the offer unanswered. A process
older than the decision signs under the decision's Session, which the gateway refuses."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mwp.activities.agent import AgentActivities
from mwp.agent import Agent, CardInfo
from mwp.agent.gateway_connection import GatewayConnection
from mwp.client import Identity, MwpClient
from mwp.contracts.agent import OfferAcceptance, ScheduleUpdate
from mwp.core.trust.registry import Principal
from mwp.stores.objects import open_store

AGENT_ID = "urn:mwp:agent:acme:tester"
GROUP = "urn:uuid:6f1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c01"
MISSION = "urn:uuid:6f1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c00"
ITEM = "urn:uuid:6f1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c02"


class Link:
    """A connection of Session ``session_epoch``, as the activities send through it."""

    def __init__(self, session_epoch: int) -> None:
        self.session_epoch = session_epoch
        self.closed = asyncio.Event()
        self.signed_under: list[int] = []

    async def send(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        group_id: str,
        session_epoch: int,
        work_item_id: str | None = None,
    ) -> dict[str, Any]:
        self.signed_under.append(session_epoch)
        accepted = {"kind": "work.offer.accepted", "payload": {"owner": {"ownershipEpoch": 1}}}
        return {"events": [accepted]}


def activities_through(link: Link, tmp_path: Path) -> AgentActivities:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    agent = Agent(
        AGENT_ID,
        identity,
        card=CardInfo("urn:mwp:organization:acme", Principal("human", "urn:mwp:human:o"), "T"),
    )
    connection = GatewayConnection(agent)
    connection.attach(link)  # type: ignore[arg-type]
    client: MwpClient = None  # type: ignore[assignment]  # gateway mode: never used
    return AgentActivities(agent, client, open_store(tmp_path), gateway=connection)


def acceptance(session_epoch: int) -> OfferAcceptance:
    return OfferAcceptance(GROUP, MISSION, ITEM, "urn:uuid:offer", 1, session_epoch)


@pytest.mark.parametrize(("decided_under", "link_session", "signed_under"), [(2, 3, 3), (3, 2, 3)])
async def test_an_acceptance_is_signed_under_the_newer_of_its_and_the_connections_session(
    tmp_path: Path, decided_under: int, link_session: int, signed_under: int
) -> None:
    link = Link(link_session)
    answer = await activities_through(link, tmp_path).accept_offer(acceptance(decided_under))
    assert answer == {"decision": "accepted", "ownershipEpoch": 1}
    assert link.signed_under == [signed_under]


async def test_a_schedule_disclosure_retried_after_a_restart_goes_under_the_new_session(
    tmp_path: Path,
) -> None:
    link = Link(5)
    update = ScheduleUpdate(GROUP, MISSION, ITEM, 1, 4, {"estimatedStart": "2030-01-01T00:00:00Z"})
    await activities_through(link, tmp_path).disclose_schedule(update)
    assert link.signed_under == [5]
