"""The door (spec 17.4, 18, 20): unknown critical extensions, payload members a kind does not
define and cited Cooperation Override Grants are refused from rules revision ``RULES_DOOR``
on, and changed nothing; under the 0.1.0 rules the same Commands decide as they always did.

Every Command here goes the shell's way: signed for real, verified, then decided.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.group import Outcome
from mwp.core.group.api import CURRENT_RULES, RULES_0_1_0, RULES_DOOR
from mwp.core.group.kinds import RULES
from tests.unit.group.harness import (
    ARTIFACT_A,
    COORD,
    MISSION,
    OWNER,
    W1,
    Harness,
    contract,
    evidence,
    fingerprint,
    item_id,
    mission_harness,
    progress,
    selection_basis,
)
from tests.unit.group.signing import admit, wire

CRITICAL = "urn:example:extension:must-understand"
NONCRITICAL = "urn:example:extension:may-ignore"
GRANT = "urn:example:cooperation-override-grant:one"


def _decide(h: Harness, command: dict[str, Any], rules: int = CURRENT_RULES) -> Outcome:
    envelope, ctx = admit(wire(command)), replace(h.ctx(), rules=rules)
    h.authority.check(envelope, ctx)
    return h.authority.submit(envelope, ctx)


def _refused(
    h: Harness, command: dict[str, Any], code: ErrorCode, rules: int = CURRENT_RULES
) -> MwpError:
    """Refused with ``code`` by check() and submit() alike; nothing changed."""
    envelope, ctx = admit(wire(command)), replace(h.ctx(), rules=rules)
    before, sequence = fingerprint(h.authority), h.authority.sequence
    with pytest.raises(MwpError) as checked:
        h.authority.check(envelope, ctx)
    with pytest.raises(MwpError) as submitted:
        h.authority.submit(envelope, ctx)
    assert (checked.value.code, submitted.value.code) == (code, code), submitted.value
    assert submitted.value.action_id == command["actionId"]
    assert (fingerprint(h.authority), h.authority.sequence) == (before, sequence)
    return submitted.value


def _post(h: Harness, **envelope: Any) -> dict[str, Any]:
    return h.command(
        COORD, "message.post", {"content": [{"type": "text", "text": "hi"}]}, **envelope
    )


def _extension(critical: bool) -> dict[str, Any]:
    return {"version": "1.0.0", "critical": critical, "data": {"any": ["thing"]}}


def test_the_current_rules_include_the_door() -> None:
    assert CURRENT_RULES >= RULES_DOOR > RULES_0_1_0


# --- unknown critical extensions (MWP-EXT-002) --------------------------------------------------


def test_an_unknown_critical_extension_is_refused_and_changes_nothing() -> None:
    h = mission_harness()
    command = _post(h, extensions={NONCRITICAL: _extension(False), CRITICAL: _extension(True)})
    error = _refused(h, command, ErrorCode.UNKNOWN_CRITICAL_EXTENSION)
    assert error.details == {"extensions": [CRITICAL]}
    assert not error.retryable


def test_an_unknown_noncritical_extension_is_accepted_uninterpreted() -> None:
    h = mission_harness()
    outcome = _decide(h, _post(h, extensions={NONCRITICAL: _extension(False)}))
    assert [e["kind"] for e in outcome.events] == ["message.posted"]


def test_a_critical_extension_is_refused_before_the_group_exists_too() -> None:
    h = Harness()
    command = h.command(OWNER, "mission.create", _mission_payload())
    command["extensions"] = {CRITICAL: _extension(True)}
    _refused(h, command, ErrorCode.UNKNOWN_CRITICAL_EXTENSION)


def test_under_the_0_1_0_rules_a_critical_extension_is_accepted_as_before() -> None:
    h = mission_harness()
    outcome = _decide(h, _post(h, extensions={CRITICAL: _extension(True)}), RULES_0_1_0)
    assert [e["kind"] for e in outcome.events] == ["message.posted"]


# --- cited Cooperation Override Grants (MWP-EXT-009, existence) ---------------------------------


def test_a_cited_override_grant_that_does_not_exist_is_forbidden() -> None:
    h = mission_harness()
    error = _refused(h, _post(h, cooperationOverrideGrantId=GRANT), ErrorCode.AUTH_FORBIDDEN)
    assert error.details == {
        "reason": "unknown_override_grant",
        "cooperationOverrideGrantId": GRANT,
    }


def test_an_override_grant_cited_by_a_creation_is_forbidden_too() -> None:
    h = Harness()
    command = h.command(
        OWNER, "mission.create", _mission_payload(), cooperationOverrideGrantId=GRANT
    )
    _refused(h, command, ErrorCode.AUTH_FORBIDDEN)


def test_under_the_0_1_0_rules_a_cited_grant_is_ignored_as_before() -> None:
    h = mission_harness()
    _decide(h, _post(h, cooperationOverrideGrantId=GRANT), RULES_0_1_0)


# --- payload members a kind does not define (spec 17.4) -----------------------------------------


def _mission_payload(**extra: Any) -> dict[str, Any]:
    return {
        "missionId": MISSION,
        "objective": "Ship pagination.",
        "definitionOfDone": [
            {"criterionId": "released", "description": "Released.", "evidenceRequired": ["x"]}
        ],
        "budget": {"currency": "USD", "financialLimit": 100},
        "deadline": "2026-08-01T00:00:00Z",
        "coordinatorAgentId": COORD.id,
        **extra,
    }


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    "unknown",
    [1, None, {"nested": {"deeper": [1, 2]}}, _deep(900), "x" * (2 * 1024 * 1024)],
    ids=["number", "null", "object", "900-deep", "2-MiB"],
)
def test_an_unknown_top_level_payload_member_is_refused(unknown: Any) -> None:
    h = mission_harness()
    command = _post(h)
    command["payload"]["unknownMember"] = unknown
    error = _refused(h, command, ErrorCode.INVALID_COMMAND)
    assert error.details == {"member": "payload", "unknown": ["unknownMember"]}


def test_under_the_0_1_0_rules_an_unknown_member_is_dropped_as_before() -> None:
    h = mission_harness()
    command = _post(h)
    command["payload"]["unknownMember"] = _deep(900)
    outcome = _decide(h, command, RULES_0_1_0)
    assert "unknownMember" not in outcome.events[0]["payload"]["message"]


def test_an_accepted_command_stays_accepted_when_retried_under_the_door() -> None:
    """A Group that accepted it under the 0.1.0 rules returns its receipt, never a refusal."""
    h = mission_harness()
    command = _post(h, extensions={CRITICAL: _extension(True)}, cooperationOverrideGrantId=GRANT)
    command["payload"]["unknownMember"] = 1
    first = _decide(h, command, RULES_0_1_0)
    retry = _decide(h, command, RULES_DOOR)
    assert retry.duplicate and retry.receipt == first.receipt


def _active_item() -> Harness:
    h = mission_harness()
    h.authorize("a")
    h.offer("a", W1)
    h.accept("a", W1)
    h.start("a", W1)
    h.publish("a", W1)
    return h


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("candidates", "payload.candidates[0]"),
        ("evidence", "payload.evidence[1]"),
    ],
)
def test_an_unknown_member_in_an_object_the_kind_reads_member_by_member_is_refused(
    path: str, where: str
) -> None:
    h = _active_item()
    if path == "candidates":
        h.authorize("b")
        payload = {
            "candidates": [{"agentId": W1.id, "selectionBasis": selection_basis(), "tip": 1}],
            "expiresAt": "2026-07-15T01:00:00Z",
        }
        command = h.command(COORD, "work.offer", payload, workItemId=item_id("b"))
    else:
        entries = evidence()
        entries[1]["weight"] = 0.5
        payload = h.owner_payload("a", artifactHashes=[ARTIFACT_A], evidence=entries)
        command = h.command(W1, "work.submit", payload, workItemId=item_id("a"))
    error = _refused(h, command, ErrorCode.INVALID_COMMAND)
    assert error.details is not None and error.details["member"] == where


@pytest.mark.parametrize(
    ("kind", "payload", "code"),
    [
        ("contract", {"contract": contract(surprise=True)}, ErrorCode.WORK_CONTRACT_INCOMPLETE),
        ("progress", {"progress": {**progress(), "percent": 50}}, ErrorCode.INVALID_COMMAND),
    ],
)
def test_core_objects_read_whole_refuse_unknown_members_by_their_own_schema(
    kind: str, payload: dict[str, Any], code: ErrorCode
) -> None:
    h = _active_item()
    if kind == "contract":
        command = h.command(COORD, "work.authorize", payload, workItemId=item_id("c"))
    else:
        owner = h.owner_payload("a", **payload)
        command = h.command(W1, "ext.missionweaveprotocol.core.execution_lease_renew", owner)
        command["workItemId"] = item_id("a")
    # Refused under both rules: their schemas always did.
    for rules in (RULES_0_1_0, RULES_DOOR):
        _refused(h, command, code, rules)


def test_data_free_form_by_design_stays_free() -> None:
    h = mission_harness()
    draft = {"anything": _deep(50), "goes": [1, "two"]}
    outcome = _decide(h, h.command(COORD, "work.propose", {"title": "t", "draftContract": draft}))
    assert outcome.events[0]["payload"]["proposal"]["draftContract"] == draft
    content = [{"type": "data_ref", "schema": "urn:example:schema:x", "data": {"free": {"a": 1}}}]
    _decide(h, h.command(COORD, "message.post", {"content": content}))


# Who passes steps 1 to 7 for each kind (the door's member check comes right before step 8).
_ACTORS = {
    "mission.approve": OWNER,
    "mission.request_changes": OWNER,
    "mission.cancel": OWNER,
    "mission.assign_coordinator": OWNER,
    "approval.grant_execution": OWNER,
    "work.accept_offer": W1,
    "work.start": W1,
    "work.checkpoint": W1,
    "work.block": W1,
    "work.submit": W1,
    "artifact.publish": W1,
    "ext.missionweaveprotocol.core.execution_lease_renew": W1,
    "ext.missionweaveprotocol.core.schedule_disclose": W1,
    "ext.missionweaveprotocol.core.group_archive": OWNER,
    "policy.grant_cooperation_override": OWNER,
}


@pytest.mark.parametrize("kind", sorted(RULES))
def test_every_kind_refuses_a_member_it_does_not_define(kind: str) -> None:
    rule = RULES[kind]
    h = Harness() if rule.creates_group else _active_item()
    actor = OWNER if rule.creates_group else _ACTORS.get(kind, COORD)
    command = h.command(actor, kind, {"notAMemberOfAnyKind": True}, workItemId=item_id("a"))
    if rule.creates_group:
        del command["workItemId"]
    error = _refused(h, command, ErrorCode.INVALID_COMMAND)
    assert error.details == {"member": "payload", "unknown": ["notAMemberOfAnyKind"]}
    # Under the 0.1.0 rules the member went unread: the kind accepted or refused the Command
    # for what it does read (kinds whose payload is all optional accepted it).
    try:
        _decide(h, command, RULES_0_1_0)
    except MwpError as old:
        assert old.details != error.details


def test_every_declared_member_is_one_the_kind_reads() -> None:
    """The declarations are the kinds' readers, not a wider allowance (spot check of the
    members docs/commands.md lists for kinds with many)."""
    assert set(RULES["work.offer"].payload.names) == {
        "candidates",
        "expiresAt",
        "startWithinSeconds",
        "contextPackageId",
        "contextPackage",
        "contract",
        "delegationGrantId",
    }
    assert set(RULES["mission.cancel"].payload.names) == {"reason"}
