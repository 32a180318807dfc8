"""What a Coordinator does next (mwp.coordinator.reconcile), decided from the pure Group
Authority's views: plan, authorize the graph, offer what its dependencies allow, review,
submit, replan after a change request; nothing for a Mission it no longer coordinates. It
publishes a Mission-wide hand-over Context Package as the plan changes and items are verified,
and a replacement appointed from one adopts the Group's WorkItems instead of planning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mwp.coordinator import ChildMission, KnowledgeSource, PlannedItem
from mwp.coordinator.reconcile import (
    ApproveChild,
    Authorize,
    ImportKnowledge,
    JournaledPlan,
    NeedPlan,
    NeedProposal,
    NeedReplan,
    NeedReuse,
    Offer,
    PackageRecord,
    Promote,
    PublishHandover,
    Renew,
    ReviewResult,
    Step,
    SubmitMission,
    TakeOver,
    adopted_key,
    child_payload,
    contract_of,
    next_steps,
    owner_steps,
    selection_basis,
    work_item_id,
)
from mwp.coordinator.remaining_plan import remaining_plan
from mwp.coordinator.runtime import GroupProjection
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.context_package import PUBLISH_KIND
from mwp.core.group.ids import event_id
from mwp.core.group.knowledge import IMPORT_KIND
from mwp.core.models import validate_document
from mwp.core.trust.registry import Principal
from mwp.core.wire.values import format_utc, parse_timestamp
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    COORD2,
    OWNER,
    SIGNATURE_VALUE,
    W1,
    W2,
    Harness,
    item_id,
)
from tests.unit.group.test_knowledge_reuse import import_payload as reuse_payload

PLAN = JournaledPlan(
    "initial",
    (
        PlannedItem("analyse", "Analyse the requirements"),
        PlannedItem("build", "Build it", depends_on=("analyse",), candidates=(W1.id,)),
    ),
)


def now_of(h: Harness) -> datetime:
    return datetime.fromisoformat(h.now.replace("Z", "+00:00"))


def notes_of(h: Harness) -> Any:
    """What the runtime notes of the Group's log (its projection's own note-taking)."""
    group = GroupProjection(h.group_id)
    for event in h.events:
        group.note(event)
    return group.notes()


def steps(
    h: Harness, plans: list[JournaledPlan], *, packages: bool = False, **overrides: Any
) -> list[Step]:
    """The steps due for COORD (``coordinator_id`` to ask for another); hand-over packages
    only with ``packages`` (the tests of other steps leave them out: one that must come before
    an authorization, carrying the items as its remaining plan, is published on the way)."""
    agent = overrides.get("coordinator_id", COORD.id)
    while True:
        mission = h.authority.mission_view()
        items = {i: h.authority.work_item_view(i) for i in h.authority.work_item_ids()}
        options: dict[str, Any] = {
            "coordinator_id": agent,
            "workers": (W1.id,),
            "session_epoch": h.sessions[agent],
            "lease_seconds": 3600,
            "now": now_of(h),
            "id_of": lambda group, key: item_id(key),
            "notes": notes_of(h),
        }
        options.update(overrides)
        due = next_steps(mission, items, plans, **options)
        if packages:
            return due
        first = [s for s in due if isinstance(s, PublishHandover) and s.record.remaining]
        if not first:
            return [s for s in due if not isinstance(s, PublishHandover)]
        take(h, first[0], PRINCIPALS[agent])


PRINCIPALS = {COORD.id: COORD, COORD2.id: COORD2}


def signed(h: Harness, step: PublishHandover, generator: Principal = COORD) -> dict[str, Any]:
    """The package as the runtime completes it (the harness's dummy signature)."""
    return {
        **step.package,
        "generatedBy": generator.to_json(),
        "generatedAt": h.now,
        "signature": {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:" + generator.id.rsplit(":", 1)[-1],
            "createdAt": h.now,
            "value": SIGNATURE_VALUE,
        },
    }


def take(h: Harness, step: Step, actor: Principal = COORD) -> None:
    """What the runtime sends for ``step`` as ``actor`` (the harness signs with dummy
    signatures)."""
    if isinstance(step, Authorize):
        payload: dict[str, Any] = {"contract": step.contract}
        if step.proposal_id is not None:
            payload["proposalId"] = step.proposal_id
        h.submit(actor, "work.authorize", payload, workItemId=step.work_item_id)
    elif isinstance(step, PublishHandover):
        h.submit(actor, PUBLISH_KIND, {"contextPackage": signed(h, step, actor)})
    elif isinstance(step, Offer):
        available = format_utc(now_of(h) + timedelta(seconds=60))
        candidates = [
            {"agentId": a, "selectionBasis": selection_basis(step.capability, available)}
            for a in step.candidates
        ]
        expires = format_utc(now_of(h) + timedelta(hours=1))
        h.submit(
            actor,
            "work.offer",
            {"candidates": candidates, "expiresAt": expires},
            workItemId=step.work_item_id,
        )
    elif isinstance(step, Promote):
        contract = h.authority.work_item_view(step.work_item_id)["contract"]
        payload = child_payload(h.authority.group_id, step.item, contract)
        h.submit(actor, "mission.create_child", payload, workItemId=step.work_item_id)
    elif isinstance(step, ReviewResult):
        review = h.review_payload(_name_of(step.work_item_id))
        h.submit(actor, "work.accept_result", review, workItemId=step.work_item_id)
    elif isinstance(step, SubmitMission):
        h.submit(
            actor, "mission.submit_for_approval", {"artifactHashes": list(step.artifact_hashes)}
        )
    else:
        raise AssertionError(step)


def _name_of(work_item_id: str) -> str:
    return work_item_id.rsplit(":", 1)[-1]


def work(h: Harness, key: str) -> None:
    """W1 accepts, starts and submits the item with Evidence for each of its criteria."""
    h.accept(key)
    h.start(key)
    if ARTIFACT_A not in h.published():
        h.publish(key)
    criteria = [c["criterionId"] for c in h.view(key)["contract"]["acceptanceCriteria"]]
    evidence = [
        {"evidenceId": f"urn:example:evidence:{key}:{c}", "criterionIds": [c]} for c in criteria
    ]
    payload = h.owner_payload(key, artifactHashes=[ARTIFACT_A], evidence=evidence)
    h.submit(W1, "work.submit", payload, workItemId=item_id(key))


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.create_mission()
    harness.admit(W1)
    return harness


def test_a_new_mission_is_planned_then_its_graph_authorized_then_offered_in_order(
    h: Harness,
) -> None:
    assert steps(h, []) == [NeedPlan()]

    due = steps(h, [PLAN])
    assert [type(s) for s in due] == [Authorize, Authorize]
    assert [s.work_item_id for s in due if isinstance(s, Authorize)] == [
        item_id("analyse"),
        item_id("build"),
    ]
    build = due[1]
    assert isinstance(build, Authorize)
    assert build.contract["dependencyWorkItemIds"] == [item_id("analyse")]
    validate_document("work-contract.schema.json", build.contract)
    for step in due:
        take(h, step)

    (offer,) = steps(h, [PLAN])  # "build" waits for "analyse"
    assert offer == Offer(item_id("analyse"), (W1.id,), ("mwp.dev.general", "1.0.0"))
    take(h, offer)
    assert steps(h, [PLAN]) == []  # the offer is pending

    work(h, "analyse")
    assert steps(h, [PLAN]) == [ReviewResult(item_id("analyse"))]
    h.accept_result("analyse")
    (offer,) = steps(h, [PLAN])
    assert isinstance(offer, Offer) and offer.work_item_id == item_id("build")
    take(h, offer)
    work(h, "build")
    h.accept_result("build")

    (submit,) = steps(h, [PLAN])
    assert submit == SubmitMission((ARTIFACT_A,))
    take(h, submit)
    assert steps(h, [PLAN]) == []  # awaiting Approval: the MissionOwner decides


def test_a_change_request_is_replanned_once_then_the_mission_submitted_again(
    h: Harness,
) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    for step in steps(h, [single]):
        take(h, step)
    take(h, steps(h, [single])[0])
    work(h, "analyse")
    h.accept_result("analyse")
    take(h, steps(h, [single])[0])
    h.submit(h_owner(), "mission.request_changes", h.changes_payload("Add the tests."))

    (replan,) = steps(h, [single])
    assert isinstance(replan, NeedReplan)
    assert replan.approval["comments"] == "Add the tests."
    answer = JournaledPlan(replan.approval["approvalId"], (PlannedItem("tests", "Add tests"),))
    (authorize,) = steps(h, [single, answer])
    assert isinstance(authorize, Authorize) and authorize.work_item_id == item_id("tests")
    # An empty answer submits the same result again.
    nothing = JournaledPlan(replan.approval["approvalId"], ())
    assert steps(h, [single, nothing]) == [SubmitMission((ARTIFACT_A,))]


def h_owner() -> Any:
    from tests.unit.group.harness import OWNER

    return OWNER


def test_reuse_is_asked_once_per_mission_beside_its_plan(h: Harness) -> None:
    assert steps(h, [], reuses=True) == [NeedReuse(), NeedPlan()]
    assert steps(h, [], reuses=True, reused=()) == [NeedPlan()]  # answered: not asked again
    assert steps(h, [], reuses=False) == [NeedPlan()]  # no reuse function: nothing imported


def test_an_import_is_due_until_the_group_holds_the_artifact(h: Harness) -> None:
    payload = reuse_payload(h)
    manifest = payload["manifest"]
    source = KnowledgeSource(manifest["groupId"], manifest["contentHash"])
    assert steps(h, [], reused=(source,)) == [ImportKnowledge(source), NeedPlan()]
    # Refused in this run (by the policy or the Group): not asked again on every change.
    refused = frozenset({source.content_hash})
    assert steps(h, [], reused=(source,), refused_imports=refused) == [NeedPlan()]
    h.submit(COORD, IMPORT_KIND, payload)  # the runtime's import, accepted
    assert steps(h, [], reused=(source,)) == [NeedPlan()]
    assert steps(h, [PLAN], reused=(source,))[0] != ImportKnowledge(source)


def test_the_lease_is_renewed_under_a_new_session_or_when_a_third_is_left(h: Harness) -> None:
    assert Renew() in steps(h, [PLAN], session_epoch=2)
    lease = h.authority.mission_view()["coordinatorLease"]
    expires = parse_timestamp(lease["expiresAt"]).text
    late = datetime.fromisoformat(expires.replace("Z", "+00:00")) - timedelta(seconds=1000)
    assert Renew() in steps(h, [PLAN], now=late.astimezone(UTC))
    assert Renew() not in steps(h, [PLAN])


def test_nothing_is_done_for_a_mission_coordinated_by_another_or_not_active(h: Harness) -> None:
    assert steps(h, [PLAN], coordinator_id=COORD2.id) == []
    h.submit(h_owner(), "mission.cancel", {"reason": "No longer needed."})
    assert steps(h, [PLAN]) == []


def test_an_item_is_offered_again_after_a_rejection_up_to_its_attempts(h: Harness) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    take(h, steps(h, [single])[0])
    for attempt in range(3):
        (offer,) = steps(h, [single])
        assert isinstance(offer, Offer), attempt
        take(h, offer)
        work(h, "analyse")
        h.submit(
            COORD,
            "work.fail",
            {
                "reason": "The tests fail.",
                "failureEvidenceIds": [
                    e["evidenceId"] for e in h.view("analyse")["submissionEvidence"]
                ],
                "failureCode": "RESULT_REJECTED",
                "review": h.review("analyse", {"criterion-1": "failed"}),
            },
            workItemId=item_id("analyse"),
        )
    assert steps(h, [single]) == []  # three attempts: given up


def test_an_item_whose_owner_lost_its_lease_is_offered_to_another(h: Harness) -> None:
    """W1's Execution Lease runs out mid-run: the item stays active under a fenced owner, and
    the next step offers it again, to the candidates and ``reassign_to`` other than W1; the
    Authority takes that offer (fencing W1's ownership in the same transition)."""
    h.admit(W2)
    single = JournaledPlan(
        "initial",
        (PlannedItem("analyse", "Analyse it", candidates=(W1.id,), reassign_to=(W2.id, W1.id)),),
    )
    take(h, steps(h, [single])[0])
    take(h, steps(h, [single])[0])
    h.accept("analyse")
    h.start("analyse")
    assert steps(h, [single]) == []  # a live owner: nothing to do
    lease = h.lease_id("analyse")
    h.advance(300)
    assert h.fire(item_id("analyse"), "execution_lease", lease) is not None
    view = h.view("analyse")
    assert view["state"] == "active" and view["ownerFencedReason"]
    (offer,) = steps(h, [single])
    assert isinstance(offer, Offer) and offer.candidates == (W2.id,)
    take(h, offer)
    created = h.events[-1]
    assert created["kind"] == "work.offer.created"
    assert created["payload"]["fencedOwnership"]["agentId"] == W1.id
    assert [o["agentId"] for o in created["payload"]["offers"]] == [W2.id]
    assert steps(h, [single]) == []  # offered: nothing more until it is taken or lapses


def test_work_item_ids_derive_from_the_group_and_key() -> None:
    a = work_item_id("urn:mwp:group:one", "build")
    assert (
        a
        == work_item_id("urn:mwp:group:one", "build")
        != work_item_id("urn:mwp:group:two", "build")
    )
    assert a.startswith("urn:uuid:")


def test_a_work_proposal_is_decided_once_and_its_item_cites_it(h: Harness, tmp_path: Any) -> None:
    from mwp.coordinator.journal import PlanJournal

    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    take(h, steps(h, [single])[0])
    h.submit(W1, "work.propose", {"title": "Add a benchmark", "goal": "Measure the change."})

    (asked,) = [s for s in steps(h, [single]) if isinstance(s, NeedProposal)]
    proposal_id = asked.proposal["proposalId"]
    assert asked.proposal["title"] == "Add a benchmark"
    taken = JournaledPlan(proposal_id, (PlannedItem("bench", "Add a benchmark"),), proposal=True)
    journal = PlanJournal(tmp_path)
    journal.add(h.group_id, single)
    journal.add(h.group_id, taken)
    assert journal.plans(h.group_id) == [single, taken]  # as journaled, flag and all

    due = steps(h, journal.plans(h.group_id))
    (authorize,) = [s for s in due if isinstance(s, Authorize)]
    assert authorize.proposal_id == proposal_id
    take(h, authorize)
    assert h.authority.mission_view()["proposals"] == []  # consumed by the authorization
    assert not any(isinstance(s, NeedProposal) for s in steps(h, journal.plans(h.group_id)))


def test_a_proposal_left_open_is_not_asked_about_again(h: Harness) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    h.submit(W1, "work.propose", {"title": "Rewrite it all"})
    (asked,) = [s for s in steps(h, [single]) if isinstance(s, NeedProposal)]
    declined = JournaledPlan(asked.proposal["proposalId"], (), proposal=True)

    assert not any(isinstance(s, NeedProposal) for s in steps(h, [single, declined]))


def test_an_item_planned_as_a_child_mission_is_promoted_once_its_dependencies_are_verified(
    h: Harness,
) -> None:
    child = ChildMission("Write the release notes", COORD2.id)
    plan = JournaledPlan(
        "initial",
        (
            PlannedItem("analyse", "Analyse the requirements"),
            PlannedItem("notes", "Release notes", depends_on=("analyse",), child=child),
        ),
    )
    for step in steps(h, [plan]):
        take(h, step)
    (offer,) = steps(h, [plan])  # the child item waits for "analyse", and is never offered
    assert isinstance(offer, Offer) and offer.work_item_id == item_id("analyse")
    take(h, offer)
    work(h, "analyse")
    h.accept_result("analyse")

    (promote,) = steps(h, [plan])
    assert promote == Promote(item_id("notes"), plan.items[1])
    take(h, promote)
    assert h.view("notes")["state"] == "blocked"
    assert steps(h, [plan]) == []  # the child runs: nothing to do until its approval


def test_the_owner_of_a_child_mission_approves_it_once_it_is_submitted() -> None:
    child = {
        "missionOwner": {"type": "agent", "id": COORD.id},
        "parent": {"missionId": "urn:uuid:1", "workItemId": "urn:uuid:2", "depth": 1},
        "state": "awaiting_approval",
    }
    assert owner_steps(child, COORD.id) == [ApproveChild()]
    assert owner_steps({**child, "state": "active"}, COORD.id) == []
    assert owner_steps(child, COORD2.id) == []  # not its owner
    assert owner_steps({k: v for k, v in child.items() if k != "parent"}, COORD.id) == []


# --- hand-over packages and takeover (MWP-MSN-005) ------------------------------------------

CHAIN = JournaledPlan(
    "initial",
    (
        PlannedItem("analyse", "Analyse the requirements"),
        PlannedItem("build", "Build it", depends_on=("analyse",)),
        PlannedItem("ship", "Ship it", depends_on=("build",)),
    ),
)


def handover(h: Harness, plans: list[JournaledPlan], **overrides: Any) -> PublishHandover | None:
    found = [
        s for s in steps(h, plans, packages=True, **overrides) if isinstance(s, PublishHandover)
    ]
    assert len(found) <= 1
    return found[0] if found else None


def test_a_handover_package_is_published_as_the_plan_changes_and_items_are_verified(
    h: Harness,
) -> None:
    (planned,) = steps(h, [CHAIN], packages=True)  # the plan first, before any authorization
    assert isinstance(planned, PublishHandover)
    assert planned.package["version"] == 1 and "previousContextPackageId" not in planned.package
    assert "workItemId" not in planned.package  # Mission-wide: what a replacement is handed
    assert planned.package["sourceEventRange"]["eventIds"] == [event_id(h.group_id, 1)]
    assert planned.record.remaining == tuple(item_id(k) for k in ("analyse", "build", "ship"))
    take(h, planned)
    for step in steps(h, [CHAIN], packages=True):
        assert isinstance(step, Authorize)  # none before the graph is whole
        take(h, step)
    first = handover(h, [CHAIN])
    assert first is not None
    package = first.package
    assert package["version"] == 2
    assert package["previousContextPackageId"] == planned.record.context_package_id
    assert "extensions" not in package  # every planned item is authorized: no remaining plan
    cited = package["sourceEventRange"]["eventIds"]
    stated = [h.view(k)["contractEvents"][0]["eventId"] for k in ("analyse", "build", "ship")]
    assert cited == [event_id(h.group_id, 1), *stated]  # the founding Event, each contract
    take(h, first)  # the Authority takes it: in scope, cited range within its log
    assert handover(h, [CHAIN]) is None  # nothing changed since: not published again

    take(h, steps(h, [CHAIN])[0])
    work(h, "analyse")
    assert handover(h, [CHAIN]) is None  # offered, started, submitted: no hand-over point
    h.accept_result("analyse")
    second = handover(h, [CHAIN])
    assert second is not None
    assert second.package["version"] == 3
    assert second.package["previousContextPackageId"] == package["contextPackageId"]
    accepted = h.view("analyse")["result"]["acceptedEvent"]["eventId"]
    assert accepted in second.package["sourceEventRange"]["eventIds"]
    assert second.package["artifactHashes"] == [ARTIFACT_A]
    assert any(accepted in d["sourceEventIds"] for d in second.package["decisions"])
    take(h, second)
    assert handover(h, [CHAIN]) is None


def test_a_package_journaled_but_not_yet_in_the_log_is_not_published_again(h: Harness) -> None:
    """A restarted runtime whose projection has not caught up publishes nothing its journal
    says it published; and the same version published twice is refused (its ID derives from
    its predecessor and version)."""
    for step in steps(h, [CHAIN]):
        take(h, step)
    due = handover(h, [CHAIN])
    assert due is not None
    assert handover(h, [CHAIN], journaled_package=due.record) is None
    take(h, due)
    behind = PackageRecord(due.record.context_package_id, 1, due.record.event_ids)
    assert handover(h, [CHAIN], journaled_package=behind) is None  # the log shows it: done
    error = h.reject(
        ErrorCode.INVALID_COMMAND, COORD, PUBLISH_KIND, {"contextPackage": signed(h, due)}
    )
    assert (error.details or {}).get("reason") == "context_package_exists"


def appoint(h: Harness, package_id: str, agent: Principal = COORD2) -> None:
    h.submit(
        OWNER, "mission.assign_coordinator", {"agentId": agent.id, "contextPackageId": package_id}
    )


def run_a_until_analyse_is_verified(h: Harness) -> str:
    """COORD plans CHAIN, publishes its packages, gets "analyse" verified and "build" offered;
    the ID of its latest package."""
    for step in steps(h, [CHAIN]):
        take(h, step)
    for _ in range(2):
        for step in steps(h, [CHAIN], packages=True):
            take(h, step)
        if h.view("analyse")["state"] == "offered":
            work(h, "analyse")
            h.accept_result("analyse")
    assert h.view("build")["state"] == "offered"
    latest = notes_of(h).mission_package
    assert latest is not None and latest.version == 3  # the plan, its authorization, "analyse"
    return str(latest.context_package_id)


def test_a_replacement_adopts_the_work_items_instead_of_planning_and_finishes_the_mission(
    h: Harness,
) -> None:
    package_id = run_a_until_analyse_is_verified(h)
    appoint(h, package_id)
    assert steps(h, [CHAIN]) == []  # the former Coordinator: nothing more

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver)  # not NeedPlan: that would duplicate the work
    assert takeover.context_package_id == package_id
    assert takeover.coordinator_epoch == 2
    ids = [item_id(k) for k in ("analyse", "build", "ship")]
    plan = takeover.plan
    assert plan.adopted == tuple(ids) and plan.answers == "initial"
    build = plan.items[1]
    assert build.goal == "Build it" and build.depends_on == (adopted_key(ids[0]),)

    # The offer A made is pending: nothing to reconcile yet, nothing to authorize.
    assert steps(h, [plan], coordinator_id=COORD2.id, packages=True) == []
    work(h, "build")
    assert steps(h, [plan], coordinator_id=COORD2.id) == [ReviewResult(ids[1])]
    for _ in range(4):
        for step in steps(h, [plan], coordinator_id=COORD2.id, packages=True):
            take(h, step, COORD2)
        if h.view("ship")["state"] == "offered":
            work(h, "ship")
    assert h.authority.mission_view()["state"] == "awaiting_approval"
    authorized = [e for e in h.events if e["kind"] == "work.authorized"]
    assert [e["workItemId"] for e in authorized] == ids  # each once, all by A
    assert {e["actor"]["id"] for e in authorized} == {COORD.id}
    published = [e for e in h.events if e["kind"].endswith("context_package_published")]
    assert published[-1]["actor"]["id"] == COORD2.id  # B's packages continue A's versions
    assert published[-1]["payload"]["contextPackage"]["version"] == len(published)
    # The former Coordinator's coordination Commands are stale.
    h.reject(
        ErrorCode.AUTH_STALE_COORDINATOR,
        COORD,
        "work.authorize",
        {"contract": contract_of(PlannedItem("extra", "More"), h.group_id, now_of(h))},
        workItemId=item_id("extra"),
        coordinatorEpoch=1,
    )


