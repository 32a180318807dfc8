"""Reusable knowledge across Groups (spec 13.3; MWP-WRK-028): an Artifact of one Group enters
another Mission only as an import by the receiving Coordinator, carrying the source's signed
manifest and an Organization policy approval bound to that Artifact and that target, within
the target's classification ceiling; the Event names source, hash, approval and actor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group import replay
from mwp.core.group.api import RULES_CONTEXT
from mwp.core.group.clock import plus_seconds
from mwp.core.group.knowledge import (
    IMPORT_KIND,
    IMPORTED_KIND,
    PROVENANCE_MEMBERS,
    REUSE_APPROVAL_PROFILE,
    check_approval_shape,
    embedded_import_documents,
    sign_reuse_approval,
)
from mwp.core.trust.signed_document import (
    PROFILES,
    VerificationError,
    sign,
    signing_hash,
    verify_value,
)
from tests.unit.group.harness import (
    COORD,
    OWNER,
    SERVICE,
    SIGNATURE_VALUE,
    W1,
    Harness,
    content_hash,
    evidence,
    item_id,
    mission_harness,
)
from tests.unit.group.signing import EVIDENCE, KEYS, key_id

SOURCE_GROUP = "urn:example:group:source"
SOURCE_MISSION = "urn:example:mission:source"
REUSED = content_hash("reusable design notes")


def _source_manifest(**overrides: Any) -> dict[str, Any]:
    """The manifest a Worker of another Group published there (its artifact.published)."""
    source = Harness(group_id=SOURCE_GROUP)
    source.create_mission(missionId=SOURCE_MISSION)
    source.admit(W1)
    source.drive("notes", "active")
    source.publish("notes", content=REUSED, **overrides)
    manifest: dict[str, Any] = source.events[-1]["payload"]["manifest"]
    return manifest


@pytest.fixture(scope="module")
def published() -> dict[str, Any]:
    return _source_manifest()


def _approval(h: Harness, manifest: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """Organization policy's approval to reuse ``manifest`` in ``h``'s Mission (dummy
    signature: the shell verifies it); ``None`` for a member removes it."""
    doc: dict[str, Any] = {
        "approvalId": "urn:example:reuse-approval:one",
        "sourceMissionId": manifest["missionId"],
        "sourceGroupId": manifest["groupId"],
        "artifactId": manifest["artifactId"],
        "contentHash": manifest["contentHash"],
        "manifestHash": signing_hash(manifest),
        "classification": manifest["classification"],
        "targetMissionId": h.authority.mission_id,
        "targetGroupId": h.group_id,
        "classificationCeiling": "internal",
        "approvedBy": SERVICE.to_json(),
        "approvedAt": h.now,
        "expiresAt": plus_seconds(h.now, 3600),
    }
    for member, value in overrides.items():
        if value is None:
            doc.pop(member, None)
        else:
            doc[member] = value
    doc["signature"] = {
        "algorithm": "Ed25519",
        "keyId": "urn:example:key:policy",
        "createdAt": h.now,
        "value": SIGNATURE_VALUE,
    }
    return doc


def _payload(h: Harness, manifest: dict[str, Any], **approval: Any) -> dict[str, Any]:
    return {"manifest": manifest, "approval": _approval(h, manifest, **approval)}


def import_payload(h: Harness) -> dict[str, Any]:
    """An approved import into ``h`` of an Artifact another Group published."""
    return _payload(h, _source_manifest())


def _refuse(h: Harness, code: ErrorCode, payload: dict[str, Any], actor: Any = COORD) -> str:
    error = h.reject(code, actor, IMPORT_KIND, payload)
    assert REUSED not in h.published()
    return str((error.details or {}).get("member", ""))


# --- accepted --------------------------------------------------------------------------------


def test_the_coordinator_imports_an_approved_artifact_with_an_auditable_event(
    published: dict[str, Any],
) -> None:
    # given a Mission that never held the other Group's Artifact
    h = mission_harness()
    revision = h.authority.mission_view()["revision"]
    payload = _payload(h, published)
    # when its Coordinator imports it with Organization policy's approval
    [event] = h.submit(COORD, IMPORT_KIND, payload).events  # schema-valid (Harness.send)
    # then one Event names the source Group, the content hash, the approval and the actor
    assert event["kind"] == IMPORTED_KIND
    assert event["actor"] == COORD.to_json()
    assert event["payload"]["sourceGroupId"] == SOURCE_GROUP
    assert event["payload"]["sourceMissionId"] == SOURCE_MISSION
    assert event["payload"]["contentHash"] == REUSED
    assert event["payload"]["approvalId"] == payload["approval"]["approvalId"]
    assert event["payload"]["approval"] == payload["approval"]
    assert event["payload"]["manifest"] == published  # unchanged, as signed
    # and the Artifact is the Group's now, with where it came from
    view = h.authority.mission_view()
    assert view["revision"] == revision + 1
    [entry] = [a for a in view["artifacts"] if a["contentHash"] == REUSED]
    assert entry["importedFrom"] == {
        "missionId": SOURCE_MISSION,
        "groupId": SOURCE_GROUP,
        "approvalId": payload["approval"]["approvalId"],
    }
    assert entry["eventId"] == event["eventId"]


def test_an_imported_artifact_can_be_cited_by_the_groups_members(
    published: dict[str, Any],
) -> None:
    # given a Group that refuses a Context Package citing another Group's Artifact
    h = mission_harness()
    citing = h.context_package("urn:example:context-package:reuse", artifactHashes=[REUSED])
    h.reject(
        ErrorCode.INVALID_COMMAND,
        COORD,
        "ext.missionweaveprotocol.core.context_package_publish",
        {"contextPackage": citing},
    )
    # when the Coordinator imports it
    h.submit(COORD, IMPORT_KIND, _payload(h, published))
    # then a Context Package and a Worker's submission may cite it
    h.publish_context_package(
        h.context_package("urn:example:context-package:reuse", artifactHashes=[REUSED])
    )
    h.drive("a", "active")
    h.submit(
        W1,
        "work.submit",
        h.owner_payload("a", artifactHashes=[REUSED], evidence=evidence()),
        workItemId=item_id("a"),
    )
    assert h.view("a")["state"] == "submitted"


def test_an_import_survives_replay_and_snapshots(published: dict[str, Any]) -> None:
    h = mission_harness()
    h.submit(COORD, IMPORT_KIND, _payload(h, published))
    rebuilt = replay(h.events)
    assert json.dumps(rebuilt.snapshot()["state"]["artifacts"], sort_keys=True) == json.dumps(
        h.authority.snapshot()["state"]["artifacts"], sort_keys=True
    )
    assert rebuilt.mission_view() == h.authority.mission_view()


@pytest.mark.parametrize(
    ("classification", "ceiling"),
    [("public", "internal"), ("internal", "internal"), ("confidential", "confidential")],
)
def test_content_up_to_the_ceiling_is_imported(classification: str, ceiling: str) -> None:
    manifest = _source_manifest(classification=classification)
    h = mission_harness()
    h.submit(COORD, IMPORT_KIND, _payload(h, manifest, classificationCeiling=ceiling))
    assert REUSED in h.published()


# --- refused, nothing changed ----------------------------------------------------------------


def test_no_approval_is_refused(published: dict[str, Any]) -> None:
    h = mission_harness()
    member = _refuse(h, ErrorCode.APPROVAL_REQUIRED, {"manifest": published})
    assert member == "payload.approval"


def test_a_malformed_approval_is_refused(published: dict[str, Any]) -> None:
    h = mission_harness()
    _refuse(h, ErrorCode.SCHEMA_VALIDATION_FAILED, _payload(h, published, expiresAt=None))
    _refuse(h, ErrorCode.SCHEMA_VALIDATION_FAILED, _payload(h, published, classification="secret"))


def test_an_approval_by_anyone_but_organization_policy_is_refused(
    published: dict[str, Any],
) -> None:
    # the MissionOwner of the receiving Mission cannot release another Mission's content
    h = mission_harness()
    payload = _payload(h, published, approvedBy=OWNER.to_json())
    assert _refuse(h, ErrorCode.AUTH_FORBIDDEN, payload) == "payload.approval.approvedBy"


def test_an_expired_approval_is_refused(published: dict[str, Any]) -> None:
    h = mission_harness()
    payload = _payload(h, published, expiresAt=h.now)
    assert _refuse(h, ErrorCode.APPROVAL_REQUIRED, payload) == "payload.approval.expiresAt"


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("contentHash", content_hash("other content")),
        ("artifactId", "urn:example:artifact:other"),
        ("manifestHash", content_hash("another manifest")),
        ("sourceGroupId", "urn:example:group:elsewhere"),
        ("sourceMissionId", "urn:example:mission:elsewhere"),
    ],
)
def test_an_approval_for_another_artifact_is_refused(
    published: dict[str, Any], member: str, value: str
) -> None:
    h = mission_harness()
    payload = _payload(h, published, **{member: value})
    assert _refuse(h, ErrorCode.INVALID_COMMAND, payload) == f"payload.approval.{member}"


def test_an_approval_for_another_edit_of_the_manifest_is_refused(
    published: dict[str, Any],
) -> None:
    # the approval names the manifest's signing hash: a changed retrieval URI is not approved
    h = mission_harness()
    payload = _payload(h, published)
    payload["manifest"] = {**published, "uri": "https://elsewhere.example/notes"}
    assert _refuse(h, ErrorCode.INVALID_COMMAND, payload) == "payload.approval.manifestHash"


@pytest.mark.parametrize(
    ("member", "value"),
    [("targetGroupId", "urn:example:group:beta"), ("targetMissionId", "urn:example:mission:b")],
)
def test_an_approval_for_another_target_is_refused(
    published: dict[str, Any], member: str, value: str
) -> None:
    h = mission_harness()
    payload = _payload(h, published, **{member: value})
    assert _refuse(h, ErrorCode.INVALID_COMMAND, payload) == f"payload.approval.{member}"


def test_content_above_the_receiving_missions_ceiling_is_refused() -> None:
    manifest = _source_manifest(classification="confidential")
    h = mission_harness()
    payload = _payload(h, manifest, classificationCeiling="internal")
    assert _refuse(h, ErrorCode.AUTH_FORBIDDEN, payload) == "payload.manifest.classification"


def test_restricted_content_never_crosses() -> None:
    manifest = _source_manifest(classification="restricted")
    h = mission_harness()
    payload = _payload(h, manifest, classificationCeiling="restricted")
    member = _refuse(h, ErrorCode.INVALID_COMMAND, payload)
    assert member == "payload.approval.classificationCeiling"


def test_an_approval_of_another_classification_is_refused(published: dict[str, Any]) -> None:
    h = mission_harness()
    payload = _payload(h, published, classification="public")
    assert _refuse(h, ErrorCode.INVALID_COMMAND, payload) == "payload.approval.classification"


@pytest.mark.parametrize("member", PROVENANCE_MEMBERS)
def test_a_manifest_without_provenance_is_refused(published: dict[str, Any], member: str) -> None:
    h = mission_harness()
    bare = {k: v for k, v in published.items() if k != member}
    payload = {"manifest": bare, "approval": _approval(h, published)}
    assert _refuse(h, ErrorCode.SCHEMA_VALIDATION_FAILED, payload) == "payload.manifest"


def test_empty_tool_and_model_lists_are_provenance_too() -> None:
    # the product's agents record none when none was used: that is a statement, not a gap
    manifest = _source_manifest(toolVersions=[], modelVersions=[])
    h = mission_harness()
    h.submit(COORD, IMPORT_KIND, _payload(h, manifest))
    assert REUSED in h.published()


def test_an_artifact_of_this_group_is_not_imported() -> None:
    h = mission_harness()
    h.drive("a", "active")
    own = h.manifest("a", content=REUSED)
    assert _refuse(h, ErrorCode.INVALID_COMMAND, _payload(h, own)) == "payload.manifest.groupId"


def test_content_the_group_already_holds_is_refused(published: dict[str, Any]) -> None:
    h = mission_harness()
    h.submit(COORD, IMPORT_KIND, _payload(h, published))
    h.reject(ErrorCode.INVALID_STATE_TRANSITION, COORD, IMPORT_KIND, _payload(h, published))


@pytest.mark.parametrize("actor", [W1, OWNER, SERVICE])
def test_only_the_receiving_coordinator_imports(published: dict[str, Any], actor: Any) -> None:
    h = mission_harness()
    _refuse(h, ErrorCode.AUTH_FORBIDDEN, _payload(h, published), actor)


def test_a_closed_mission_imports_nothing(published: dict[str, Any]) -> None:
    h = mission_harness()
    h.submit(OWNER, "mission.cancel", {})
    _refuse(h, ErrorCode.INVALID_STATE_TRANSITION, _payload(h, published))


def test_older_rules_do_not_know_the_kind(published: dict[str, Any]) -> None:
    h = mission_harness()
    h.rules = RULES_CONTEXT
    h.reject(ErrorCode.INVALID_COMMAND, COORD, IMPORT_KIND, _payload(h, published))


# --- the signatures the shell verifies --------------------------------------------------------


def _signed_documents() -> tuple[dict[str, Any], dict[str, Any]]:
    h = mission_harness()
    unsigned = {k: v for k, v in _source_manifest().items() if k != "signature"}
    manifest = sign(unsigned, "artifact", key_id(W1), KEYS[W1.id])
    approval = {k: v for k, v in _approval(h, manifest).items() if k != "signature"}
    return manifest, sign_reuse_approval(approval, key_id(SERVICE), KEYS[SERVICE.id])


def test_the_shell_verifies_both_carried_documents_with_the_codec() -> None:
    manifest, approval = _signed_documents()
    documents = embedded_import_documents(IMPORT_KIND, {"manifest": manifest, "approval": approval})
    assert documents == (manifest, approval)
    assert embedded_import_documents("artifact.publish", {"manifest": manifest}) is None
    verify_value(manifest, PROFILES["artifact"], EVIDENCE)
    verified = verify_value(
        approval, REUSE_APPROVAL_PROFILE, EVIDENCE, schema_check=check_approval_shape
    )
    assert verified.principal == SERVICE


def test_a_forged_or_altered_approval_fails_verification() -> None:
    _, approval = _signed_documents()
    altered = {**approval, "classificationCeiling": "confidential"}
    with pytest.raises(VerificationError) as raised:
        verify_value(altered, REUSE_APPROVAL_PROFILE, EVIDENCE, schema_check=check_approval_shape)
    assert raised.value.code is ErrorCode.AUTH_INVALID_SIGNATURE
    # signed by a Worker's key in the name of Organization policy
    unsigned = {k: v for k, v in approval.items() if k != "signature"}
    forged = sign_reuse_approval(unsigned, key_id(W1), KEYS[W1.id])
    with pytest.raises(VerificationError) as raised:
        verify_value(forged, REUSE_APPROVAL_PROFILE, EVIDENCE, schema_check=check_approval_shape)
    assert raised.value.stage == "key-resolution"
