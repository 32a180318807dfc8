"""Continue-as-new snapshots, replay from the Event log, bounded size, every Event kind."""

from __future__ import annotations

import hashlib
import json
from base64 import urlsafe_b64decode, urlsafe_b64encode
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import (
    EVENT_KINDS,
    GroupAuthority,
    replay,
)
from mwp.core.group.archive import GROUP_ARCHIVE_KIND as ARCHIVE
from mwp.core.group.clock import plus_seconds
from mwp.core.group.knowledge import IMPORT_KIND
from mwp.core.group.receipts import receipt_key
from mwp.core.group.resource_usage import RECORD_KIND as USAGE_RECORD
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    COORD2,
    DELEGATE,
    OWNER,
    SERVICE,
    W1,
    W2,
    W3,
    Harness,
    content_hash,
    contract,
    fingerprint,
    full_budget,
    grant_payload,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)
from tests.unit.group.test_child_missions import Family
from tests.unit.group.test_group_archive import snapshot as archival_snapshot
from tests.unit.group.test_knowledge_reuse import import_payload
from tests.unit.group.test_override_grants import overridden

TEXT = {"content": [{"type": "text", "text": "Status."}]}
EXTERNAL = content_hash("external")


def rich_history() -> Harness:
    """One Group whose log holds nearly every Event kind (see the coverage test)."""
    h = mission_harness()
    posted = h.submit(W1, "message.post", TEXT).events[0]["payload"]["message"]
    target = {"targetMessageId": posted["messageId"]}
    h.submit(W1, "message.correct", {**target, "content": TEXT["content"], "reason": "Typo."})
    h.submit(W1, "message.retract", {**target, "reason": "Obsolete."})
    h.submit(OWNER, "message.redact", {**target, "reason": "Leak.", "policy": "secrets"})
    proposal = h.submit(W2, "work.propose", {"title": "Tests"}).events[0]["payload"]["proposal"]
    h.submit(
        COORD,
        "work.authorize",
        {
            "contract": contract(executionApproval="policy_required"),
            "proposalId": proposal["proposalId"],
        },
        workItemId=item_id("a"),
    )
    h.offer("a", W1, W3)
    h.submit(
        COORD,
        "work.offer",
        {
            "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "contract": contract(contractVersion=2, executionApproval="policy_required"),
        },
        workItemId=item_id("a"),
    )
    h.accept("a", W1)
    h.submit(SERVICE, "approval.grant_execution", {"contractVersion": 2}, workItemId=item_id("a"))
    h.start("a")
    h.submit(
        W1,
        "ext.missionweaveprotocol.core.execution_lease_renew",
        h.owner_payload("a", progress=progress()),
        workItemId=item_id("a"),
    )
    h.submit(
        W1, "work.checkpoint", h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    h.start("a")
    h.submit(
        W1, "work.block", h.owner_payload("a", requiredResolution="Creds."), workItemId=item_id("a")
    )
    h.submit(COORD, "work.unblock", {}, workItemId=item_id("a"))
    h.start("a")
    lease = h.lease_id("a")
    h.advance(300)
    assert h.fire(item_id("a"), "execution_lease", lease) is not None
    h.submit(COORD, "mission.renew_coordinator", {})
    h.offer("a", W2)
    h.accept("a", W2)
    h.start("a", W2)
    # Artifacts with provenance: A from an external source, a report derived from A.
    h.publish("a", W2, ARTIFACT_A, sources=(EXTERNAL,), external=(EXTERNAL,))
    h.publish("a", W2, content_hash("report"), sources=(ARTIFACT_A,))
    h.submit_work("a", W2)
    h.accept_result("a")
    h.drive("b", "queued")
    h.admit(DELEGATE, "work_delegate")
    granted = h.submit(COORD, "membership.grant_delegation", grant_payload("b")).events[0]
    grant_id = granted["payload"]["grant"]["grantId"]
    h.submit(
        DELEGATE,
        "work.authorize",
        {
            "contract": contract(budget=full_budget()),
            "parentWorkItemId": item_id("b"),
            "delegationGrantId": grant_id,
        },
        workItemId=item_id("b1"),
    )
    h.submit(
        DELEGATE,
        "work.offer",
        {
            "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis()}],
            "expiresAt": plus_seconds(h.now, 600),
            "delegationGrantId": grant_id,
        },
        workItemId=item_id("b1"),
    )
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("b1"))
    h.submit(
        COORD,
        "work.fail",
        {"reason": "x", "failureEvidenceIds": ["urn:example:evidence:f"]},
        workItemId=item_id("b"),
    )
    h.drive("c", "offered")
    h.submit(COORD, "work.cancel", {}, workItemId=item_id("c"))
    h.submit(COORD, "membership.end", {"memberId": W3.id})
    h.submit(
        OWNER,
        "mission.assign_coordinator",
        {"agentId": COORD2.id, "contextPackageId": h.handover_package()},
    )
    h.submit(
        COORD2, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]}, coordinatorEpoch=2
    )
    h.submit(OWNER, "mission.request_changes", h.changes_payload())
    h.submit(
        COORD2, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]}, coordinatorEpoch=2
    )
    h.approve()
    return h


