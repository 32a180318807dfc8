"""WorkItems: proposals, authorization, offers, first-accept ownership, review, failure and
cancellation (spec 10).

Offers: one ``work.offer`` opens an offer round to one candidate (sequential) or a bounded set
(at most 8). A new round withdraws every pending offer of the previous one. Each offer records
its structured selection basis (MWP-WRK-006). The first valid acceptance atomically wins the
next Ownership Epoch; the round's other pending offers become ``lost_race`` and their
acceptance is refused with ``WORK_ALREADY_OWNED`` (MWP-WRK-004). Offer expiry appends no Event;
an acceptance at or after ``expiresAt`` is ``WORK_OFFER_EXPIRED``.
"""

from __future__ import annotations

from typing import Any

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.budget import book, check_allocation
from mwp.core.group.clock import plus_seconds, reached
from mwp.core.group.context_package import add_published, offered_package, require_published
from mwp.core.group.delegation import (
    GRANT_MEMBER,
    PARENT_MEMBER,
    authorize_work,
    check_capabilities,
    check_grant_budget,
    check_scope,
    cited_grant,
    record_use,
)
from mwp.core.group.dependencies import check_dependencies
from mwp.core.group.drafts import Drafts
from mwp.core.group.ids import derive_id, work_item_conversation_id
from mwp.core.group.incoming import Incoming
from mwp.core.group.membership import add_grant, grant
from mwp.core.group.mission import conversation_document, conversation_from_document
from mwp.core.group.ownership import require_lease, require_owner
from mwp.core.group.payload import Payload, members
from mwp.core.group.policy import (
    MAX_OFFER_CANDIDATES,
    MAX_START_WITHIN_SECONDS,
    START_WITHIN_SECONDS,
)
from mwp.core.group.rejection import bad_transition, forbidden, invalid, reject, revision_conflict
from mwp.core.group.review import review_members, reviewed
from mwp.core.group.roles import (
    coordinator_only,
    coordinator_or_owner,
    coordinator_or_working_agent,
    is_current_coordinator,
    is_mission_owner,
    members_only,
    working_agent,
)
from mwp.core.group.rules import CommandRule, by_agent, no_target, work_item_target
from mwp.core.group.schedule import schedule_estimate
from mwp.core.group.state import Conversation, GroupState, Offer, Ownership, Proposal, WorkItem
from mwp.core.group.views import ownership_lease_document, work_item_document
from mwp.core.group.work_contract import (
    capability_refs,
    complete_contract,
    covers,
    selection_basis,
)
from mwp.core.group.work_item_state import (
    abandon_or_settle,
    active_mission,
    get_item,
    has_live_owner,
    release_ownership,
    settle,
    settle_link,
    touch,
    withdraw_pending_offers,
)
from mwp.core.kinds import OFFERABLE_WORK_STATES, UNFINISHED_WORK_STATES

Json = dict[str, Any]

_FAILURE_CODE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _item(state: GroupState, event: Json) -> WorkItem:
    item = state.work_items[event["workItemId"]]
    touch(item, event)
    return item


# --- work.propose --------------------------------------------------------------------------------


