"""The signed Approval in ``mission.approved`` (spec 7.3): under RULES_LEDGER the MissionOwner's
``mission.approve`` carries the Approval document, which the Group checks against the
submission and records unchanged; the archive's policy log names its signature and the signed
Command hash. The signature itself is the shell's to verify (tests/integration)."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.client.identity import Identity
from mwp.client.review import approve_payload, signed_approval
from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_CONTEXT
from mwp.core.group.approval import embedded_approval
from mwp.core.log.group_snapshot import ArchiveProjection
from mwp.core.models import validate_document
from mwp.core.wire.ed25519 import SigningKey, verify_equation
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import b64url_decode
from tests.unit.group.harness import (
    ARTIFACT_A,
    ARTIFACT_B,
    COORD,
    KEYS_VALID_FROM,
    OWNER,
    STRANGER,
    Harness,
    mission_harness,
)


def _awaiting(rules: int | None = None) -> Harness:
    h = mission_harness()
    if rules is not None:
        h.rules = rules
    h.verify("a")
    h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    return h


def _refused(h: Harness, payload: dict[str, Any], code: ErrorCode) -> Any:
    return h.reject(code, OWNER, "mission.approve", payload)


def _with(h: Harness, **overrides: Any) -> dict[str, Any]:
    return {**h.approve_payload(), "approval": h.approval(**overrides)}


def test_given_a_submission_when_the_owner_sends_a_signed_approval_then_the_event_carries_it() -> (
    None
):
    h = _awaiting()
    payload = h.approve_payload()

    outcome = h.submit(OWNER, "mission.approve", payload)

    (event,) = outcome.events
    assert event["payload"]["approval"] == payload["approval"]  # unchanged, signature included
    validate_document("approval.schema.json", event["payload"]["approval"])
    view = h.authority.mission_view()
    assert view["state"] == "approved" and view["approval"] == payload["approval"]


def test_given_a_submission_when_the_approval_is_missing_or_not_an_object_then_refused() -> None:
    h = _awaiting()
    bare = {k: v for k, v in h.approve_payload().items() if k != "approval"}
    error = _refused(h, bare, ErrorCode.INVALID_COMMAND)
    assert error.details == {"member": "payload.approval", "reason": "is required"}
    _refused(h, {**bare, "approval": "yes"}, ErrorCode.INVALID_COMMAND)


def test_given_a_submission_when_the_approval_is_not_schema_valid_then_refused() -> None:
    h = _awaiting()
    error = _refused(h, _with(h, acceptancePolicyVersion=None), ErrorCode.SCHEMA_VALIDATION_FAILED)
    assert error.details is not None and error.details["member"] == "payload.approval"
    unsigned = h.approve_payload()
    del unsigned["approval"]["signature"]
    _refused(h, unsigned, ErrorCode.SCHEMA_VALIDATION_FAILED)


def test_given_a_submission_when_someone_else_is_the_approver_then_refused() -> None:
    h = _awaiting()
    payload = {**h.approve_payload(), "approval": h.approval(STRANGER)}
    error = _refused(h, payload, ErrorCode.INVALID_COMMAND)
    assert error.details is not None and error.details["member"] == "payload.approval.approver"


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("missionId", "urn:example:mission:other"),
        ("groupId", "urn:example:group:other"),
        ("kind", "child_mission"),
        ("decision", "denied"),
        ("acceptancePolicyVersion", "2.0.0"),
        ("artifactHashes", [ARTIFACT_B]),
        ("workItemId", "urn:example:work-item:a"),
    ],
)
def test_given_a_submission_when_the_approval_is_for_something_else_then_refused(
    member: str, value: Any
) -> None:
    h = _awaiting()
    error = _refused(h, _with(h, **{member: value}), ErrorCode.INVALID_COMMAND)
    assert error.details is not None and error.details["member"] == f"payload.approval.{member}"


def test_given_a_submission_when_the_approval_names_another_revision_then_revision_conflict() -> (
    None
):
    h = _awaiting()
    submitted = h.authority.mission_view()["submission"]["missionRevision"]
    error = _refused(h, _with(h, missionRevision=submitted - 1), ErrorCode.REVISION_CONFLICT)
    assert (error.expected_revision, error.current_revision) == (submitted - 1, submitted)


def test_given_changes_requested_when_its_approval_id_is_reused_then_refused() -> None:
    h = _awaiting()
    h.submit(OWNER, "mission.request_changes", h.changes_payload())
    earlier = h.authority.mission_view()["approval"]["approvalId"]
    h.submit(COORD, "mission.submit_for_approval", {"artifactHashes": [ARTIFACT_A]})
    _refused(h, _with(h, approvalId=earlier), ErrorCode.INVALID_COMMAND)
    h.approve()


def test_given_a_signed_approval_when_comments_also_travel_outside_it_then_refused() -> None:
    h = _awaiting()
    _refused(h, {**h.approve_payload(), "comments": "Ship it."}, ErrorCode.INVALID_COMMAND)
    _refused(h, {**h.approve_payload(), "conditions": ["Tag it."]}, ErrorCode.INVALID_COMMAND)


def test_given_older_rules_when_approving_then_the_group_writes_the_approval_as_before() -> None:
    h = _awaiting(RULES_CONTEXT)
    assert "approval" not in h.approve_payload()
    _refused(h, _with(h), ErrorCode.INVALID_COMMAND)  # the member is unknown to these rules
    outcome = h.approve()
    approval = outcome.events[0]["payload"]["approval"]
    assert "signature" not in approval and approval["approver"] == OWNER.to_json()


def test_the_shell_is_handed_the_approval_a_mission_approve_carries() -> None:
    h = _awaiting()
    payload = h.approve_payload()
    assert embedded_approval("mission.approve", payload) == payload["approval"]
    changes = h.changes_payload()
    assert embedded_approval("mission.request_changes", changes) == changes["approval"]
    assert embedded_approval("mission.approve", {"missionRevision": 3}) is None


def test_the_policy_log_records_the_approval_signature_and_the_signed_command_hash() -> None:
    h = _awaiting()
    command = h.command(OWNER, "mission.approve", h.approve_payload())
    h.send(command)
    projection = ArchiveProjection()
    for event in h.events:
        projection.add(event)

    [entry] = [e for e in projection.policy_entries if e["decision"] == "mission.approved"]
    approval = command["payload"]["approval"]
    assert entry["details"]["approvalId"] == approval["approvalId"]
    assert entry["details"]["approvalSignature"] == approval["signature"]
    assert entry["details"]["commandHash"] == h.envelope(command).signing_hash
    # Other policy decisions (here: the WorkItem's authorization) name their Event only.
    [authorized] = [e for e in projection.policy_entries if e["decision"] == "work.authorized"]
    assert set(authorized["details"]) == {"eventId", "sequence"}


def test_the_client_signs_an_approval_the_group_accepts_and_its_signature_verifies() -> None:
    h = _awaiting()
    owner = Identity(OWNER, "urn:example:key:olivia-real", SigningKey.generate(), KEYS_VALID_FROM)
    approval = signed_approval(h.authority.mission_view(), owner, occurred_at=h.now)
    assert verify_equation(
        owner.key.public_key,
        b64url_decode(approval["signature"]["value"]),
        canonicalize({k: v for k, v in approval.items() if k != "signature"}),
    )
    outcome = h.submit(OWNER, "mission.approve", approve_payload(approval))
    assert outcome.events[0]["payload"]["approval"] == approval


# --- mission.request_changes ---------------------------------------------------------------------


def _changes_refused(h: Harness, payload: dict[str, Any], code: ErrorCode) -> Any:
    return h.reject(code, OWNER, "mission.request_changes", payload)


def test_given_a_signed_request_for_changes_then_the_event_carries_it_and_work_resumes() -> None:
    h = _awaiting()
    payload = h.changes_payload("Cover the empty page.")
    (event,) = h.submit(OWNER, "mission.request_changes", payload).events
    assert event["payload"]["approval"] == payload["approval"]
    assert event["payload"]["reason"] == "Cover the empty page."
    assert h.authority.mission_view()["state"] == "active"


def test_a_request_for_changes_must_be_a_signed_decision_of_this_submission() -> None:
    h = _awaiting()
    submitted = h.authority.mission_view()["submission"]["missionRevision"]

    def changed(**overrides: Any) -> dict[str, Any]:
        payload = h.changes_payload()
        terms = {"decision": "changes_requested", "comments": "More.", **overrides}
        payload["approval"] = h.approval(**terms)
        return payload

    _changes_refused(h, changed(decision="approved"), ErrorCode.INVALID_COMMAND)
    _changes_refused(h, changed(approver=STRANGER), ErrorCode.INVALID_COMMAND)
    _changes_refused(h, changed(missionId="urn:example:mission:other"), ErrorCode.INVALID_COMMAND)
    _changes_refused(h, changed(artifactHashes=[ARTIFACT_B]), ErrorCode.INVALID_COMMAND)
    _changes_refused(h, changed(missionRevision=submitted - 1), ErrorCode.REVISION_CONFLICT)
    _changes_refused(h, changed(conditions=None), ErrorCode.SCHEMA_VALIDATION_FAILED)
    _changes_refused(h, {**h.changes_payload(), "reason": "More."}, ErrorCode.INVALID_COMMAND)
    assert h.authority.mission_view()["state"] == "awaiting_approval"


def test_given_older_rules_a_request_for_changes_is_written_by_the_group_as_before() -> None:
    h = _awaiting(RULES_CONTEXT)
    payload = h.changes_payload()
    assert "approval" not in payload
    _changes_refused(h, {**payload, "approval": {}}, ErrorCode.INVALID_COMMAND)
    (event,) = h.submit(OWNER, "mission.request_changes", payload).events
    assert "signature" not in event["payload"]["approval"]
