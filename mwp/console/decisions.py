"""The MissionOwner's decision, drafted by the console and signed in the browser.

The console writes the two documents a decision needs, unsigned: the Approval of the submitted
revision and Artifact set (``approved``, or ``changes_requested`` with the reason), and the
Command that carries it (``mission.approve`` or ``mission.request_changes``, with the human's
current Membership Epoch). The browser signs the Approval, puts it in the Command's payload and
signs the Command; :func:`forwardable` checks that what comes back is that human's decision on
that Mission before the console sends it to the Group Authority, which verifies both
signatures and decides like any other Command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mwp import PROTOCOL_VERSION
from mwp.client.identity import new_id, utc_now
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.group.approval import DEFAULT_POLICY_VERSION
from mwp.core.trust.registry import Principal

Json = dict[str, Any]

KINDS: Final = {"approve": "mission.approve", "request_changes": "mission.request_changes"}
DECISIONS: Final = {"approve": "approved", "request_changes": "changes_requested"}
REASON_CHARS: Final = 2000


def _invalid(message: str, reason: str) -> MwpError:
    return MwpError(ErrorCode.INVALID_COMMAND, message, diagnostic=Diagnostic("console", reason))


def draft(
    view: Mapping[str, Any],
    human: Principal,
    decision: str,
    membership_epoch: int | None,
    reason: str = "",
) -> Json:
    """``{approval, command}``, unsigned; the Command's ``payload.approval`` is the slot for
    the signed Approval. Refused while the Mission awaits no Approval."""
    if decision not in KINDS:
        raise _invalid("a decision is approve or request_changes", "decision")
    reason = reason.strip()
    if decision == "request_changes" and not reason:
        raise _invalid("a change request needs its reason", "reason")
    if len(reason) > REASON_CHARS:
        raise _invalid(f"the reason is longer than {REASON_CHARS} characters", "reason-length")
    submission = view.get("submission")
    if view.get("state") != "awaiting_approval" or not submission:
        raise MwpError(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"the Mission is {view.get('state')}, not awaiting approval",
            diagnostic=Diagnostic("console", "not-awaiting"),
        )
    now = utc_now()
    policy = view.get("approvalPolicy") or {}
    approval: Json = {
        "approvalId": new_id(),
        "kind": "child_mission" if view.get("parent") else "mission_final",
        "decision": DECISIONS[decision],
        "missionId": view["missionId"],
        "groupId": view["groupId"],
        "missionRevision": submission["missionRevision"],
        "artifactHashes": list(submission["artifactHashes"]),
        "acceptancePolicyVersion": policy.get("policyVersion", DEFAULT_POLICY_VERSION),
        "approver": human.to_json(),
        "comments": reason,
        "conditions": [],
        "occurredAt": now,
    }
    payload: Json = {"missionRevision": submission["missionRevision"], "approval": None}
    if decision == "approve":
        payload["artifactHashes"] = list(submission["artifactHashes"])
    command: Json = {
        "protocolVersion": PROTOCOL_VERSION,
        "actionId": new_id(),
        "actor": human.to_json(),
        "kind": KINDS[decision],
        "correlationId": new_id(),
        "issuedAt": now,
        "payload": payload,
        "groupId": view["groupId"],
    }
    if membership_epoch is not None:
        command["membershipEpoch"] = membership_epoch
    return {"approval": approval, "command": command}


def forwardable(command: Any, human: Principal, view: Mapping[str, Any]) -> Json:
    """``command`` if it is this human's decision on this Mission (what the console may send
    for them); the Group Authority checks everything else, signatures first."""
    if not isinstance(command, Mapping):
        raise _invalid("the decision is a signed Command object", "not-an-object")
    if command.get("kind") not in KINDS.values():
        raise _invalid("the console sends mission.approve or mission.request_changes", "kind")
    if command.get("actor") != human.to_json():
        raise MwpError(
            ErrorCode.AUTH_FORBIDDEN,
            "the Command is not signed as the logged-in human",
            diagnostic=Diagnostic("console", "actor"),
        )
    if command.get("groupId") != view.get("groupId"):
        raise _invalid("the Command names another Group", "group")
    if not isinstance(command.get("signature"), Mapping):
        raise MwpError(
            ErrorCode.AUTH_INVALID_SIGNATURE,
            "the Command is not signed",
            diagnostic=Diagnostic("console", "unsigned"),
        )
    return dict(command)
