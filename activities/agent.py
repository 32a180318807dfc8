"""The Worker Scheduler's activities, hosted by the agent worker process (it holds the key).

* ``accept_offer``: signs and sends ``work.accept_offer`` for an admitted offer. Losing the
  race (``WORK_ALREADY_OWNED``) or a lapsed offer is an answer, not a failure.
* ``run_capability``: one leased run of the capability (:class:`LeasedExecution`), its
  Commands signed with the agent's key under the worker's Session Epoch; heartbeats while it
  runs, so a dead worker is noticed; preemption requests are read from the AgentWorkflow.
* In gateway mode (``gateway`` given) every Command goes as a ``COMMAND`` frame of the
  agent's one gateway connection, and a run's WorkItem view, Artifacts and checkpoints come
  through it too: nothing here reads the store or the authority namespace then. The
  connection outlives each link, so a run that loses the gateway goes on offline (spec 11.5).
* ``signing_key`` (a local activity of the AgentWorkflow): the binding of the agent's key this
  process holds, against which the workflow opens its sealed signals.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from mwp.agent.declaration import Agent
from mwp.agent.execution import LeasedExecution, OwnerChannel, RunContent, refusal
from mwp.agent.gateway_channel import GatewayChannel, GatewayContent
from mwp.agent.gateway_connection import GatewayConnection
from mwp.agent.progress import OwnerCommand
from mwp.agent.tokens import TokenHolder
from mwp.client import MwpClient
from mwp.client.missions import MissionHandle
from mwp.contracts.agent import (
    ACCEPT_OFFER,
    DISCLOSE_SCHEDULE,
    RUN_CAPABILITY,
    SIGNING_KEY,
    ExecutionOrder,
    ExecutionOutcome,
    OfferAcceptance,
    ScheduleUpdate,
    agent_workflow_id,
)
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.schedule import SCHEDULE_DISCLOSE_KIND
from mwp.stores.objects import ObjectStore

Json = dict[str, Any]

# Refusals that mean the epochs a Command carried are out of date (ask the Group again).
STALE_EPOCHS = frozenset({ErrorCode.MEMBERSHIP_STALE, ErrorCode.AUTH_STALE_COORDINATOR})
# Refusals of an acceptance that only mean "not ours".
LOST_OFFER = frozenset({ErrorCode.WORK_ALREADY_OWNED, ErrorCode.WORK_OFFER_EXPIRED})


class _Channel:
    """An :class:`~mwp.agent.execution.OwnerChannel` over the client SDK."""

    def __init__(self, agents: AgentActivities, order: ExecutionOrder) -> None:
        self._agents = agents
        self._order = order
        self._mission = MissionHandle(agents.client, order.mission_id, order.group_id)
        self._epochs: Json | None = None

    async def send(self, command: OwnerCommand) -> Json:
        # The owner's epochs rarely change during a run: asked once, asked again only when the
        # Group says they are stale (one round trip less per Command).
        try:
            return await self._signed_and_sent(command)
        except MwpError as error:
            if error.code not in STALE_EPOCHS:
                raise
            self._epochs = None
            return await self._signed_and_sent(command)

    async def _signed_and_sent(self, command: OwnerCommand) -> Json:
        if self._epochs is None:
            self._epochs = await self._mission.epochs(self._agents.agent.agent_id)
        return await self._mission.send(
            self._agents.agent.identity,
            command.kind,
            command.payload,
            session_epoch=self._order.session_epoch,
            work_item_id=command.work_item_id,
            epochs=self._epochs,
        )

    async def work_item(self, work_item_id: str) -> Json:
        return await self._mission.work_item(work_item_id)

    async def preemption_requested(self) -> bool:
        return await self._agents.preemption_requested(self._order)


class AgentActivities:
    """``accept_offer`` and ``run_capability`` for one Agent."""

    def __init__(
        self,
        agent: Agent,
        client: MwpClient,
        store: ObjectStore,
        card_version: int | None = None,
        *,
        gateway: GatewayConnection | None = None,
    ) -> None:
        self.agent = agent
        self.client = client  # in gateway mode: the agents' namespace only
        self.store = store
        self._card_version = card_version  # registered at start; None: the declaration's
        self.gateway = gateway

    async def _send(
        self,
        group_id: str,
        mission_id: str,
        kind: str,
        payload: Json,
        *,
        session_epoch: int,
        work_item_id: str,
    ) -> Json:
        if self.gateway is not None:
            link = self.gateway.current()
            # The AgentWorkflow decided this under the Session it knew; a retry carried over a
            # restart runs in the process of a newer Session, whose connection the gateway
            # holds to that Session: signed under the old one it would be refused on every
            # attempt (AUTH_STALE_SESSION) and the offer never answered. A process older than
            # the decision (a zombie) keeps the decision's Session and is refused, as it must.
            return await link.send(
                kind,
                payload,
                group_id=group_id,
                session_epoch=max(session_epoch, link.session_epoch),
                work_item_id=work_item_id,
            )
        mission = MissionHandle(self.client, mission_id, group_id)
        return await mission.send(
            self.agent.identity,
            kind,
            payload,
            session_epoch=session_epoch,
            work_item_id=work_item_id,
        )

    async def preemption_requested(self, order: ExecutionOrder) -> bool:
        """Whether the AgentWorkflow asked ``order``'s run to stop at its next checkpoint."""
        handle = self.temporal.get_workflow_handle(agent_workflow_id(order.agent_id))
        requested: bool = await handle.query(
            "preemption_requested", args=[order.group_id, order.work_item_id]
        )
        return requested

    @property
    def card_version(self) -> int | None:
        """The Agent Card version the Registry holds (re-read through each new gateway link)."""
        if self.gateway is not None and self.gateway.card_version is not None:
            return self.gateway.card_version
        return self._card_version

    @property
    def temporal(self) -> Client:
        return self.client.temporal

    @activity.defn(name=SIGNING_KEY)
    async def signing_key(self, agent_id: str) -> Json:
        """The public binding of the key this process seals the agent's signals with. A worker
        of another agent on this queue is a misconfiguration: the workflow waits (retries)
        until the right one serves it, rather than trust another agent's key."""
        if agent_id != self.agent.agent_id:
            raise ApplicationError(
                f"this worker holds {self.agent.agent_id}'s key, not {agent_id}'s"
            )
        return self.agent.identity.binding()

    @activity.defn(name=ACCEPT_OFFER)
    async def accept_offer(self, acceptance: OfferAcceptance) -> Json:
        payload: Json = {
            "offerId": acceptance.offer_id,
            "contractVersion": acceptance.contract_version,
        }
        if acceptance.schedule_estimate is not None:
            payload["scheduleEstimate"] = acceptance.schedule_estimate
        try:
            receipt = await self._send(
                acceptance.group_id,
                acceptance.mission_id,
                "work.accept_offer",
                payload,
                session_epoch=acceptance.session_epoch,
                work_item_id=acceptance.work_item_id,
            )
        except MwpError as error:
            if error.code in LOST_OFFER:
                return {"decision": "lost", "refusal": refusal(error)}
            raise
        accepted = next(e for e in receipt["events"] if e["kind"] == "work.offer.accepted")
        return {
            "decision": "accepted",
            "ownershipEpoch": accepted["payload"]["owner"]["ownershipEpoch"],
        }

    @activity.defn(name=DISCLOSE_SCHEDULE)
    async def disclose_schedule(self, update: ScheduleUpdate) -> Json:
        """Publish a waiting item's changed schedule estimate to its Group. A refusal (the
        item started or moved on meanwhile) is an answer: the estimate is advisory."""
        try:
            await self._send(
                update.group_id,
                update.mission_id,
                SCHEDULE_DISCLOSE_KIND,
                {
                    "ownershipEpoch": update.ownership_epoch,
                    "scheduleEstimate": update.schedule_estimate,
                },
                session_epoch=update.session_epoch,
                work_item_id=update.work_item_id,
            )
        except MwpError as error:
            return {"disclosed": False, "refusal": refusal(error)}
        return {"disclosed": True}

    @activity.defn(name=RUN_CAPABILITY)
    async def run_capability(self, order: ExecutionOrder) -> ExecutionOutcome:
        authorizer: TokenHolder | None = None
        if self.gateway is None:  # direct mode: the operators' trusted mode, no tokens
            channel: OwnerChannel = _Channel(self, order)
            content: RunContent | None = None
        else:
            channel = GatewayChannel(self.gateway, order, lambda: self.preemption_requested(order))
            content = GatewayContent(self.gateway, order.group_id)
            authorizer = TokenHolder(self.gateway, order, self.agent.tools)
        run = LeasedExecution(
            self.agent,
            order,
            channel,
            self.store,
            beat=activity.heartbeat,
            card_version=self.card_version,
            content=content,
            authorizer=authorizer,
            offline=self.gateway,
        )
        outcome = await run.run()
        activity.logger.info("run of %s ended: %s", order.work_item_id, asdict(outcome))
        return outcome
