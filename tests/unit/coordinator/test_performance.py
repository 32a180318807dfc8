"""Performance records a Coordinator keeps from the logs it reads (mwp.coordinator.performance,
its fallback when the gateway serves no Registry records): per Worker and capability, the
Events of each outcome; its offers leave out a Worker whose record is mostly setbacks, order
the rest by record, and cite the Events they rest on."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.coordinator.performance import CITED, REGISTRY_RULE, RULE, PerformanceRecords
from mwp.coordinator.reconcile import selection_basis
from mwp.core.organization.performance import OUTCOMES, choose
from tests.unit.coordinator.test_projection import runtime
from tests.unit.group.harness import COORD, W1, W2, Harness, item_id, mission_harness


def rejected(h: Harness, name: str, worker: Any) -> None:
    h.authorize(name)
    h.offer(name, worker)
    h.accept(name, worker)
    h.start(name, worker)
    h.submit_work(name, worker)
    h.submit(
        COORD,
        "work.fail",
        {
            "reason": "The tests fail.",
            "failureEvidenceIds": [e["evidenceId"] for e in h.view(name)["submissionEvidence"]],
            "failureCode": "RESULT_REJECTED",
            "review": h.review(name, {"tests-pass": "failed"}),
        },
        workItemId=item_id(name),
    )


def records_of(h: Harness, tmp: Any) -> PerformanceRecords:
    rt = runtime([], tmp)
    for event in h.events:
        rt.follow(event)
    return rt.performance


def test_outcomes_are_recorded_per_worker_and_capability_with_their_events(tmp_path: Any) -> None:
    h = mission_harness()
    h.verify("a", W1)
    rejected(h, "b", W2)
    rejected(h, "c", W2)

    records = records_of(h, tmp_path)

    capability = "acme.software.python@2.1.0"
    assert records.record(W1.id, capability).counts["completed"] == 1
    assert records.record(W2.id, capability).counts == {
        **dict.fromkeys(OUTCOMES, 0),
        "changes_requested": 2,
        "reassigned": 0,
    }
    accepted = [e["eventId"] for e in h.events if e["kind"] == "work.result.accepted"]
    assert records.record(W1.id, capability).evidence(CITED) == accepted
    failed = [e["eventId"] for e in h.events if e["kind"] == "work.failed"]
    assert records.record(W2.id, capability).evidence(CITED) == failed
    # W2's record is mostly setbacks: left out while W1 can take it; alone, still offered.
    assert choose([W2.id, W1.id], records.records([W2.id, W1.id], capability)) == [W1.id]
    assert choose([W2.id], records.records([W2.id], capability)) == [W2.id]
    assert records.record("urn:example:agent:nobody", capability).counts["completed"] == 0


@pytest.mark.parametrize("rule", [RULE, REGISTRY_RULE])
def test_an_offer_citing_the_record_is_accepted_by_the_authority(tmp_path: Any, rule: str) -> None:
    h = mission_harness()
    h.verify("a", W1)
    records = records_of(h, tmp_path)
    cited = records.record(W1.id, "acme.software.python@2.1.0").evidence(CITED)
    basis = selection_basis(("acme.software.python", "2.1.0"), h.now, cited, [rule])
    h.authorize("next")
    offered = h.offer("next", W1, candidates=[{"agentId": W1.id, "selectionBasis": basis}])
    (event,) = [e for e in offered.events if e["kind"] == "work.offer.created"]
    chosen = event["payload"]["offers"][0]["selectionBasis"]
    assert chosen["reliabilityEvidence"] == cited
    assert rule in chosen["policyRulesApplied"]
