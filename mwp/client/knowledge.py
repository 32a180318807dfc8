"""Reusable knowledge for clients (``docs/commands.md``, ``artifact_import``): the Knowledge
Reuse Approval an Organization policy service signs for one Artifact and one receiving Group,
and the import payload the receiving Coordinator sends with it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mwp.client.identity import Identity, new_id
from mwp.core.group.knowledge import APPROVAL_MEMBER, sign_reuse_approval
from mwp.core.organization.knowledge_reuse import approval_document


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
    document = approval_document(
        manifest,
        approval_id=new_id(),
        target_mission_id=target_mission_id,
        target_group_id=target_group_id,
        ceiling=ceiling,
        approved_by=policy.principal.to_json(),
        now=datetime.now(UTC),
        valid_seconds=valid_seconds,
    )
    return sign_reuse_approval(document, policy.key_id, policy.key)


def import_payload(manifest: Mapping[str, Any], approval: Mapping[str, Any]) -> dict[str, Any]:
    """The ``artifact_import`` payload: both documents unchanged."""
    return {"manifest": dict(manifest), APPROVAL_MEMBER: dict(approval)}
