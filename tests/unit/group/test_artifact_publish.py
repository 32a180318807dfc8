"""``artifact.publish`` (spec 13.1, 11.3; MWP-WRK-013, 023, 024, MWP-IDN-003): the owner of
an active WorkItem records a signed Artifact manifest under its current Execution Lease; the
Group keeps an acyclic provenance index, and a submission names published Artifacts only."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group.artifact import embedded_manifest
from mwp.core.models import validate_document
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, VerificationError, sign, verify_value
from mwp.core.wire.ed25519 import SigningKey
from tests.event_log_samples import ORG, binding
from tests.unit.group.harness import (
    ARTIFACT_A,
    ARTIFACT_B,
    CAPABILITY,
    COORD,
    OWNER,
    SERVICE,
    W1,
    W2,
    W3,
    Harness,
    content_hash,
    evidence,
    item_id,
    mission_harness,
    progress,
)

PUBLISH = "artifact.publish"
EXTERNAL = content_hash("an Organization-approved Artifact of another Group")


def _active(name: str = "a") -> Harness:
    h = mission_harness()
    h.drive(name, "active")
    return h


def _submission(h: Harness, name: str, *hashes: str) -> dict[str, Any]:
    return h.owner_payload(name, artifactHashes=list(hashes), evidence=evidence())


# --- accepted ------------------------------------------------------------------------------------


def test_the_owner_publishes_a_manifest_under_its_lease() -> None:
    h = _active()
    revision = h.view("a")["revision"]
    lease = h.lease_id("a")
    payload = h.publish_payload("a")
    manifest = copy.deepcopy(payload["manifest"])

    outcome = h.submit(W1, PUBLISH, payload, workItemId=item_id("a"))

    [event] = outcome.events
    assert event["kind"] == "artifact.published"
    assert event["workItemId"] == item_id("a") and event["actor"] == W1.to_json()
    assert event["aggregateRevision"] == revision + 1 == outcome.receipt.aggregate_revision
    # The manifest is recorded exactly as signed, with the grant it was published under.
    assert event["payload"] == {"manifest": manifest, "ownershipEpoch": 1, "leaseId": lease}
    validate_document("artifact.schema.json", event["payload"]["manifest"])
    view = h.view("a")
    assert view["state"] == "active" and view["revision"] == revision + 1
    assert view["executionLease"]["leaseId"] == lease  # publication does not release the lease
    [entry] = h.authority.mission_view()["artifacts"]
    assert entry == {
        "contentHash": ARTIFACT_A,
        "artifactId": manifest["artifactId"],
        "workItemId": item_id("a"),
        "producer": {"agentId": W1.id, "agentCardVersion": 1},
        "mediaType": "text/x-diff",
        "schemaUri": "urn:example:schema:opaque",
        "sizeBytes": 4096,
        "uri": manifest["uri"],
        "classification": "internal",
        "sourceArtifactHashes": [],
        "createdAt": manifest["createdAt"],
        "ownershipEpoch": 1,
        "publishedAt": h.now,
        "eventId": event["eventId"],
    }


def test_a_derived_artifact_names_published_and_declared_external_sources() -> None:
    h = _active()
    h.publish("a")
    derived = content_hash("derived")
    outcome = h.publish("a", content=derived, sources=(ARTIFACT_A, EXTERNAL), external=(EXTERNAL,))

    assert outcome.events[0]["payload"]["externalSourceHashes"] == [EXTERNAL]
    entry = h.authority.mission_view()["artifacts"][1]
    assert entry["contentHash"] == derived
    assert entry["sourceArtifactHashes"] == [ARTIFACT_A, EXTERNAL]
    assert entry["externalSourceHashes"] == [EXTERNAL]


def test_the_coordinator_owning_an_item_publishes_as_its_owner() -> None:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", COORD)
    h.accept("a", COORD)
    h.start("a", COORD)
    command = h.command(COORD, PUBLISH, h.publish_payload("a", COORD), workItemId=item_id("a"))
    assert "coordinatorEpoch" not in command  # it acts as owner, not as Coordinator
    assert h.send(command).events[0]["kind"] == "artifact.published"


def test_a_byte_equal_retry_returns_the_original_receipt() -> None:
    h = _active()
    command = h.command(W1, PUBLISH, h.publish_payload("a"), workItemId=item_id("a"))
    first = h.send(command)
    again = h.send(command)
    assert again.duplicate and again.events == () and again.receipt == first.receipt
    assert len(h.authority.mission_view()["artifacts"]) == 1


def test_expected_revision_is_the_work_items() -> None:
    h = _active()
    revision = h.view("a")["revision"]
    h.reject(
        ErrorCode.REVISION_CONFLICT,
        W1,
        PUBLISH,
        h.publish_payload("a"),
        workItemId=item_id("a"),
        expectedRevision=revision - 1,
    )
    h.submit(
        W1, PUBLISH, h.publish_payload("a"), workItemId=item_id("a"), expectedRevision=revision
    )


# --- who and when --------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["open", "offered", "queued", "blocked", "submitted", "verified"])
def test_only_an_active_item_accepts_publications(state: str) -> None:
    h = mission_harness()
    h.drive("a", state)
    payload = {
        "ownershipEpoch": 1,
        "leaseId": "urn:example:lease:none",
        "manifest": h.manifest("a", W1, ARTIFACT_B),
    }
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION, W1, PUBLISH, payload, workItemId=item_id("a")
    )
    assert error.details is not None and error.details["state"] == state


def test_nothing_is_published_once_the_mission_is_not_active() -> None:
    h = _active()
    payload = h.publish_payload("a")
    h.submit(OWNER, "mission.cancel", {})
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION, W1, PUBLISH, payload, workItemId=item_id("a")
    )
    assert error.details is not None and error.details["state"] == "cancelled"


def test_the_work_item_must_exist() -> None:
    h = _active()
    payload = h.publish_payload("a")
    h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, payload, workItemId=item_id("nope"))
    h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, payload)


def test_only_the_owner_publishes() -> None:
    h = _active()
    h.admit(W3, "observer")
    payload = h.publish_payload("a")
    for actor in (W2, COORD):  # a working agent that is not the owner; the Coordinator
        h.reject(ErrorCode.AUTH_FORBIDDEN, actor, PUBLISH, payload, workItemId=item_id("a"))
    for actor in (W3, SERVICE, OWNER):  # an observer, Organization policy, the MissionOwner
        h.reject(ErrorCode.AUTH_FORBIDDEN, actor, PUBLISH, payload, workItemId=item_id("a"))


def test_a_fenced_or_wrong_ownership_epoch_is_stale() -> None:
    h = _active()
    h.reject(
        ErrorCode.WORK_STALE_OWNERSHIP,
        W1,
        PUBLISH,
        {**h.publish_payload("a"), "ownershipEpoch": 2},
        workItemId=item_id("a"),
    )
    payload = h.publish_payload("a")
    lease = h.lease_id("a")
    h.advance(300)
    assert h.fire(item_id("a"), "execution_lease", lease) is not None
    h.reject(ErrorCode.WORK_STALE_OWNERSHIP, W1, PUBLISH, payload, workItemId=item_id("a"))


def test_publication_needs_the_current_unexpired_lease() -> None:
    h = _active()
    old = h.publish_payload("a")
    h.submit(
        W1, "work.checkpoint", h.owner_payload("a", progress=progress()), workItemId=item_id("a")
    )
    h.start("a")
    # The older Lease ID under the same Ownership Epoch.
    h.reject(ErrorCode.WORK_LEASE_EXPIRED, W1, PUBLISH, old, workItemId=item_id("a"))
    # A lease past its expiry, before its timer fired.
    h.advance(300)
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED, W1, PUBLISH, h.publish_payload("a"), workItemId=item_id("a")
    )


def test_a_lease_revoked_by_a_newer_session_cannot_publish() -> None:
    h = _active()
    h.sessions[W1.id] = 2
    h.reject(
        ErrorCode.WORK_LEASE_EXPIRED, W1, PUBLISH, h.publish_payload("a"), workItemId=item_id("a")
    )


def test_the_lease_id_is_required() -> None:
    h = _active()
    payload = h.publish_payload("a")
    del payload["leaseId"]
    h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, payload, workItemId=item_id("a"))


# --- the manifest --------------------------------------------------------------------------------


@pytest.mark.parametrize("manifest", [None, "sha256:" + "a" * 64, [1]])
def test_the_payload_must_carry_a_manifest_object(manifest: Any) -> None:
    h = _active()
    payload = h.owner_payload("a")
    if manifest is not None:
        payload["manifest"] = manifest
    error = h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, payload, workItemId=item_id("a"))
    assert error.details is not None and error.details["member"] == "payload.manifest"


@pytest.mark.parametrize(
    "change",
    [
        {"signature": None},  # unsigned
        {"content": "aW5saW5l"},  # inline content is not a manifest member
        {"contentHash": "md5:abc"},
        {"sizeBytes": -1},
        {"producer": {"agentId": W1.id, "agentCardVersion": 1, "capabilities": []}},
        {"sourceArtifactHashes": [ARTIFACT_B, ARTIFACT_B]},
    ],
)
def test_a_manifest_outside_its_schema_is_schema_validation_failed(change: dict[str, Any]) -> None:
    h = _active()
    payload = h.publish_payload("a")
    for member, value in change.items():
        if value is None:
            del payload["manifest"][member]
        else:
            payload["manifest"][member] = value
    error = h.reject(
        ErrorCode.SCHEMA_VALIDATION_FAILED, W1, PUBLISH, payload, workItemId=item_id("a")
    )
    assert error.details is not None and error.details["member"] == "payload.manifest"


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("missionId", "urn:example:mission:other"),
        ("groupId", "urn:example:group:other"),
        ("workItemId", "urn:example:work-item:other"),
        ("producer.agentId", W2.id),
        ("producer.agentCardVersion", 2),
        ("producer.capabilities", [{"id": CAPABILITY["id"], "version": "2.2.0"}]),
    ],
)
def test_the_manifest_must_describe_this_group_item_and_owner(member: str, value: Any) -> None:
    h = _active()
    payload = h.publish_payload("a")
    target = payload["manifest"]
    *path, last = member.split(".")
    for step in path:
        target = target[step]
    target[last] = value
    error = h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, payload, workItemId=item_id("a"))
    assert error.details is not None and error.details["member"] == f"payload.manifest.{member}"


def test_capabilities_the_assignment_did_not_pin_may_be_named() -> None:
    h = _active()
    extra = {"id": "acme.text.summarize", "version": "1.0.0"}
    h.publish(
        "a", producer={"agentId": W1.id, "agentCardVersion": 1, "capabilities": [CAPABILITY, extra]}
    )


# --- duplicates and identity ---------------------------------------------------------------------


def test_the_same_content_is_published_once_per_group() -> None:
    h = _active()
    first = h.publish("a").events[0]
    # Another Command (new Action ID) with the very same manifest: no second publication.
    error = h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W1,
        PUBLISH,
        h.publish_payload("a"),
        workItemId=item_id("a"),
    )
    assert error.details is not None
    assert error.details["contentHash"] == ARTIFACT_A
    assert error.details["eventId"] == first["eventId"]
    # The same content from another WorkItem, with its own Artifact ID, is refused as well.
    h.drive("c", "open")
    h.offer("c", W2)
    h.accept("c", W2)
    h.start("c", W2)
    h.reject(
        ErrorCode.INVALID_STATE_TRANSITION,
        W2,
        PUBLISH,
        h.publish_payload("c", W2, artifactId="urn:example:artifact:copy"),
        workItemId=item_id("c"),
    )


def test_an_artifact_id_names_one_content() -> None:
    h = _active()
    h.publish("a")
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", content=ARTIFACT_B, artifactId=h.manifest("a")["artifactId"]),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["member"] == "payload.manifest.artifactId"


# --- provenance ----------------------------------------------------------------------------------


def test_every_source_is_published_here_or_declared_external() -> None:
    h = _active()
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", content=ARTIFACT_B, sources=(ARTIFACT_A, EXTERNAL)),
        workItemId=item_id("a"),
    )
    assert error.details is not None
    assert error.details["unknownSources"] == sorted([ARTIFACT_A, EXTERNAL])


def test_a_declared_external_source_must_be_a_source_and_not_published_here() -> None:
    h = _active()
    h.publish("a")
    not_a_source = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", content=ARTIFACT_B, external=(EXTERNAL,)),
        workItemId=item_id("a"),
    )
    assert not_a_source.details is not None
    assert not_a_source.details["notSources"] == [EXTERNAL]
    published_here = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", content=ARTIFACT_B, sources=(ARTIFACT_A,), external=(ARTIFACT_A,)),
        workItemId=item_id("a"),
    )
    assert published_here.details is not None
    assert published_here.details["publishedSources"] == [ARTIFACT_A]
    malformed = h.publish_payload("a", content=ARTIFACT_B)
    malformed["externalSourceHashes"] = ["not-a-hash"]
    h.reject(ErrorCode.INVALID_COMMAND, W1, PUBLISH, malformed, workItemId=item_id("a"))


def test_an_artifact_cannot_derive_from_itself() -> None:
    h = _active()
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", sources=(ARTIFACT_A,)),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["reason"] == "provenance-cycle"
    # Declaring itself external changes nothing.
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", sources=(ARTIFACT_A,), external=(ARTIFACT_A,)),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["reason"] == "provenance-cycle"


def test_publishing_an_external_ancestor_may_not_close_a_cycle() -> None:
    h = _active()
    # B derives from X (external); C derives from B.
    h.publish("a", content=ARTIFACT_B, sources=(EXTERNAL,), external=(EXTERNAL,))
    c = content_hash("c")
    h.publish("a", content=c, sources=(ARTIFACT_B,))
    # X published here as derived from C would make X its own ancestor.
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        PUBLISH,
        h.publish_payload("a", content=EXTERNAL, sources=(c,)),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["reason"] == "provenance-cycle"
    # Published without that edge, X joins the graph as a source of B.
    h.publish("a", content=EXTERNAL, sources=(ARTIFACT_A,), external=(ARTIFACT_A,))
    assert [a["contentHash"] for a in h.authority.mission_view()["artifacts"]] == [
        ARTIFACT_B,
        c,
        EXTERNAL,
    ]


# --- submission ----------------------------------------------------------------------------------


def test_a_submission_names_published_artifacts_only() -> None:
    h = _active()
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.submit",
        _submission(h, "a", ARTIFACT_A),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["unpublishedArtifacts"] == [ARTIFACT_A]
    h.publish("a")
    error = h.reject(
        ErrorCode.INVALID_COMMAND,
        W1,
        "work.submit",
        _submission(h, "a", ARTIFACT_A, ARTIFACT_B),
        workItemId=item_id("a"),
    )
    assert error.details is not None and error.details["unpublishedArtifacts"] == [ARTIFACT_B]
    outcome = h.submit(W1, "work.submit", _submission(h, "a", ARTIFACT_A), workItemId=item_id("a"))
    assert outcome.events[0]["payload"]["submission"]["artifactHashes"] == [ARTIFACT_A]


def test_a_later_owner_may_submit_what_a_fenced_owner_published() -> None:
    h = _active()
    h.publish("a")
    lease = h.lease_id("a")
    h.advance(300)
    h.fire(item_id("a"), "execution_lease", lease)
    h.offer("a", W2)
    h.accept("a", W2)
    h.start("a", W2)
    h.submit(W2, "work.submit", _submission(h, "a", ARTIFACT_A), workItemId=item_id("a"))
    assert h.view("a")["state"] == "submitted"
    [entry] = h.authority.mission_view()["artifacts"]
    assert entry["producer"]["agentId"] == W1.id and entry["ownershipEpoch"] == 1


# --- the shell's part: the manifest's own signature ----------------------------------------------


def test_the_shell_verifies_the_embedded_manifest_against_registry_evidence() -> None:
    key_id = "urn:example:key:worker-one"
    key = SigningKey(bytes(range(11, 43)))
    evidence_ = RegistryEvidence.from_bindings(ORG, [binding(key_id, W1, key)])
    h = _active()
    payload = h.publish_payload("a")
    payload["manifest"] = sign(payload["manifest"], "artifact", key_id, key)

    manifest = embedded_manifest(payload)
    assert manifest is payload["manifest"]
    verified = verify_value(manifest, PROFILES["artifact"], evidence_)
    assert verified.principal == W1
    h.submit(W1, PUBLISH, payload, workItemId=item_id("a"))

    # The same manifest altered after signing no longer verifies (the core cannot tell).
    tampered = {**manifest, "sizeBytes": 1}
    with pytest.raises(VerificationError) as failed:
        verify_value(tampered, PROFILES["artifact"], evidence_)
    assert failed.value.code == ErrorCode.AUTH_INVALID_SIGNATURE


@pytest.mark.parametrize("payload", [{}, {"manifest": "x"}, {"manifest": [1]}])
def test_embedded_manifest_refuses_a_payload_without_a_manifest_object(
    payload: dict[str, Any],
) -> None:
    with pytest.raises(MwpError) as refused:
        embedded_manifest(payload)
    assert refused.value.code == ErrorCode.INVALID_COMMAND
    assert refused.value.details is not None
    assert refused.value.details["member"] == "payload.manifest"