def test_the_founding_coordinator_without_a_journal_still_plans(h: Harness) -> None:
    for step in steps(h, [CHAIN]):
        take(h, step)
    assert steps(h, []) == [NeedPlan()]  # Coordinator Epoch 1: no earlier Coordinator


def run_to_approval(h: Harness, plans: list[JournaledPlan], actor: Principal = COORD) -> None:
    """``actor`` takes every step, packages included, and W1 does each item offered, until
    the Mission awaits Approval."""
    for _ in range(12):
        for step in steps(h, plans, packages=True, coordinator_id=actor.id):
            take(h, step, actor)
        for key in h.authority.work_item_ids():
            if h.authority.work_item_view(key)["state"] == "offered":
                work(h, _name_of(key))
        if h.authority.mission_view()["state"] == "awaiting_approval":
            return
    raise AssertionError("the Mission never reached Approval")


def test_a_replacement_answers_a_change_request_its_predecessor_had_not_answered(
    h: Harness,
) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    run_to_approval(h, [single])
    h.submit(OWNER, "mission.request_changes", h.changes_payload("Add the tests."))
    latest = notes_of(h).mission_package
    assert latest is not None
    appoint(h, latest.context_package_id)

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver) and takeover.plan.answers == "initial"
    (replan,) = steps(h, [takeover.plan], coordinator_id=COORD2.id)
    assert isinstance(replan, NeedReplan)  # B's on_changes_requested answers it