def test_every_event_kind_is_emitted_and_schema_valid() -> None:
    seen = {e["kind"] for e in rich_history().events}  # Harness.send validates each Event
    cancelled = mission_harness()
    cancelled.submit(OWNER, "mission.cancel", {})
    cancelled.submit(SERVICE, ARCHIVE, {"snapshot": archival_snapshot(cancelled)})
    terminated = mission_harness()
    terminated.submit(COORD, "mission.terminate", {"reason": "x"})
    replaced = mission_harness()  # a Session replacement revokes an active lease
    replaced.drive("a", "active")
    replaced.submit(
        W1,
        USAGE_RECORD,
        replaced.owner_payload("a", delta={"modelTokenLimit": 1}),
        workItemId=item_id("a"),
    )
    replaced.sessions[W1.id] = 2
    replaced.revoke_replaced_sessions()
    replaced.drive("b", "queued")  # and the owner discloses its schedule for waiting work
    replaced.submit(
        W1,
        "ext.missionweaveprotocol.core.schedule_disclose",
        {
            "ownershipEpoch": 1,
            "scheduleEstimate": {
                "estimatedStart": "2026-07-15T01:00:00Z",
                "estimatedCompletion": "2026-07-15T02:00:00Z",
                "confidence": 0.5,
                "capacityStatus": "queued",
                "lastCalculatedAt": "2026-07-15T00:00:00Z",
            },
        },
        workItemId=item_id("b"),
    )
    imported = mission_harness()  # an Artifact of another Group, imported with approval
    imported.submit(COORD, IMPORT_KIND, import_payload(imported))
    for other in (cancelled, terminated, replaced, imported):
        seen |= {e["kind"] for e in other.events}
    seen |= {e["kind"] for e in _follow_up_events()}
    family = Family()
    seen |= {e["kind"] for e in family.parent.events + family.child.events}
    seen |= {e["kind"] for e in overridden().events}  # a limit notifies, a grant is used
    assert seen == set(EVENT_KINDS)


def _follow_up_events() -> list[dict[str, Any]]:
    h = Harness()
    h.approved_missions["urn:example:mission:earlier"] = OWNER.id
    return list(
        h.submit(
            OWNER,
            "mission.create_follow_up",
            {
                "missionId": "urn:example:mission:follow-up",
                "objective": "Fix a regression.",
                "definitionOfDone": [
                    {
                        "criterionId": "fixed",
                        "description": "Fixed.",
                        "evidenceRequired": ["deterministic_test"],
                    }
                ],
                "budget": {"modelTokenLimit": 10},
                "deadline": "2026-08-01T00:00:00Z",
                "coordinatorAgentId": COORD.id,
                "followUpToMissionId": "urn:example:mission:earlier",
            },
        ).events
    )


def test_sequences_are_contiguous_and_event_ids_unique() -> None:
    h = rich_history()
    assert [e["sequence"] for e in h.events] == list(range(1, len(h.events) + 1))
    assert len({e["eventId"] for e in h.events}) == len(h.events)
    assert h.authority.sequence == len(h.events)


