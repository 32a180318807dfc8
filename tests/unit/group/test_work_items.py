"""WorkItems: proposals, contracts, DAG, offers, first-accept ownership and the 10.2 table."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_LEDGER
from mwp.core.group.clock import plus_seconds
from mwp.core.models import validate_document
from mwp.core.trust.registry import Principal
from tests.unit.group.harness import (
    ARTIFACT_A,
    ARTIFACT_B,
    CAPABILITY,
    CONTEXT_PACKAGE,
    COORD,
    OWNER,
    SERVICE,
    W1,
    W2,
    W3,
    Harness,
    contract,
    evidence,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)

RENEW = "ext.missionweaveprotocol.core.execution_lease_renew"

# --- work.propose / work.authorize -----------------------------------------------------------


def test_given_a_member_when_it_proposes_then_an_open_proposal_and_no_work_item() -> None:
    h = mission_harness()
    outcome = h.submit(
        W1,
        "work.propose",
        {"title": "Add caching", "goal": "Cache list pages.", "draftContract": {"goal": "x"}},
    )
    proposal_id = outcome.events[0]["payload"]["proposal"]["proposalId"]
    assert h.authority.work_item_ids() == []
    assert [p["proposalId"] for p in h.authority.mission_view()["proposals"]] == [proposal_id]

    authorized = h.submit(
        COORD,
        "work.authorize",
        {"contract": contract(), "proposalId": proposal_id},
        workItemId=item_id("cache"),
    )

    doc = authorized.events[0]["payload"]["workItem"]
    assert doc["createdBy"] == W1.to_json() and doc["authorizedBy"] == COORD.to_json()
    assert h.authority.mission_view()["proposals"] == []
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(), "proposalId": proposal_id},
        workItemId=item_id("again"),
    )
    h.reject(ErrorCode.INVALID_COMMAND, W1, "work.propose", {"title": " "})


def test_given_a_complete_contract_when_authorized_then_open_item_with_its_conversation() -> None:
    h = mission_harness()
    outcome = h.authorize("a")
    event = outcome.events[0]
    validate_document("work-item.schema.json", event["payload"]["workItem"])
    validate_document("conversation.schema.json", event["payload"]["conversation"])
    assert event["workItemId"] == item_id("a") and event["aggregateRevision"] == 1
    assert h.view("a")["state"] == "open" and event["payload"]["override"] is False


def test_the_mission_owner_may_authorize_as_an_audited_override() -> None:
    h = mission_harness()
    outcome = h.submit(OWNER, "work.authorize", {"contract": contract()}, workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["override"] is True


def test_an_item_id_is_derived_when_the_command_names_none() -> None:
    h = mission_harness()
    outcome = h.submit(COORD, "work.authorize", {"contract": contract()})
    assert outcome.events[0]["workItemId"].startswith("urn:uuid:")


@pytest.mark.parametrize(
    "broken",
    [
        {"goal": ""},
        {"acceptanceCriteria": []},
        {"requiredDeliverables": []},
        {"requiredCapabilities": []},
        {"retryPolicy": None},
        {"executionApproval": None},
        {"budget": {}},
        {"businessImpact": "   "},
        {
            "acceptanceCriteria": [
                {"criterionId": "x", "description": "d", "evidenceRequired": ["human_review"]},
                {"criterionId": "x", "description": "e", "evidenceRequired": ["human_review"]},
            ]
        },
        {"requiredCapabilities": [CAPABILITY, CAPABILITY]},
    ],
)
def test_given_an_incomplete_contract_then_work_contract_incomplete(broken: dict[str, Any]) -> None:
    h = mission_harness()
    body = {k: v for k, v in contract(**broken).items() if v is not None}
    h.reject(
        ErrorCode.WORK_CONTRACT_INCOMPLETE,
        COORD,
        "work.authorize",
        {"contract": body},
        workItemId=item_id("a"),
    )


def test_a_missing_contract_is_incomplete_and_a_past_deadline_invalid() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.WORK_CONTRACT_INCOMPLETE, COORD, "work.authorize", {}, workItemId=item_id("a")
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(deadline="2026-07-01T00:00:00Z")},
        workItemId=item_id("a"),
    )


def test_an_existing_item_cannot_be_authorized_again() -> None:
    h = mission_harness()
    h.authorize("a")
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.authorize",
        {"contract": contract()},
        workItemId=item_id("a"),
    )


# --- dependencies ----------------------------------------------------------------------------


def test_dependencies_must_exist_and_may_not_name_the_item_itself() -> None:
    h = mission_harness()
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(dependencyWorkItemIds=[item_id("ghost")])},
        workItemId=item_id("a"),
    )
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(dependencyWorkItemIds=[item_id("a")])},
        workItemId=item_id("a"),
    )
    assert error.details and error.details["cycle"] == [item_id("a"), item_id("a")]


def test_given_a_chain_when_a_revision_would_close_a_cycle_then_rejected() -> None:
    h = mission_harness()
    h.authorize("a")
    h.authorize("b", dependencyWorkItemIds=[item_id("a")])
    h.authorize("c", dependencyWorkItemIds=[item_id("b")])

    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "contract": contract(contractVersion=2, dependencyWorkItemIds=[item_id("c")]),
        },
        workItemId=item_id("a"),
    )
    assert error.details and error.details["cycle"] == [
        item_id("a"),
        item_id("c"),
        item_id("b"),
        item_id("a"),
    ]


def test_given_unverified_dependencies_when_starting_then_not_eligible() -> None:
    h = mission_harness()
    h.authorize("a")
    h.drive("b", "queued")
    h.authorize("c", dependencyWorkItemIds=[item_id("a")])
    h.offer("c", W1)
    h.accept("c", W1)
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("c"),
    )
    assert error.details and error.details["pendingDependencies"] == [item_id("a")]
    assert h.view("c")["pendingDependencies"] == [item_id("a")]


def test_given_verified_dependencies_then_eligible() -> None:
    h = mission_harness()
    h.verify("a")
    h.drive("b", "active")
    h.authorize("c", dependencyWorkItemIds=[item_id("a")])
    assert h.view("c")["pendingDependencies"] == []


# --- budget ----------------------------------------------------------------------------------


def test_work_item_budgets_narrow_the_mission_budget() -> None:
    h = mission_harness()  # Mission: 100 USD, 100,000 model tokens
    h.authorize("a", budget={"currency": "USD", "financialLimit": 60})
    error = h.reject(
        ErrorCode.BUDGET_EXCEEDED,
        COORD,
        "work.authorize",
        {"contract": contract(budget={"currency": "USD", "financialLimit": 40.5})},
        workItemId=item_id("b"),
    )
    assert error.details and error.details["dimension"] == "financialLimit"
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.authorize",
        {"contract": contract(budget={"currency": "EUR", "financialLimit": 1})},
        workItemId=item_id("b"),
    )
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("a"))  # cancelled releases it
    h.authorize("b", budget={"currency": "USD", "financialLimit": 100})
    assert h.authority.mission_view()["budgetAllocated"]["financialLimit"] == 100


# --- offers ----------------------------------------------------------------------------------


def test_given_an_open_item_when_offered_to_a_new_worker_then_provisional_membership() -> None:
    h = mission_harness()
    h.authorize("a")

    outcome = h.offer("a", W3, startWithinSeconds=120)

    assert [e["kind"] for e in outcome.events] == ["membership.changed", "work.offer.created"]
    membership = outcome.events[0]["payload"]["membership"]
    validate_document("membership.schema.json", membership)
    assert membership["state"] == "provisional"
    assert membership["contextPackageId"] == CONTEXT_PACKAGE
    offer = outcome.events[1]["payload"]["offers"][0]
    assert offer["selectionBasis"] == selection_basis() and offer["contractVersion"] == 1
    view = h.view("a")
    assert view["state"] == "offered" and view["offers"][0]["status"] == "pending"

    accepted = h.accept("a", W3)

    assert [e["kind"] for e in accepted.events] == ["membership.changed", "work.offer.accepted"]
    assert accepted.events[0]["payload"]["membership"]["state"] == "active"
    assert accepted.events[0]["payload"]["membership"]["membershipEpoch"] == 1
    view = h.view("a")
    assert view["state"] == "queued" and view["owner"]["agentId"] == W3.id
    assert view["owner"]["ownershipEpoch"] == 1 and view["selectionBasis"] == selection_basis()
    assert view["startBy"] == plus_seconds(h.now, 120)
    validate_document("lease.schema.json", view["ownershipLease"])


def test_offer_refusals() -> None:
    h = mission_harness()
    h.authorize("a")
    base = {
        "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
        "expiresAt": plus_seconds(h.now, 600),
    }
    target = {"workItemId": item_id("a")}
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", {**base, "expiresAt": h.now}, **target)
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", {**base, "candidates": []}, **target)
    too_many = [
        {"agentId": f"urn:example:agent:{i}", "selectionBasis": selection_basis()} for i in range(9)
    ]
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": too_many, "contextPackageId": CONTEXT_PACKAGE},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": base["candidates"] * 2},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": W3.id, "selectionBasis": selection_basis()}]},
        **target,
    )  # a new Worker needs a Context Package
    weak = selection_basis(verifiedMatches=[{"id": CAPABILITY["id"], "version": "2.0.9"}])
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": W1.id, "selectionBasis": weak}]},
        **target,
    )
    ineligible = selection_basis(authorizationEligible=False)
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": W1.id, "selectionBasis": ineligible}]},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": W1.id, "selectionBasis": {}}]},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": OWNER.id, "selectionBasis": selection_basis()}]},
        **target,
    )
    h.admit(W3, role="reviewer")
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "work.offer",
        {**base, "candidates": [{"agentId": W3.id, "selectionBasis": selection_basis()}]},
        **target,
    )
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", base, workItemId=item_id("ghost"))
    h.reject(ErrorCode.INVALID_COMMAND, COORD, "work.offer", base, workItemId=None)


def test_a_newer_version_in_selection_basis_still_matches() -> None:
    h = mission_harness()
    h.authorize("a")
    newer = selection_basis(verifiedMatches=[{"id": CAPABILITY["id"], "version": "2.10.0"}])
    h.submit(
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W1.id, "selectionBasis": newer}],
            "expiresAt": plus_seconds(h.now, 60),
        },
        workItemId=item_id("a"),
    )


def test_given_two_candidates_when_both_accept_then_first_wins_second_already_owned() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1, W2)
    loser_payload = h.accept_payload("a", W2)

    won = h.accept("a", W1)

    assert won.events[-1]["payload"]["lostOfferIds"] == [loser_payload["offerId"]]
    statuses = {o["agentId"]: o["status"] for o in h.view("a")["offers"]}
    assert statuses == {W1.id: "accepted", W2.id: "lost_race"}
    h.reject(
        ErrorCode.WORK_ALREADY_OWNED,
        W2,
        "work.accept_offer",
        loser_payload,
        workItemId=item_id("a"),
    )
    # Even when the loser states the revision it saw, it learns that it lost.
    h.reject(
        ErrorCode.WORK_ALREADY_OWNED,
        W2,
        "work.accept_offer",
        loser_payload,
        workItemId=item_id("a"),
        expectedRevision=2,
    )
    assert h.view("a")["owner"]["agentId"] == W1.id


def test_given_an_offer_when_it_expires_then_acceptance_is_refused_without_an_event() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1, expires_in=60)
    payload = h.accept_payload("a", W1)
    sequence = h.authority.sequence
    [timer] = h.authority.timers()
    assert (timer.kind, timer.token, timer.due_at) == (
        "offer_expiry",
        payload["offerId"],
        plus_seconds(h.now, 60),
    )

    h.advance(60)

    assert h.fire(item_id("a"), "offer_expiry", payload["offerId"]) is None
    assert h.authority.sequence == sequence
    h.reject(
        ErrorCode.WORK_OFFER_EXPIRED, W1, "work.accept_offer", payload, workItemId=item_id("a")
    )
    # Re-offering (offered -> offered) makes a fresh offer; the old one is withdrawn.
    h.offer("a", W1)
    h.reject(
        ErrorCode.WORK_OFFER_EXPIRED, W1, "work.accept_offer", payload, workItemId=item_id("a")
    )
    h.accept("a", W1)


def test_accept_refusals() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    payload = h.accept_payload("a", W1)
    target = {"workItemId": item_id("a")}
    h.reject(ErrorCode.AUTH_FORBIDDEN, W2, "work.accept_offer", payload, **target)
    h.reject(
        ErrorCode.WORK_OFFER_EXPIRED,
        W1,
        "work.accept_offer",
        {**payload, "offerId": "urn:example:offer:unknown"},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.accept_offer",
        {**payload, "contractVersion": 2},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.accept_offer",
        {**payload, "agentCardVersion": 3},
        **target,
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.accept_offer",
        {**payload, "capabilityPins": [{"id": "acme.other.thing", "version": "1.0.0"}]},
        **target,
    )
    h.reject(
        ErrorCode.REVISION_CONFLICT, W1, "work.accept_offer", payload, expectedRevision=1, **target
    )
    h.submit(
        W1,
        "work.accept_offer",
        {**payload, "capabilityPins": [CAPABILITY]},
        expectedRevision=2,
        **target,
    )


def test_given_a_revised_contract_then_new_version_needs_renewed_acceptance() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    old = h.accept_payload("a", W1)

    outcome = h.submit(
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "contract": contract(contractVersion=2, goal="Implement keyset pagination."),
        },
        workItemId=item_id("a"),
    )

    assert [e["kind"] for e in outcome.events] == ["work.contract.revised", "work.offer.created"]
    assert outcome.events[1]["payload"]["withdrawnOfferIds"] == [old["offerId"]]
    assert h.view("a")["contract"]["contractVersion"] == 2
    h.reject(ErrorCode.WORK_OFFER_EXPIRED, W1, "work.accept_offer", old, workItemId=item_id("a"))
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.accept_offer",
        {**h.accept_payload("a", W1), "contractVersion": 1},
        workItemId=item_id("a"),
    )
    h.accept("a", W1)


@pytest.mark.parametrize("version", [1, 3, 5])
def test_a_revised_contract_must_carry_exactly_the_next_version(version: int) -> None:
    h = mission_harness()
    h.authorize("b")
    h.offer("b", W1)  # offerable (offered, no owner): only the version can refuse the revision

    def revision(contract_version: int) -> dict[str, Any]:
        return {
            "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "contract": contract(contractVersion=contract_version, goal="Other."),
        }

    error = h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "work.offer", revision(version), workItemId=item_id("b")
    )
    assert error.details == {"expectedContractVersion": 2}
    outcome = h.submit(COORD, "work.offer", revision(2), workItemId=item_id("b"))
    assert outcome.events[0]["payload"]["previousContractVersion"] == 1
    assert h.view("b")["contract"]["contractVersion"] == 2


# --- execution approval gate -----------------------------------------------------------------


def test_given_a_gated_item_when_started_without_approval_then_approval_required() -> None:
    h = mission_harness()
    h.authorize("a", executionApproval="human_required")
    h.offer("a", W1)
    h.accept("a", W1)
    h.reject(
        ErrorCode.APPROVAL_REQUIRED,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        SERVICE,
        "approval.grant_execution",
        {"contractVersion": 1},
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        COORD,
        "approval.grant_execution",
        {"contractVersion": 1},
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "approval.grant_execution",
        {"contractVersion": 2},
        workItemId=item_id("a"),
    )

    granted = h.submit(
        OWNER,
        "approval.grant_execution",
        {"contractVersion": 1, "comments": "Go."},
        workItemId=item_id("a"),
    )

    assert granted.events[0]["payload"]["approval"]["kind"] == "work_execution"
    assert h.view("a")["state"] == "queued" and h.view("a")["executionApproved"] is True
    h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "approval.grant_execution",
        {"contractVersion": 1},
        workItemId=item_id("a"),
    )
    h.start("a", W1)


def test_policy_gates_high_risk_work_and_a_service_may_grant_it() -> None:
    h = mission_harness()
    h.authorize("a", sideEffectRisk="destructive")
    h.offer("a", W1)
    h.accept("a", W1)
    assert h.view("a")["executionGate"] == "policy_required"
    h.reject(
        ErrorCode.APPROVAL_REQUIRED,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.submit(SERVICE, "approval.grant_execution", {"contractVersion": 1}, workItemId=item_id("a"))
    h.start("a", W1)


def test_an_ungated_item_has_nothing_to_approve() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    h.reject(
        ErrorCode.INVALID_COMMAND,
        OWNER,
        "approval.grant_execution",
        {"contractVersion": 1},
        workItemId=item_id("a"),
    )


# --- execution -------------------------------------------------------------------------------


def test_given_a_queued_item_when_its_owner_starts_then_an_execution_lease() -> None:
    h = mission_harness()
    h.drive("a", "queued")

    outcome = h.start("a", W1, leaseSeconds=120)

    lease = outcome.events[0]["payload"]["executionLease"]
    validate_document("lease.schema.json", lease)
    assert (lease["holderAgentId"], lease["sessionEpoch"], lease["ownershipEpoch"]) == (W1.id, 1, 1)
    assert lease["workItemId"] == item_id("a") and lease["expiresAt"] == plus_seconds(h.now, 120)
    assert h.view("a")["state"] == "active"
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "ext.missionweaveprotocol.core.execution_lease_renew",
        h.owner_payload("a", leaseSeconds=99999),
        workItemId=item_id("a"),
    )


def test_given_an_active_item_when_renewed_then_progressed_with_the_same_lease_id() -> None:
    h = mission_harness()
    h.drive("a", "active")
    lease_id = h.lease_id("a")
    h.advance(100)

    outcome = h.submit(
        W1,
        "ext.missionweaveprotocol.core.execution_lease_renew",
        h.owner_payload("a", progress=progress()),
        workItemId=item_id("a"),
    )

    event = outcome.events[0]
    assert event["kind"] == "work.progressed"
    lease = event["payload"]["executionLease"]
    assert lease["leaseId"] == lease_id and lease["renewalCount"] == 1
    assert lease["expiresAt"] == plus_seconds(h.now, 300)
    assert h.view("a")["progress"] == progress()
    # The Organization's execution supervisor may renew on the owner's behalf.
    h.submit(
        SERVICE,
        "ext.missionweaveprotocol.core.execution_lease_renew",
        h.owner_payload("a"),
        workItemId=item_id("a"),
    )


@pytest.mark.parametrize(
    "ref", ["sha256:" + "c" * 64, "urn:example:checkpoint:one", "https://example.com/ck/1"]
)
def test_given_an_active_item_when_renewed_with_a_checkpoint_ref_then_progressed_carries_it(
    ref: str,
) -> None:
    h = mission_harness()
    h.drive("a", "active")
    lease_id = h.lease_id("a")
    h.advance(60)

    outcome = h.submit(W1, RENEW, h.owner_payload("a", checkpointRef=ref), workItemId=item_id("a"))

    [event] = outcome.events
    assert event["kind"] == "work.progressed"
    assert event["payload"]["checkpointRef"] == ref
    view = h.view("a")
    assert view["checkpoint"] == {
        "checkpointRef": ref,
        "leaseId": lease_id,
        "checkpointedAt": event["occurredAt"],
        # The Event that recorded it: a Context Package handing the item over cites it.
        "sequence": event["sequence"],
        "eventId": event["eventId"],
    }
    assert event["occurredAt"] == h.now
    # A safe point without releasing execution: still active under the same lease.
    assert view["state"] == "active" and view["executionLease"]["leaseId"] == lease_id


def test_given_a_renewal_without_a_checkpoint_ref_then_no_checkpoint_is_recorded() -> None:
    h = mission_harness()
    h.drive("a", "active")

    outcome = h.submit(
        W1, RENEW, h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )

    assert "checkpointRef" not in outcome.events[0]["payload"]
    assert h.view("a").get("checkpoint") is None


def test_given_renewed_checkpoints_then_the_latest_wins_and_a_bare_renewal_keeps_it() -> None:
    h = mission_harness()
    h.drive("a", "active")
    first, second = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    h.advance(10)
    h.submit(W1, RENEW, h.owner_payload("a", checkpointRef=first), workItemId=item_id("a"))
    h.advance(10)
    later = h.submit(W1, RENEW, h.owner_payload("a", checkpointRef=second), workItemId=item_id("a"))
    h.advance(10)
    h.submit(W1, RENEW, h.owner_payload("a"), workItemId=item_id("a"))

    checkpoint = h.view("a")["checkpoint"]
    assert checkpoint["checkpointRef"] == second
    assert checkpoint["checkpointedAt"] == later.events[0]["occurredAt"]


@pytest.mark.parametrize(
    "bad",
    ["not a ref", "", "checkpoints/one", "urn:" + "x" * 600, 42, 1.5, True, None, [], {}],
)
def test_given_a_malformed_checkpoint_ref_when_renewing_then_invalid_and_nothing_changes(
    bad: Any,
) -> None:
    h = mission_harness()
    h.drive("a", "active")
    before = h.view("a")
    sequence = h.authority.sequence
    h.advance(10)

    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        RENEW,
        h.owner_payload("a", checkpointRef=bad, progress=progress()),
        workItemId=item_id("a"),
    )

    assert h.authority.sequence == sequence
    assert h.view("a") == before
    assert h.view("a").get("checkpoint") is None


def test_given_an_active_item_when_checkpointed_then_queued_with_a_fresh_start_by() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.advance(30)
    outcome = h.submit(
        W1,
        "work.checkpoint",
        h.owner_payload("a", progress=progress(), checkpointRef="sha256:" + "d" * 64),
        workItemId=item_id("a"),
    )
    assert outcome.events[0]["payload"]["startBy"] == plus_seconds(h.now, 3600)
    view = h.view("a")
    assert view["state"] == "queued" and "executionLease" not in view
    assert view["checkpoint"]["checkpointRef"] == "sha256:" + "d" * 64
    h.start("a", W1)  # resumes under a new lease


def test_checkpoint_needs_structured_progress() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.checkpoint",
        h.owner_payload("a"),
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.checkpoint",
        h.owner_payload("a", progress={"percent": 50}),
        workItemId=item_id("a"),
    )


def test_given_an_active_item_when_blocked_then_unblocked_back_to_queue() -> None:
    h = mission_harness()
    h.drive("a", "active")
    blocked = h.submit(
        W1,
        "work.block",
        h.owner_payload("a", requiredResolution="Need credentials.", blockedLeaseSeconds=600),
        workItemId=item_id("a"),
    )
    lease = blocked.events[0]["payload"]["blockedLease"]
    validate_document("lease.schema.json", lease)
    assert h.view("a")["state"] == "blocked"

    unblocked = h.submit(COORD, "work.unblock", {"resolution": "Granted."}, workItemId=item_id("a"))

    assert unblocked.events[0]["payload"]["nextState"] == "queued"
    assert h.view("a")["state"] == "queued" and h.view("a")["owner"]["agentId"] == W1.id
    h.start("a", W1)


def test_the_owner_may_unblock_itself_while_its_blocked_lease_runs() -> None:
    h = mission_harness()
    h.drive("a", "blocked")
    h.submit(W1, "work.unblock", {"ownershipEpoch": 1}, workItemId=item_id("a"))
    assert h.view("a")["state"] == "queued"


def test_block_needs_a_required_resolution() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.reject(
        ErrorCode.INVALID_COMMAND, W1, "work.block", h.owner_payload("a"), workItemId=item_id("a")
    )


def test_given_an_active_item_when_submitted_with_mapped_evidence_then_submitted() -> None:
    h = mission_harness()
    h.drive("a", "active")
    outcome = h.submit_work("a")
    submission = outcome.events[0]["payload"]["submission"]
    assert submission["artifactHashes"] == [ARTIFACT_A]
    view = h.view("a")
    assert view["state"] == "submitted" and view["submission"]["evidenceIds"] == [
        e["evidenceId"] for e in evidence()
    ]
    h.accept_result("a")
    assert h.view("a")["state"] == "verified"


TESTS, REVIEW = evidence()
UNKNOWN = {"evidenceId": "urn:example:evidence:x", "criterionIds": ["unknown"]}


@pytest.mark.parametrize(
    ("payload", "details"),
    [
        ({"artifactHashes": [], "evidence": evidence()}, {"member": "payload.artifactHashes"}),
        ({"artifactHashes": ["not-a-hash"], "evidence": evidence()}, {}),
        (
            {"artifactHashes": [ARTIFACT_B], "evidence": evidence()},
            {"unpublishedArtifacts": [ARTIFACT_B]},
        ),
        ({"artifactHashes": [ARTIFACT_A], "evidence": []}, {"member": "payload.evidence"}),
        (
            {"artifactHashes": [ARTIFACT_A], "evidence": [TESTS]},
            {"uncoveredCriteria": ["reviewed"]},
        ),
        (
            {"artifactHashes": [ARTIFACT_A], "evidence": [*evidence(), UNKNOWN]},
            {"unknownCriteria": ["unknown"], "evidenceId": UNKNOWN["evidenceId"]},
        ),
        (
            {
                "artifactHashes": [ARTIFACT_A],
                "evidence": [TESTS, {**REVIEW, "criterionIds": []}],
            },
            {"evidenceId": REVIEW["evidenceId"]},
        ),
        (
            {"artifactHashes": [ARTIFACT_A], "evidence": [*evidence(), TESTS]},
            {"duplicateEvidenceIds": [TESTS["evidenceId"]]},
        ),
    ],
    ids=[
        "no-artifact",
        "malformed-hash",
        "unpublished-artifact",
        "no-evidence",
        "uncovered-criterion",
        "unknown-criterion",
        "empty-criteria",
        "duplicate-evidence-id",
    ],
)
def test_submission_needs_published_artifacts_and_evidence_for_every_criterion(
    payload: dict[str, Any], details: dict[str, Any]
) -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.publish("a")  # ARTIFACT_A is published: only the refusal under test can stop the Command
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.submit",
        h.owner_payload("a", **payload),
        workItemId=item_id("a"),
    )
    assert error.details is not None
    assert {k: error.details.get(k) for k in details} == details
    # The same Command with published Artifacts and Evidence for every criterion is accepted.
    h.submit(
        W1,
        "work.submit",
        h.owner_payload("a", artifactHashes=[ARTIFACT_A], evidence=evidence()),
        workItemId=item_id("a"),
    )


def test_the_coordinator_reviewing_its_own_output_needs_other_evidence() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", COORD)
    h.accept("a", COORD)
    h.start("a", COORD)
    h.submit_work("a", COORD)
    review = h.review_payload("a")
    h.reject(
        ErrorCode.INVALID_COMMAND, COORD, "work.accept_result", review, workItemId=item_id("a")
    )
    h.submit(
        COORD,
        "work.accept_result",
        {"reviewEvidenceIds": ["urn:example:evidence:peer"], **review},
        workItemId=item_id("a"),
    )


def test_failure_by_owner_and_by_coordinator_then_re_offer() -> None:
    h = mission_harness()
    h.drive("a", "active")
    failure = {
        "reason": "Tool outage.",
        "failureEvidenceIds": ["urn:example:evidence:f"],
        "failureCode": "TOOL_OUTAGE",
    }
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.fail",
        h.owner_payload("a", reason="x"),
        workItemId=item_id("a"),
    )
    h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.fail",
        h.owner_payload("a", **{**failure, "failureCode": "bad code"}),
        workItemId=item_id("a"),
    )
    outcome = h.submit(W1, "work.fail", h.owner_payload("a", **failure), workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["reportedBy"] == "owner"
    view = h.view("a")
    assert view["state"] == "failed" and "owner" not in view
    assert view["failure"]["failureCode"] == "TOOL_OUTAGE"
    # Control returns to the Coordinator: a new offer, a new Ownership Epoch.
    h.offer("a", W2)
    h.accept("a", W2)
    assert h.view("a")["owner"]["ownershipEpoch"] == 2
    outcome = h.submit(COORD, "work.fail", failure, workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["reportedBy"] == "coordinator"


def test_a_worker_cannot_fail_or_cancel_an_item_it_does_not_hold() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    failure = {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]}
    h.reject(ErrorCode.AUTH_FORBIDDEN, W2, "work.fail", failure, workItemId=item_id("a"))
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        W2,
        "work.fail",
        {**failure, "ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.reject(ErrorCode.AUTH_FORBIDDEN, W1, "work.cancel", {}, workItemId=item_id("a"))


# --- the WorkItem state table (spec 10.2) ----------------------------------------------------

WORK_STATES = [
    "open",
    "offered",
    "queued",
    "active",
    "blocked",
    "submitted",
    "verified",
    "failed",
    "cancelled",
]
UNFINISHED = {"open", "offered", "queued", "active", "blocked", "submitted"}
TABLE = {
    "work.offer": {"open", "offered", "failed"},  # queued/active/blocked only without live owner
    "work.accept_offer": {"offered"},
    "approval.grant_execution": {"queued"},
    "work.start": {"queued"},
    "ext.missionweaveprotocol.core.execution_lease_renew": {"active"},
    "work.checkpoint": {"active"},
    "work.block": {"active"},
    "work.unblock": {"blocked"},
    "work.submit": {"active"},
    "artifact.publish": {"active"},
    "work.accept_result": {"submitted"},
    "work.fail": UNFINISHED,
    "work.cancel": UNFINISHED,
}


def _table_command(h: Harness, kind: str, name: str) -> tuple[Principal, dict[str, Any]]:
    view = h.view(name)
    epoch = view["ownershipEpoch"] or 1
    lease = view.get("executionLease", {}).get("leaseId", "urn:example:lease:none")
    owner = {"ownershipEpoch": epoch, "leaseId": lease}
    offers = [o for o in view.get("offers", []) if o["agentId"] == W1.id]
    commands: dict[str, tuple[Principal, dict[str, Any]]] = {
        "work.offer": (
            COORD,
            {
                "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
                "expiresAt": plus_seconds(h.now, 600),
            },
        ),
        "work.accept_offer": (
            W1,
            {
                "offerId": offers[0]["offerId"] if offers else "urn:example:offer:none",
                "contractVersion": 1,
            },
        ),
        "approval.grant_execution": (OWNER, {"contractVersion": 1}),
        "work.start": (W1, {"ownershipEpoch": epoch}),
        "ext.missionweaveprotocol.core.execution_lease_renew": (W1, owner),
        "work.checkpoint": (W1, {**owner, "progress": progress()}),
        "work.block": (W1, {**owner, "requiredResolution": "Waiting."}),
        "work.unblock": (COORD, {}),
        "work.submit": (W1, {**owner, "artifactHashes": [ARTIFACT_A], "evidence": evidence()}),
        "artifact.publish": (W1, {**owner, "manifest": h.manifest(name, W1, ARTIFACT_B)}),
        "work.accept_result": (COORD, h.review_payload(name)),
        "work.fail": (COORD, {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]}),
        "work.cancel": (COORD, {}),
    }
    if view["state"] == "submitted" and h.rules >= RULES_LEDGER:
        # Failing a submitted result is rejecting it: a review naming what did not pass.
        rejected = h.review(name, {"tests-pass": "failed"})
        commands["work.fail"] = (COORD, {**commands["work.fail"][1], "review": rejected})
    return commands[kind]


@pytest.mark.parametrize("state", WORK_STATES)
@pytest.mark.parametrize("kind", sorted(TABLE))
def test_work_item_state_table(state: str, kind: str) -> None:
    h = mission_harness()
    gated = kind == "approval.grant_execution"
    h.drive("x", state, gated=gated)
    if gated and state == "queued":
        # drive() already approved the gate; a second approval needs a revised contract.
        h = mission_harness()
        h.authorize("x", executionApproval="policy_required")
        h.offer("x", W1)
        h.accept("x", W1)
    assert h.view("x")["state"] == state
    if kind == "work.submit" and state == "active":
        h.publish("x")  # a submission names published Artifacts only
    actor, payload = _table_command(h, kind, "x")
    if state in TABLE[kind]:
        outcome = h.submit(actor, kind, payload, workItemId=item_id("x"))
        assert outcome.events
    else:
        h.reject(ErrorCode.INVALID_STATE_TRANSITION, actor, kind, payload, workItemId=item_id("x"))
