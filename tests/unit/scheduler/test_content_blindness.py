"""The Scheduler is blind to Mission content (MWP-WRK-028): what it is handed of each Event
(:func:`scheduling_metadata`) and all it holds (queues, entries, offers, disclosures, dispatch
contexts) carry scheduling metadata only, never the goal, the rest of the Work Contract, a
Conversation, a Message, progress, a block or failure reason, a review or a Context Package."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mwp.core.scheduler import Admitted, Scheduler
from mwp.core.scheduler.group_queue import SCHEDULED_KINDS, snapshot_json
from mwp.core.scheduler.metadata import SHAPES, scheduling_metadata
from mwp.core.scheduler.model import TERMS_MEMBERS
from tests.unit.group.harness import W1, W2, W3
from tests.unit.group.test_snapshot_replay import rich_history
from tests.unit.scheduler.builders import GroupLog, at, contract, profile

Json = dict[str, Any]
SECRET = "CONFIDENTIAL-"  # every piece of Mission content below carries it


def _confidential_log() -> GroupLog:
    """One Group's Events in the Authority's shapes, Mission content in every place it goes."""
    log = GroupLog("g1")
    for item in ("a", "b", "c"):
        doc = {
            **contract(goal=f"{SECRET}goal of {item}"),
            "title": f"{SECRET}title",
            "description": f"{SECRET}description",
            "acceptanceCriteria": [{"criterionId": "done", "description": f"{SECRET}crit"}],
            "inputArtifacts": [],
        }
        event = log.authorized(item, doc)
        event["payload"]["conversation"] = {"title": f"{SECRET}conversation"}
        event["payload"]["workItem"]["title"] = f"{SECRET}item title"
    for item in ("a", "b", "c"):
        offer = log.offered(item)
        offer["payload"]["contextPackageId"] = f"urn:example:package:{item}"
        offer["payload"]["offers"][0]["note"] = f"{SECRET}offer note"
    for item in ("a", "b", "c"):
        log.accepted(item, when=1)["payload"]["ownershipLease"] = {"purpose": f"{SECRET}lease"}
    log.started("a", when=2)
    log.progressed("a", "urn:example:checkpoint:a", when=3)["payload"]["progress"] = {
        "currentPhase": f"{SECRET}phase"
    }
    log.checkpointed("a", "urn:example:checkpoint:a2", when=4)["payload"]["progress"] = {
        "nextCheckpoint": f"{SECRET}next"
    }
    log.started("b", when=5)
    log.blocked("b", when=6)["payload"]["requiredResolution"] = f"{SECRET}resolution"
    log.unblocked("b", when=7)
    log.started("c", when=8)
    log.submitted("c", when=9)["payload"]["submission"] = {"summary": f"{SECRET}summary"}
    log.result_accepted("c", when=10)["payload"]["review"] = {"comments": f"{SECRET}review"}
    log.granted("a", when=11)["payload"]["approval"] = {"comments": f"{SECRET}approval"}
    log.failed("b", when=12)["payload"]["reason"] = f"{SECRET}failure"
    log.add("message.posted", "a", {"message": {"text": f"{SECRET}message"}}, 13)
    return log


def _strings(value: Any, seen: set[int] | None = None) -> Iterator[str]:
    """Every string reachable from ``value`` (objects through their attributes and slots)."""
    seen = set() if seen is None else seen
    if isinstance(value, str):
        yield value
        return
    if id(value) in seen or value is None or isinstance(value, int | float | bool):
        return
    seen.add(id(value))
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, seen)
            yield from _strings(v, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _strings(v, seen)
    elif not callable(value):
        slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
        members = [getattr(value, s) for s in slots if hasattr(value, s)]
        for v in [*members, *getattr(value, "__dict__", {}).values()]:
            yield from _strings(v, seen)


def _leaks(value: Any) -> list[str]:
    return [s for s in _strings(value) if SECRET in s]


def _fed(events: list[Json], agent_id: str = "agent-a") -> Scheduler:
    sched = Scheduler(profile(agent_id=agent_id))
    sched.join_group("g1", "mission-g1")
    for event in events:
        sched.apply("g1", event)
    return sched


def test_the_scheduler_is_handed_no_mission_content() -> None:
    log = _confidential_log()
    assert any(_leaks(event) for event in log.events)  # the content is there to leak
    handed = [scheduling_metadata(event) for event in log.events]
    assert _leaks(handed) == []
    # What it is handed of a kind it does not read is the kind, sequence and WorkItem only.
    assert handed[-1] == {
        "kind": "message.posted",
        "sequence": len(log.events),
        "workItemId": "a",
        "payload": {},
    }
    terms = handed[0]["payload"]["workItem"]["contract"]
    assert set(terms) == TERMS_MEMBERS
    assert SHAPES.keys() == SCHEDULED_KINDS


def test_the_metadata_projects_the_queues_the_whole_events_project() -> None:
    """Nothing a Scheduler reads is lost: on the Authority's own Events of a Group that holds
    nearly every kind, and on the confidential Group, both feeds build the same queues."""
    real = [e for e in rich_history().events if e.get("workItemId")]
    projected = 0
    for events, agents in (
        (real, (W1.id, W2.id, W3.id)),
        (_confidential_log().events, ("agent-a",)),
    ):
        for agent_id in agents:
            whole, handed = _fed([], agent_id), _fed([], agent_id)
            for event in events:  # after every Event, the same queue
                whole.apply("g1", event)
                handed.apply("g1", scheduling_metadata(event))
                snapshot = snapshot_json(whole.queue("g1"))
                assert snapshot == snapshot_json(handed.queue("g1")), event["kind"]
                projected += len(snapshot["entries"])
    assert projected  # items were offered to and owned by these agents on the way


def test_the_scheduler_s_state_holds_no_mission_content_even_fed_whole_events() -> None:
    log = _confidential_log()
    sched = _fed(log.events[:6])  # authorized and offered: offers pending
    for item in ("a", "b", "c"):
        decision = sched.admit("g1", item, at(0))
        assert isinstance(decision, Admitted)
        assert _leaks(decision.disclosure.schedule_estimate()) == []
    for event in log.events[6:]:
        sched.apply("g1", event)
    sched.join_group("g2", "mission-g2")
    other = GroupLog("g2")
    for event in (other.authorized("x", contract()), other.offered("x"), other.accepted("x")):
        sched.apply("g2", event)
    dispatched = sched.next_start()
    assert dispatched is not None
    assert _leaks(dispatched) == []
    disclosures = [d.schedule_estimate() for d in sched.material_changes("g2", at(20))]
    assert _leaks(sched) == [] and _leaks(disclosures) == []
    assert SECRET not in json.dumps(snapshot_json(sched.queue("g1")))