def _without_receipts(snapshot: dict[str, Any]) -> dict[str, Any]:
    state = dict(snapshot["state"])
    state.pop("receipts")
    return state


def test_replay_of_the_event_log_rebuilds_the_identical_state() -> None:
    h = rich_history()
    rebuilt = replay(json.loads(json.dumps(h.events)))

    assert _without_receipts(rebuilt.snapshot()) == _without_receipts(h.authority.snapshot())
    live = h.authority.snapshot()["state"]["receipts"]["entries"]
    derived = rebuilt.snapshot()["state"]["receipts"]["entries"]
    # Receipts rebuilt from Events match in everything but the digest they can know.
    assert [e[:1] + e[2:] for e in derived] == [e[:1] + e[2:] for e in live]
    assert all(e[1].startswith("c:") for e in derived)
    assert rebuilt.mission_view() == h.authority.mission_view()
    assert rebuilt.timers() == h.authority.timers()


def test_a_replayed_authority_still_recognizes_duplicates_and_collisions() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    original = h.send(command)
    h.authority = replay(h.events)

    again = h.send(command)

    assert again.duplicate and again.receipt == original.receipt
    from mwp.core.errors import ErrorCode

    h.refuse(
        {**command, "payload": {"content": [{"type": "text", "text": "other"}]}},
        ErrorCode.ACTION_ID_COLLISION,
    )


def test_replay_refuses_a_gap_or_a_foreign_event() -> None:
    events = mission_harness().events
    with pytest.raises(ValueError, match="does not continue"):
        replay([events[0], events[2]])
    with pytest.raises(ValueError, match="does not continue"):
        replay([events[0], {**events[1], "groupId": "urn:example:group:other"}])


def test_snapshot_restore_round_trips_through_json_and_keeps_working() -> None:
    h = rich_history()
    snapshot = json.loads(json.dumps(h.authority.snapshot()))
    restored = GroupAuthority.restore(snapshot)

    assert restored.snapshot() == h.authority.snapshot()
    assert len(snapshot["state"]["artifacts"]) == 2
    assert restored.mission_view()["artifacts"] == h.authority.mission_view()["artifacts"]
    assert (restored.group_id, restored.mission_id, restored.sequence) == (
        h.authority.group_id,
        h.authority.mission_id,
        h.authority.sequence,
    )

    command = h.command(W1, "message.post", TEXT)
    expected = h.authority.submit(h.envelope(command), h.ctx())
    assert restored.submit(h.envelope(command), h.ctx()) == expected
    with pytest.raises(ValueError):
        GroupAuthority.restore({"format": "something-else"})


def test_a_duplicate_of_a_command_from_before_continue_as_new_returns_its_receipt() -> None:
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    original = h.send(command)
    for _ in range(20):
        h.submit(W2, "message.post", TEXT)
    h.authority = GroupAuthority.restore(json.loads(json.dumps(h.authority.snapshot())))

    assert h.send(command).receipt == original.receipt


def test_snapshot_size_does_not_grow_with_messages() -> None:
    h = Harness(GroupAuthority(receipt_window=64, message_window=32))
    h.create_mission()
    h.admit(W1)

    def size_after(messages: int) -> int:
        for _ in range(messages):
            h.advance(31)  # each one issued after the last evicted receipt (and skew)
            h.submit(W1, "message.post", TEXT)
        return len(json.dumps(h.authority.snapshot()))

    first = size_after(200)
    second = size_after(800)

    assert h.authority.sequence > 1000
    assert second - first < 400  # only wider sequence numbers, not more entries
    assert h.authority.receipt_horizon > 1


def test_a_receipt_costs_under_80_bytes_so_the_default_window_fits_a_payload() -> None:
    h = Harness(GroupAuthority(receipt_window=500))
    h.create_mission()
    h.admit(W1)
    for _ in range(500):
        h.advance(31)
        h.submit(W1, "message.post", TEXT)
    receipts = h.authority.snapshot()["state"]["receipts"]["entries"]
    per_entry = len(json.dumps(receipts)) / len(receipts)
    assert per_entry < 80
    assert per_entry * 10_000 < 800_000  # the default window stays under 0.8 MB


