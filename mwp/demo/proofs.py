"""Checks the demo proves from the Groups' signed logs once both Missions are approved: how
the plan was shaped, reviewed and revised, how the Workers were scheduled, restarted and
admitted late, and that the owner's Approval is the owner's signed document."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mwp.core.scheduler.group_queue import GroupQueue, snapshot_json
from mwp.core.scheduler.metadata import scheduling_metadata
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, VerificationError, verify_value
from mwp.demo import cast
from mwp.demo.coordination import prove_child, prove_selection
from mwp.demo.groups import GroupEvents, proof
from mwp.demo.report import Report

Json = dict[str, Any]
LEASE_REVOKED = "ext.missionweaveprotocol.core.execution_lease_revoked"
OWNERSHIP_EXPIRED = "ext.missionweaveprotocol.core.ownership_expired"
USAGE_RECORDED = "ext.missionweaveprotocol.core.resource_usage_recorded"
PUBLISHED = "ext.missionweaveprotocol.core.context_package_published"


@dataclass(frozen=True)
class Injected:
    """What the scenes did, for the checks to find in the logs."""

    killed: str  # the tester's WorkItem when it was killed
    killed_at: float  # when
    tester_status: str  # the restarted tester's status (as `mwp agent status --json` prints)
    # The sequence of the small Group's log its Scheduler had applied when that was read.
    tester_rebuilt_to: int
    replaced: Json  # mission.coordinator.assigned of the re-appointed Coordinator
    expired: str  # the review the killed reviewer held
    preempted: str  # the developer's integration run asked to preempt
    offline: str  # the developer's revision run cut off from the gateway
    disconnection: Json  # the gateway process killed and started again
    arrived_at: float  # when the hotfix Mission was created (and the small Group capped)


def prove(
    report: Report, logs: dict[str, GroupEvents], evidence: RegistryEvidence, injected: Injected
) -> None:
    """Every check of this module, on the ``full`` and ``small`` Missions' logs."""
    full, small = logs["full"], logs["small"]
    _plan(report, full, small)
    _redelivery(report, logs)
    _reviews(report, logs)
    _revision(report, full)
    _approvals(report, logs, evidence)
    _restart(report, logs, injected)
    _slots(report, logs)
    _late_joiner(report, full)
    _preemption(report, full, injected.preempted, "developer")
    _reassignment(report, full, injected.expired)
    _disconnection(report, full, injected.offline, injected.disconnection)
    _priority(report, logs, injected.arrived_at)
    prove_child(report, small, logs["child"])
    prove_selection(report, logs)


def _plan(report: Report, full: GroupEvents, small: GroupEvents) -> None:
    authorized = full.of("work.authorized")[: len(cast.STAGES)]
    contracts = [e["payload"]["workItem"]["contract"] for e in authorized]
    stage_of = {
        e["workItemId"]: stage
        for e in authorized
        for stage in cast.STAGES
        if e["payload"]["workItem"]["contract"]["goal"].startswith(cast.goal_of(stage, ""))
    }
    graph = {
        stage_of.get(e["workItemId"]): sorted(
            str(stage_of.get(d))
            for d in e["payload"]["workItem"]["contract"]["dependencyWorkItemIds"]
        )
        for e in authorized
    }
    report.check(
        "coordinator.plans_a_graph",
        len(authorized) == len(cast.STAGES)
        and graph == {stage: sorted(d) for stage, d in cast.DEPENDS.items()}
        and all(c["budget"] and c["acceptanceCriteria"] for c in contracts),
        "the Coordinator planned the full Mission as a graph of five WorkItems (requirements, "
        "implementation, then testing and code review side by side, then integration), each "
        "depending on the stages before it, each with a Work Contract, a budget and "
        "acceptance criteria",
        events=proof(authorized),
        graph=graph,
    )
    report.check(
        "missions.concurrent",
        _overlap(_span(full), _span(small)),
        "the two Missions ran at the same time in one Organization",
        full=[e["occurredAt"] for e in _ends(full)],
        small=[e["occurredAt"] for e in _ends(small)],
    )