def test_a_change_request_its_predecessor_answered_is_not_answered_again(h: Harness) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    run_to_approval(h, [single])
    h.submit(OWNER, "mission.request_changes", h.changes_payload("Add the tests."))
    approval_id = h.authority.mission_view()["approval"]["approvalId"]
    answer = JournaledPlan(approval_id, (PlannedItem("tests", "Add tests"),))
    for _ in range(2):  # its remaining plan, then its authorization
        for step in steps(h, [single, answer], packages=True):
            take(h, step)
    package = handover(h, [single, answer])
    assert package is not None
    take(h, package)
    appoint(h, package.record.context_package_id)

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver) and takeover.plan.answers == approval_id
    (offer,) = steps(h, [takeover.plan], coordinator_id=COORD2.id)
    assert isinstance(offer, Offer) and offer.work_item_id == item_id("tests")


# --- the remaining plan: nothing its predecessor planned is lost (MWP-MSN-005) -------------


def authorized_by(h: Harness) -> list[tuple[str, str]]:
    """Each ``work.authorized`` Event: its WorkItem's plan name and the actor."""
    return [
        (_name_of(e["workItemId"]), e["actor"]["id"])
        for e in h.events
        if e["kind"] == "work.authorized"
    ]


def publish_the_plan(h: Harness, plans: list[JournaledPlan]) -> PublishHandover:
    """COORD's first step for ``plans``: the package carrying them, before any authorization."""
    (planned,) = steps(h, plans, packages=True)
    assert isinstance(planned, PublishHandover) and planned.record.remaining
    take(h, planned)
    return planned


