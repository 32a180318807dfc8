"""A run may start before its Group's Events reach the runtime's link: the AgentWorkflow,
replayed from Temporal, orders it at once, while a new process's views fill only as the
gateway delivers the Group. The run's first read of its WorkItem waits for that delivery
instead of failing (a failed run attempt is retried by Temporal a second or more later: the
restarted tester of the proof of concept lost two attempts so), and still fails on a WorkItem
the Group never showed."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from mwp.agent import Agent, CardInfo
from mwp.agent import gateway_channel as channel
from mwp.agent.gateway_channel import GatewayChannel
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.gateway_views import GroupViews, UnknownWorkItemError
from mwp.client import Identity
from mwp.contracts.agent import ExecutionOrder
from mwp.core.trust.registry import Principal

AGENT_ID = "urn:mwp:agent:acme:tester"
GROUP = "urn:uuid:7a1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c01"
ITEM = "urn:uuid:7a1c2b8e-0b1d-4c55-9a57-3f0f6b8a0c02"


class Link:
    """What the channel reads of a GatewayLink: its Group views."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.views: dict[str, GroupViews] = {}

    def group(self, group_id: str) -> GroupViews:
        return self.views.setdefault(group_id, GroupViews(group_id, AGENT_ID))


def authorized(sequence: int, work_item_id: str) -> dict[str, Any]:
    return {
        "sequence": sequence,
        "kind": "work.authorized",
        "workItemId": work_item_id,
        "payload": {"workItem": {"workItemId": work_item_id, "state": "authorized"}},
    }


def channel_over(link: Link) -> GatewayChannel:
    identity = Identity.generate(Principal("agent", AGENT_ID))
    card = CardInfo("urn:mwp:organization:acme", Principal("human", "urn:mwp:human:o"), "T")
    connection = GatewayConnection(Agent(AGENT_ID, identity, card=card))
    connection.attach(cast(Any, link))
    order = ExecutionOrder(AGENT_ID, 3, GROUP, "urn:uuid:m", ITEM, 1)

    async def never() -> bool:
        return False

    return GatewayChannel(connection, order, never)


async def test_a_run_started_before_its_group_was_delivered_reads_its_work_item_once_it_is() -> (
    None
):
    link = Link()
    run = channel_over(link)
    reading = asyncio.create_task(run.work_item(ITEM))
    await asyncio.sleep(0.3)  # the gateway delivers the Group again, a moment later
    assert not reading.done()
    link.group(GROUP).apply(authorized(1, ITEM))
    view = await asyncio.wait_for(reading, 5)
    assert view["workItemId"] == ITEM


async def test_a_work_item_the_group_never_showed_is_still_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channel, "VIEW_WAIT_SECONDS", 0.3)
    link = Link()
    link.group(GROUP).apply(authorized(1, "urn:uuid:another-item"))
    with pytest.raises(UnknownWorkItemError):
        await channel_over(link).work_item(ITEM)