def _redelivery(report: Report, logs: dict[str, GroupEvents]) -> None:
    """At-least-once delivery: the tester's Scheduler queue of each Group fed every Event of
    its signed log twice (each redelivered at once, then the whole log again, as after a
    reconnection) ends exactly as fed once."""
    tester = cast.agent_id("tester")
    same = {}
    for name, events in logs.items():
        once, twice = GroupQueue(name, tester), GroupQueue(name, tester)
        for event in events.events:
            once.apply(scheduling_metadata(event))
            twice.apply(scheduling_metadata(event))
            twice.apply(scheduling_metadata(event))
        for event in events.events:
            twice.apply(scheduling_metadata(event))
        same[name] = snapshot_json(once) == snapshot_json(twice) and once.cursor == len(
            events.events
        )
    report.check(
        "failure.duplicate_event_delivery",
        all(same.values()),
        "every Event of both Groups delivered twice over, and the whole log once more, "
        "leaves the tester's Scheduler queues exactly as one delivery does",
        groups=same,
        events={name: len(events.events) for name, events in logs.items()},
    )


def _reviews(report: Report, logs: dict[str, GroupEvents]) -> None:
    # Each Group's Coordinator reviewed its results (a child's approval verifies its item).
    coordinators = {name: cast.agent_id("steward" if name == "child" else "lead") for name in logs}
    accepted = [
        (name, e)
        for name, g in logs.items()
        for e in g.of("work.result.accepted")
        if "childMissionId" not in e["payload"]
    ]
    cited = all(
        e["payload"]["review"]["decision"] == "accepted"
        and all(c["evidenceIds"] and c["result"] == "passed" for c in _criteria(e))
        for _, e in accepted
    )
    report.check(
        "coordinator.reviews_evidence",
        bool(accepted)
        and cited
        and all(e["actor"]["id"] == coordinators[name] for name, e in accepted),
        "every result was accepted by the Coordinator with a review record citing, per "
        "criterion, the Evidence it read",
        accepted=len(accepted),
    )


def _criteria(accepted: Json) -> list[Json]:
    criteria: list[Json] = accepted["payload"]["review"]["criteria"]
    return criteria


def _revision(report: Report, full: GroupEvents) -> None:
    requested = full.first("mission.changes_requested")
    submissions = full.of("mission.submitted_for_approval")
    after = requested["sequence"] if requested else None
    later = [e for e in full.of("work.authorized") if after and e["sequence"] > after]
    verified = {e["workItemId"] for e in full.of("work.result.accepted")}
    revisions = [s["payload"]["missionRevision"] for s in submissions]
    report.check(
        "coordinator.replans_on_changes",
        requested is not None
        and len(later) == 2
        and all(e["workItemId"] in verified for e in later)
        and len(submissions) == 2
        and revisions[1] > revisions[0],
        "after the owner's change request the Coordinator planned a revision and its tests, "
        "had both verified and submitted a later revision of the Mission",
        events=proof([requested, *later, *submissions]),
        revisions=revisions,
    )


def _approvals(report: Report, logs: dict[str, GroupEvents], evidence: RegistryEvidence) -> None:
    verified: list[str] = []
    for name, events in logs.items():
        approved = events.first("mission.approved")
        if approved is None:
            continue
        try:
            verify_value(approved["payload"]["approval"], PROFILES["approval"], evidence)
        except VerificationError:
            continue
        owner = cast.agent_id("lead") if name == "child" else cast.OWNER  # who owns it
        if approved["payload"]["approval"]["approver"]["id"] == owner:
            verified.append(name)
    report.check(
        "human.approval_signed",
        sorted(verified) == sorted(logs),
        "each Mission's mission.approved carries its MissionOwner's Approval (the human's; "
        "the lead's for the child), a signed document that verifies against the Registry",
        missions=verified,
    )


