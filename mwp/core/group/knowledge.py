"""Reusable knowledge across Groups (spec 13.3): an Artifact crosses only as an approved import.

Nothing of one Group reaches another Mission on its own: the only way in is
``ext.missionweaveprotocol.core.artifact_import``, sent in the *receiving* Group by its current
Coordinator. It carries the source Artifact's signed manifest, unchanged, and a signed
Knowledge Reuse Approval (:data:`REUSE_APPROVAL_PROFILE`) by an Organization policy service.

Why the Organization and not a MissionOwner: releasing content crosses two audit boundaries.
The receiving MissionOwner has no say over another Mission's content and the source's has none
over the receiving Mission, while Organization policy governs both (and is the one that knows
the receiving Mission's clearance). The approval is this runtime's own Signed Document, signed
and verified by the spec 6.4 codec (``mwp.core.trust.signed_document``): the protocol's
Approval document has no kind for reuse.

Classifications are ordered ``public`` < ``internal`` < ``confidential`` < ``restricted``. The
receiving Mission's ceiling is the one the approval states (``classificationCeiling``): the
Mission document has no classification of its own, and data clearance is Organization policy.
``restricted`` content never crosses: a ceiling above ``confidential`` is refused.

The Group checks what it knows: the approval names this Mission and Group as target, the
manifest's source Group, Artifact ID, content hash, signing hash and classification; it has not
expired; the source is another Group; the manifest carries its provenance (producer, source
Mission, Group and WorkItem, source Artifacts, tool and model versions: all required, though a
list may be empty when nothing of the kind was used); the content is new here. Accepted, the
``..._artifact_imported`` Event names the source Group, the content hash, the approval and (as
its actor) the Coordinator, and the Artifact counts as this Group's from then on: its members
may cite it in submissions and Context Packages like a published one. Its manifest's
sources stay in the source Group: they are recorded as external.

The core cannot check either signature (it holds no Registry evidence). The shell verifies
both, on what :func:`embedded_import_documents` returns, against the Organization's Registry
evidence: a manifest and an approval that verify there are of this Organization.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from mwp.core.errors import ErrorCode
from mwp.core.group.api import RULES_LEDGER, AuthorityContext
from mwp.core.group.artifact import MANIFEST_MEMBER, manifest_entry, signed_manifest
from mwp.core.group.clock import reached
from mwp.core.group.drafts import Drafts
from mwp.core.group.incoming import Incoming
from mwp.core.group.payload import Payload, members
from mwp.core.group.rejection import forbidden, invalid, reject
from mwp.core.group.roles import coordinator_only
from mwp.core.group.rules import CommandRule, by_agent, no_target
from mwp.core.group.state import GroupState
from mwp.core.group.work_item_state import active_mission
from mwp.core.trust.signed_document import Profile, sign, signing_hash
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import is_identifier, is_profile_timestamp, is_sha256_ref

Json = dict[str, Any]

IMPORT_KIND: Final = "ext.missionweaveprotocol.core.artifact_import"
IMPORTED_KIND: Final = "ext.missionweaveprotocol.core.artifact_imported"
APPROVAL_MEMBER: Final = "approval"

CLAUSES: tuple[str, ...] = ("MWP-WRK-028",)

# What a manifest says of where its content came from and how it was made (spec 13.1).
PROVENANCE_MEMBERS: Final = (
    "producer",
    "missionId",
    "groupId",
    "workItemId",
    "sourceArtifactHashes",
    "toolVersions",
    "modelVersions",
)
CLASSIFICATIONS: Final = ("public", "internal", "confidential", "restricted")
# The highest ceiling an approval may grant: restricted content stays in its Group.
MAX_REUSE_CEILING: Final = "confidential"

# The runtime's own document: who signs (``approvedBy``) and when (``approvedAt``).
REUSE_APPROVAL_PROFILE: Final = Profile(
    "knowledge-reuse-approval",
    "knowledge-reuse-approval",
    "approvedAt",
    "principal-object",
    ("approvedBy",),
)

_ID_MEMBERS: Final = (
    "approvalId",
    "sourceMissionId",
    "sourceGroupId",
    "artifactId",
    "targetMissionId",
    "targetGroupId",
)
_HASH_MEMBERS: Final = ("contentHash", "manifestHash")
_TIME_MEMBERS: Final = ("approvedAt", "expiresAt")
_CLASS_MEMBERS: Final = ("classification", "classificationCeiling")
_APPROVAL_MEMBERS: Final = frozenset(
    (*_ID_MEMBERS, *_HASH_MEMBERS, *_TIME_MEMBERS, *_CLASS_MEMBERS, "approvedBy", "signature")
)


def rank(classification: str) -> int:
    return CLASSIFICATIONS.index(classification)


def check_approval_shape(schema: str, value: Any) -> None:
    """The Knowledge Reuse Approval's structure (the codec's stage 2 for this profile): every
    member present, of its type, and no other. Raises ``ValueError`` naming the first fault."""
    if not isinstance(value, dict):
        raise ValueError("not an object")
    missing = sorted(_APPROVAL_MEMBERS - value.keys())
    if missing:
        raise ValueError(f"missing {missing}")
    extra = sorted(value.keys() - _APPROVAL_MEMBERS)
    if extra:
        raise ValueError(f"unknown members {extra}")
    for name in _ID_MEMBERS:
        if not isinstance(value[name], str) or not is_identifier(value[name]):
            raise ValueError(f"{name}: must be an identifier")
    for name in _HASH_MEMBERS:
        if not isinstance(value[name], str) or not is_sha256_ref(value[name]):
            raise ValueError(f"{name}: must be a sha256 hash")
    for name in _TIME_MEMBERS:
        if not isinstance(value[name], str) or not is_profile_timestamp(value[name]):
            raise ValueError(f"{name}: must be a timestamp")
    for name in _CLASS_MEMBERS:
        if value[name] not in CLASSIFICATIONS:
            raise ValueError(f"{name}: must be one of {list(CLASSIFICATIONS)}")
    approver = value["approvedBy"]
    if (
        not isinstance(approver, dict)
        or set(approver) != {"type", "id"}
        or approver["type"] not in ("agent", "human", "service")
        or not isinstance(approver["id"], str)
        or not is_identifier(approver["id"])
    ):
        raise ValueError("approvedBy: must be an actor")
    # The envelope's own rules (algorithm, key ID, encoding) are the codec's stages 3 and 4.
    signature = value["signature"]
    if not isinstance(signature, dict) or set(signature) != {
        "algorithm",
        "keyId",
        "createdAt",
        "value",
    }:
        raise ValueError("signature: must be a signature envelope")


def sign_reuse_approval(document: Mapping[str, Any], key_id: str, key: SigningKey) -> Json:
    """``document`` with a fresh signature by ``key`` (Organization policy's key).

    The codec signs by profile ID and its table holds only protocol documents; the Extension
    Profile's row protects the same member (``approvedAt``), which is all signing reads."""
    return sign(document, "extension-profile", key_id, key)


def embedded_import_documents(kind: str, payload: Mapping[str, Any]) -> tuple[Json, Json] | None:
    """The signed manifest and approval an import carries, unchanged; None for another kind.

    The shell verifies both against the Registry evidence before the Command is decided::

        manifest, approval = embedded_import_documents(command["kind"], command["payload"])
        verify_value(manifest, PROFILES["artifact"], evidence)  # signer: producer.agentId
        verify_value(approval, REUSE_APPROVAL_PROFILE, evidence,
                     schema_check=check_approval_shape)  # signer: approvedBy

    A missing document is refused here exactly as ``decide`` refuses it.
    """
    if kind != IMPORT_KIND:
        return None
    p = Payload(payload)
    return _object(p, MANIFEST_MEMBER), _approval_object(p)


def _object(payload: Payload, member: str) -> Json:
    value = payload.raw(member)
    if not isinstance(value, dict):
        invalid(
            f"payload.{member}: must be an object",
            member=f"payload.{member}",
            reason="must be an object",
        )
    return value


def _approval_object(payload: Payload) -> Json:
    if not payload.has(APPROVAL_MEMBER):
        reject(
            ErrorCode.APPROVAL_REQUIRED,
            "an Artifact crosses Groups only with the Organization's approval for reuse",
            member=f"payload.{APPROVAL_MEMBER}",
        )
    return _object(payload, APPROVAL_MEMBER)


def _wrong(member: str, message: str, **details: Any) -> NoReturn:
    invalid(message, member=member, **details)


def _checked_manifest(state: GroupState, cmd: Incoming) -> Json:
    # Schema-valid: a manifest without its provenance (PROVENANCE_MEMBERS, all required) fails.
    manifest = signed_manifest(cmd)
    if manifest["groupId"] == state.group_id or manifest["missionId"] == state.mission_id:
        _wrong(
            f"payload.{MANIFEST_MEMBER}.groupId",
            "an import brings an Artifact of another Group; this one is already here",
        )
    content_hash = manifest["contentHash"]
    held = state.artifacts.get(content_hash)
    if held is not None:
        reject(
            ErrorCode.INVALID_STATE_TRANSITION,
            "this content is already an Artifact of the Group",
            contentHash=content_hash,
            eventId=held["eventId"],
        )
    artifact_id = manifest["artifactId"]
    if any(entry["artifactId"] == artifact_id for entry in state.artifacts.values()):
        _wrong(
            f"payload.{MANIFEST_MEMBER}.artifactId",
            "the Artifact ID already names other content in this Group",
            artifactId=artifact_id,
        )
    return manifest


def _checked_approval(
    state: GroupState, cmd: Incoming, ctx: AuthorityContext, manifest: Json
) -> Json:
    approval = _approval_object(cmd.payload)
    at = f"payload.{APPROVAL_MEMBER}"
    try:
        check_approval_shape(REUSE_APPROVAL_PROFILE.schema, approval)
    except ValueError as exc:
        reject(
            ErrorCode.SCHEMA_VALIDATION_FAILED,
            f"the Knowledge Reuse Approval is invalid: {exc}",
            member=at,
            reason=str(exc),
        )
    if approval["approvedBy"]["type"] != "service":
        forbidden(
            "reuse across Groups is approved by Organization policy (a service)",
            member=f"{at}.approvedBy",
        )
    if reached(ctx.now, approval["expiresAt"]):
        reject(
            ErrorCode.APPROVAL_REQUIRED,
            "the approval for reuse has expired",
            member=f"{at}.expiresAt",
            expiresAt=approval["expiresAt"],
        )
    for member, expected in (
        ("targetMissionId", state.mission_id),
        ("targetGroupId", state.group_id),
    ):
        if approval[member] != expected:
            _wrong(
                f"{at}.{member}", "the approval is for another Mission or Group", expected=expected
            )
    for member, expected in (
        ("sourceMissionId", manifest["missionId"]),
        ("sourceGroupId", manifest["groupId"]),
        ("artifactId", manifest["artifactId"]),
        ("contentHash", manifest["contentHash"]),
        ("manifestHash", signing_hash(manifest)),
        ("classification", manifest["classification"]),
    ):
        if approval[member] != expected:
            _wrong(f"{at}.{member}", "the approval is for another Artifact", expected=expected)
    ceiling = approval["classificationCeiling"]
    if rank(ceiling) > rank(MAX_REUSE_CEILING):
        _wrong(
            f"{at}.classificationCeiling",
            f"no Mission is cleared above {MAX_REUSE_CEILING} for reused content",
            maximum=MAX_REUSE_CEILING,
        )
    if rank(manifest["classification"]) > rank(ceiling):
        forbidden(
            "the receiving Mission may not hold content of this classification",
            member=f"payload.{MANIFEST_MEMBER}.classification",
            classification=manifest["classification"],
            ceiling=ceiling,
        )
    return approval


# --- ext.missionweaveprotocol.core.artifact_import --------------------------------------------


def _decide_import(state: GroupState, cmd: Incoming, ctx: AuthorityContext, drafts: Drafts) -> None:
    mission = active_mission(state, cmd)
    manifest = _checked_manifest(state, cmd)
    approval = _checked_approval(state, cmd, ctx, manifest)
    external = [h for h in manifest["sourceArtifactHashes"] if h not in state.artifacts]
    payload: Json = {
        "sourceMissionId": manifest["missionId"],
        "sourceGroupId": manifest["groupId"],
        "contentHash": manifest["contentHash"],
        "approvalId": approval["approvalId"],
        "classificationCeiling": approval["classificationCeiling"],
        MANIFEST_MEMBER: manifest,
        APPROVAL_MEMBER: approval,
    }
    if external:
        payload["externalSourceHashes"] = external
    drafts.add(IMPORTED_KIND, ("mission", mission.mission_id), payload)


def _evolve_imported(state: GroupState, event: Json) -> None:
    payload = event["payload"]
    entry: Json = {
        **manifest_entry(payload[MANIFEST_MEMBER]),  # its workItemId is the source Group's
        "publishedAt": event["occurredAt"],
        "eventId": event["eventId"],
        "importedFrom": {
            "missionId": payload["sourceMissionId"],
            "groupId": payload["sourceGroupId"],
            "approvalId": payload["approvalId"],
        },
    }
    if "externalSourceHashes" in payload:
        entry["externalSourceHashes"] = payload["externalSourceHashes"]
    state.artifacts[entry["contentHash"]] = entry
    assert state.mission is not None
    state.mission.revision = event["aggregateRevision"]
    state.mission.updated_at = event["occurredAt"]


RULES = (
    CommandRule(
        IMPORT_KIND,
        _decide_import,
        coordinator_only,
        target=no_target,
        coordinator=by_agent,
        payload=members(MANIFEST_MEMBER, APPROVAL_MEMBER),
        clauses=CLAUSES,
        since_rules=RULES_LEDGER,
    ),
)

EVOLVERS = {IMPORTED_KIND: _evolve_imported}