def test_the_remaining_plan_is_published_before_any_of_its_items_is_authorized(
    h: Harness,
) -> None:
    planned = publish_the_plan(h, [CHAIN])
    (carried,) = planned.package["extensions"].values()
    assert carried["critical"] is False  # a reader that does not know it still has a package
    validate_document("context-package.schema.json", signed(h, planned))
    remaining = remaining_plan(signed(h, planned))
    assert [(r.key, r.work_item_id, r.answers) for r in remaining] == [
        (k, item_id(k), "initial") for k in ("analyse", "build", "ship")
    ]
    build = remaining[1].contract
    assert build["dependencyWorkItemIds"] == [item_id("analyse")]
    assert build["budget"] == {"currency": "USD", "financialLimit": 10, "toolCallLimit": 100}
    assert "3 planned, not yet authorized" in planned.package["summary"]
    # The package is in the log: the items are authorized, and it is not published again.
    due = steps(h, [CHAIN], packages=True)
    assert [type(s) for s in due] == [Authorize, Authorize, Authorize]


def test_items_no_package_carries_wait_for_the_one_journaled_to_reach_the_log(
    h: Harness,
) -> None:
    """A restarted runtime whose log has not shown the package it journaled (the Authority
    took it) authorizes what that package carries, and neither authorizes other items (no
    package may carry them yet) nor publishes another meanwhile."""
    (planned,) = steps(h, [CHAIN], packages=True)
    assert isinstance(planned, PublishHandover)
    due = steps(h, [CHAIN], packages=True, journaled_package=planned.record)
    assert [type(s) for s in due] == [Authorize, Authorize, Authorize]
    older = PackageRecord(planned.record.context_package_id, 1, planned.record.event_ids)
    assert steps(h, [CHAIN], packages=True, journaled_package=older) == []
    take(h, planned)
    for step in steps(h, [CHAIN], packages=True, journaled_package=planned.record):
        take(h, step)
    # A plan journaled later: its items are published before they are authorized.
    more = JournaledPlan("more", (PlannedItem("docs", "Document it", depends_on=("ship",)),))
    (again,) = steps(h, [CHAIN, more], packages=True)
    assert isinstance(again, PublishHandover) and again.record.remaining == (item_id("docs"),)


