"""Ownership and lease fencing (spec 11.3, 11.5; MWP-WRK-013/014/019) and durable timers."""

from __future__ import annotations

from mwp.core.errors import ErrorCode
from mwp.core.group import OWNERSHIP_EXPIRED_KIND, replay
from mwp.core.group.clock import plus_seconds
from mwp.core.group.execution_lease import LEASE_REVOKED_KIND
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    W1,
    W2,
    evidence,
    fingerprint,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)

RENEW = "ext.missionweaveprotocol.core.execution_lease_renew"


def _submission(h: object, **owner: object) -> dict[str, object]:
    return {**owner, "artifactHashes": [ARTIFACT_A], "evidence": evidence()}


def test_given_a_new_lease_when_a_command_carries_the_older_lease_id_then_lease_expired() -> None:
    h = mission_harness()
    h.drive("a", "active")
    old = h.lease_id("a")
    h.submit(
        W1, "work.checkpoint", h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    h.start("a", W1)
    assert h.lease_id("a") != old and h.epoch("a") == 1  # same Ownership Epoch

    for kind, payload in (
        (RENEW, {}),
        ("work.submit", _submission(h)),
        ("work.block", {"requiredResolution": "x"}),
        ("work.checkpoint", {"progress": progress()}),
        ("work.fail", {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]}),
    ):
        h.reject(
            ErrorCode.WORK_LEASE_EXPIRED,
            W1,
            kind,
            {"ownershipEpoch": 1, "leaseId": old, **payload},
            workItemId=item_id("a"),
        )
    h.submit_work("a")


def test_given_an_expired_lease_before_its_timer_fires_then_lease_expired() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.advance(300)  # the default Execution Lease is 300 s
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        W1,
        "work.submit",
        _submission(h, **h.owner_payload("a")),
        workItemId=item_id("a"),
    )
    h.reject(ErrorCode.WORK_LEASE_EXPIRED, W1, RENEW, h.owner_payload("a"), workItemId=item_id("a"))


def test_given_an_active_lease_then_its_timer_is_listed_and_moves_on_renewal() -> None:
    h = mission_harness()
    h.drive("a", "active")
    [timer] = h.authority.timers()
    assert (timer.kind, timer.token) == ("execution_lease", h.lease_id("a"))
    assert timer.due_at == plus_seconds(h.now, 300)

    h.advance(200)
    h.submit(W1, RENEW, h.owner_payload("a"), workItemId=item_id("a"))
    [renewed] = h.authority.timers()
    assert renewed.token == timer.token and renewed.due_at == plus_seconds(h.now, 300)

    # The timer for the old due time fires late: the lease was renewed, so it is stale.
    h.advance(100)
    assert h.fire(item_id("a"), "execution_lease", timer.token) is None


def test_given_an_expired_lease_when_its_timer_fires_then_owner_fenced_and_item_reofferable() -> (
    None
):
    h = mission_harness()
    h.drive("a", "active")
    lease = h.lease_id("a")
    h.advance(300)
    sequence = h.authority.sequence

    outcome = h.fire(item_id("a"), "execution_lease", lease)

    assert outcome is not None
    [event] = outcome.events
    assert event["kind"] == OWNERSHIP_EXPIRED_KIND and event["sequence"] == sequence + 1
    assert event["cause"]["type"] == "timer" and "commandHash" not in event
    assert event["payload"]["reason"] == "execution_lease_expired"
    assert outcome.receipt.first_sequence == sequence + 1 and not outcome.duplicate
    view = h.view("a")
    assert view["state"] == "active" and view["ownerFencedReason"] == "execution_lease_expired"
    assert h.authority.timers() == []
    assert h.authority.work_item_search_attributes(item_id("a"))["Owner"] == ""
    # The same timer firing again is stale.
    assert h.fire(item_id("a"), "execution_lease", lease) is None

    # A late result from the fenced owner can never complete the item ...
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        "work.submit",
        _submission(h, ownershipEpoch=1, leaseId=lease),
        workItemId=item_id("a"),
    )
    # ... and the Coordinator re-offers under a higher Ownership Epoch.
    h.offer("a", W2)
    h.accept("a", W2)
    assert h.view("a")["owner"]["ownershipEpoch"] == 2
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.start("a", W2)
    h.submit_work("a", W2)
    h.accept_result("a")
    assert h.view("a")["state"] == "verified"


