"""The Registry's performance records, pure (mwp.core.organization.performance): each outcome
of a Worker's work, per capability, proven by the Event that records it; never one score.
Every outcome kind is shown recorded from the Group Authority's own Events, and shown not
recorded where the same kind of Event is not that Worker's doing."""

from __future__ import annotations

from typing import Any

from mwp.agent.usage import exhausted
from mwp.core.group.clock import plus_seconds
from mwp.core.organization.performance import (
    OUTCOMES,
    PerformanceLedger,
    PerformanceRecord,
    choose,
    record_of,
)
from tests.unit.group.harness import (
    CAPABILITY,
    COORD,
    W1,
    W2,
    Harness,
    item_id,
    mission_harness,
)

PYTHON = f"{CAPABILITY['id']}@{CAPABILITY['version']}"


def ledger_of(h: Harness) -> PerformanceLedger:
    ledger = PerformanceLedger()
    for event in h.events:
        ledger.evolve(event)
    return ledger


def found(h: Harness, agent: Any = W1) -> dict[str, list[str]]:
    """Per outcome, the kinds of the Events recorded for ``agent``."""
    kinds = {e["eventId"]: e["kind"] for e in h.events}
    by_outcome: dict[str, list[str]] = {}
    for outcome in ledger_of(h).outcomes(agent.id, PYTHON):
        by_outcome.setdefault(outcome.outcome, []).append(kinds[outcome.event_id])
    return by_outcome


def owned(h: Harness, name: str, worker: Any = W1, **contract: Any) -> None:
    h.authorize(name, **contract)
    h.offer(name, worker)
    h.accept(name, worker)


def owner_fails(h: Harness, name: str, worker: Any = W1, **extra: Any) -> None:
    h.submit(
        worker,
        "work.fail",
        h.owner_payload(name, reason="It broke.", failureEvidenceIds=["urn:example:e:1"], **extra),
        workItemId=item_id(name),
    )


def coordinator_fails(h: Harness, name: str, **extra: Any) -> None:
    payload = {"reason": "Not needed.", "failureEvidenceIds": ["urn:example:e:2"], **extra}
    h.submit(COORD, "work.fail", payload, workItemId=item_id(name))


def rejected(h: Harness, name: str, worker: Any = W1) -> None:
    owned(h, name, worker)
    h.start(name, worker)
    h.submit_work(name, worker)
    coordinator_fails(
        h, name, failureCode="RESULT_REJECTED", review=h.review(name, {"tests-pass": "failed"})
    )


def lease_runs_out(h: Harness, name: str) -> None:
    owned(h, name)
    h.start(name)
    lease = h.lease_id(name)
    h.advance(3600)
    assert h.fire(item_id(name), "execution_lease", lease) is not None


# --- completed ---------------------------------------------------------------------------------


def test_an_accepted_result_completes_its_owners_record() -> None:
    h = mission_harness()
    h.verify("a", W1)
    assert found(h) == {"completed": ["work.result.accepted"]}
    assert found(h, W2) == {}


def test_an_item_authorized_before_the_ledger_read_the_log_proves_nothing() -> None:
    h = mission_harness()
    h.verify("a", W1)
    ledger = PerformanceLedger()
    for event in h.events:
        if event["kind"] != "work.authorized":
            ledger.evolve(event)
    assert ledger.outcomes(W1.id) == []


# --- failed, changes requested, budget exceeded ------------------------------------------------


def test_the_owners_failure_is_a_failure_of_its_record() -> None:
    h = mission_harness()
    owned(h, "a")
    h.start("a")
    owner_fails(h, "a")
    assert found(h) == {"failed": ["work.failed"]}


def test_failing_an_item_nobody_owned_is_no_workers_outcome() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    coordinator_fails(h, "a")
    assert found(h) == {}


def test_a_rejected_result_is_a_change_request_not_a_failure() -> None:
    h = mission_harness()
    rejected(h, "a")
    assert found(h) == {"changes_requested": ["work.failed"]}


def test_a_budget_failure_code_or_an_exhausted_budget_block_is_budget_exceeded() -> None:
    h = mission_harness()
    owned(h, "a")
    h.start("a")
    owner_fails(h, "a", failureCode="TOOL_BUDGET_EXHAUSTED")
    owned(h, "b")
    h.start("b")
    resolution = exhausted("toolCalls", "3 of 3 used")
    h.submit(
        W1,
        "work.block",
        h.owner_payload("b", requiredResolution=resolution),
        workItemId=item_id("b"),
    )
    assert found(h) == {"budget_exceeded": ["work.failed", "work.blocked"]}


def test_other_failure_codes_and_blocks_are_not_budget_outcomes() -> None:
    h = mission_harness()
    owned(h, "a")
    h.start("a")
    owner_fails(h, "a", failureCode="TESTS_FAILED")
    owned(h, "b")
    h.start("b")
    h.submit(
        W1, "work.block", h.owner_payload("b", requiredResolution="Creds."), workItemId=item_id("b")
    )
    assert found(h) == {"failed": ["work.failed"]}