def test_a_group_that_refused_a_package_authorizes_its_plan_without_one(h: Harness) -> None:
    (planned,) = steps(h, [CHAIN], packages=True)
    assert isinstance(planned, PublishHandover)
    due = steps(h, [CHAIN], packages=True, refused_package=planned.record)
    assert [type(s) for s in due] == [Authorize, Authorize, Authorize]


def test_a_replacement_adopts_the_remaining_plan_and_authorizes_each_item_once(
    h: Harness,
) -> None:
    """A published its plan, authorized "analyse" and stopped: B adopts "analyse" from the
    Group and "build" and "ship" from A's package, authorizes those two under A's IDs and
    contracts, once, and finishes the Mission without planning."""
    planned = publish_the_plan(h, [CHAIN])
    first = steps(h, [CHAIN])[0]
    assert isinstance(first, Authorize) and first.work_item_id == item_id("analyse")
    take(h, first)  # then A stops
    appoint(h, planned.record.context_package_id)

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver)  # not NeedPlan
    ids = tuple(item_id(k) for k in ("analyse", "build", "ship"))
    plan = takeover.plan
    assert plan.adopted == ids and plan.answers == "initial"
    carried = {r.work_item_id: r.contract for r in remaining_plan(signed(h, planned))}
    assert plan.contracts == (None, carried[ids[1]], carried[ids[2]])
    assert plan.items[2].depends_on == (adopted_key(ids[1]),)

    due = steps(h, [plan], coordinator_id=COORD2.id, packages=True)
    assert [(type(s), getattr(s, "work_item_id", None)) for s in due] == [
        (Authorize, ids[1]),
        (Authorize, ids[2]),
    ]  # no package first: A's carries them
    assert all(isinstance(s, Authorize) and s.contract == carried[s.work_item_id] for s in due)
    run_to_approval(h, [plan], COORD2)
    assert authorized_by(h) == [
        ("analyse", COORD.id),
        ("build", COORD2.id),
        ("ship", COORD2.id),
    ]
    assert h.authority.mission_view()["submission"]["artifactHashes"] == [ARTIFACT_A]


