"""Review records and signed Approvals from the client SDK (spec 13.2, 7.3).

A Coordinator's verdict on a submitted result names, per acceptance criterion, the
Submission's Evidence it checked and the result of its review; the MissionOwner's
``mission.approve`` carries the Approval document itself, signed by the approver:

>>> view = await mission.work_item(item_id)
>>> payload = {"review": review_record(view)}           # every criterion passed
>>> await mission.send(coordinator, "work.accept_result", payload, ...)
>>> rejected = review_record(view, {"tests-pass": "failed"}, {"tests-pass": "2 tests fail"})
>>> approval = signed_approval(await mission.view(), owner, comments="Ship it.")
>>> await mission.send(owner, "mission.approve", approve_payload(approval))

The Group refuses a review that leaves a criterion out or cites Evidence the Submission does
not map to it, and an Approval of another Mission, revision or Artifact set
(docs/commands.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from mwp.client.identity import Identity, new_id, utc_now
from mwp.core.group.approval import DEFAULT_POLICY_VERSION

# The failureCode a rejected result is recorded with (``work.failed``).
RESULT_REJECTED: Final = "RESULT_REJECTED"


def review_record(
    view: Mapping[str, Any],
    results: Mapping[str, str] | None = None,
    comments: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``review`` member for the submitted WorkItem ``view`` (what ``work_item``
    returns): each criterion cites the Submission's Evidence mapped to it, with the result in
    ``results`` (default ``passed``) and the comment in ``comments``, if any."""
    evidence = view.get("submissionEvidence") or []
    criteria = []
    for criterion in view["contract"]["acceptanceCriteria"]:
        criterion_id = criterion["criterionId"]
        entry: dict[str, Any] = {
            "criterionId": criterion_id,
            "evidenceIds": [
                e["evidenceId"] for e in evidence if criterion_id in e.get("criterionIds", [])
            ],
            "result": (results or {}).get(criterion_id, "passed"),
        }
        if comments and comments.get(criterion_id):
            entry["comments"] = comments[criterion_id]
        criteria.append(entry)
    return {"criteria": criteria}


def rejection_payload(
    view: Mapping[str, Any],
    reason: str,
    results: Mapping[str, str],
    comments: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``work.fail`` of a submitted result: the reasons, the review naming what did not pass
    (``results``: criterion -> ``failed`` or ``inconclusive``) and the Submission's Evidence as
    the failure Evidence. The item is then ``failed``, to be offered again."""
    submission = view.get("submission") or {}
    return {
        "reason": reason,
        "failureEvidenceIds": list(submission.get("evidenceIds") or []),
        "failureCode": RESULT_REJECTED,
        "review": review_record(view, results, comments),
    }


def signed_approval(
    mission_view: Mapping[str, Any],
    approver: Identity,
    *,
    comments: str = "",
    conditions: Sequence[str] = (),
    approval_id: str | None = None,
    occurred_at: str | None = None,
    decision: str = "approved",
) -> dict[str, Any]:
    """The Approval of the Mission's submitted revision and Artifact set (``mission_view``:
    what ``MissionHandle.view`` returns), signed by ``approver``; ``decision``
    ``changes_requested`` (its reason in ``comments``) for ``mission.request_changes``."""
    submission = mission_view.get("submission")
    if not submission:
        raise ValueError(f"the Mission is {mission_view.get('state')}, not awaiting approval")
    policy = mission_view.get("approvalPolicy") or {}
    document = {
        "approvalId": approval_id or new_id(),
        "kind": "child_mission" if mission_view.get("parent") else "mission_final",
        "decision": decision,
        "missionId": mission_view["missionId"],
        "groupId": mission_view["groupId"],
        "missionRevision": submission["missionRevision"],
        "artifactHashes": list(submission["artifactHashes"]),
        "acceptancePolicyVersion": policy.get("policyVersion", DEFAULT_POLICY_VERSION),
        "approver": approver.principal.to_json(),
        "comments": comments,
        "conditions": list(conditions),
        "occurredAt": occurred_at or utc_now(),
    }
    return approver.sign(document, "approval")


def changes_payload(approval: Mapping[str, Any]) -> dict[str, Any]:
    """``mission.request_changes`` carrying ``approval`` (decision ``changes_requested``)."""
    return {"missionRevision": approval["missionRevision"], "approval": dict(approval)}


def approve_payload(approval: Mapping[str, Any]) -> dict[str, Any]:
    """``mission.approve`` carrying ``approval``: the revision and Artifact set it approves."""
    return {
        "missionRevision": approval["missionRevision"],
        "artifactHashes": list(approval["artifactHashes"]),
        "approval": dict(approval),
    }