def test_given_an_expired_owner_without_a_timer_when_re_offered_then_fenced_first() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.offer",
        {"candidates": [], "expiresAt": plus_seconds(h.now, 60)},
        workItemId=item_id("a"),
    )
    h.advance(301)
    outcome = h.offer("a", W2)
    assert outcome.events[-1]["payload"]["fencedOwnership"] == {
        "agentId": W1.id,
        "ownershipEpoch": 1,
    }
    assert "owner" not in h.view("a")


def test_given_a_missed_start_by_deadline_then_fenced_and_reoffered() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    [timer] = h.authority.timers()
    assert timer.kind == "start_by"
    h.advance(60)
    assert h.fire(item_id("a"), "start_by", timer.token) is None  # not due yet
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.offer",
        {"candidates": [], "expiresAt": plus_seconds(h.now, 60)},
        workItemId=item_id("a"),
    )
    h.advance(3600)
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )

    outcome = h.fire(item_id("a"), "start_by", timer.token)

    assert outcome is not None and outcome.events[0]["payload"]["reason"] == "start_by_missed"
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.submit(COORD, "mission.renew_coordinator", {})  # an hour passed: the lease lapsed
    h.offer("a", W1)  # the same Worker may get it again, under a new epoch
    h.accept("a", W1)
    assert h.epoch("a") == 2


