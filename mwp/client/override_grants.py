"""Cooperation Override Grants from the client SDK (spec 20; docs/commands.md).

>>> grant = CooperationOverride("workItemDepth", coordinator.principal, "work.authorize",
...                             action_id, reason="The audit needs one more level.",
...                             expires_at=in_seconds(600))
>>> grant_id, _ = await mission.grant_cooperation_override(owner, grant)
>>> await mission.send(coordinator, "work.authorize", payload, action_id=action_id,
...                    override_grant_id=grant_id, work_item_id=item_id)

The target Command is signed in advance only by its Action ID: the grant names the Action ID,
and the beneficiary later sends the Command with that ID citing the grant. It is consumed when
that Command is accepted; a retry of the accepted Command returns its receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mwp.core.group.override_grant import override_grant_id
from mwp.core.trust.registry import Principal

GRANT_KIND: Final = "policy.grant_cooperation_override"
GRANTED_KIND: Final = "policy.cooperation_override.granted"


@dataclass(frozen=True)
class CooperationOverride:
    """What one grant lifts, for whom and for which Command."""

    policy_name: str  # the exceeded limit, e.g. "workItemDepth" (RATE_LIMITED's details.policy)
    beneficiary: Principal
    target_kind: str
    target_action_id: str
    reason: str
    expires_at: str

    def payload(self, mission_id: str) -> dict[str, Any]:
        return {
            "missionId": mission_id,
            "policyName": self.policy_name,
            "beneficiary": self.beneficiary.to_json(),
            "targetKind": self.target_kind,
            "targetActionId": self.target_action_id,
            "reason": self.reason,
            "expiresAt": self.expires_at,
        }


def granted_id(result: Mapping[str, Any], group_id: str) -> str:
    """The grant ID of an accepted grant Command's result; a retry's result holds no Events,
    but its receipt's sequence is the grant's, from which its ID is derived."""
    for event in result.get("events", ()):
        if event["kind"] == GRANTED_KIND:
            return str(event["payload"]["grantId"])
    return override_grant_id(group_id, int(result["receipt"]["lastSequence"]))
