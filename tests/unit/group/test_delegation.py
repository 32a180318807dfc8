"""Delegated work authority (spec 9.1, MWP-MSN-019..022): membership.grant_delegation and
delegated work.authorize / work.offer citing the Grant."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import GroupAuthority, replay
from mwp.core.group.clock import plus_seconds
from mwp.core.group.ids import derive_id
from mwp.core.group.policy import MAX_DELEGATION_DEPTH
from mwp.core.models import validate_document
from tests.unit.group.harness import (
    CAPABILITY,
    COORD,
    COORD2,
    DELEGATE,
    GROUP,
    MISSION,
    OWNER,
    W1,
    W2,
    Harness,
    contract,
    fingerprint,
    full_budget,
    grant_payload,
    item_id,
    mission_harness,
    selection_basis,
)

GRANT = "membership.grant_delegation"
# Ceilings roomy enough that only the budget tests reach them.
ROOMY = full_budget(
    financialLimit=50,
    modelTokenLimit=10_000,
    toolCallLimit=100,
    computeSecondsLimit=1000,
    wallClockSecondsLimit=10_000,
    externalSideEffectLimit=5,
)
FAIL = {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]}


def delegate_harness() -> Harness:
    """W1, W2 workers; DELEGATE a work_delegate; an open WorkItem ``root`` bounded in every
    budget dimension."""
    h = mission_harness()
    h.admit(DELEGATE, "work_delegate")
    h.authorize("root", budget=full_budget())
    return h


def grant(h: Harness, target: str = "root", **overrides: Any) -> str:
    overrides.setdefault("budget", ROOMY)
    outcome = h.submit(COORD, GRANT, grant_payload(target, **overrides))
    return str(outcome.events[-1]["payload"]["grant"]["grantId"])


def authorize_payload(
    grant_id: str | None, parent: str | None = "root", **c: Any
) -> dict[str, Any]:
    c.setdefault("budget", full_budget())
    payload: dict[str, Any] = {"contract": contract(**c)}
    if parent is not None:
        payload["parentWorkItemId"] = item_id(parent)
    if grant_id is not None:
        payload["delegationGrantId"] = grant_id
    return payload


def offer_payload(
    h: Harness, grant_id: str | None, worker: Any = W1, **extra: Any
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "candidates": [{"agentId": worker.id, "selectionBasis": selection_basis()}],
        "expiresAt": plus_seconds(h.now, 600),
    }
    if grant_id is not None:
        payload["delegationGrantId"] = grant_id
    payload.update(extra)
    return payload


def delegated_authorize(
    h: Harness, grant_id: str, name: str, parent: str = "root", **c: Any
) -> Any:
    return h.submit(
        DELEGATE,
        "work.authorize",
        authorize_payload(grant_id, parent, **c),
        workItemId=item_id(name),
    )


def refuse_authorize(
    h: Harness,
    code: ErrorCode,
    grant_id: str | None,
    name: str = "x",
    actor: Any = DELEGATE,
    parent: str | None = "root",
    **c: Any,
) -> Any:
    return h.reject(
        code,
        actor,
        "work.authorize",
        authorize_payload(grant_id, parent, **c),
        workItemId=item_id(name),
    )


def delegated_offer(h: Harness, grant_id: str, name: str, worker: Any = W1, **extra: Any) -> Any:
    return h.submit(
        DELEGATE,
        "work.offer",
        offer_payload(h, grant_id, worker, **extra),
        workItemId=item_id(name),
    )


def refuse_offer(
    h: Harness, code: ErrorCode, grant_id: str | None, name: str = "root", actor: Any = DELEGATE
) -> Any:
    return h.reject(code, actor, "work.offer", offer_payload(h, grant_id), workItemId=item_id(name))


def delegate_view(h: Harness) -> dict[str, Any]:
    view = h.authority.mission_view()
    return next(m for m in view["memberships"] if m["member"]["id"] == DELEGATE.id)


# --- membership.grant_delegation -------------------------------------------------------------


def test_the_coordinator_grants_and_the_grant_records_every_member() -> None:
    h = delegate_harness()
    before = delegate_view(h)
    outcome = h.submit(COORD, GRANT, grant_payload("root"))
    assert [e["kind"] for e in outcome.events] == ["membership.delegation.granted"]
    event = outcome.events[0]
    doc = event["payload"]["grant"]
    assert doc == {
        "grantId": derive_id(GROUP, "delegation-grant", event["sequence"]),
        "granteeAgentId": DELEGATE.id,
        "missionId": MISSION,
        "groupId": GROUP,
        "targetWorkItemId": item_id("root"),
        "allowedCapabilities": [CAPABILITY],
        "budget": full_budget(financialLimit=30, modelTokenLimit=3000),
        "maxDescendantDepth": 2,
        "granteeMembershipEpoch": before["membershipEpoch"],
        "coordinatorEpoch": 1,
        "grantedBy": COORD.to_json(),
        "grantedAt": h.now,
        "expiresAt": "2026-07-16T00:00:00Z",
    }
    membership = delegate_view(h)
    assert membership["delegationGrants"] == [doc]
    validate_document("membership.schema.json", membership)
    for other in h.authority.mission_view()["memberships"]:
        validate_document("membership.schema.json", other)
    assert outcome.receipt.aggregate_revision == event["aggregateRevision"]


def test_grant_ids_are_deterministic() -> None:
    first, second = delegate_harness(), delegate_harness()
    assert grant(first) == grant(second)
    assert grant(first) != grant(first)  # a later Event sequence mints a new ID


@pytest.mark.parametrize("actor", [OWNER, W1, DELEGATE])
def test_only_the_coordinator_may_grant(actor: Any) -> None:
    h = delegate_harness()
    h.reject(ErrorCode.AUTH_FORBIDDEN, actor, GRANT, grant_payload("root"))


def test_the_grant_carries_the_current_coordinator_epoch() -> None:
    h = delegate_harness()
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR, COORD, GRANT, grant_payload("root"), coordinatorEpoch=None
    )
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR, COORD, GRANT, grant_payload("root"), coordinatorEpoch=7
    )
    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR, COORD, GRANT, grant_payload("root"), coordinatorEpoch=1
    )
    h.submit(COORD2, GRANT, grant_payload("root"), coordinatorEpoch=2)


def test_the_grantee_must_hold_an_active_work_delegate_membership() -> None:
    h = delegate_harness()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, GRANT, grant_payload("root", granteeAgentId=W1.id))
    stranger = "urn:example:agent:nobody"
    h.reject(
        ErrorCode.INVALID_COMMAND, COORD, GRANT, grant_payload("root", granteeAgentId=stranger)
    )
    h.submit(COORD, "membership.end", {"memberId": DELEGATE.id})
    h.reject(ErrorCode.INVALID_COMMAND, COORD, GRANT, grant_payload("root"))


def test_the_target_must_exist_and_be_live() -> None:
    h = delegate_harness()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, GRANT, grant_payload("missing"))
    for state in ("failed", "cancelled", "verified"):
        h.drive(state, state)
        h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, GRANT, grant_payload(state))
    for state in ("offered", "queued"):
        h.drive(state, state)
        grant(h, state)


@pytest.mark.parametrize(
    "overrides",
    [
        {"budget": {"currency": "USD", "modelTokenLimit": 10}},  # not all six ceilings
        {"budget": full_budget(currency="EUR")},  # not the Mission's currency
        {"budget": full_budget(toolCallLimit=-1)},
        {"maxDescendantDepth": MAX_DELEGATION_DEPTH + 1},  # beyond cooperation policy
        {"maxDescendantDepth": -1},
        {"expiresAt": "2026-07-15T00:00:00Z"},  # already expired
        {"allowedCapabilities": []},
        {"allowedCapabilities": [CAPABILITY, {**CAPABILITY, "version": "3.0.0"}]},
        {"allowedCapabilities": [{"id": "nope", "version": "1.0.0"}]},
    ],
)
def test_malformed_grants_are_invalid_commands(overrides: dict[str, Any]) -> None:
    h = delegate_harness()
    h.reject(ErrorCode.INVALID_COMMAND, COORD, GRANT, grant_payload("root", **overrides))


def test_a_grant_needs_an_active_mission() -> None:
    h = delegate_harness()
    h.submit(OWNER, "mission.cancel", {})
    h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, GRANT, grant_payload("root"))


# --- the role alone conveys nothing ------------------------------------------------------------


def test_a_work_delegate_without_a_grant_is_forbidden() -> None:
    h = delegate_harness()
    refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, None)
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, None)
    unknown = "urn:example:grant:unknown"
    refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, unknown)
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, unknown)
    grant_id = grant(h)
    delegated_authorize(h, grant_id, "child")  # with the cited Grant it works


# --- delegated work.authorize ------------------------------------------------------------------


def test_the_grantee_authorizes_a_linked_descendant_within_depth() -> None:
    h = delegate_harness()
    grant_id = grant(h)  # maxDescendantDepth 2
    outcome = delegated_authorize(h, grant_id, "child")
    payload = outcome.events[-1]["payload"]
    assert payload["delegationGrantId"] == grant_id
    assert payload["parentWorkItemId"] == item_id("root")
    assert payload["override"] is False
    assert payload["workItem"]["authorizedBy"] == DELEGATE.to_json()
    assert h.view("child")["parentWorkItemId"] == item_id("root")
    delegated_authorize(h, grant_id, "grandchild", parent="child")
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id, "great", parent="grandchild")
    assert error.details is not None and error.details["reason"] == "max_depth"


def test_max_depth_zero_allows_only_offering_the_root() -> None:
    h = delegate_harness()
    grant_id = grant(h, maxDescendantDepth=0)
    refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    h.submit(COORD, "work.offer", offer_payload(h, None), workItemId=item_id("root"))
    delegated_offer(h, grant_id, "root", W2)


def test_a_new_descendant_needs_an_explicit_link_into_the_subtree() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id, parent=None)
    assert error.details is not None and error.details["reason"] == "parent_link_required"
    h.authorize("elsewhere")
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id, parent="elsewhere")
    assert error.details is not None and error.details["reason"] == "outside_subtree"
    refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id, parent="missing")


def test_the_coordinator_may_link_a_parent_and_it_must_exist() -> None:
    h = delegate_harness()
    refuse_authorize(h, ErrorCode.INVALID_COMMAND, None, actor=COORD, parent="missing")
    outcome = h.submit(COORD, "work.authorize", authorize_payload(None), workItemId=item_id("c"))
    assert outcome.events[-1]["payload"]["parentWorkItemId"] == item_id("root")
    assert "delegationGrantId" not in outcome.events[-1]["payload"]
    assert h.view("c")["parentWorkItemId"] == item_id("root")


def test_required_capabilities_must_be_allowed_at_the_minimum_version() -> None:
    h = delegate_harness()
    grant_id = grant(h)  # acme.software.python >= 2.1.0
    newer = {"id": CAPABILITY["id"], "version": "2.3.0"}
    older = {"id": CAPABILITY["id"], "version": "2.0.9"}
    other = {"id": "acme.software.rust", "version": "1.0.0"}
    delegated_authorize(h, grant_id, "same", requiredCapabilities=[CAPABILITY])
    delegated_authorize(h, grant_id, "newer", requiredCapabilities=[newer])
    for name, required in (("older", [older]), ("other", [CAPABILITY, other])):
        error = refuse_authorize(
            h, ErrorCode.AUTH_FORBIDDEN, grant_id, name, requiredCapabilities=required
        )
        assert error.details is not None and error.details["reason"] == "capability_not_allowed"


def test_cumulative_budgets_stay_within_every_ceiling() -> None:
    h = delegate_harness()
    ceilings = full_budget(
        financialLimit=30,
        modelTokenLimit=3000,
        toolCallLimit=10,
        computeSecondsLimit=180,
        wallClockSecondsLimit=1800,
        externalSideEffectLimit=1,
    )
    grant_id = grant(h, budget=ceilings)
    delegated_authorize(h, grant_id, "one", budget=full_budget(toolCallLimit=4))
    delegated_authorize(h, grant_id, "two", budget=full_budget(toolCallLimit=4))
    error = refuse_authorize(
        h, ErrorCode.BUDGET_EXCEEDED, grant_id, budget=full_budget(toolCallLimit=3)
    )
    assert error.details is not None and error.details["dimension"] == "toolCallLimit"
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("two"))  # cumulative: still counts
    refuse_authorize(h, ErrorCode.BUDGET_EXCEEDED, grant_id, budget=full_budget(toolCallLimit=3))
    for dimension, value in (
        ("financialLimit", 20.5),
        ("modelTokenLimit", 2001),
        ("computeSecondsLimit", 61),
        ("wallClockSecondsLimit", 601),
        ("externalSideEffectLimit", 2),
    ):
        error = refuse_authorize(
            h,
            ErrorCode.BUDGET_EXCEEDED,
            grant_id,
            budget=full_budget(toolCallLimit=2, **{dimension: value}),
        )
        assert error.details is not None and error.details["dimension"] == dimension
    delegated_authorize(h, grant_id, "three", budget=full_budget(toolCallLimit=2))


def test_an_item_silent_on_a_dimension_is_unbounded_and_exceeds_the_grant() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    error = refuse_authorize(h, ErrorCode.BUDGET_EXCEEDED, grant_id, budget={"modelTokenLimit": 5})
    assert error.details is not None and error.details["requested"] == "Infinity"
    refuse_authorize(h, ErrorCode.INVALID_COMMAND, grant_id, budget=full_budget(currency="EUR"))


# --- delegated work.offer ----------------------------------------------------------------------


def test_the_grantee_offers_the_root_and_existing_descendants() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    outcome = delegated_offer(h, grant_id, "root")
    assert outcome.events[-1]["payload"]["delegationGrantId"] == grant_id
    assert outcome.events[-1]["payload"]["override"] is False
    h.accept("root", W1)
    h.authorize("child", budget=full_budget())  # not linked into the subtree
    h.submit(COORD, "work.authorize", authorize_payload(None), workItemId=item_id("linked"))
    delegated_offer(h, grant_id, "linked", W2)
    error = refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id, "child")
    assert error.details is not None and error.details["reason"] == "outside_subtree"


def test_offers_count_toward_the_grant_budget_once_per_item() -> None:
    h = mission_harness()
    h.admit(DELEGATE, "work_delegate")
    h.authorize("root", budget=full_budget(toolCallLimit=6))
    grant_id = grant(h, budget={**ROOMY, "toolCallLimit": 10})
    delegated_offer(h, grant_id, "root")
    delegated_offer(h, grant_id, "root", W2)  # a new round of the same item: counted once
    refuse_authorize(h, ErrorCode.BUDGET_EXCEEDED, grant_id, budget=full_budget(toolCallLimit=5))
    delegated_authorize(h, grant_id, "child", budget=full_budget(toolCallLimit=4))
    # A revised contract offered under the Grant is checked with its new budget and capabilities.
    revised = contract(contractVersion=2, budget=full_budget(toolCallLimit=7))
    h.reject(
        ErrorCode.BUDGET_EXCEEDED,
        DELEGATE,
        "work.offer",
        offer_payload(h, grant_id, contract=revised),
        workItemId=item_id("child"),
    )
    other = contract(
        contractVersion=2, requiredCapabilities=[{"id": "acme.software.rust", "version": "1.0.0"}]
    )
    h.reject(
        ErrorCode.AUTH_FORBIDDEN,
        DELEGATE,
        "work.offer",
        offer_payload(h, grant_id, contract=other),
        workItemId=item_id("child"),
    )


def test_an_unbounded_root_cannot_be_offered_under_a_grant() -> None:
    h = mission_harness()
    h.admit(DELEGATE, "work_delegate")
    h.authorize("root")  # its budget states only modelTokenLimit
    grant_id = grant(h)
    error = refuse_offer(h, ErrorCode.BUDGET_EXCEEDED, grant_id)
    assert error.details is not None and error.details["requested"] == "Infinity"


# --- at every use (MWP-MSN-022) -----------------------------------------------------------------


def test_the_grant_is_not_transferable() -> None:
    h = delegate_harness()
    h.admit(W2, "work_delegate")
    grant_id = grant(h)
    for actor in (W1, W2, COORD, OWNER):
        error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id, actor=actor)
        assert error.details is not None and error.details["reason"] == "not_grantee"
        refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id, actor=actor)


def test_a_changed_membership_invalidates_the_grant() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    h.submit(
        COORD,
        "membership.change",
        {"memberId": DELEGATE.id, "role": "work_delegate", "scopes": ["x"]},
    )
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "membership_changed"
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    h.submit(COORD, "membership.change", {"memberId": DELEGATE.id, "role": "worker"})
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "not_work_delegate"


def test_an_ended_membership_invalidates_the_grant_even_after_readmission() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    h.submit(COORD, "membership.end", {"memberId": DELEGATE.id})
    refuse_authorize(h, ErrorCode.MEMBERSHIP_STALE, grant_id)  # step 4 refuses first
    h.admit(DELEGATE, "work_delegate")
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "membership_changed"
    delegated_authorize(h, grant(h), "fresh")  # a new Grant at the new epoch works


def test_an_expired_grant_is_refused() -> None:
    h = delegate_harness()
    grant_id = grant(h, expiresAt=plus_seconds(h.now, 60))
    h.advance(59)
    delegated_authorize(h, grant_id, "in-time")
    h.advance(1)
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "grant_expired"
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id)


def test_a_replaced_coordinator_invalidates_the_grant_a_renewal_does_not() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    h.submit(COORD, "mission.renew_coordinator", {})
    delegated_authorize(h, grant_id, "after-renewal")
    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "coordinator_replaced"
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id)


@pytest.mark.parametrize("end", ["failed", "cancelled", "verified"])
def test_a_dead_target_invalidates_the_grant(end: str) -> None:
    h = mission_harness()
    h.admit(DELEGATE, "work_delegate")
    h.drive("root", "submitted" if end == "verified" else "open")  # W1 owns it
    grant_id = grant(h)
    if end == "verified":
        h.accept_result("root")
    elif end == "failed":
        h.submit(COORD, "work.fail", FAIL, workItemId=item_id("root"))
    else:
        h.submit(COORD, "work.cancel", {}, workItemId=item_id("root"))
    error = refuse_authorize(h, ErrorCode.AUTH_FORBIDDEN, grant_id)
    assert error.details is not None and error.details["reason"] == "target_not_live"
    refuse_offer(h, ErrorCode.AUTH_FORBIDDEN, grant_id)


def test_a_stale_coordinator_epoch_on_a_delegated_command_is_fenced() -> None:
    h = delegate_harness()
    grant_id = grant(h)
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        DELEGATE,
        "work.authorize",
        authorize_payload(grant_id),
        workItemId=item_id("x"),
        coordinatorEpoch=9,
    )


# --- snapshot, restore, replay -----------------------------------------------------------------


def delegated_history() -> tuple[Harness, str]:
    h = mission_harness()
    h.admit(DELEGATE, "work_delegate")
    h.authorize("root", budget=full_budget())
    grant_id = grant(h, budget={**ROOMY, "financialLimit": 30})
    delegated_offer(h, grant_id, "root")
    delegated_authorize(h, grant_id, "child")
    delegated_authorize(h, grant_id, "grandchild", parent="child")
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("grandchild"))
    return h, grant_id


def _next_use(h: Harness, grant_id: str) -> dict[str, Any]:
    return h.command(
        DELEGATE,
        "work.authorize",
        authorize_payload(grant_id, "child", budget=full_budget(financialLimit=0)),
        workItemId=item_id("late"),
    )


def _without_receipts(authority: GroupAuthority) -> dict[str, Any]:
    """Replay rebuilds receipts with only the digest an Event can carry (see receipts.py)."""
    state = dict(authority.snapshot()["state"])
    state.pop("receipts")
    return state


def test_replay_and_restore_equal_the_live_state_with_grants() -> None:
    h, grant_id = delegated_history()
    assert h.authority.snapshot()["state"]["delegationGrants"] == [
        {
            "grant": delegate_view(h)["delegationGrants"][0],
            "workItemIds": [item_id("root"), item_id("child"), item_id("grandchild")],
        }
    ]
    replayed = replay(json.loads(json.dumps(h.events)))
    restored = GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))
    assert fingerprint(restored) == fingerprint(h.authority)
    assert _without_receipts(replayed) == _without_receipts(h.authority)
    assert replayed.mission_view() == restored.mission_view() == h.authority.mission_view()
    for name in ("root", "child", "grandchild"):
        assert replayed.work_item_view(item_id(name)) == h.view(name)
    # All three accept the same next use under the Grant with the same Events.
    command = _next_use(h, grant_id)
    outcomes = []
    for authority in (h.authority, replayed, restored):
        other = Harness(authority)
        other.now = h.now
        outcomes.append(other.send(command).events)
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert fingerprint(restored) == fingerprint(h.authority)
    assert _without_receipts(replayed) == _without_receipts(h.authority)


def test_a_restored_ledger_still_enforces_the_ceiling() -> None:
    h, grant_id = delegated_history()  # root, child, cancelled grandchild: 30 of 30 financial
    restored = Harness(GroupAuthority.restore(h.authority.snapshot()))
    restored.now = h.now
    restored.reject(
        ErrorCode.BUDGET_EXCEEDED,
        DELEGATE,
        "work.authorize",
        authorize_payload(grant_id, "child", budget=full_budget(financialLimit=1)),
        workItemId=item_id("over"),
    )
    restored.submit(
        DELEGATE,
        "work.authorize",
        authorize_payload(grant_id, "child", budget=full_budget(financialLimit=0)),
        workItemId=item_id("free"),
    )