# --- deadlines and leases ----------------------------------------------------------------------


def test_a_missed_start_by_deadline_is_a_missed_deadline() -> None:
    h = mission_harness()
    owned(h, "a")
    token = h.view("a")["owner"]["ownershipLeaseId"]
    h.advance(3600)
    assert h.fire(item_id("a"), "start_by", token) is not None
    assert found(h) == {"deadline_missed": ["ext.missionweaveprotocol.core.ownership_expired"]}


def test_a_result_submitted_after_the_contracts_deadline_missed_it() -> None:
    h = mission_harness()
    deadline = plus_seconds(h.now, 600)
    owned(h, "late", deadline=deadline)
    h.start("late", leaseSeconds=3600)
    owned(h, "early", deadline=plus_seconds(h.now, 7200))
    h.start("early", leaseSeconds=3600)
    h.advance(900)
    h.submit_work("late")
    h.submit_work("early")
    assert found(h) == {"deadline_missed": ["work.submitted"]}


def test_an_execution_lease_that_ran_out_is_a_lease_expiry() -> None:
    h = mission_harness()
    lease_runs_out(h, "a")
    assert found(h) == {"lease_expired": ["ext.missionweaveprotocol.core.ownership_expired"]}


def test_a_lease_renewed_in_time_records_nothing() -> None:
    h = mission_harness()
    owned(h, "a")
    h.start("a")
    lease = h.lease_id("a")
    h.advance(30)
    assert h.fire(item_id("a"), "execution_lease", lease) is None
    assert found(h) == {}


# --- reassigned --------------------------------------------------------------------------------


def test_an_item_offered_again_after_its_owner_lost_it_is_a_reassignment() -> None:
    h = mission_harness()
    lease_runs_out(h, "a")
    h.submit(COORD, "mission.renew_coordinator", {})
    h.offer("a", W2)  # fences W1's expired ownership
    owned(h, "b")
    h.start("b")
    owner_fails(h, "b")
    h.offer("b", W2)
    assert found(h)["reassigned"] == ["work.offer.created", "work.offer.created"]
    assert "reassigned" not in found(h, W2)


def test_an_offer_fencing_an_expired_owner_before_its_timer_fired_reassigns_it() -> None:
    h = mission_harness()
    owned(h, "a")
    h.start("a")
    h.advance(3600)  # the lease ran out; its timer has not fired
    h.submit(COORD, "mission.renew_coordinator", {})
    offered = h.offer("a", W2)
    (event,) = [e for e in offered.events if e["kind"] == "work.offer.created"]
    assert event["payload"]["fencedOwnership"]["agentId"] == W1.id
    assert found(h) == {"reassigned": ["work.offer.created"]}


def test_a_first_offer_or_one_after_an_unowned_failure_reassigns_nothing() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    coordinator_fails(h, "a")
    h.offer("a", W1, W2)
    assert found(h) == {}
    assert found(h, W2) == {}


# --- the ledger and the record -----------------------------------------------------------------


def test_replaying_the_log_changes_nothing_and_records_are_per_capability() -> None:
    h = mission_harness()
    h.verify("a", W1)
    rejected(h, "b")
    ledger = ledger_of(h)
    before = ledger.outcomes(W1.id)
    for event in h.events:
        assert ledger.evolve(event) == []
    assert ledger.outcomes(W1.id) == before
    assert ledger.capabilities(W1.id) == [PYTHON]
    assert ledger.outcomes(W1.id, "acme.software.rust@1.0.0") == []


def test_a_record_counts_every_outcome_and_cites_only_what_its_reader_may_see() -> None:
    h = mission_harness()
    h.verify("a", W1)
    rejected(h, "b")
    outcomes = ledger_of(h).outcomes(W1.id, PYTHON)
    accepted = [o.event_id for o in outcomes if o.outcome == "completed"]
    record = record_of(outcomes, W1.id, PYTHON, lambda o: o.outcome == "completed")
    assert record.counts == {**dict.fromkeys(OUTCOMES, 0), "completed": 1, "changes_requested": 1}
    assert record.cited["completed"] == tuple(accepted)
    assert record.cited["changes_requested"] == ()
    assert PerformanceRecord.from_json(record.to_json()) == record


def test_the_default_policy_leaves_out_a_doubtful_record_and_orders_by_balance() -> None:
    def record(agent: str, completed: int, failed: int) -> PerformanceRecord:
        counts = {**dict.fromkeys(OUTCOMES, 0), "completed": completed, "failed": failed}
        return PerformanceRecord(agent, PYTHON, counts, {})

    records = {"a": record("a", 0, 2), "b": record("b", 1, 0), "c": record("c", 3, 1)}
    assert choose(["a", "b", "c", "d"], records) == ["c", "b", "d"]
    assert choose(["a"], records) == ["a"]  # alone, still offered
    assert choose(["d", "e"], {}) == ["d", "e"]
