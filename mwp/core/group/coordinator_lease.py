"""The Coordinator lease: epochs, renewal, replacement and Coordinator fencing (spec 7.2).

Exactly one Coordinator Epoch is current. Commands exercising Coordinator authority must carry
it and come from its holder while the lease is unexpired; ``mission.renew_coordinator`` may
revive an expired lease as long as no replacement took the epoch. A replaced Coordinator keeps
its Membership (its history stays valid) but every later coordination Command is refused with
``AUTH_STALE_COORDINATOR``.
"""

from __future__ import annotations

from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.clock import plus_seconds, reached
from mwp.core.group.context_package import require_handover_package
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.membership import add_grant, grant
from mwp.core.group.payload import members
from mwp.core.group.policy import COORDINATOR_LEASE_SECONDS, MAX_COORDINATOR_LEASE_SECONDS
from mwp.core.group.rejection import bad_transition, invalid, reject
from mwp.core.group.roles import coordinator_only, owner_or_service
from mwp.core.group.rules import CommandRule, by_agent
from mwp.core.group.state import CoordinatorLease, GroupState

Json = dict[str, Any]

CLAUSES: tuple[str, ...] = ("MWP-EVT-002", "MWP-MSN-004", "MWP-MSN-005")


def new_lease(
    group_id: str,
    agent_id: str,
    agent_card_version: int,
    epoch: int,
    session_epoch: int,
    now: str,
    seconds: int,
) -> CoordinatorLease:
    return CoordinatorLease(
        agent_id=agent_id,
        agent_card_version=agent_card_version,
        epoch=epoch,
        lease_id=derive_id(group_id, "coordinator-lease", epoch),
        session_epoch=session_epoch,
        issued_at=now,
        expires_at=plus_seconds(now, seconds),
        lease_seconds=seconds,
    )


def assignment(lease: CoordinatorLease) -> Json:
    """The Mission's ``coordinator`` member."""
    return {
        "agentId": lease.agent_id,
        "agentCardVersion": lease.agent_card_version,
        "coordinatorEpoch": lease.epoch,
        "leaseId": lease.lease_id,
    }


def lease_document(state: GroupState, lease: CoordinatorLease, now: str | None = None) -> Json:
    """The lease.schema.json object; with ``now``, an unrenewed lease shows as expired."""
    doc: Json = {
        "leaseId": lease.lease_id,
        "leaseType": "coordinator",
        "missionId": state.mission_id,
        "groupId": state.group_id,
        "holderAgentId": lease.agent_id,
        "sessionEpoch": lease.session_epoch,
        "coordinatorEpoch": lease.epoch,
        "issuedAt": lease.issued_at,
        "startsAt": lease.issued_at,
        "expiresAt": lease.expires_at,
        "state": "active",
        "renewalCount": lease.renewal_count,
    }
    if lease.last_renewed_at is not None:
        doc["lastRenewedAt"] = lease.last_renewed_at
    if now is not None and reached(now, lease.expires_at):
        doc.update(state="expired", closedAt=lease.expires_at, closureReason="not renewed")
    return doc


def lease_payload(state: GroupState, lease: CoordinatorLease) -> Json:
    return {
        "coordinator": assignment(lease),
        "coordinatorLease": lease_document(state, lease),
        "leaseSeconds": lease.lease_seconds,
    }


def lease_from_payload(payload: Json, revision: int) -> CoordinatorLease:
    coordinator, doc = payload["coordinator"], payload["coordinatorLease"]
    return CoordinatorLease(
        agent_id=coordinator["agentId"],
        agent_card_version=coordinator["agentCardVersion"],
        epoch=coordinator["coordinatorEpoch"],
        lease_id=coordinator["leaseId"],
        session_epoch=doc["sessionEpoch"],
        issued_at=doc["issuedAt"],
        expires_at=doc["expiresAt"],
        lease_seconds=payload["leaseSeconds"],
        revision=revision,
        renewal_count=doc["renewalCount"],
        last_renewed_at=doc.get("lastRenewedAt"),
    )


def lease_seconds(cmd: Incoming) -> int:
    return cmd.payload.integer(
        "leaseSeconds",
        minimum=1,
        maximum=MAX_COORDINATOR_LEASE_SECONDS,
        default=COORDINATOR_LEASE_SECONDS,
    )


def coordinator_session(ctx: AuthorityContext, agent_id: str) -> int:
    """The lease binds the Coordinator's Session Epoch: it must have an open Session."""
    session = ctx.session_epochs.get(agent_id)
    if session is None:
        invalid("the Coordinator agent has no open Session", agentId=agent_id)
    return session


# --- Authority step 5 ----------------------------------------------------------------------------


