"""Artifact publication (spec 13.1, 11.3): the owner records a signed manifest under its lease.

An Artifact is immutable and known by its content hash. ``artifact.publish`` puts one signed
manifest into the Group: only the WorkItem's owner may send it, under its current Ownership
Epoch and Execution Lease while the item is ``active`` (publication is one of the acts that
must name the current Lease ID). The manifest must describe this Mission, Group and WorkItem
and name the owner, at its pinned Agent Card version, as producer.

Each content hash is published once per Group: a second publication of the same content is
``INVALID_STATE_TRANSITION`` (a byte-equal retry of the same Command still gets its receipt).
Provenance stays a graph without cycles: every source is either published in this Group or
declared external by the Command, and no source may derive, through published Artifacts,
from the new content.

The core cannot check the manifest's own signature (it holds no Registry evidence). The shell
does, on the object :func:`embedded_manifest` returns, before the Command is decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import AuthorityContext
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.ownership import require_lease, require_owner
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import bad_transition, invalid, reject
from mwp.core.group.roles import working_agent
from mwp.core.group.rules import CommandRule, work_item_target
from mwp.core.group.state import GroupState, Ownership, WorkItem
from mwp.core.group.work_item_state import active_mission, get_item, touch
from mwp.core.models import DocumentInvalid, validate_document

Json = dict[str, Any]

PUBLISH_KIND: Final = "artifact.publish"
PUBLISHED_KIND = "artifact.published"
MANIFEST_MEMBER = "manifest"
EXTERNAL_SOURCES_MEMBER = "externalSourceHashes"


def embedded_manifest(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The signed Artifact manifest an ``artifact.publish`` payload carries, unchanged.

    The shell verifies it against the Registry evidence before the Command is decided::

        manifest = embedded_manifest(command["payload"])
        verify_value(manifest, PROFILES["artifact"], evidence)  # signer: producer.agentId

    Raises ``INVALID_COMMAND`` (``details.member``) when the payload holds no manifest object,
    exactly as ``decide`` would.
    """
    return _manifest_object(Payload(payload))


def _manifest_object(payload: Payload) -> dict[str, Any]:
    value = payload.raw(MANIFEST_MEMBER)
    if not isinstance(value, dict):
        invalid(
            f"payload.{MANIFEST_MEMBER}: must be an object",
            member=f"payload.{MANIFEST_MEMBER}",
            reason="must be an object",
        )
    return value


# --- artifact.publish ----------------------------------------------------------------------------


def _decide_publish(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts
) -> None:
    active_mission(state, cmd)
    item = get_item(state, cmd)
    if item.state != "active":
        bad_transition("WorkItem", item.state, cmd.kind)
    owner = require_owner(item, cmd)
    lease = require_lease(item, cmd, ctx)
    manifest = signed_manifest(cmd)
    content_hash = manifest["contentHash"]
    published = state.artifacts.get(content_hash)
    if published is not None:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "this content is already published in the Group; an Artifact is immutable",
            contentHash=content_hash,
            artifactId=published["artifactId"],
            eventId=published["eventId"],
        )
    _check_binding(state, item, owner, cmd, manifest)
    external = _check_provenance(state, cmd, manifest)
    payload: Json = {
        "manifest": manifest,
        "ownershipEpoch": owner.epoch,
        "leaseId": lease.lease_id,
    }
    if external:
        payload[EXTERNAL_SOURCES_MEMBER] = external
    drafts.add(
        PUBLISHED_KIND, ("work_item", item.work_item_id), payload, work_item_id=item.work_item_id
    )


def signed_manifest(cmd: Incoming) -> Json:
    """The manifest as signed (never normalized: its signature covers these exact values)."""
    manifest = _manifest_object(cmd.payload)
    try:
        validate_document("artifact.schema.json", manifest)
    except DocumentInvalid as exc:
        reject(
            ErrorCode.SCHEMA_VALIDATION_FAILED,
            f"the Artifact manifest is invalid: {exc.reason}",
            member=f"payload.{MANIFEST_MEMBER}",
            reason=exc.reason,
        )
    return manifest


def _mismatch(member: str, expected: Any) -> NoReturn:
    invalid(
        f"payload.{MANIFEST_MEMBER}.{member} does not match",
        member=f"payload.{MANIFEST_MEMBER}.{member}",
        expected=expected,
    )