def _decide_propose(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    p = cmd.payload
    proposal_id = p.opt_id("proposalId") or derive_id(
        state.group_id, "proposal", drafts.next_sequence
    )
    if proposal_id in state.proposals or state.has_item(proposal_id):
        invalid("the proposal ID is already in use", proposalId=proposal_id)
    proposal: Json = {
        "proposalId": proposal_id,
        "proposedBy": cmd.actor,
        "proposedAt": ctx.now,
        "title": p.text("title", max_length=500),
    }
    for member in ("goal", "rationale"):
        value = p.opt_text(member, max_length=10000)
        if value is not None:
            proposal[member] = value
    draft = p.opt_obj("draftContract")
    if draft is not None:
        proposal["draftContract"] = draft
    drafts.add("work.proposed", ("proposal", proposal_id), {"proposal": proposal})


def _evolve_proposed(state: GroupState, event: Json) -> None:
    doc = dict(event["payload"]["proposal"])
    proposal = Proposal(
        proposal_id=doc.pop("proposalId"),
        proposed_by=doc.pop("proposedBy"),
        proposed_at=doc.pop("proposedAt"),
        title=doc.pop("title"),
        revision=event["aggregateRevision"],
        details=doc,
    )
    state.proposals[proposal.proposal_id] = proposal


# --- work.authorize ------------------------------------------------------------------------------


def _decide_authorize(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    p = cmd.payload
    work_item_id = cmd.work_item_id or derive_id(state.group_id, "work-item", drafts.next_sequence)
    existing = state.item_state(work_item_id)
    if existing is not None:
        bad_transition("WorkItem", existing, cmd.kind)
    parent_id = p.opt_id(PARENT_MEMBER)
    grant = cited_grant(state, cmd)
    if grant is not None:
        check_scope(state, ctx, grant, parent_id=parent_id)
    elif parent_id is not None and not state.has_item(parent_id):
        invalid("no such parent WorkItem in this Group", parentWorkItemId=parent_id)
    contract = complete_contract(p.raw("contract") if p.has("contract") else None)
    if reached(ctx.now, contract["deadline"]):
        invalid("the Work Contract's deadline has already passed")
    created_by = cmd.actor
    proposal_id = p.opt_id("proposalId")
    if proposal_id is not None:
        proposal = state.proposals.get(proposal_id)
        if proposal is None:
            invalid("no open Work Proposal with this ID", proposalId=proposal_id)
        created_by = proposal.proposed_by
    check_dependencies(state, work_item_id, contract["dependencyWorkItemIds"])
    if grant is not None:
        check_capabilities(grant, contract)
        check_grant_budget(state, grant, work_item_id, contract["budget"])
    check_allocation(state, contract["budget"], work_item_id)
    item = WorkItem(
        work_item_id=work_item_id,
        conversation_id=work_item_conversation_id(state.group_id, work_item_id),
        revision=1,
        state="open",
        exclusive=p.boolean("exclusive", default=True),
        contract=contract,
        created_by=created_by,
        authorized_by=cmd.actor,
        created_at=ctx.now,
        updated_at=ctx.now,
        proposal_id=proposal_id,
    )
    conversation = Conversation(
        conversation_id=item.conversation_id,
        type="work_item",
        title=contract["goal"][:500],
        created_by=cmd.actor,
        created_at=ctx.now,
        primary_work_item_id=work_item_id,
    )
    payload: Json = {
        "workItem": work_item_document(state, item),
        "conversation": conversation_document(state, conversation),
        # The MissionOwner authorizing directly is the audited emergency override (spec 7.1).
        "override": is_mission_owner(state, cmd),
    }
    if proposal_id is not None:
        payload["proposalId"] = proposal_id
    if parent_id is not None:
        payload[PARENT_MEMBER] = parent_id
    if grant is not None:
        payload[GRANT_MEMBER] = grant.grant_id
    drafts.add("work.authorized", ("work_item", work_item_id), payload, work_item_id=work_item_id)


def _evolve_authorized(state: GroupState, event: Json) -> None:
    payload = event["payload"]
    doc, conversation = payload["workItem"], payload["conversation"]
    item = WorkItem(
        work_item_id=doc["workItemId"],
        conversation_id=doc["conversationId"],
        revision=event["aggregateRevision"],
        state=doc["state"],
        exclusive=doc["exclusive"],
        contract=doc["contract"],
        created_by=doc["createdBy"],
        authorized_by=doc["authorizedBy"],
        created_at=doc["createdAt"],
        updated_at=event["occurredAt"],
        proposal_id=payload.get("proposalId"),
        parent_work_item_id=payload.get(PARENT_MEMBER),
        contract_events=[{"sequence": event["sequence"], "eventId": event["eventId"]}],
    )
    state.work_items[item.work_item_id] = item
    if GRANT_MEMBER in payload:
        record_use(state, payload[GRANT_MEMBER], item.work_item_id)
    book(state, item.contract["budget"], +1)
    state.conversations[conversation["conversationId"]] = conversation_from_document(conversation)
    state.proposals.pop(item.proposal_id or "", None)


# --- work.offer ----------------------------------------------------------------------------------


def _decide_offer(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    grant = cited_grant(state, cmd)
    if grant is not None:
        check_scope(state, ctx, grant, offered=item)
    if item.state not in OFFERABLE_WORK_STATES:
        bad_transition("WorkItem", item.state, cmd.kind)
    fenced = None
    if item.state in ("queued", "active", "blocked"):
        owner = item.owner
        if has_live_owner(item, ctx.now):
            bad_transition("WorkItem", item.state, cmd.kind, reason="the WorkItem has a live owner")
        if owner is not None:  # an expired owner is fenced first (spec 10.2)
            fenced = {"agentId": owner.agent_id, "ownershipEpoch": owner.epoch}
    p = cmd.payload
    contract = item.contract
    revised = None
    if p.has("contract"):
        candidate = complete_contract(p.raw("contract"))
        if candidate != contract:
            if candidate["contractVersion"] != item.contract_version + 1:
                invalid(
                    "a revised Work Contract must carry the next contractVersion",
                    expectedContractVersion=item.contract_version + 1,
                )
            check_dependencies(state, item.work_item_id, candidate["dependencyWorkItemIds"])
            check_allocation(state, candidate["budget"], item.work_item_id)
            revised = contract = candidate
    if grant is not None:
        check_capabilities(grant, contract)
        check_grant_budget(state, grant, item.work_item_id, contract["budget"])
    expires_at = p.timestamp("expiresAt")
    if reached(ctx.now, expires_at):
        invalid("the offer would already be expired")
    start_within = p.integer(
        "startWithinSeconds",
        minimum=1,
        maximum=MAX_START_WITHIN_SECONDS,
        default=START_WITHIN_SECONDS,
    )
    context_package, inline_package = offered_package(state, cmd, ctx, item.work_item_id)
    candidates = p.objects("candidates", min_items=1, max_items=MAX_OFFER_CANDIDATES)
    if inline_package is not None:  # published first: the grant below names it
        add_published(drafts, state, inline_package)
    else:  # a named package is one the Group published (an inline one was just checked)
        require_published(
            state,
            ctx,
            context_package,
            member_id=_newcomer(state, candidates),
            work_item_id=item.work_item_id,
        )

    if revised is not None:
        drafts.add(
            "work.contract.revised",
            ("work_item", item.work_item_id),
            {"contract": revised, "previousContractVersion": item.contract_version},
            work_item_id=item.work_item_id,
        )
    offers: list[Json] = []
    for index, candidate_payload in enumerate(candidates):
        agent_id = candidate_payload.id("agentId")
        if any(o["agentId"] == agent_id for o in offers):
            invalid("a candidate is named twice", agentId=agent_id)
        basis = selection_basis(candidate_payload.raw("selectionBasis"))
        missing = covers(contract["requiredCapabilities"], basis["verifiedMatches"])
        if missing or not basis["authorizationEligible"]:
            invalid(
                "the selection basis must show eligible, verified matches of every required "
                "capability",
                agentId=agent_id,
                unmatchedCapabilities=missing,
            )
        _admit_candidate(state, cmd, ctx, drafts, agent_id, expires_at, context_package)
        offers.append(
            {
                "offerId": derive_id(state.group_id, "offer", drafts.base_sequence, index),
                "agentId": agent_id,
                "agentCardVersion": candidate_payload.integer(
                    "agentCardVersion", minimum=1, default=1
                ),
                "expiresAt": expires_at,
                "status": "pending",
                "selectionBasis": basis,
                "contractVersion": contract["contractVersion"],
            }
        )
    payload: Json = {
        "offers": offers,
        "startWithinSeconds": start_within,
        "withdrawnOfferIds": [o.offer_id for o in item.offers if o.status == "pending"],
        "override": is_mission_owner(state, cmd),
    }
    if fenced is not None:
        payload["fencedOwnership"] = fenced
    if context_package is not None:
        payload["contextPackageId"] = context_package
    if grant is not None:
        payload[GRANT_MEMBER] = grant.grant_id
    drafts.add(
        "work.offer.created",
        ("work_item", item.work_item_id),
        payload,
        work_item_id=item.work_item_id,
    )


def _newcomer(state: GroupState, candidates: list[Payload]) -> Any:
    """The candidate an offer's Context Package is for: the first without a Membership."""
    named = [c.raw("agentId") for c in candidates]
    for agent_id in named:
        current = state.memberships.get(agent_id) if isinstance(agent_id, str) else None
        if current is None or current.state == "ended":
            return agent_id
    return named[0]


def _admit_candidate(
    state: GroupState,
    cmd: Incoming,
    ctx: AuthorityContext,
    drafts: Drafts,
    agent_id: str,
    expires_at: str,
    context_package: str | None,
) -> None:
    """Just-in-time Membership: a candidate without one gets a provisional worker Membership
    scoped by the offer and its Context Package (spec 8, steps 1-2)."""
    current = state.memberships.get(agent_id)
    if current is not None and current.member["type"] != "agent":
        invalid("offers go to agents", agentId=agent_id)
    if current is not None and current.state != "ended":
        if current.role not in ("worker", "coordinator"):
            invalid(
                f"the candidate holds a {current.role} Membership; change it to worker first",
                agentId=agent_id,
            )
        return
    if context_package is None:
        invalid("a new Worker needs payload.contextPackageId with its provisional Membership")
    doc = grant(
        state,
        {"type": "agent", "id": agent_id},
        "worker",
        now=ctx.now,
        sequence=drafts.next_sequence,
        provisional_until=expires_at,
        context_package_id=context_package,
    )
    assert doc is not None
    add_grant(drafts, doc, "work.offer")


def _evolve_contract_revised(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    book(state, item.contract["budget"], -1)
    item.contract = event["payload"]["contract"]
    book(state, item.contract["budget"], +1)
    item.contract_events.append({"sequence": event["sequence"], "eventId": event["eventId"]})


def _evolve_offer_created(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    if "fencedOwnership" in payload:
        release_ownership(item)
    item.offers = [Offer.from_json(o) for o in payload["offers"]]
    item.start_within_seconds = payload["startWithinSeconds"]
    item.failure = None
    item.state = "offered"
    if GRANT_MEMBER in payload:
        record_use(state, payload[GRANT_MEMBER], item.work_item_id)


# --- work.accept_offer ---------------------------------------------------------------------------


def _decide_accept(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    p = cmd.payload
    offer_id = p.id("offerId")
    offer = next((o for o in item.offers if o.offer_id == offer_id), None)
    if offer is not None and offer.agent_id == cmd.actor_id and offer.status == "lost_race":
        reject(ErrorCode.WORK_ALREADY_OWNED, "another candidate won this WorkItem")
    if item.state != "offered":
        bad_transition("WorkItem", item.state, cmd.kind)
    if offer is None:
        reject(ErrorCode.WORK_OFFER_EXPIRED, "the offer is no longer valid", offerId=offer_id)
    if offer.agent_id != cmd.actor_id:
        forbidden("the offer is addressed to another agent")
    if offer.status != "pending" or reached(ctx.now, offer.expires_at):
        reject(ErrorCode.WORK_OFFER_EXPIRED, "the offer is no longer valid", offerId=offer_id)
    # First-accept ownership is compare-and-set on the offer itself (spec 15.3); a stated
    # expectedRevision is checked only after the race, so a loser learns it lost.
    if cmd.expected_revision is not None and cmd.expected_revision != item.revision:
        revision_conflict(cmd.expected_revision, item.revision, "WorkItem")
    if p.integer("contractVersion", minimum=1) != item.contract_version:
        invalid("acceptance must name the current contract version", current=item.contract_version)
    if p.integer("agentCardVersion", minimum=1, default=offer.agent_card_version) != (
        offer.agent_card_version
    ):
        invalid("the Agent Card version differs from the one the offer pinned")
    required = item.contract["requiredCapabilities"]
    if p.has("capabilityPins"):
        pins = capability_refs(p.raw("capabilityPins"))
    else:
        required_ids = {c["id"] for c in required}
        pins = [c for c in offer.selection_basis["verifiedMatches"] if c["id"] in required_ids]
    missing = covers(required, pins)
    if missing:
        invalid("capability pins must cover every required capability", missing=missing)
    membership = state.memberships.get(cmd.actor_id)
    if membership is not None and membership.state == "provisional":
        doc = grant(state, cmd.actor, "worker", now=ctx.now, sequence=drafts.next_sequence)
        assert doc is not None
        add_grant(drafts, doc, "work.accept_offer")  # acceptance activates the Membership
    estimate = schedule_estimate(p.raw("scheduleEstimate")) if p.has("scheduleEstimate") else None
    assert cmd.session_epoch is not None
    epoch = item.ownership_epoch + 1
    owner = Ownership(
        agent_id=cmd.actor_id,
        agent_card_version=offer.agent_card_version,
        capability_pins=pins,
        epoch=epoch,
        lease_id=derive_id(state.group_id, "ownership-lease", item.work_item_id, epoch),
        accepted_at=ctx.now,
        start_by=plus_seconds(ctx.now, item.start_within_seconds),
        start_within_seconds=item.start_within_seconds,
        session_epoch=cmd.session_epoch,
    )
    accepted: Json = {
        "offerId": offer_id,
        "contractVersion": item.contract_version,
        "owner": _owner_payload(owner),
        "ownershipLease": ownership_lease_document(state, item, owner),
        "selectionBasis": offer.selection_basis,
        "lostOfferIds": [
            o.offer_id for o in item.offers if o.status == "pending" and o is not offer
        ],
    }
    if estimate is not None:
        accepted["scheduleEstimate"] = estimate  # disclosed on acceptance (spec 11.2)
    drafts.add(
        "work.offer.accepted",
        ("work_item", item.work_item_id),
        accepted,
        work_item_id=item.work_item_id,
    )


def _owner_payload(owner: Ownership) -> Json:
    return {
        "agentId": owner.agent_id,
        "agentCardVersion": owner.agent_card_version,
        "capabilityPins": owner.capability_pins,
        "ownershipEpoch": owner.epoch,
        "ownershipLeaseId": owner.lease_id,
        "acceptedAt": owner.accepted_at,
        "startBy": owner.start_by,
        "startWithinSeconds": owner.start_within_seconds,
        "sessionEpoch": owner.session_epoch,
    }


def _owner_from_payload(doc: Json) -> Ownership:
    return Ownership(
        agent_id=doc["agentId"],
        agent_card_version=doc["agentCardVersion"],
        capability_pins=doc["capabilityPins"],
        epoch=doc["ownershipEpoch"],
        lease_id=doc["ownershipLeaseId"],
        accepted_at=doc["acceptedAt"],
        start_by=doc["startBy"],
        start_within_seconds=doc["startWithinSeconds"],
        session_epoch=doc["sessionEpoch"],
    )


def _evolve_offer_accepted(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    payload = event["payload"]
    for offer in item.offers:
        if offer.offer_id == payload["offerId"]:
            offer.status = "accepted"
        elif offer.status == "pending":
            offer.status = "lost_race"
    owner = _owner_from_payload(payload["owner"])
    item.owner = owner
    item.ownership_epoch = owner.epoch
    item.selection_basis = payload["selectionBasis"]
    item.schedule_estimate = payload.get("scheduleEstimate")
    # A new owner resumes from the latest checkpoint and progress (spec 11.5).
    item.submission = item.result = None
    item.state = "queued"


# --- work.accept_result --------------------------------------------------------------------------


def _decide_accept_result(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != "submitted":
        bad_transition("WorkItem", item.state, cmd.kind)
    submission, owner = item.submission, item.owner
    assert submission is not None and owner is not None
    if submission["ownershipEpoch"] != item.ownership_epoch:
        reject(ErrorCode.WORK_STALE_OWNERSHIP, "the submission is from a fenced Ownership Epoch")
    p = cmd.payload
    # The Coordinator must not be the sole reviewer of its own output (spec 7.2).
    own_output = owner.agent_id == cmd.actor_id
    review = p.id_list(
        "reviewEvidenceIds", min_items=1 if own_output else 0, default=not own_output
    )
    payload: Json = {"ownershipEpoch": item.ownership_epoch, "reviewEvidenceIds": review}
    comments = p.opt_text("comments", max_length=10000)
    if comments is not None:
        payload["comments"] = comments
    record = reviewed(item, cmd, ctx, "accepted")
    if record is not None:
        payload["review"] = record
    drafts.add(
        "work.result.accepted",
        ("work_item", item.work_item_id),
        payload,
        work_item_id=item.work_item_id,
    )


def _evolve_result_accepted(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    approval = event["payload"].get("childApproval")
    if approval is not None:
        # The approved child result becomes the item's Evidence and Artifacts (spec 14).
        settle_link(item, event)
        item.submission = {
            "artifactHashes": approval["artifactHashes"],
            "evidenceIds": [approval["approvalId"]],
            "evidence": [],  # the child Approval itself is the Evidence (result.childApproval)
            "childMissionId": event["payload"]["childMissionId"],
            "submittedAt": event["occurredAt"],
        }
    item.result = {
        "acceptedBy": event["actor"],
        "acceptedAt": event["occurredAt"],
        # Where it was accepted: an offer of a dependant to a Worker new to the Group cites
        # it, so the newcomer learns the dependency is verified (MWP-MSN-012).
        "acceptedEvent": {"sequence": event["sequence"], "eventId": event["eventId"]},
        **event["payload"],
    }
    item.state = "verified"
    settle(state, item)


# --- work.fail / work.cancel ---------------------------------------------------------------------


def _acts_as_owner(cmd: Incoming) -> bool:
    return cmd.payload.has("ownershipEpoch")


def _coordinating_unless_owner(state: GroupState, cmd: Incoming) -> bool:
    return cmd.is_agent and not _acts_as_owner(cmd)


def _decide_fail(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in UNFINISHED_WORK_STATES:
        bad_transition("WorkItem", item.state, cmd.kind)
    p = cmd.payload
    payload: Json = {}
    if _acts_as_owner(cmd):
        # A Worker reports failure of the item it holds, under its current lease when active.
        if item.state not in ("queued", "active", "blocked"):
            bad_transition("WorkItem", item.state, cmd.kind, reason="the owner no longer holds it")
        owner = require_owner(item, cmd)
        payload.update(reportedBy="owner", ownershipEpoch=owner.epoch)
        if item.state == "active":
            payload["leaseId"] = require_lease(item, cmd, ctx, releasing=True).lease_id
    elif is_current_coordinator(state, cmd):
        payload["reportedBy"] = "coordinator"
    else:
        forbidden("only the owner or the Coordinator may fail a WorkItem")
    payload["reason"] = p.text("reason")
    if item.state == "submitted":  # the Coordinator rejecting the result (spec 13.2)
        record = reviewed(item, cmd, ctx, "rejected")
        if record is not None:
            payload["review"] = record
    elif p.has("review"):
        invalid("only a submitted result is reviewed", member="payload.review", state=item.state)
    payload["failureEvidenceIds"] = p.id_list("failureEvidenceIds", min_items=1)
    if p.has("failureCode"):
        code = p.raw("failureCode")
        if not (
            isinstance(code, str) and 2 <= len(code) <= 128 and set(code) <= _FAILURE_CODE_CHARS
        ):
            invalid("payload.failureCode must be an upper-case failure code")
        payload["failureCode"] = code
    drafts.add(
        "work.failed", ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def _evolve_failed(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    abandon_or_settle(item, event)
    release_ownership(item)
    withdraw_pending_offers(item)
    item.failure = {"failedAt": event["occurredAt"], **event["payload"]}
    item.state = "failed"


def _decide_cancel(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state not in UNFINISHED_WORK_STATES:
        bad_transition("WorkItem", item.state, cmd.kind)
    drafts.add(
        "work.cancelled",
        ("work_item", item.work_item_id),
        {"reason": cmd.payload.opt_text("reason") or cmd.kind},
        work_item_id=item.work_item_id,
    )


def _evolve_cancelled(state: GroupState, event: Json) -> None:
    item = _item(state, event)
    abandon_or_settle(item, event)
    release_ownership(item)
    withdraw_pending_offers(item)
    item.cancellation = {"cancelledAt": event["occurredAt"], **event["payload"]}
    item.state = "cancelled"
    book(state, item.contract["budget"], -1)  # a cancelled item releases its allocation
    settle(state, item)


RULES = (
    CommandRule(
        "work.propose",
        _decide_propose,
        members_only,
        target=no_target,
        payload=members("title", "goal", "rationale", "draftContract", "proposalId"),
        clauses=("MWP-MSN-018",),
    ),
    CommandRule(
        "work.authorize",
        _decide_authorize,
        authorize_work,
        coordinator=by_agent,
        payload=members("contract", "exclusive", "proposalId", PARENT_MEMBER, GRANT_MEMBER),
        clauses=(
            "MWP-AUT-004",
            "MWP-EVT-002",
            "MWP-MSN-003",
            "MWP-MSN-004",
            "MWP-MSN-015",
            "MWP-MSN-019",
            "MWP-MSN-021",
            "MWP-MSN-022",
            "MWP-WRK-001",
            "MWP-WRK-007",
        ),
    ),
    CommandRule(
        "work.offer",
        _decide_offer,
        authorize_work,
        target=work_item_target,
        coordinator=by_agent,
        payload=members(
            "expiresAt",
            "startWithinSeconds",
            "contextPackageId",
            "contextPackage",
            "contract",
            GRANT_MEMBER,
            candidates=members("agentId", "agentCardVersion", "selectionBasis"),
        ),
        clauses=(
            "MWP-AUT-004",
            "MWP-EVT-002",
            "MWP-FND-017",
            "MWP-MSN-003",
            "MWP-MSN-004",
            "MWP-MSN-011",
            "MWP-MSN-019",
            "MWP-MSN-021",
            "MWP-MSN-022",
            "MWP-WRK-001",
            "MWP-WRK-002",
            "MWP-WRK-003",
            "MWP-WRK-004",
            "MWP-WRK-006",
            "MWP-WRK-007",
            "MWP-WRK-019",
            "MWP-WRK-027",
        ),
    ),
    CommandRule(
        "work.accept_offer",
        _decide_accept,
        working_agent,
        target=no_target,
        provisional_ok=True,
        payload=members(
            "offerId", "contractVersion", "agentCardVersion", "capabilityPins", "scheduleEstimate"
        ),
        clauses=(
            "MWP-EVT-007",
            "MWP-FND-017",
            "MWP-IDN-003",
            "MWP-MSN-011",
            "MWP-WRK-002",
            "MWP-WRK-004",
            "MWP-WRK-006",
            "MWP-WRK-012",
            "MWP-WRK-013",
        ),
    ),
    CommandRule(
        "work.accept_result",
        _decide_accept_result,
        coordinator_only,
        target=work_item_target,
        coordinator=by_agent,
        payload=members("reviewEvidenceIds", "comments", **review_members()),
        clauses=(
            "MWP-EVT-002",
            "MWP-FND-017",
            "MWP-MSN-004",
            "MWP-MSN-006",
            "MWP-WRK-003",
            "MWP-WRK-019",
        ),
    ),
    CommandRule(
        "work.fail",
        _decide_fail,
        coordinator_or_working_agent,
        target=work_item_target,
        coordinator=_coordinating_unless_owner,
        payload=members(
            "reason",
            "failureEvidenceIds",
            "failureCode",
            "ownershipEpoch",
            "leaseId",
            **review_members(),
        ),
        clauses=("MWP-EVT-002", "MWP-FND-017", "MWP-WRK-003", "MWP-WRK-013"),
    ),
    CommandRule(
        "work.cancel",
        _decide_cancel,
        coordinator_or_owner,
        target=work_item_target,
        coordinator=by_agent,
        payload=members("reason"),
        clauses=("MWP-EVT-002", "MWP-WRK-003"),
    ),
)

EVOLVERS = {
    "work.proposed": _evolve_proposed,
    "work.authorized": _evolve_authorized,
    "work.contract.revised": _evolve_contract_revised,
    "work.offer.created": _evolve_offer_created,
    "work.offer.accepted": _evolve_offer_accepted,
    "work.result.accepted": _evolve_result_accepted,
    "work.failed": _evolve_failed,
    "work.cancelled": _evolve_cancelled,
}
