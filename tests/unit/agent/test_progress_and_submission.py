"""Structured progress (MWP-WRK-016), blocking (MWP-WRK-017) and Evidence-mapped submissions:
the builders' payloads are the ones the pure Group Authority accepts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mwp.agent import (
    EvidenceItem,
    Progress,
    Submission,
    block_command,
    checkpoint_command,
    progress_command,
    submit_command,
)
from mwp.core.errors import ErrorCode, MwpError
from tests.unit.group.harness import ARTIFACT_A, W1, contract, item_id, mission_harness

ESTIMATE = "2026-07-16T00:00:00Z"


def progress(**overrides: Any) -> Progress:
    values: dict[str, Any] = {
        "phase": "implementation",
        "milestones": ["design"],
        "next_checkpoint": "tests",
        "revised_estimate": ESTIMATE,
    }
    values.update(overrides)
    return Progress(**values)


def full_evidence() -> list[EvidenceItem]:
    return [
        EvidenceItem("urn:example:evidence:tests", ["tests-pass"]),
        EvidenceItem("urn:example:evidence:review", ["reviewed"], result=None),
    ]


def test_progress_is_the_structured_wire_object() -> None:
    value = progress(blockers=["waiting for data"], evidence_refs=["urn:example:evidence:t"])
    assert value.to_json() == {
        "currentPhase": "implementation",
        "completedMilestones": ["design"],
        "nextCheckpoint": "tests",
        "blockers": ["waiting for data"],
        "updatedCompletionEstimate": ESTIMATE,
        "evidenceIds": ["urn:example:evidence:t"],
    }
    assert Progress.from_json(value.to_json()) == value
    dated = progress(revised_estimate=datetime(2026, 7, 16, tzinfo=UTC))
    assert dated.revised_estimate == ESTIMATE


@pytest.mark.parametrize(
    "overrides",
    [
        {"phase": "45% done"},
        {"phase": "half, 50 %"},
        {"milestones": ["design", "80 percent of tests"]},
        {"next_checkpoint": "at 90%"},
        {"phase": ""},
        {"milestones": "design"},
        {"revised_estimate": "tomorrow"},
        {"revised_estimate": datetime(2026, 7, 16)},  # naive: refused
        {"evidence_refs": ["not an id"]},
        {"evidence_refs": ["urn:x:e", "urn:x:e"]},
    ],
)
def test_percentages_and_malformed_progress_are_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(MwpError) as refused:
        progress(**overrides)
    assert refused.value.code == ErrorCode.INVALID_COMMAND


def test_a_percentage_member_is_refused_when_parsing() -> None:
    wire = progress().to_json()
    with pytest.raises(MwpError) as refused:
        Progress.from_json({**wire, "percentComplete": 40})
    assert refused.value.details == {"unknownMembers": ["percentComplete"], "reason": "percentage"}
    with pytest.raises(TypeError):
        Progress(percent=40)  # type: ignore[call-arg]


def test_submission_evidence_must_cover_every_criterion_and_name_no_other() -> None:
    c = contract()
    Submission([ARTIFACT_A], full_evidence()).check(c)
    partial = Submission([ARTIFACT_A], full_evidence()[:1])
    with pytest.raises(MwpError) as uncovered:
        partial.check(c)
    assert uncovered.value.details == {"uncoveredCriteria": ["reviewed"]}
    stray = Submission([ARTIFACT_A], [*full_evidence(), EvidenceItem("urn:x:e", ["made-up"])])
    with pytest.raises(MwpError) as unknown:
        stray.check(c)
    assert unknown.value.details == {"unknownCriteria": ["made-up"]}
    twice = Submission([ARTIFACT_A], [*full_evidence(), full_evidence()[0]])
    with pytest.raises(MwpError) as duplicate:
        twice.check(c)
    assert duplicate.value.details == {"duplicateEvidenceIds": ["urn:example:evidence:tests"]}
    for bad in (
        lambda: Submission([], full_evidence()),
        lambda: Submission(["not-a-hash"], full_evidence()),
        lambda: Submission([ARTIFACT_A], []),
        lambda: EvidenceItem("urn:x:e", []),
        lambda: EvidenceItem("urn:x:e", ["a"], result="ok"),
    ):
        with pytest.raises(MwpError):
            bad()


def test_evidence_item_from_a_full_evidence_document() -> None:
    item = EvidenceItem.from_document(
        {"evidenceId": "urn:x:e", "criterionIds": ["tests-pass"], "result": "passed"}
    )
    assert item.to_json() == {
        "evidenceId": "urn:x:e",
        "criterionIds": ["tests-pass"],
        "result": "passed",
    }


def test_the_group_authority_accepts_the_built_progress_checkpoint_block_and_submit() -> None:
    h = mission_harness()
    h.drive("a", "active")
    wid = item_id("a")

    def send(command: Any) -> list[dict[str, Any]]:
        return h.submit(W1, command.kind, command.payload, workItemId=wid).events

    owner = {"ownership_epoch": h.epoch("a"), "lease_id": h.lease_id("a")}
    renewed = send(progress_command(wid, progress=progress(), lease_seconds=120, **owner))
    assert renewed[0]["kind"] == "work.progressed"
    assert h.view("a")["progress"] == progress().to_json()
    checkpointed = send(checkpoint_command(wid, progress=progress(), **owner))
    assert checkpointed[0]["kind"] == "work.checkpointed"
    assert h.view("a")["state"] == "queued"
    h.start("a", W1)
    owner = {"ownership_epoch": h.epoch("a"), "lease_id": h.lease_id("a")}
    blocked = send(block_command(wid, required_resolution="need API access", **owner))
    assert blocked[0]["payload"]["requiredResolution"] == "need API access"
    assert h.view("a")["state"] == "blocked"


def test_the_group_authority_accepts_the_built_submission() -> None:
    h = mission_harness()
    h.drive("a", "active")
    h.publish("a")
    wid = item_id("a")
    command = submit_command(
        wid,
        ownership_epoch=h.epoch("a"),
        lease_id=h.lease_id("a"),
        submission=Submission([ARTIFACT_A], full_evidence()),
        contract=contract(),
    )
    assert command.payload == {
        "ownershipEpoch": h.epoch("a"),
        "leaseId": h.lease_id("a"),
        "artifactHashes": [ARTIFACT_A],
        "evidence": [e.to_json() for e in full_evidence()],
    }
    h.submit(W1, command.kind, command.payload, workItemId=wid)
    assert h.view("a")["state"] == "submitted"


def test_an_uncovered_submission_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(MwpError) as refused:
        submit_command(
            item_id("a"),
            ownership_epoch=1,
            lease_id="urn:x:lease",
            submission=Submission([ARTIFACT_A], full_evidence()[1:]),
            contract=contract(),
        )
    assert refused.value.details == {"uncoveredCriteria": ["tests-pass"]}
