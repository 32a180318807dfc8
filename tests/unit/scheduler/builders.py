"""Accepted Group Events in the Authority's shapes (docs/commands.md), for one Group each."""

from __future__ import annotations

from typing import Any

from mwp.core.scheduler import AgentProfile, GroupPolicy, Scheduler
from mwp.core.scheduler.clock import seconds, timestamp
from mwp.core.scheduler.group_queue import LEASE_REVOKED, OWNERSHIP_EXPIRED

Json = dict[str, Any]

T0 = seconds("2030-01-01T00:00:00Z")
FAR = "2031-01-01T00:00:00Z"
CAP = "text.summarize"


def at(offset: int) -> str:
    return timestamp(T0 + offset)


def contract(
    *,
    urgency: str = "normal",
    deadline: str = FAR,
    caps: tuple[tuple[str, str], ...] = ((CAP, "1.2.0"),),
    deps: tuple[str, ...] = (),
    budget: Json | None = None,
    risk: str = "none",
    approval: str = "not_required",
    version: int = 1,
    goal: str = "summarize",
) -> Json:
    return {
        "contractVersion": version,
        "goal": goal,
        "requiredCapabilities": [{"id": c, "version": v} for c, v in caps],
        "dependencyWorkItemIds": list(deps),
        "deadline": deadline,
        "requestedUrgency": urgency,
        "businessImpact": "impact",
        "budget": budget or {"wallClockSecondsLimit": 600, "toolCallLimit": 50},
        "sideEffectRisk": risk,
        "executionApproval": approval,
    }


class GroupLog:
    """One Group's log: sequences in order, every Event kept for replay."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.events: list[Json] = []

    def add(self, kind: str, item: str, payload: Json, when: int = 0) -> Json:
        event = {
            "kind": kind,
            "sequence": len(self.events) + 1,
            "groupId": self.group_id,
            "workItemId": item,
            "occurredAt": at(when),
            "payload": payload,
        }
        self.events.append(event)
        return event

    def authorized(self, item: str, doc: Json, when: int = 0) -> Json:
        return self.add("work.authorized", item, {"workItem": {"contract": doc}}, when)

    def revised(self, item: str, doc: Json, when: int = 0) -> Json:
        return self.add("work.contract.revised", item, {"contract": doc}, when)

    def offered(
        self,
        item: str,
        agents: tuple[str, ...] = ("agent-a",),
        *,
        when: int = 0,
        card: int = 1,
        start_within: int = 3600,
        eligible: bool = True,
        pins: tuple[tuple[str, str], ...] = ((CAP, "1.2.0"),),
        withdrawn: tuple[str, ...] = (),
    ) -> Json:
        offers = [
            {
                "offerId": f"{item}-offer-{agent}-{len(self.events)}",
                "agentId": agent,
                "agentCardVersion": card,
                "expiresAt": at(when + 7200),
                "status": "pending",
                "contractVersion": 1,
                "selectionBasis": {
                    "authorizationEligible": eligible,
                    "verifiedMatches": [{"id": c, "version": v} for c, v in pins],
                },
            }
            for agent in agents
        ]
        payload = {"offers": offers, "startWithinSeconds": start_within}
        payload["withdrawnOfferIds"] = list(withdrawn)
        return self.add("work.offer.created", item, payload, when)

    def accepted(self, item: str, agent: str = "agent-a", when: int = 0, epoch: int = 1) -> Json:
        owner = {
            "agentId": agent,
            "ownershipEpoch": epoch,
            "acceptedAt": at(when),
            "startBy": at(when + 3600),
        }
        return self.add("work.offer.accepted", item, {"offerId": "x", "owner": owner}, when)

    def started(self, item: str, when: int = 0) -> Json:
        lease = {"leaseId": f"lease-{item}-{len(self.events)}"}
        return self.add("work.started", item, {"ownershipEpoch": 1, "executionLease": lease}, when)

    def checkpointed(self, item: str, ref: str, when: int = 0) -> Json:
        payload = {"checkpointRef": ref, "startBy": at(when + 3600), "progress": {}}
        return self.add("work.checkpointed", item, payload, when)

    def progressed(self, item: str, ref: str | None = None, when: int = 0) -> Json:
        """A lease renewal, with the checkpoint it reached if ``ref``."""
        payload: Json = {"executionLease": {"leaseId": f"lease-{item}"}}
        if ref is not None:
            payload["checkpointRef"] = ref
        return self.add("work.progressed", item, payload, when)

    def ownership_expired(self, item: str, agent: str = "agent-a", when: int = 0) -> Json:
        payload = {"agentId": agent, "reason": "execution_lease_expired"}
        return self.add(OWNERSHIP_EXPIRED, item, payload, when)

    def lease_revoked(self, item: str, agent: str = "agent-a", when: int = 0) -> Json:
        payload = {
            "agentId": agent,
            "reason": "session_replaced",
            "startBy": at(when + 3600),
        }
        return self.add(LEASE_REVOKED, item, payload, when)

    def blocked(self, item: str, when: int = 0) -> Json:
        return self.add("work.blocked", item, {"requiredResolution": "needs input"}, when)

    def unblocked(self, item: str, when: int = 0, next_state: str = "queued") -> Json:
        payload = {"nextState": next_state, "startBy": at(when + 3600)}
        return self.add("work.unblocked", item, payload, when)

    def submitted(self, item: str, when: int = 0) -> Json:
        return self.add("work.submitted", item, {"submission": {}}, when)

    def result_accepted(self, item: str, when: int = 0) -> Json:
        return self.add("work.result.accepted", item, {"ownershipEpoch": 1}, when)

    def failed(self, item: str, when: int = 0) -> Json:
        return self.add("work.failed", item, {"reason": "x"}, when)

    def granted(self, item: str, version: int = 1, when: int = 0) -> Json:
        return self.add("approval.execution.granted", item, {"contractVersion": version}, when)


def profile(**overrides: Any) -> AgentProfile:
    values: Json = {
        "agent_id": "agent-a",
        "card_version": 1,
        "capabilities": {CAP: frozenset({"1.2.0", "1.3.0"})},
        "slots": 2,
    }
    values.update(overrides)
    return AgentProfile(**values)


class World:
    """A Scheduler plus one log per Group, kept in step."""

    def __init__(self, sched: Scheduler | None = None) -> None:
        self.sched = sched or Scheduler(profile())
        self.logs: dict[str, GroupLog] = {}

    def group(
        self, gid: str, weight: int = 1, quota: int | None = None, queue_bound: int = 1000
    ) -> GroupLog:
        policy = GroupPolicy(weight=weight, quota=quota, queue_bound=queue_bound)
        self.sched.join_group(gid, f"mission-{gid}", policy)
        self.logs[gid] = GroupLog(gid)
        return self.logs[gid]

    def feed(self, gid: str, event: Json) -> None:
        self.sched.apply(gid, event)

    def queue_item(self, gid: str, item: str, when: int = 0, **terms: Any) -> None:
        """authorized + offered + accepted: the item is queued for this agent."""
        log = self.logs[gid]
        self.feed(gid, log.authorized(item, contract(**terms), when))
        self.feed(gid, log.offered(item, when=when))
        self.feed(gid, log.accepted(item, when=when))

    def offer_item(self, gid: str, item: str, when: int = 0, **offer: Any) -> None:
        log = self.logs[gid]
        self.feed(gid, log.offered(item, when=when, **offer))
