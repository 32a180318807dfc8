"""Group archival (spec 7.4, 15.2, MWP-MSN-009): on a closed Group, the MissionOwner or an
Organization service sends ``ext.missionweaveprotocol.core.group_archive`` with the signed final
snapshot; the Group records ``group.snapshot.created`` and ``group.archived`` and then refuses
every Command but a byte-equal retry. A snapshot that does not describe exactly this Group's
Events, or that another service created, is refused and changes nothing."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from mwp.client.identity import wire_text
from mwp.contracts.command_size import MAX_COMMAND_BYTES, command_payload_bytes
from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import replay
from mwp.core.group.api import RULES_DOOR, RULES_LEDGER, RULES_OVERSIGHT
from mwp.core.group.archive import GROUP_ARCHIVE_KIND as ARCHIVE
from mwp.core.group.archive import compact_snapshot, completed_snapshot
from mwp.core.group.ids import event_id
from mwp.core.log.group_snapshot import SnapshotPurpose, build_snapshot, sign_snapshot
from mwp.core.trust.registry import Principal
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.strict_json import parse_bytes
from tests.unit.group.harness import (
    AUTHORITY,
    COORD,
    GROUP,
    OWNER,
    SERVICE,
    W1,
    Harness,
    mission_harness,
)

HEAD = "sha256:" + "d" * 64
STATE = b'{"format":"test-state"}'


def snapshot(
    h: Harness,
    *,
    through: int | None = None,
    created_by: Principal = AUTHORITY,
    event_ids: list[str] | None = None,
    group_id: str = GROUP,
    purpose: SnapshotPurpose = SnapshotPurpose.ARCHIVAL,
) -> dict[str, Any]:
    """A signed Group Snapshot over the harness's Events (the core never checks the signature:
    the shell does)."""
    sequence = h.authority.sequence if through is None else through
    ids = event_ids if event_ids is not None else [e["eventId"] for e in h.events][:sequence]
    unsigned = build_snapshot(
        group_id=group_id,
        through_sequence=sequence,
        event_ids=ids,
        state_bytes=STATE,
        head_hash=HEAD,
        purpose=purpose,
        created_by=created_by,
        created_at=h.now,
    )
    document: dict[str, Any] = parse_bytes(
        sign_snapshot(unsigned, "urn:example:key:group-authority", SigningKey(b"\x07" * 32))
    )
    return document


def closed_harness() -> Harness:
    h = mission_harness()
    h.authorize("a")
    h.submit(OWNER, "mission.cancel", {"reason": "no longer needed"})
    return h


def test_given_a_closed_group_when_archived_then_both_events_are_recorded() -> None:
    h = closed_harness()
    through = h.authority.sequence
    document = snapshot(h)

    outcome = h.submit(SERVICE, ARCHIVE, {"snapshot": document})

    created, archived = outcome.events  # schema-valid: the harness checks every Event
    assert [created["kind"], archived["kind"]] == ["group.snapshot.created", "group.archived"]
    assert created["sequence"] == through + 1 and archived["sequence"] == through + 2
    assert created["payload"] == {
        "snapshotId": document["snapshotId"],
        "throughSequence": through,
        "stateHash": document["stateHash"],
        "snapshotHash": sha256_ref(canonicalize(document)),
    }
    assert archived["payload"] == {"snapshotId": document["snapshotId"], "throughSequence": through}
    assert h.authority.archived
    view = h.authority.mission_view()
    assert view["state"] == "cancelled"
    assert view["archive"] == {
        "snapshotId": document["snapshotId"],
        "throughSequence": through,
        "archivedAt": h.now,
    }
    # The Event log alone, and a continue-as-new snapshot, rebuild the archived Group.
    assert replay(h.events).mission_view() == view
    restored = type(h.authority).restore(h.authority.snapshot())
    assert restored.archived and restored.mission_view() == view


def test_the_mission_owner_may_archive_an_approved_group_too() -> None:
    h = mission_harness()
    h.drive("a", "verified")
    h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": sorted(h.published())})
    h.approve()
    assert h.authority.mission_view()["state"] == "approved"

    outcome = h.submit(OWNER, ARCHIVE, {"snapshot": snapshot(h)})

    assert [e["kind"] for e in outcome.events] == ["group.snapshot.created", "group.archived"]


def test_after_archival_every_command_is_refused_but_a_retry_gets_its_receipt() -> None:
    h = closed_harness()
    command = h.command(SERVICE, ARCHIVE, {"snapshot": snapshot(h)})
    first = h.send(command)

    retry = h.authority.submit(h.envelope(command), h.ctx())
    assert retry.duplicate and retry.receipt == first.receipt

    again = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION, SERVICE, ARCHIVE, {"snapshot": snapshot(h)}
    )
    assert (again.details or {})["state"] == "archived"
    post = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        OWNER,
        "message.post",
        {"content": [{"type": "text", "text": "still there?"}]},
    )
    assert (post.details or {})["state"] == "archived"
    cancel = h.reject(ErrorCode.INVALID_STATE_TRANSITION, OWNER, "mission.cancel", {})
    assert (cancel.details or {})["snapshotId"] == first.events[0]["payload"]["snapshotId"]


def test_an_active_group_is_not_archived() -> None:
    h = mission_harness()
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION, SERVICE, ARCHIVE, {"snapshot": snapshot(h)}
    )
    assert (error.details or {})["state"] == "active"


def test_only_the_mission_owner_or_a_service_archives() -> None:
    h = closed_harness()
    h.reject(ErrorCode.AUTH_FORBIDDEN, COORD, ARCHIVE, {"snapshot": snapshot(h)})
    h.reject(ErrorCode.AUTH_FORBIDDEN, W1, ARCHIVE, {"snapshot": snapshot(h)})


def test_a_snapshot_another_service_created_is_forbidden() -> None:
    h = closed_harness()
    error = h.reject(
        ErrorCode.AUTH_FORBIDDEN, SERVICE, ARCHIVE, {"snapshot": snapshot(h, created_by=SERVICE)}
    )
    assert (error.details or {})["createdBy"] == SERVICE.id


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("behind", "snapshot_sequence"),
        ("other group", "snapshot_group"),
        ("reordered", "snapshot_events"),
        ("foreign event", "snapshot_events"),
        ("compaction", "snapshot_policy_log"),
        ("decision edited", "snapshot_policy_log"),
    ],
)
def test_a_snapshot_that_does_not_describe_this_group_is_refused(name: str, reason: str) -> None:
    h = closed_harness()
    ids = [e["eventId"] for e in h.events]
    document = {
        "behind": lambda: snapshot(h, through=h.authority.sequence - 1),
        "other group": lambda: snapshot(h, group_id="urn:example:group:beta"),
        "reordered": lambda: snapshot(h, event_ids=[ids[1], ids[0], *ids[2:]]),
        "foreign event": lambda: snapshot(h, event_ids=[*ids[:-1], "urn:example:event:other"]),
        "compaction": lambda: snapshot(h, purpose=SnapshotPurpose.COMPACTION),
        "decision edited": lambda: _edited_decision(snapshot(h)),
    }[name]()
    error = h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": document})
    assert (error.details or {})["reason"] == reason
    assert not h.authority.archived


def _edited_decision(document: dict[str, Any]) -> dict[str, Any]:
    edited = copy.deepcopy(document)
    edited["policyLog"][0]["details"]["throughSequence"] -= 1
    return edited


def test_a_payload_that_is_no_group_snapshot_is_refused() -> None:
    h = closed_harness()
    document = snapshot(h)
    del document["stateHash"]
    h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": document})
    h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": "not an object"})


def test_a_group_deciding_under_older_rules_does_not_know_the_command() -> None:
    """Refused as every kind those rules did not know: before authorization, so a Coordinator
    gets the same INVALID_COMMAND as the service."""
    h = closed_harness()
    for actor in (SERVICE, COORD):
        command = h.command(actor, ARCHIVE, {"snapshot": snapshot(h)})
        with pytest.raises(MwpError) as caught:
            h.authority.submit(h.envelope(command), replace(h.ctx(), rules=RULES_DOOR))
        assert caught.value.code is ErrorCode.INVALID_COMMAND
        assert "is not a Command this Authority accepts" in caught.value.message
    assert not h.authority.archived


# --- the compact archive Command (rules from RULES_OVERSIGHT) --------------------------------


def test_a_compact_snapshot_archives_the_group_like_the_full_one() -> None:
    """Its Event IDs are derived from the Group ID and sequence range; the Events name the
    full stored document's hash."""
    full, compact = closed_harness(), closed_harness()
    document = snapshot(full)
    assert "eventIds" not in compact_snapshot(document)

    by_full = full.submit(SERVICE, ARCHIVE, {"snapshot": document})
    by_compact = compact.submit(SERVICE, ARCHIVE, {"snapshot": compact_snapshot(document)})

    assert [e["payload"] for e in by_compact.events] == [e["payload"] for e in by_full.events]
    assert by_compact.events[0]["payload"]["snapshotHash"] == sha256_ref(canonicalize(document))
    assert compact.authority.archived