def test_items_the_predecessor_authorized_meanwhile_are_not_authorized_again(
    h: Harness,
) -> None:
    """B is appointed from A's first package, whose remaining plan A authorized whole after
    it: every item is adopted from the Group, none authorized again."""
    planned = publish_the_plan(h, [CHAIN])
    for step in steps(h, [CHAIN]):
        take(h, step)
    appoint(h, planned.record.context_package_id)
    assert notes_of(h).remaining_plan  # the latest package still names all three

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver)
    assert takeover.plan.contracts == (None, None, None)
    run_to_approval(h, [takeover.plan], COORD2)
    assert [actor for _, actor in authorized_by(h)] == [COORD.id] * 3


def test_a_replacement_adopts_a_plan_none_of_whose_items_was_authorized(h: Harness) -> None:
    publish_the_plan(h, [CHAIN])
    latest = notes_of(h).mission_package
    assert latest is not None
    appoint(h, latest.context_package_id)

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)  # no WorkItem in the Group, yet no plan
    assert isinstance(takeover, TakeOver) and len(takeover.plan.items) == 3
    run_to_approval(h, [takeover.plan], COORD2)
    assert authorized_by(h) == [(k, COORD2.id) for k in ("analyse", "build", "ship")]


def test_a_replacement_with_a_package_without_a_remaining_plan_plans_an_empty_mission(
    h: Harness,
) -> None:
    """A package from before remaining plans (none in the Group names any item): with no
    WorkItem to adopt, the replacement plans, as before."""
    h.submit(COORD, PUBLISH_KIND, {"contextPackage": signed(h, _bare_package(h))})
    latest = notes_of(h).mission_package
    assert latest is not None and latest.remaining == ()
    appoint(h, latest.context_package_id)
    assert steps(h, [], coordinator_id=COORD2.id) == [NeedPlan()]


