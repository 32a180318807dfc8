"""Reconciling buffered offline Commands under a new Session (MWP-WRK-021): the Group learns
that Session from the Registry a moment after the HELLO opened it, so a refusal as a stale
Session is asked again for a while before it is final; any other refusal is final at once."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.agent import Agent, CardInfo
from mwp.agent import gateway_connection as connection
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.offline_buffer import Buffered
from mwp.client import Identity
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.offline_execution import OFFLINE_EXTENSION
from mwp.core.trust.registry import Principal

AGENT_ID = "urn:mwp:agent:acme:indexer"
GROUP = "urn:uuid:6f1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c01"
ITEM = "urn:uuid:6f1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c02"


class Link:
    """The new Session's link as `_reconcile_one` uses it: refuses ``refusals`` first."""

    session_epoch = 3

    def __init__(self, *refusals: ErrorCode) -> None:
        self.refusals = list(refusals)
        self.sent: list[dict[str, Any]] = []

    async def command(self, signed: dict[str, Any]) -> list[dict[str, Any]]:
        self.sent.append(signed)
        if self.refusals:
            raise MwpError(self.refusals.pop(0), "refused")
        return [{"kind": "work.checkpointed"}]


def buffered_connection() -> GatewayConnection:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    agent = Agent(
        AGENT_ID,
        identity,
        card=CardInfo("urn:mwp:organization:acme", Principal("human", "urn:mwp:human:o"), "I"),
    )
    command = identity.command(
        "work.checkpoint",
        {"ownershipEpoch": 1},
        group_id=GROUP,
        work_item_id=ITEM,
        session_epoch=2,
        membership_epoch=1,
        extensions={OFFLINE_EXTENSION: {"bufferedAt": "2030-01-01T00:00:00Z"}},
    )
    gateway = GatewayConnection(agent)
    gateway.keep(2, Buffered(command))
    return gateway


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "SESSION_LEARNED_DELAYS", (0.0, 0.0, 0.0))


async def test_a_session_the_group_has_not_learned_yet_is_asked_again() -> None:
    link = Link(ErrorCode.AUTH_STALE_SESSION, ErrorCode.AUTH_STALE_SESSION)
    (decided,) = await buffered_connection().reconcile(link)  # type: ignore[arg-type]
    assert decided.kinds == ("work.checkpointed",) and decided.refusal is None
    assert len(link.sent) == 3 and len({s["actionId"] for s in link.sent}) == 1


async def test_a_stale_session_is_final_after_the_last_ask_and_other_refusals_at_once() -> None:
    link = Link(*[ErrorCode.AUTH_STALE_SESSION] * 4)
    (decided,) = await buffered_connection().reconcile(link)  # type: ignore[arg-type]
    assert decided.refusal == "AUTH_STALE_SESSION" and len(link.sent) == 4
    link = Link(ErrorCode.WORK_LEASE_EXPIRED)
    (decided,) = await buffered_connection().reconcile(link)  # type: ignore[arg-type]
    assert decided.refusal == "WORK_LEASE_EXPIRED" and len(link.sent) == 1
