"""Evidence-based review and the signed Approval on Temporal (spec 13.2, 7.3): through the
client SDK the Coordinator rejects a submitted result with a review naming the criterion that
failed (the item is failed, offered again), then accepts the new submission with a review
citing each criterion's Evidence; the MissionOwner's mission.approve carries an Approval it
signed, which the MissionWorkflow verifies (forged or mismatched ones are refused, changing
nothing) and the Group Event log holds; the archive's policy log names its signature and the
signed Command hash."""

from __future__ import annotations

import copy
from typing import Any

from mwp.client import MwpClient
from mwp.client.review import approve_payload, changes_payload, review_record, signed_approval
from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import RegistryEvidence
from mwp.log.compaction import archive_group, final_snapshot
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import open_store
from tests.integration.conftest import stack_log_location
from tests.integration.missions_helper import (
    MissionRig,
    WorkItemRef,
    event_of,
    eventually,
    new_mission,
)
from tests.integration.test_group_archive import authority_identity


async def _submitted(rig: MissionRig, item: WorkItemRef) -> None:
    worker = rig.crew.workers[0]
    offers = await rig.offer(item, worker)
    epoch = await rig.accept(worker, item, offers["offers"][0]["offerId"])
    lease = await rig.start(worker, item, epoch)
    await rig.submit(worker, item, epoch, lease["leaseId"])


async def _mirrored(log: GroupEventLog, through: int) -> bool:
    return log.last_sequence() >= through


async def test_a_review_cites_evidence_and_the_approval_is_signed_in_the_group_log(
    mwp_client: MwpClient,
) -> None:
    rig = await new_mission(mwp_client, workers=1)
    coordinator, owner = rig.crew.coordinator, rig.crew.owner
    session = rig.crew.session(coordinator)
    item = await rig.authorize("Summarise the incident")
    criterion = item.contract["acceptanceCriteria"][0]["criterionId"]
    await _submitted(rig, item)

    # A review citing Evidence the Submission does not hold is refused.
    view = await rig.mission.work_item(item.work_item_id)
    forged = review_record(view)
    forged["criteria"][0]["evidenceIds"] = ["urn:uuid:00000000-0000-4000-8000-00000000beef"]
    await rig.assert_refused(
        lambda: rig.coordinate(
            "work.accept_result", {"review": forged}, work_item_id=item.work_item_id
        ),
        ErrorCode.INVALID_COMMAND,
    )
    # Rejected with the reasons: failed, with the review in its Event; then offered again.
    rejected = await rig.mission.reject_result(
        coordinator,
        item.work_item_id,
        session_epoch=session,
        reason="The summary omits the timeline.",
        results={criterion: "failed"},
        comments={criterion: "No timeline section."},
    )
    review = event_of(rejected, "work.failed")["payload"]["review"]
    assert review["decision"] == "rejected"
    assert review["criteria"][0]["result"] == "failed"
    assert review["criteria"][0]["evidenceIds"] == [
        e["evidenceId"] for e in view["submissionEvidence"]
    ]
    await _submitted(rig, item)
    accepted = await rig.mission.accept_result(
        coordinator, item.work_item_id, session_epoch=session
    )
    review = event_of(accepted, "work.result.accepted")["payload"]["review"]
    assert review["decision"] == "accepted"
    assert {c["result"] for c in review["criteria"]} == {"passed"}

    # The MissionOwner's Approval: forged, signed by another, or of another revision: refused.
    hashes = (await rig.mission.work_item(item.work_item_id))["submission"]["artifactHashes"]
    await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    # Changes requested: the owner's signed decision too (a tampered one is refused).
    changes = signed_approval(
        await rig.mission.view(), owner, comments="Name the owner.", decision="changes_requested"
    )
    altered = {**changes, "comments": "Nothing to change."}
    await rig.assert_refused(
        lambda: rig.send(owner, "mission.request_changes", changes_payload(altered)),
        ErrorCode.AUTH_INVALID_SIGNATURE,
    )
    requested = await rig.mission.request_changes(owner, "Name the owner.")
    decided = event_of(requested, "mission.changes_requested")["payload"]
    assert decided["reason"] == "Name the owner." and "signature" in decided["approval"]
    await rig.coordinate("mission.submit_for_approval", {"artifactHashes": hashes})
    mission_view = await rig.mission.view()
    approval = signed_approval(mission_view, owner, comments="Ship it.")
    tampered = copy.deepcopy(approval)
    tampered["comments"] = "Ship it, and the next one."
    by_another = {**approval, "signature": coordinator.sign(approval, "approval")["signature"]}
    stale = signed_approval(
        {**mission_view, "submission": {**mission_view["submission"], "missionRevision": 1}}, owner
    )
    for bad, code in (
        (tampered, ErrorCode.AUTH_INVALID_SIGNATURE),
        (by_another, ErrorCode.AUTH_INVALID_SIGNATURE),
        (stale, ErrorCode.REVISION_CONFLICT),
    ):
        payload: dict[str, Any] = {**approve_payload(approval), "approval": bad}
        await rig.assert_refused(lambda p=payload: rig.send(owner, "mission.approve", p), code)
    missing = {k: v for k, v in approve_payload(approval).items() if k != "approval"}
    await rig.assert_refused(
        lambda: rig.send(owner, "mission.approve", missing), ErrorCode.INVALID_COMMAND
    )

    approved = await rig.send(owner, "mission.approve", approve_payload(approval))
    event = event_of(approved, "mission.approved")
    assert event["payload"]["approval"] == approval
    assert event["commandHash"] == approved["receipt"]["signingHash"]

    # The Group Event log holds it, verified; the archive's policy log names its signature.
    through = await rig.mission.sequence()
    log = GroupEventLog(open_store(stack_log_location()), rig.mission.group_id)
    evidence = RegistryEvidence.from_json(await rig.crew.organization.registry.evidence_json())
    await eventually(lambda: _mirrored(log, through), timeout=20)
    verdict = log.verify_all(evidence)
    assert verdict.ok and verdict.last_sequence == through, verdict
    [logged] = [e.event for e in log.read(0, through) if e.event["kind"] == "mission.approved"]
    assert logged["payload"]["approval"] == approval
    authority = authority_identity(rig)
    reference = archive_group(log, authority.key_id, authority.key, evidence=evidence)
    policy = final_snapshot(log, reference).document["policyLog"]
    [entry] = [e for e in policy if e["decision"] == "mission.approved"]
    assert entry["details"]["approvalSignature"] == approval["signature"]
    assert entry["details"]["commandHash"] == approved["receipt"]["signingHash"]