def _restart(report: Report, logs: dict[str, GroupEvents], injected: Injected) -> None:
    killed_item, tester_status = injected.killed, injected.tester_status
    tester = cast.agent_id("tester")
    events = next((g for g in logs.values() if g.first("work.authorized", killed_item)), None)
    chain: list[Json | None] = []
    revoked: Json | None = None
    if events is not None:
        started = events.of("work.started", killed_item)
        revoked = events.first(LEASE_REVOKED, killed_item)
        chain = [started[0] if started else None, revoked, started[-1] if started else None]
        chain.append(events.first("work.submitted", killed_item))
    ok = (
        len(chain) == 4
        and all(chain)
        and chain[0] is not chain[2]
        and all(e is not None and e["actor"]["id"] == tester for e in (chain[2], chain[3]))
    )
    status = json.loads(tester_status) if tester_status.startswith("{") else {}
    report.check(
        "failure.worker_restart",
        ok,
        "the tester, killed mid-run, came back under a new Session: the Authority revoked the "
        "dead runtime's execution lease and the new runtime started the WorkItem again and "
        "submitted it",
        events=proof(chain),
    )
    member = sorted(
        name
        for name, events in logs.items()
        if any(
            e["payload"]["membership"]["member"]["id"] == tester and _at(e) < injected.killed_at
            for e in events.of("membership.changed")
        )
    )
    # Read after its Scheduler applied the revocation of the dead runtime's lease: what it
    # shows then is the new runtime's, not what the dead one left.
    rebuilt = revoked is not None and injected.tester_rebuilt_to >= int(revoked["sequence"])
    report.check(
        "scheduling.queues_rebuilt",
        bool(member)
        and rebuilt
        and int(status.get("groups") or 0) >= len(member)
        and int(status.get("running") or 0) + int(status.get("queued") or 0) >= 1,
        "the restarted tester's Scheduler was rebuilt from the gateway's redelivery: a queue "
        "for each Group it was a member of when it died, holding its work again once it had "
        "taken the revocation of the dead runtime's lease",
        memberOf=member,
        appliedThrough=injected.tester_rebuilt_to,
        revokedAt=revoked["sequence"] if revoked is not None else None,
        groups=status.get("groups"),
        running=status.get("running"),
        queued=status.get("queued"),
        sessionEpoch=status.get("sessionEpoch"),
    )


def _slots(report: Report, logs: dict[str, GroupEvents]) -> None:
    tester = cast.agent_id("tester")
    runs = []
    for events in logs.values():
        last = {e["workItemId"]: e for e in events.by(tester, ["work.started"])}  # the run kept
        for item, started in last.items():
            ended = events.first("work.submitted", item)
            if ended is not None:
                runs.append((started, ended))
    overlapping = [
        (a, b)
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a[0]["groupId"] != b[0]["groupId"] and _overlap(_times(a), _times(b))
    ]
    report.check(
        "scheduling.several_slots",
        bool(overlapping),
        "the tester ran WorkItems of both Groups at the same time in its two execution slots",
        runs=[proof(list(pair[0]) + list(pair[1])) for pair in overlapping[:1]],
    )


def _late_joiner(report: Report, full: GroupEvents) -> None:
    tester = cast.agent_id("tester")
    joined = next(
        (
            e
            for e in full.of("membership.changed")
            if e["payload"]["membership"]["member"]["id"] == tester
        ),
        None,
    )
    items = [e["workItemId"] for e in full.of("work.authorized")]
    testing = items[list(cast.STAGES).index("testing")] if len(items) >= len(cast.STAGES) else ""
    dependency = full.first("work.result.accepted", items[1] if len(items) > 1 else "")
    package = full.first(PUBLISHED, testing)
    cited = (package or {}).get("payload", {}).get("contextPackage", {}).get("sourceEventRange", {})
    started = full.first("work.started", testing)
    report.check(
        "context.late_joiner",
        joined is not None
        and dependency is not None
        and joined["sequence"] > dependency["sequence"]
        and dependency["eventId"] in cited.get("eventIds", [])
        and started is not None
        and started["actor"]["id"] == tester,
        "the tester joined the full Mission's Group after the implementation was verified: "
        "the offer's Context Package cited the testing contract and that verification, and the "
        "tester started the testing stage (it sees nothing from before it joined otherwise)",
        events=proof([dependency, package, joined, started]),
    )


def _preemption(report: Report, full: GroupEvents, item: str, name: str) -> None:
    worker = cast.agent_id(name)
    started = full.of("work.started", item)
    checkpointed = full.first("work.checkpointed", item)
    submitted = full.first("work.submitted", item)
    resumed = [
        e
        for e in full.of("work.progressed", item)
        if len(started) > 1 and e["sequence"] > started[-1]["sequence"]
    ]
    report.check(
        "scheduling.checkpoint_preemption",
        len(started) == 2
        and checkpointed is not None
        and submitted is not None
        and started[0]["sequence"] < checkpointed["sequence"] < started[1]["sequence"]
        and all(e["actor"]["id"] == worker for e in (*started, submitted))
        and len(resumed) < cast.CHECKPOINTS,
        f"asked to preempt, the {name} stopped its run at its next checkpoint, queued the "
        "WorkItem again and resumed it from that checkpoint (fewer steps left to run)",
        events=proof([started[0] if started else None, checkpointed, *started[1:], submitted]),
        stepsAfterResume=len(resumed),
    )