def test_given_an_expired_blocked_lease_then_fenced_and_unblock_reopens() -> None:
    h = mission_harness()
    h.drive("a", "blocked")
    [timer] = h.authority.timers()
    assert timer.kind == "blocked_lease"
    h.advance(3600)
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        W1,
        "work.unblock",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )

    assert h.fire(item_id("a"), "blocked_lease", timer.token) is not None
    assert h.fire(item_id("a"), "execution_lease", timer.token) is None  # wrong kind: stale

    h.submit(COORD, "mission.renew_coordinator", {})
    outcome = h.submit(COORD, "work.unblock", {}, workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["nextState"] == "open"
    view = h.view("a")
    assert view["state"] == "open" and "owner" not in view
    h.offer("a", W2)


def test_given_a_blocked_lease_lapsed_without_timer_when_coordinator_unblocks_then_open() -> None:
    h = mission_harness()
    h.drive("a", "blocked")
    h.advance(3600)
    h.submit(COORD, "mission.renew_coordinator", {})
    outcome = h.submit(COORD, "work.unblock", {}, workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["fencedOwnership"]["ownershipEpoch"] == 1
    assert h.view("a")["state"] == "open"


def test_given_a_newer_session_then_the_old_lease_is_revoked_but_may_be_released() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.sessions[W1.id] = 2  # the Worker's runtime restarted
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED,
        W1,
        "work.submit",
        _submission(h, **h.owner_payload("a")),
        workItemId=item_id("a"),
    )
    h.reject(ErrorCode.WORK_LEASE_EXPIRED, W1, RENEW, h.owner_payload("a"), workItemId=item_id("a"))
    # The new runtime returns the item to queued, then starts it under a new lease.
    h.submit(
        W1, "work.checkpoint", h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    h.start("a", W1)
    assert h.view("a")["executionLease"]["sessionEpoch"] == 2


def test_stale_or_foreign_timers_record_nothing() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.advance(1000)
    assert h.fire(item_id("a"), "execution_lease", "urn:example:lease:other") is None
    assert h.fire(item_id("ghost"), "execution_lease", "x") is None
    assert h.fire(item_id("a"), "start_by", h.lease_id("a")) is None
    h.submit(COORD, "mission.renew_coordinator", {})
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("a"))
    assert h.fire(item_id("a"), "execution_lease", h.events[-1]["eventId"]) is None


def test_timers_of_several_items_are_ordered_by_due_time() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    h.drive("b", "active")
    h.authorize("c")
    h.offer("c", W1, W2, expires_in=30)
    kinds = [(t.work_item_id, t.kind) for t in h.authority.timers()]
    assert kinds == [
        (item_id("c"), "offer_expiry"),
        (item_id("c"), "offer_expiry"),
        (item_id("b"), "execution_lease"),
        (item_id("a"), "start_by"),
    ]
    h.submit(COORD, "mission.terminate", {"reason": "stop"})
    assert h.authority.timers() == []


def test_work_item_timers_match_the_full_list_per_item() -> None:
    h = mission_harness()
    h.drive("a", "queued")
    h.drive("b", "active")
    everything = h.authority.timers()
    for work_item_id in h.authority.work_item_ids():
        mine = [t for t in everything if t.work_item_id == work_item_id]
        assert h.authority.work_item_timers(work_item_id) == mine
    assert h.authority.work_item_timers(item_id("ghost")) == []


def test_a_timer_outcome_has_a_receipt_naming_the_timer() -> None:
    h = mission_harness()
    h.drive("a", "active")
    lease = h.lease_id("a")
    h.advance(300)
    outcome = h.fire(item_id("a"), "execution_lease", lease)
    assert outcome is not None
    receipt = outcome.receipt
    assert receipt.action_id == outcome.events[0]["cause"]["id"]
    assert receipt.actor_id == outcome.events[0]["acceptedBy"]["id"]
    assert receipt.signing_hash == "" and receipt.event_ids == (outcome.events[0]["eventId"],)
    assert type(receipt).from_json(receipt.to_json()) == receipt


def test_views_show_lapsed_offers_and_leases_as_expired() -> None:
    from mwp.core.models import validate_document

    h = mission_harness()
    h.drive("a", "active")
    h.authorize("b")
    h.offer("b", W2, expires_in=10)
    h.advance(400)
    h.submit(W1, "message.post", {"content": [{"type": "text", "text": "tick"}]})
    assert h.view("b")["offers"][0]["status"] == "expired"
    lease = h.view("a")["executionLease"]
    assert lease["state"] == "expired" and lease["closedAt"] == lease["expiresAt"]
    validate_document("lease.schema.json", lease)


def test_a_reassigned_item_keeps_its_latest_checkpoint_for_the_new_owner() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.submit(
        W1,
        "work.checkpoint",
        h.owner_payload("a", progress=progress(), checkpointRef="sha256:" + "e" * 64),
        workItemId=item_id("a"),
    )
    h.advance(3600)  # the start-by deadline passes
    h.submit(COORD, "mission.renew_coordinator", {})
    h.offer("a", W2)
    h.accept("a", W2)
    view = h.view("a")
    assert view["owner"]["ownershipEpoch"] == 2
    assert view["checkpoint"]["checkpointRef"] == "sha256:" + "e" * 64
    assert view["progress"] == progress()


def test_given_a_checkpoint_in_a_renewal_when_the_lease_lapses_then_the_new_owner_sees_it() -> None:
    h = mission_harness()
    h.drive("a", "active")
    lease = h.lease_id("a")
    ref = "sha256:" + "f" * 64
    h.advance(60)
    h.submit(W1, RENEW, h.owner_payload("a", checkpointRef=ref), workItemId=item_id("a"))
    h.advance(300)  # the renewed lease lapses without a release
    assert h.fire(item_id("a"), "execution_lease", lease) is not None

    h.offer("a", W2)
    h.accept("a", W2)

    view = h.view("a")
    assert view["owner"]["agentId"] == W2.id and view["ownershipEpoch"] == 2
    assert view["checkpoint"]["checkpointRef"] == ref
    assert view["checkpoint"]["leaseId"] == lease
    # The Event log alone rebuilds the same checkpoint.
    assert replay(h.events).work_item_view(item_id("a"))["checkpoint"] == view["checkpoint"]


def test_given_a_replacement_session_then_its_active_items_return_to_queued() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.drive("b", "active")
    h.drive("c", "queued")
    h.drive("d", "active")
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("d"))
    old_lease = h.lease_id("a")
    assert h.revoke_replaced_sessions() is None  # nothing replaced yet: nothing recorded
    h.sessions[W1.id] = 2  # the agent's runtime restarted under a new Session
    outcome = h.revoke_replaced_sessions()
    assert outcome is not None
    kinds = [(e["kind"], e["workItemId"]) for e in outcome.events]
    assert kinds == sorted((LEASE_REVOKED_KIND, item_id(n)) for n in ("a", "b"))
    revoked = next(e for e in outcome.events if e["workItemId"] == item_id("a"))
    assert revoked["cause"]["type"] == "policy"
    assert revoked["payload"]["leaseId"] == old_lease
    assert (revoked["payload"]["sessionEpoch"], revoked["payload"]["currentSessionEpoch"]) == (1, 2)
    view = h.view("a")
    assert view["state"] == "queued" and "executionLease" not in view
    assert view["ownershipEpoch"] == 1  # the ownership stays: the same agent resumes it
    # The new runtime starts the item under a new lease of its new Session ...
    h.start("a", W1)
    assert h.view("a")["executionLease"]["sessionEpoch"] == 2
    # ... and a delayed Command under the revoked lease is refused.
    stale = h.owner_payload("a", lease=False) | {"leaseId": old_lease}
    h.reject(ErrorCode.WORK_LEASE_EXPIRED, W1, RENEW, stale, workItemId=item_id("a"))
    assert h.revoke_replaced_sessions() is None  # idempotent: nothing left to revoke
    rebuilt, live = replay(h.events).snapshot()["state"], h.authority.snapshot()["state"]
    rebuilt.pop("receipts")  # replay keeps no receipt digests (Commands are not in the log)
    live.pop("receipts")
    assert rebuilt == live