def _bare_package(h: Harness) -> PublishHandover:
    mission = h.authority.mission_view()
    package = {
        "contextPackageId": "urn:example:context-package:bare",
        "version": 1,
        "missionId": mission["missionId"],
        "groupId": h.group_id,
        "sourceEventRange": {
            "fromSequence": 1,
            "toSequence": 1,
            "eventIds": [event_id(h.group_id, 1)],
        },
        "artifactHashes": [],
        "summary": "Nothing planned yet.",
        "decisions": [],
        "constraints": [],
        "unresolvedQuestions": [],
    }
    return PublishHandover(package)


def test_a_remaining_plan_that_answers_a_change_request_is_not_answered_again(
    h: Harness,
) -> None:
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    run_to_approval(h, [single])
    h.submit(OWNER, "mission.request_changes", h.changes_payload("Add the tests."))
    approval_id = h.authority.mission_view()["approval"]["approvalId"]
    answer = JournaledPlan(approval_id, (PlannedItem("tests", "Add tests"),))
    planned = publish_the_plan(h, [single, answer])  # then A stops
    appoint(h, planned.record.context_package_id)

    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver) and takeover.plan.answers == approval_id
    (authorize,) = steps(h, [takeover.plan], coordinator_id=COORD2.id)
    assert isinstance(authorize, Authorize) and authorize.work_item_id == item_id("tests")


