"""Reusable knowledge for clients (``docs/commands.md``, ``artifact_import``): the Knowledge
Reuse Approval an Organization policy service signs for one Artifact and one receiving Group,
and the import payload the receiving Coordinator sends with it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from mwp.client.identity import Identity, new_id, utc_now
from mwp.core.group.knowledge import APPROVAL_MEMBER, sign_reuse_approval
from mwp.core.trust.signed_document import signing_hash
from mwp.core.wire.values import format_utc


def reuse_approval(
    policy: Identity,
    manifest: Mapping[str, Any],
    *,
    target_mission_id: str,
    target_group_id: str,
    ceiling: str = "internal",
    valid_seconds: int = 3600,
) -> dict[str, Any]:
    """``policy``'s signed approval to reuse the Artifact ``manifest`` describes (as its
    producer signed it) in the target Mission, cleared up to ``ceiling``."""
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=valid_seconds)
    document = {
        "approvalId": new_id(),
        "sourceMissionId": manifest["missionId"],
        "sourceGroupId": manifest["groupId"],
        "artifactId": manifest["artifactId"],
        "contentHash": manifest["contentHash"],
        "manifestHash": signing_hash(manifest),
        "classification": manifest["classification"],
        "targetMissionId": target_mission_id,
        "targetGroupId": target_group_id,
        "classificationCeiling": ceiling,
        "approvedBy": policy.principal.to_json(),
        "approvedAt": utc_now(),
        "expiresAt": format_utc(expires),
    }
    return sign_reuse_approval(document, policy.key_id, policy.key)


def import_payload(manifest: Mapping[str, Any], approval: Mapping[str, Any]) -> dict[str, Any]:
    """The ``artifact_import`` payload: both documents unchanged."""
    return {"manifest": dict(manifest), APPROVAL_MEMBER: dict(approval)}