def test_a_session_change_of_another_agent_or_an_older_epoch_revokes_nothing() -> None:
    h = mission_harness()
    h.drive("a", "active")
    before = fingerprint(h.authority)
    h.sessions[W2.id] = 5  # another agent's new Session
    assert h.revoke_replaced_sessions() is None
    h.sessions[W1.id] = 1  # the lease's own Session
    assert h.revoke_replaced_sessions() is None
    assert fingerprint(h.authority) == before


def test_given_a_blocked_item_whose_owner_was_fenced_then_it_can_be_offered_again() -> None:
    h = mission_harness()
    h.drive("a", "blocked")
    [timer] = h.authority.timers()
    # While the blocked lease runs the owner is live: no new offer.
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W2.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
        },
        workItemId=item_id("a"),
    )
    h.advance(3600)
    assert h.fire(item_id("a"), "blocked_lease", timer.token) is not None  # the owner is fenced
    assert h.view("a")["state"] == "blocked"

    h.submit(COORD, "mission.renew_coordinator", {})
    outcome = h.offer("a", W2)  # straight from blocked, without work.unblock
    assert outcome.events[-1]["payload"]["fencedOwnership"] == {
        "agentId": W1.id,
        "ownershipEpoch": 1,
    }
    assert h.view("a")["state"] == "offered" and "owner" not in h.view("a")
    h.accept("a", W2)
    assert h.epoch("a") == 2
    # The fenced owner can no longer act on it.
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        "work.start",
        {"ownershipEpoch": 1},
        workItemId=item_id("a"),
    )
    h.start("a", W2)