def test_an_item_answering_an_open_proposal_stays_out_of_the_remaining_plan(
    h: Harness,
) -> None:
    """The proposal stays open in the Group until an item cites it: whoever coordinates
    answers it; carrying A's answer too would authorize the same work twice."""
    single = JournaledPlan("initial", (PlannedItem("analyse", "Analyse the requirements"),))
    planned = publish_the_plan(h, [single])
    for step in steps(h, [single]):
        take(h, step)
    h.submit(W1, "work.propose", {"title": "Add a benchmark"})
    (asked,) = [s for s in steps(h, [single]) if isinstance(s, NeedProposal)]
    taken = JournaledPlan(
        asked.proposal["proposalId"], (PlannedItem("bench", "Benchmark"),), proposal=True
    )
    due = steps(h, [single, taken], packages=True)
    assert [type(s) for s in due] == [Authorize]  # no package first: nothing to carry
    assert planned.record.remaining == (item_id("analyse"),)


def test_a_child_mission_planned_travels_with_the_remaining_plan(h: Harness) -> None:
    child = ChildMission("Write the release notes", W2.id, ("Notes are published.",))
    plan = JournaledPlan(
        "initial",
        (
            PlannedItem("analyse", "Analyse the requirements"),
            PlannedItem("notes", "Release notes", depends_on=("analyse",), child=child),
        ),
    )
    planned = publish_the_plan(h, [plan])
    (_, notes) = remaining_plan(signed(h, planned))
    assert notes.child == child
    appoint(h, planned.record.context_package_id)
    (takeover,) = steps(h, [], coordinator_id=COORD2.id)
    assert isinstance(takeover, TakeOver) and takeover.plan.items[1].child == child


def test_a_malformed_remaining_plan_is_a_typed_error_and_is_taken_as_none(h: Harness) -> None:
    planned = publish_the_plan(h, [CHAIN])
    package = signed(h, planned)
    (name,) = package["extensions"]
    package["extensions"][name]["data"]["items"][1]["contract"]["budget"] = "ten dollars"
    with pytest.raises(MwpError) as raised:
        remaining_plan(package)
    assert raised.value.code is ErrorCode.SCHEMA_VALIDATION_FAILED
    assert "items[1].contract" in raised.value.message
    group = GroupProjection(h.group_id)
    for event in h.events[:-1]:
        group.note(event)
    group.note({**h.events[-1], "payload": {"contextPackage": package}})
    assert group.notes().remaining_plan == ()
    assert group.notes().mission_package is not None  # the package itself is noted


def test_a_plan_too_large_for_one_package_is_authorized_without_one(h: Harness) -> None:
    """A package over what a Command may carry could never be published: the plan is then
    authorized as in a Group that refuses packages, not held up for good."""
    goal = "Translate one chapter of the manual. " * 20
    large = JournaledPlan("initial", tuple(PlannedItem(f"chapter-{n}", goal) for n in range(300)))
    due = steps(h, [large], packages=True)
    assert len(due) == 300 and all(isinstance(s, Authorize) for s in due)
    fits = JournaledPlan("initial", large.items[:30])
    (planned,) = steps(h, [fits], packages=True)
    assert isinstance(planned, PublishHandover)