def test_receipts_older_than_the_window_are_evicted_and_the_horizon_says_so() -> None:
    h = Harness(GroupAuthority(receipt_window=4))
    h.create_mission()
    h.admit(W1)
    h.advance(31)  # later than the evicted receipts' Commands (see test_command_freshness)
    recent = [h.command(W1, "message.post", TEXT) for _ in range(4)]
    for command in recent:
        h.send(command)
    # The Mission's and the admission's receipts were evicted; the last four are kept.
    assert h.authority.receipt_horizon == h.events[-4]["sequence"]
    for command in recent:
        assert h.send(command).duplicate


def test_fingerprint_is_stable_across_views() -> None:
    h = rich_history()
    before = fingerprint(h.authority)
    h.authority.mission_view()
    for work_item_id in h.authority.work_item_ids():
        h.authority.work_item_view(work_item_id)
        h.authority.work_item_search_attributes(work_item_id)
    h.authority.timers()
    assert fingerprint(h.authority) == before


def test_a_mid_flight_group_restores_and_replays_identically() -> None:
    h = mission_harness()
    h.submit(W2, "work.propose", {"title": "Later"})
    h.drive("a", "active")
    h.submit(
        W1,
        "ext.missionweaveprotocol.core.execution_lease_renew",
        h.owner_payload("a", progress=progress()),
        workItemId=item_id("a"),
    )
    h.publish("a")
    h.drive("b", "blocked")
    h.drive("c", "offered")
    h.authorize("d", budget={"currency": "USD", "financialLimit": 12.5})
    live = h.authority.snapshot()
    assert [a["contentHash"] for a in live["state"]["artifacts"]] == [ARTIFACT_A]

    restored = GroupAuthority.restore(json.loads(json.dumps(live)))
    rebuilt = replay(h.events)

    assert restored.snapshot() == live
    assert _without_receipts(rebuilt.snapshot()) == _without_receipts(live)
    for other in (restored, rebuilt):
        assert other.mission_view() == h.authority.mission_view()
        assert other.timers() == h.authority.timers()
        for work_item_id in h.authority.work_item_ids():
            assert other.work_item_view(work_item_id) == h.authority.work_item_view(work_item_id)


def test_a_snapshot_from_before_artifacts_restores_with_none_published() -> None:
    h = mission_harness()
    snapshot = json.loads(json.dumps(h.authority.snapshot()))
    del snapshot["state"]["artifacts"]
    restored = GroupAuthority.restore(snapshot)
    assert restored.mission_view()["artifacts"] == []
    assert restored.snapshot() == h.authority.snapshot()


def test_receipts_of_a_snapshot_with_longer_digests_still_recognize_retries() -> None:
    # Snapshots written before receipts were shortened carry 96-bit keys and digests: the
    # same SHA-256 prefixes, so the restored Group still answers retries and collisions.
    h = mission_harness()
    command = h.command(W1, "message.post", TEXT)
    original = h.send(command)
    state = json.loads(json.dumps(h.authority.snapshot()))
    actor, action = command["actor"]["id"], command["actionId"]
    sent_key = receipt_key(actor, action)
    for entry in state["state"]["receipts"]["entries"]:
        long_key = (
            hashlib.sha256(f"{actor}\x00{action}".encode()).digest()[:12]
            if entry[0] == sent_key
            else urlsafe_b64decode(entry[0] + "=") + bytes(4)
        )
        entry[0] = urlsafe_b64encode(long_key).decode("ascii")
        entry[1] = entry[1] + ("" if entry[1].startswith("c:") else "0" * 8)
        assert len(entry[0]) == 16
    h.authority = GroupAuthority.restore(state)

    assert h.send(command).receipt == original.receipt
    other = {**command, "payload": {"content": [{"type": "text", "text": "Other."}]}}
    h.refuse(other, ErrorCode.ACTION_ID_COLLISION)