def _check_binding(
    state: GroupState, item: WorkItem, owner: Ownership, cmd: Incoming, manifest: Json
) -> None:
    """The manifest describes this Mission, Group and WorkItem, produced by the owner at
    its pinned Agent Card and capability versions (MWP-IDN-003)."""
    for member, expected in (
        ("missionId", state.mission_id),
        ("groupId", state.group_id),
        ("workItemId", item.work_item_id),
    ):
        if manifest[member] != expected:
            _mismatch(member, expected)
    producer = manifest["producer"]
    if producer["agentId"] != cmd.actor_id:
        _mismatch("producer.agentId", cmd.actor_id)
    if producer["agentCardVersion"] != owner.agent_card_version:
        _mismatch("producer.agentCardVersion", owner.agent_card_version)
    pinned = {pin["id"]: pin["version"] for pin in owner.capability_pins}
    drifted = sorted(
        c["id"]
        for c in producer["capabilities"]
        if c["id"] in pinned and c["version"] != pinned[c["id"]]
    )
    if drifted:
        invalid(
            "the producer's capability versions differ from the assignment's pins",
            member=f"payload.{MANIFEST_MEMBER}.producer.capabilities",
            capabilities=drifted,
        )
    artifact_id = manifest["artifactId"]
    if any(entry["artifactId"] == artifact_id for entry in state.artifacts.values()):
        invalid(
            "the Artifact ID already names other content in this Group",
            member=f"payload.{MANIFEST_MEMBER}.artifactId",
            artifactId=artifact_id,
        )


def _check_provenance(state: GroupState, cmd: Incoming, manifest: Json) -> list[str]:
    """Every source is published here or declared external; no cycle. The declared list."""
    content_hash = manifest["contentHash"]
    sources: list[str] = manifest["sourceArtifactHashes"]
    external = cmd.payload.sha256_list(EXTERNAL_SOURCES_MEMBER, default=True)
    member = f"payload.{EXTERNAL_SOURCES_MEMBER}"
    if content_hash in sources:
        invalid(
            "an Artifact cannot derive from itself",
            member=f"payload.{MANIFEST_MEMBER}.sourceArtifactHashes",
            reason="provenance-cycle",
        )
    undeclared = sorted(set(external) - set(sources))
    if undeclared:
        invalid(
            "an external source must be a source of the manifest",
            member=member,
            notSources=undeclared,
        )
    published_here = sorted(h for h in external if h in state.artifacts)
    if published_here:
        invalid(
            "a source published in this Group is not external",
            member=member,
            publishedSources=published_here,
        )
    unknown = sorted(h for h in sources if h not in state.artifacts and h not in external)
    if unknown:
        invalid(
            "every source must be published in this Group or declared external",
            member=f"payload.{MANIFEST_MEMBER}.sourceArtifactHashes",
            unknownSources=unknown,
        )
    if _derives_from(state, sources, content_hash):
        invalid(
            "a source already derives from this content: provenance would form a cycle",
            member=f"payload.{MANIFEST_MEMBER}.sourceArtifactHashes",
            reason="provenance-cycle",
        )
    return external


def _derives_from(state: GroupState, sources: Iterable[str], content_hash: str) -> bool:
    """Whether ``content_hash`` is among the ancestors of ``sources`` in the Group's graph.

    Only content once named as an external source can be an ancestor before it is published
    itself, so the walk rarely goes far; it visits each published Artifact at most once."""
    seen: set[str] = set()
    frontier = list(sources)
    while frontier:
        current = frontier.pop()
        if current == content_hash:
            return True
        if current in seen:
            continue
        seen.add(current)
        entry = state.artifacts.get(current)
        if entry is not None:
            frontier.extend(entry["sourceArtifactHashes"])
    return False


def manifest_entry(manifest: Json) -> Json:
    """What the Group keeps of an Artifact's manifest (the whole manifest stays in the Event
    that brought it: a publication or an import)."""
    producer = manifest["producer"]
    return {
        "contentHash": manifest["contentHash"],
        "artifactId": manifest["artifactId"],
        "workItemId": manifest["workItemId"],
        "producer": {
            "agentId": producer["agentId"],
            "agentCardVersion": producer["agentCardVersion"],
        },
        "mediaType": manifest["mediaType"],
        "schemaUri": manifest["schemaUri"],
        "sizeBytes": manifest["sizeBytes"],
        "uri": manifest["uri"],
        "classification": manifest["classification"],
        "sourceArtifactHashes": manifest["sourceArtifactHashes"],
        "createdAt": manifest["createdAt"],
    }


def index_entry(event: Json) -> Json:
    """What the Group keeps of a published Artifact."""
    payload = event["payload"]
    entry: Json = {
        **manifest_entry(payload["manifest"]),
        "ownershipEpoch": payload["ownershipEpoch"],
        "publishedAt": event["occurredAt"],
        "eventId": event["eventId"],
    }
    if EXTERNAL_SOURCES_MEMBER in payload:
        entry[EXTERNAL_SOURCES_MEMBER] = payload[EXTERNAL_SOURCES_MEMBER]
    return entry


def _evolve_published(state: GroupState, event: Json) -> None:
    touch(state.work_items[event["workItemId"]], event)
    entry = index_entry(event)
    state.artifacts[entry["contentHash"]] = entry


RULES = (
    CommandRule(
        PUBLISH_KIND,
        _decide_publish,
        working_agent,
        target=work_item_target,
        payload=members("ownershipEpoch", "leaseId", MANIFEST_MEMBER, EXTERNAL_SOURCES_MEMBER),
        clauses=("MWP-FND-017", "MWP-IDN-003", "MWP-WRK-013", "MWP-WRK-023", "MWP-WRK-024"),
    ),
)

EVOLVERS = {PUBLISHED_KIND: _evolve_published}