def _reassignment(report: Report, full: GroupEvents, item: str) -> None:
    reviewer, analyst = cast.agent_id("reviewer"), cast.agent_id("analyst")
    expired = full.first(OWNERSHIP_EXPIRED, item)
    offers = full.of("work.offer.created", item)
    again = offers[-1] if len(offers) > 1 else None
    accepted = full.of("work.offer.accepted", item)
    started = full.of("work.started", item)
    submitted = full.first("work.submitted", item)
    verified = full.first("work.result.accepted", item)
    report.check(
        "failure.lease_expiry",
        expired is not None
        and expired["payload"].get("agentId") == reviewer
        and expired["payload"].get("reason") == "execution_lease_expired",
        "the reviewer, killed mid-review and left down, stopped renewing its Execution Lease: "
        "the Authority's timer recorded the ownership expired and fenced it",
        events=proof([started[0] if started else None, expired]),
    )
    fenced = (again or {}).get("payload", {}).get("fencedOwnership") or {}
    report.check(
        "failure.reassignment",
        again is not None
        and fenced.get("agentId") == reviewer
        and [o["agentId"] for o in again["payload"]["offers"]] == [analyst]
        and bool(accepted)
        and accepted[-1]["actor"]["id"] == analyst
        and submitted is not None
        and submitted["actor"]["id"] == analyst
        and verified is not None,
        "the Coordinator offered the abandoned review to the analyst (fencing the reviewer's "
        "ownership in the same transition); the analyst took it, submitted it and it was "
        "verified",
        events=proof([again, accepted[-1] if accepted else None, submitted, verified]),
    )
    resumed = [
        e
        for e in full.of("work.progressed", item)
        if started and e["sequence"] > started[-1]["sequence"]
    ]
    report.check(
        "context.resumed_from_checkpoint",
        len(started) >= 2
        and started[-1]["actor"]["id"] == analyst
        and len(resumed) < cast.CHECKPOINTS,
        "the analyst resumed the review from the reviewer's last checkpoint, which the offer's "
        "Context Package cited (fewer steps left to run)",
        stepsAfterResume=len(resumed),
        events=proof(started[-1:]),
    )


def _disconnection(report: Report, full: GroupEvents, item: str, cut: Json) -> None:
    developer = cast.agent_id("developer")
    usage = [
        e
        for e in full.of(USAGE_RECORDED, item)
        if "reconciliation" in e["payload"] and e["actor"]["id"] == developer
    ]
    after = [
        e
        for e in full.of("work.checkpointed", item)
        if usage and e["sequence"] == usage[0]["sequence"] + 1
    ]
    verified = full.first("work.result.accepted", item)
    report.check(
        "failure.group_disconnection",
        bool(usage) and bool(after) and verified is not None,
        "with the gateway killed mid-run, the developer's revision went on offline and buffered "
        "its checkpoint; reconnected under a new Session it reconciled them (the offline usage "
        "charged, then the checkpoint, in one decision) and the revision was verified",
        gateway=cut,
        events=proof([*usage[:1], *after[:1], verified]),
    )


def _priority(report: Report, logs: dict[str, GroupEvents], arrived_at: float) -> None:
    tester = cast.agent_id("tester")
    small, hotfix = logs["small"], logs["hotfix"]
    started = hotfix.first("work.started")
    tests = [e["workItemId"] for e in small.of("work.authorized")][1:]
    waiting = [  # the small tests the tester had taken before the hotfix arrived
        item
        for item in tests
        if (accepted := small.first("work.offer.accepted", item)) is not None
        and _at(accepted) < arrived_at
    ]
    overtaken = [
        item
        for item in waiting
        if started is not None and _at(small.of("work.started", item)[-1]) > _at(started)
    ]
    report.check(
        "scheduling.high_priority_arrival",
        started is not None and started["actor"]["id"] == tester and bool(overtaken),
        "the hotfix, arriving while the tester held a backlog of the small Mission's tests, "
        "was started ahead of small tests the tester had taken before it (its Group weighted "
        "4, the small Group capped at one slot)",
        hotfix=proof([started]),
        overtaken=overtaken,
    )


# --- time ----------------------------------------------------------------------------------------


def _ends(events: GroupEvents) -> list[Json]:
    return [events.events[0], events.events[-1]]


def _span(events: GroupEvents) -> tuple[float, float]:
    first, last = _ends(events)
    return _at(first), _at(last)


def _times(run: Iterable[Json]) -> tuple[float, float]:
    started, ended = run
    return _at(started), _at(ended)


def _at(event: Json) -> float:
    return datetime.fromisoformat(event["occurredAt"]).timestamp()


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]