def check_coordinator(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, exercised: bool
) -> None:
    lease = state.coordinator
    if lease is None:
        return
    if cmd.coordinator_epoch is not None and cmd.coordinator_epoch != lease.epoch:
        reject(
            ErrorCode.AUTH_STALE_COORDINATOR,
            "the Coordinator Epoch is fenced",
            coordinatorEpoch=cmd.coordinator_epoch,
            currentCoordinatorEpoch=lease.epoch,
        )
    if not (exercised and cmd.is_agent):
        return
    if lease.agent_id != cmd.actor_id:
        former = state.memberships.get(cmd.actor_id)
        if former is not None and former.role == "coordinator":
            reject(ErrorCode.AUTH_STALE_COORDINATOR, "the actor is no longer the Coordinator")
        return  # never a Coordinator: step 7 refuses it
    if cmd.coordinator_epoch is None:
        reject(
            ErrorCode.AUTH_STALE_COORDINATOR,
            "a Coordinator Command must carry the current Coordinator Epoch",
            currentCoordinatorEpoch=lease.epoch,
        )
    if cmd.kind != "mission.renew_coordinator" and reached(ctx.now, lease.expires_at):
        reject(ErrorCode.AUTH_STALE_COORDINATOR, "the Coordinator lease has expired; renew it")


# --- mission.assign_coordinator ------------------------------------------------------------------


def _decide_assign(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission, lease = state.mission, state.coordinator
    assert mission is not None and lease is not None
    if mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind)
    p = cmd.payload
    agent_id = p.id("agentId")
    card = p.integer("agentCardVersion", minimum=1, default=1)
    seconds = lease_seconds(cmd)
    context_package = p.opt_id("contextPackageId")
    existing = state.memberships.get(agent_id)
    if existing is not None and existing.member["type"] != "agent":
        invalid("the Coordinator must be an agent", agentId=agent_id)
    # A replacement needs a package the Group holds (a package's generator is an agent, so the
    # MissionOwner names one the Coordinators published), from the ledger rules on.
    require_handover_package(
        state, ctx, context_package, agent_id=agent_id, previous_agent_id=lease.agent_id
    )
    session = coordinator_session(ctx, agent_id)
    doc = grant(state, {"type": "agent", "id": agent_id}, "coordinator", now=ctx.now, sequence=0)
    if doc is not None:
        add_grant(drafts, doc, "mission.assign_coordinator")
    replacement = new_lease(
        state.group_id, agent_id, card, lease.epoch + 1, session, ctx.now, seconds
    )
    payload = lease_payload(state, replacement)
    payload["previousCoordinator"] = {"agentId": lease.agent_id, "coordinatorEpoch": lease.epoch}
    if context_package is not None:
        payload["contextPackageId"] = context_package
    drafts.add("mission.coordinator.assigned", ("mission", mission.mission_id), payload)


def _evolve_assigned(state: GroupState, event: Json) -> None:
    mission = state.mission
    assert mission is not None
    state.coordinator = lease_from_payload(event["payload"], 1)
    mission.revision = event["aggregateRevision"]
    mission.updated_at = event["occurredAt"]


# --- mission.renew_coordinator -------------------------------------------------------------------


def _renew_target(state: GroupState, cmd: Incoming) -> tuple[str, int] | None:
    return ("CoordinatorLease", state.coordinator.revision) if state.coordinator else None


def _decide_renew(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission, lease = state.mission, state.coordinator
    assert mission is not None and lease is not None
    if mission.terminal:
        bad_transition("Mission", mission.state, cmd.kind)
    seconds = lease_seconds(cmd)
    assert cmd.session_epoch is not None
    renewed = CoordinatorLease(
        agent_id=lease.agent_id,
        agent_card_version=lease.agent_card_version,
        epoch=lease.epoch,
        lease_id=lease.lease_id,
        session_epoch=cmd.session_epoch,
        issued_at=lease.issued_at,
        expires_at=plus_seconds(ctx.now, seconds),
        lease_seconds=seconds,
        renewal_count=lease.renewal_count + 1,
        last_renewed_at=ctx.now,
    )
    drafts.add(
        "mission.coordinator.renewed",
        ("coordinator_lease", lease.lease_id),
        lease_payload(state, renewed),
    )


def _evolve_renewed(state: GroupState, event: Json) -> None:
    state.coordinator = lease_from_payload(event["payload"], event["aggregateRevision"])


RULES = (
    CommandRule(
        "mission.assign_coordinator",
        _decide_assign,
        owner_or_service,
        payload=members("agentId", "agentCardVersion", "leaseSeconds", "contextPackageId"),
        clauses=("MWP-MSN-004", "MWP-MSN-005"),
    ),
    CommandRule(
        "mission.renew_coordinator",
        _decide_renew,
        coordinator_only,
        target=_renew_target,
        coordinator=by_agent,
        payload=members("leaseSeconds"),
        clauses=("MWP-EVT-002", "MWP-MSN-004", "MWP-MSN-005"),
    ),
)

EVOLVERS = {
    "mission.coordinator.assigned": _evolve_assigned,
    "mission.coordinator.renewed": _evolve_renewed,
}