def test_a_compact_snapshot_is_refused_where_it_does_not_fit_the_group() -> None:
    h = closed_harness()
    behind = compact_snapshot(snapshot(h, through=h.authority.sequence - 1))
    error = h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": behind})
    assert (error.details or {})["reason"] == "snapshot_sequence"
    # Past the Group's sequence no ID is derived: the document stays no Group Snapshot.
    ahead = {**compact_snapshot(snapshot(h)), "throughSequence": h.authority.sequence + 1}
    h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": ahead})
    other = compact_snapshot(snapshot(h, group_id="urn:example:group:beta"))
    error = h.reject(ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": other})
    assert (error.details or {})["reason"] == "snapshot_group"
    assert not h.authority.archived


def test_under_the_ledger_rules_a_compact_snapshot_is_no_group_snapshot() -> None:
    h = closed_harness()
    h.rules = RULES_LEDGER
    h.reject(
        ErrorCode.INVALID_COMMAND, SERVICE, ARCHIVE, {"snapshot": compact_snapshot(snapshot(h))}
    )
    assert not h.authority.archived
    h.rules = RULES_OVERSIGHT
    h.submit(SERVICE, ARCHIVE, {"snapshot": compact_snapshot(snapshot(h))})
    assert h.authority.archived


def test_a_large_groups_compact_archive_command_fits_the_command_bound() -> None:
    """20,000 Events: the full snapshot is over the bound, the compact one far under it, and
    the shell's completed document is the signed one, byte for byte."""
    through = 20_000
    h = closed_harness()
    ids = [event_id(GROUP, s) for s in range(1, through + 1)]
    document = snapshot(h, through=through, event_ids=ids)

    def size(snap: dict[str, Any]) -> int:
        return command_payload_bytes(wire_text(h.command(SERVICE, ARCHIVE, {"snapshot": snap})))

    assert size(document) > MAX_COMMAND_BYTES > 100 * size(compact_snapshot(document))
    completed = completed_snapshot(compact_snapshot(document), through)
    assert canonicalize(completed) == canonicalize(document)
    assert completed_snapshot(compact_snapshot(document), through - 1) == compact_snapshot(document)
