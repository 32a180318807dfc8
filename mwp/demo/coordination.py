"""The Coordinators' checks, from the signed logs: the lead made a child Mission of the small
Mission's release notes, the steward coordinated it in its own Group, the lead approved it as
its MissionOwner and that approval verified the parent's WorkItem; and the offers rest on the
Registry's performance records and cite their Events."""

from __future__ import annotations

from typing import Any

from mwp.coordinator.performance import REGISTRY_RULE, RULE
from mwp.core.organization.performance import PerformanceLedger
from mwp.demo import cast
from mwp.demo.groups import GroupEvents, proof
from mwp.demo.report import Report

Json = dict[str, Any]
COORDINATED = ("work.authorized", "work.offer.created", "work.result.accepted")
RECORDS_RULES = (RULE, REGISTRY_RULE)  # the Coordinator's own records, or the Registry's


def prove_child(report: Report, small: GroupEvents, child: GroupEvents) -> None:
    lead, steward = cast.agent_id("lead"), cast.agent_id("steward")
    created = small.first("mission.child.created")
    document: Json = (created or {}).get("payload", {}).get("childMission", {})
    report.check(
        "child.created",
        created is not None
        and created["actor"]["id"] == lead
        and document.get("parent", {}).get("workItemId") == created.get("workItemId")
        and (document.get("coordinator") or {}).get("agentId") == steward,
        "the lead made a child Mission of the small Mission's release notes WorkItem, "
        "coordinated by the steward",
        events=proof([created]),
    )
    founded = child.events[0] if child.events else None
    report.check(
        "child.own_group",
        created is not None
        and founded is not None
        and founded["groupId"] == document.get("groupId") != created["groupId"]
        and founded.get("cause") == {"type": "event", "id": created["eventId"]}
        and document.get("missionOwner", {}).get("id") == lead,
        "the child Mission runs in its own Group, founded from the parent's Event, and the "
        "lead (the parent's Coordinator) is its MissionOwner",
        events=proof([founded]),
    )
    coordinated = child.by(steward, [*COORDINATED, "mission.submitted_for_approval"])
    worked = child.by(cast.agent_id("analyst"), ["work.started", "work.submitted"])
    report.check(
        "child.coordinated",
        {e["kind"] for e in coordinated} >= {*COORDINATED, "mission.submitted_for_approval"}
        and len(worked) >= 2,
        "the steward planned, offered, reviewed and submitted the child Mission; the analyst "
        "did its work",
        events=proof([*coordinated[:4], *worked[:2]]),
    )
    approved = child.first("mission.approved")
    approval: Json = (approved or {}).get("payload", {}).get("approval", {})
    report.check(
        "child.approved_by_parent_coordinator",
        approved is not None
        and approved["actor"]["id"] == lead
        and approval.get("kind") == "child_mission"
        and approval.get("approver", {}).get("id") == lead,
        "the lead approved the child Mission as its MissionOwner: a child_mission Approval "
        "signed with the lead's key",
        events=proof([approved]),
        approvalId=approval.get("approvalId"),
    )
    item = created.get("workItemId") if created else None
    settled = small.first("work.result.accepted", item) if item else None
    report.check(
        "child.verifies_parent_item",
        settled is not None
        and settled["payload"].get("childMissionId") == document.get("missionId")
        and settled["payload"].get("reviewEvidenceIds") == [approval.get("approvalId")],
        "the child's approval verified the parent's WorkItem, citing the Approval",
        events=proof([settled]),
    )


def prove_selection(report: Report, logs: dict[str, GroupEvents]) -> None:
    """The Coordinator's offers cite each candidate's performance record: Events of that
    candidate's accepted results for the same capability, in the signed logs."""
    by_id = {e["eventId"]: e for g in logs.values() for e in g.events}
    submitted_by = {
        e["workItemId"]: e["actor"]["id"] for g in logs.values() for e in g.of("work.submitted")
    }
    citing = []
    for offer in (e for g in logs.values() for e in g.of("work.offer.created")):
        for candidate in offer["payload"]["offers"]:
            basis = candidate["selectionBasis"]
            cited = [by_id.get(i) for i in basis.get("reliabilityEvidence", [])]
            rules = set(basis.get("policyRulesApplied", []))
            if cited and rules & set(RECORDS_RULES):
                citing.append((offer, candidate["agentId"], cited))
    report.check(
        "coordinator.selection_cites_records",
        bool(citing)
        and all(
            e is not None
            and e["kind"] == "work.result.accepted"
            and submitted_by.get(e["workItemId"]) == agent
            for _, agent, cited in citing
            for e in cited
        ),
        "offers made after a Worker's results were accepted cite those acceptances in its "
        "selection basis (performance records, kept apart from Agent Cards)",
        offers=proof([offer for offer, _, _ in citing[:3]]),
    )
    _prove_registry(report, logs)


def _prove_registry(report: Report, logs: dict[str, GroupEvents]) -> None:
    """The offers rest on the Registry's records: named by its rule, and every Event they cite
    proves an outcome of that candidate (the same classifier over all the logs) in a Group the
    offering Coordinator is a member of."""
    ledger = PerformanceLedger()
    for events in logs.values():
        for event in events.events:
            ledger.evolve(event)
    group_of = {e["eventId"]: name for name, g in logs.items() for e in g.events}
    members = {
        name: {e["payload"]["membership"]["member"]["id"] for e in g.of("membership.changed")}
        for name, g in logs.items()
    }
    offers, cited = [], []
    for offer in (e for g in logs.values() for e in g.of("work.offer.created")):
        for candidate in offer["payload"]["offers"]:
            basis = candidate["selectionBasis"]
            if REGISTRY_RULE not in basis.get("policyRulesApplied", []):
                continue
            offers.append(offer)
            proven = {o.event_id for o in ledger.outcomes(candidate["agentId"])}
            for event_id in basis.get("reliabilityEvidence", []):
                name = group_of.get(event_id)
                member = name is not None and offer["actor"]["id"] in members[name]
                cited.append((event_id, event_id in proven and member))
    report.check(
        "registry.performance_records",
        bool(offers) and bool(cited) and all(ok for _, ok in cited),
        "the Coordinator's offers rest on the Registry's performance records (rule "
        f"{REGISTRY_RULE}), and every Event they cite proves an outcome of that candidate in a "
        "Group the Coordinator is a member of",
        offers=proof(offers[:3]),
        cited=[event_id for event_id, _ in cited[:5]],
    )
