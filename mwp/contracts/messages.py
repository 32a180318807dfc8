"""Sealed messages between the authority zone's workflows: their types, and the two local
activities that give a workflow its trusted key and seal what it sends.

Every workflow-to-workflow signal of the authority zone (a Registry notice, a child Mission's
report, a parent's closure, an approval notice, a WorkItem transition, a registry
subscription) carries a document sealed with the Organization's Group Authority key
(:mod:`mwp.core.trust.service_message`). The authority worker holds that key and seals; the
receiving workflow opens the document against the binding the same worker reports. A timer
report needs no seal: the Authority acts on it only if the timer it names is current and due.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mwp.contracts.organization import organization_workflow_id
from mwp.core.trust.registry import Principal

# Message types (the document's ``type``).
REGISTRY_NOTICE = "registry-notice"  # registry -> every subscribed Mission
REGISTRY_SUBSCRIBE = "registry-subscribe"  # a Mission (from) -> its registry
REGISTRY_UNSUBSCRIBE = "registry-unsubscribe"
MISSION_APPROVED = "mission-approved"  # a root Mission -> its registry
CHILD_SETTLED = "child-settled"  # a child Mission -> its parent
PARENT_CLOSED = "parent-closed"  # a parent Mission -> a child it abandoned
CHILD_USAGE = "child-usage"  # a child Mission -> its parent, before it records usage
WORK_ITEM_TRANSITION = "work-item-transition"  # a Mission -> a WorkItem child

# The authority worker's key work (activities/seal.py): activities, local activities in runs
# begun before patches.MISSION_AUTHORITY_ACTIVITIES.
SERVICE_KEY = "service_key"
SEAL_MESSAGE = "seal_message"


@dataclass
class SealRequest:
    signer_id: str  # the service Principal whose key seals
    message_type: str
    sender: str  # workflow IDs
    recipient: str
    sent_at: str
    body: dict[str, Any]


def group_authority(organization_id: str) -> Principal:
    """The Organization's Group Authority service: it accepts every Event (``acceptedBy``) and
    seals the messages between the Organization's workflows."""
    return Principal("service", f"{organization_id}:service:group-authority")


def authorization_service(organization_id: str) -> Principal:
    """The Organization's Authorization Service: it issues the Workers' capability tokens."""
    return Principal("service", f"{organization_id}:service:authorization")


def knowledge_reuse_service(organization_id: str) -> Principal:
    """The Organization's Knowledge Reuse Policy service: it signs the approvals that let an
    Artifact of one Mission be imported into another (``mwp.gateway.knowledge_imports``)."""
    return Principal("service", f"{organization_id}:service:knowledge-reuse")


def registry_subscribers(organization_id: str) -> str:
    """The recipient of a Registry notice: every subscriber of the registry at once (a notice
    is sealed once per revision; shown to another subscriber, it says nothing new)."""
    return f"{organization_workflow_id(organization_id)}/subscribers"
