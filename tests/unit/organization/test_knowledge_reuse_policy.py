"""The Organization's Knowledge Reuse Policy (mwp.core.organization.knowledge_reuse;
MWP-WRK-028): it approves only what a rule allows (the source and target Missions named or
"*", the content's classification at most the rule's), never a Mission to itself, nothing
without a rule; a policy that would clear a Mission above what the Group accepts does not
load; and the approval it builds for an Artifact is one the Group Authority accepts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.group.knowledge import IMPORT_KIND, IMPORTED_KIND
from mwp.core.organization.knowledge_reuse import ReusePolicy, approval_document
from tests.unit.group.harness import COORD, SERVICE, SIGNATURE_VALUE, Harness, mission_harness
from tests.unit.group.test_knowledge_reuse import _source_manifest

FIX = "urn:example:mission:fix"
HOTFIX = "urn:example:mission:hotfix"
OTHER = "urn:example:mission:other"


def policy(*rules: dict[str, Any]) -> ReusePolicy:
    return ReusePolicy.from_json({"rules": list(rules)})


def rule(**members: Any) -> dict[str, Any]:
    return {
        "name": "fixes",
        "sourceMissions": [FIX],
        "targetMissions": [HOTFIX],
        "ceiling": "internal",
        **members,
    }


def test_a_rule_approves_its_source_for_its_target_up_to_its_classification() -> None:
    decided = policy(rule()).decide(FIX, HOTFIX, "internal")
    assert decided.rule is not None and decided.rule.name == "fixes"
    assert decided.rule.ceiling == "internal" and decided.rule.valid_seconds == 3600
    assert policy(rule()).decide(FIX, HOTFIX, "public").rule is not None


@pytest.mark.parametrize(
    ("source", "target", "classification", "reason"),
    [
        (OTHER, HOTFIX, "internal", "no-rule"),  # another source
        (FIX, OTHER, "internal", "no-rule"),  # another target
        (FIX, HOTFIX, "confidential", "classification-above-rules:fixes"),
        (FIX, FIX, "public", "same-mission"),
    ],
)
def test_what_no_rule_allows_is_not_approved(
    source: str, target: str, classification: str, reason: str
) -> None:
    decided = policy(rule()).decide(source, target, classification)
    assert decided.rule is None and decided.reason == reason


def test_without_a_policy_nothing_crosses() -> None:
    assert ReusePolicy().decide(FIX, HOTFIX, "public").rule is None


def test_any_mission_of_the_organization_and_the_first_rule_that_allows() -> None:
    rules = policy(
        rule(name="narrow", maxClassification="public"),
        rule(name="wide", sourceMissions="*", targetMissions="*", ceiling="confidential"),
    )
    assert rules.decide(FIX, HOTFIX, "public").reason == "rule:narrow"
    decided = rules.decide(OTHER, FIX, "confidential")
    assert decided.rule is not None and decided.rule.name == "wide"
    assert rules.decide(OTHER, FIX, "restricted").rule is None  # restricted never crosses


@pytest.mark.parametrize(
    "document",
    [
        {"rules": [rule(ceiling="restricted")]},  # above what any Group accepts
        {"rules": [rule(maxClassification="confidential")]},  # above its own ceiling
        {"rules": [rule(sourceMissions=[])]},
        {"rules": [rule(targetMissions="any")]},
        {"rules": [rule(validSeconds=0)]},
        {"rules": [rule(), rule()]},  # a name twice
        {"rules": [rule(extra=1)]},
        {"rules": [{k: v for k, v in rule().items() if k != "name"}]},
        {"rule": []},
        [],
    ],
)
def test_a_policy_that_would_open_more_than_it_says_does_not_load(document: Any) -> None:
    with pytest.raises(ValueError):
        ReusePolicy.from_json(document)


def test_the_approval_it_builds_is_accepted_by_the_receiving_group() -> None:
    h = mission_harness()
    manifest = _source_manifest()
    document = approval_document(
        manifest,
        approval_id="urn:example:reuse-approval:policy",
        target_mission_id=h.authority.mission_id,
        target_group_id=h.group_id,
        ceiling="internal",
        approved_by=SERVICE.to_json(),
        now=datetime.fromisoformat(h.now.replace("Z", "+00:00")),
        valid_seconds=600,
    )
    approval = {
        **document,
        "signature": {
            "algorithm": "Ed25519",
            "keyId": "urn:example:key:policy",
            "createdAt": h.now,
            "value": SIGNATURE_VALUE,
        },
    }
    outcome = h.submit(COORD, IMPORT_KIND, {"manifest": manifest, "approval": approval})
    imported = [e for e in outcome.events if e["kind"] == IMPORTED_KIND]
    assert imported and imported[0]["payload"]["approvalId"] == document["approvalId"]
    # Approved for that Group, the same document is refused by another (it checks the target).
    other = Harness(group_id="urn:example:group:elsewhere")
    other.create_mission(missionId="urn:example:mission:elsewhere")
    payload = {"manifest": manifest, "approval": approval}
    other.reject(ErrorCode.INVALID_COMMAND, COORD, IMPORT_KIND, payload)
