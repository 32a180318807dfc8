"""The ``OrganizationRegistryWorkflow``'s contract: its ID, type, Update, Query and Signal names
and its input. The registry's rules are :mod:`mwp.core.organization.service`'s."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from mwp.core.organization.service import (
    AGENT_CARD_REGISTER,
    KEY_BINDING_REGISTER,
    KEY_VALIDITY_CHANGE,
    SESSION_OPEN,
)

REGISTRY_WORKFLOW_TYPE = "OrganizationRegistryWorkflow"
UPDATE_FOR_KIND: dict[str, str] = {
    KEY_BINDING_REGISTER: "register_key_binding",
    KEY_VALIDITY_CHANGE: "change_key_validity",
    AGENT_CARD_REGISTER: "register_agent_card",
    SESSION_OPEN: "open_session",
}
QUERY_REGISTRY_EVIDENCE = "registry_evidence"
QUERY_SESSION_EPOCHS = "session_epochs"
QUERY_REVISION = "revision"
QUERY_AGENT_CARD = "agent_card"
QUERY_NOTICE = "registry_notice"
QUERY_VIEW = "organization_view"
SIGNAL_SUBSCRIBE = "subscribe_registry"
SIGNAL_UNSUBSCRIBE = "unsubscribe_registry"
SIGNAL_REGISTRY_CHANGED = "registry_changed"  # sent by the registry to each subscriber
# Sent by a Group Authority when its root Mission is approved: follow-ups may link to it.
SIGNAL_MISSION_APPROVED = "mission_approved"

_WORKFLOW_ID_SAFE = re.compile(r"[^A-Za-z0-9._:@-]")


def organization_workflow_id(organization_id: str) -> str:
    """``mwp-org-<orgId>``, with unusual characters replaced and then disambiguated by hash."""
    safe = _WORKFLOW_ID_SAFE.sub("-", organization_id)
    if safe != organization_id or len(safe) > 200:
        digest = hashlib.sha256(organization_id.encode()).hexdigest()[:12]
        safe = f"{safe[:200]}-{digest}"
    return f"mwp-org-{safe}"


@dataclass
class OrganizationRegistryInput:
    """Start (and continue-as-new) input of the ``OrganizationRegistryWorkflow``.

    ``registry_service_binding`` is the trust root: ``{keyId, principal, algorithm,
    publicKey, validFrom}`` of the registry service's first key. ``state`` is None on the
    first start and carries the compact state across continue-as-new.
    """

    organization_id: str
    registry_service_binding: dict[str, Any]
    session_authorities: list[str] = field(default_factory=list)
    # Continue-as-new once history reaches this many events, if earlier than the server's
    # suggestion (tests lower it; production leaves it None).
    continue_as_new_after_events: int | None = None
    state: dict[str, Any] | None = None
