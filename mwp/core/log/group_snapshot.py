"""Signed Group Snapshots, as pure data: object keys, building, checking, archive projection.

A Group Snapshot is a signed document (the ``group-snapshot`` profile: the signer is
``createdBy``, a service) saying "this is the Group through sequence N". Its schema admits no
member for the state itself, so the snapshot *commits* to a separate **state document** by its
``stateHash`` (SHA-256 of the state document's JCS bytes). The state document holds:

* the Group Authority state rebuilt by replaying the verified entries 1..N
  (:meth:`mwp.core.group.GroupAuthority.snapshot`, restorable with ``GroupAuthority.restore``);
* the signing hash of the log entry at N (``headSigningHash``), where entry N+1 links, so a
  subscriber restored from the snapshot keeps verifying the hash chain from there;
* for an archival snapshot, the final record of the Group: the Mission, every WorkItem, the
  decisions, the approvals and the Artifact references (spec 7.4).

The snapshot's first ``policyLog`` entry records the snapshot decision itself and repeats the
purpose, the sequence and the head hash in its ``details``, so the signed document alone says
where the chain continues; an archival snapshot adds one entry per authorization, approval,
override, delegation or redaction Event, each naming its Event ID. ``eventIds`` lists the
Event ID of every entry 1..N in order: the snapshot is linked to exactly the history it was
produced from.

No I/O here; :mod:`mwp.log.compaction` reads and writes snapshots in an object store.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.log.cursor import Cursor, is_sha256_ref
from mwp.core.log.event_log import SEQUENCE_DIGITS, group_segment
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import PROFILES, VerificationError, sign, verify_value
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

CLAUSES: tuple[str, ...] = ("MWP-MSN-009", "MWP-WRK-030")

Json = dict[str, Any]

STATE_FORMAT = "mwp-group-snapshot-state/1"
SNAPSHOT_PROFILE = "group-snapshot"
_PROFILE = PROFILES[SNAPSHOT_PROFILE]
_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://missionweaveprotocol.dev/temporal/snapshot")


class SnapshotPurpose(StrEnum):
    COMPACTION = "compaction"  # the online log before it may be archived away
    ARCHIVAL = "archival"  # the signed final snapshot of an archived Group (spec 7.4)


# Event kinds recorded as decisions in an archival snapshot; the policy-relevant subset (who
# was authorized, approved, overridden, delegated or redacted) also gets a policyLog entry.
DECISION_KINDS = frozenset(
    {
        "mission.created",
        "mission.coordinator.assigned",
        "mission.approved",
        "mission.changes_requested",
        "mission.cancelled",
        "mission.terminated",
        "mission.child.created",
        "mission.follow_up.created",
        "membership.changed",
        "membership.ended",
        "membership.delegation.granted",
        "work.authorized",
        "work.contract.revised",
        "work.offer.accepted",
        "work.result.accepted",
        "work.failed",
        "work.cancelled",
        "approval.execution.granted",
        "policy.cooperation_override.granted",
        "ext.missionweaveprotocol.core.cooperation_override_consumed",
        "message.redacted",
    }
)
# A grant's consumption names the grant and the Event it admitted; a soft threshold reached
# is the runaway controls' auditable notification (spec 20).
OVERRIDE_CONSUMED = "ext.missionweaveprotocol.core.cooperation_override_consumed"
POLICY_KINDS = frozenset(
    {
        "mission.approved",
        "mission.changes_requested",
        "mission.cancelled",
        "mission.terminated",
        "membership.changed",
        "membership.ended",
        "membership.delegation.granted",
        "work.authorized",
        "approval.execution.granted",
        "policy.cooperation_override.granted",
        OVERRIDE_CONSUMED,
        "ext.missionweaveprotocol.core.cooperation_threshold_reached",
        "message.redacted",
    }
)
APPROVAL_KINDS = frozenset(
    {
        "mission.approved",
        "mission.changes_requested",
        "approval.execution.granted",
        "policy.cooperation_override.granted",
    }
)


class SnapshotError(MwpError):
    """A snapshot could not be made, or a stored one is not what it claims (not retryable).

    ``reason`` is stable: ``signature`` (six-stage verification failed), ``content-hash``
    (the bytes are not the referenced ones), ``not-canonical``, ``wrong-group``,
    ``wrong-authority``, ``malformed``, ``state-missing``, ``state-hash``, ``state-mismatch``,
    ``missing`` (no snapshot where one was referenced), ``no-snapshot``, ``log-fault``,
    ``replay``, ``conflict``, ``not-closed``, ``bad-request``.
    """

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        group_id: str | None = None,
        code: ErrorCode = ErrorCode.PROTOCOL_VIOLATION,
    ) -> None:
        super().__init__(
            code,
            f"Group Snapshot: {reason}" + (f": {detail}" if detail else ""),
            retryable=False,
            group_id=group_id,
            details={"reason": reason},
        )
        self.reason = reason
        self.detail = detail


# --- object keys ----------------------------------------------------------------------------


def _group_prefix(group_id: str) -> str:
    return f"groups/{group_segment(group_id)}/"


def archive_prefix(group_id: str) -> str:
    """Where compaction moves entries: same names, same bytes, out of the online log."""
    return _group_prefix(group_id) + "archive/events/"


def archive_entry_key(group_id: str, sequence: int) -> str:
    return f"{archive_prefix(group_id)}{sequence:0{SEQUENCE_DIGITS}d}.json"


def snapshots_prefix(group_id: str) -> str:
    return _group_prefix(group_id) + "snapshots/"


def snapshot_key(group_id: str, through_sequence: int, purpose: SnapshotPurpose) -> str:
    """``groups/<group>/snapshots/<sequence, 12 digits>.<purpose>.json``."""
    return f"{snapshots_prefix(group_id)}{through_sequence:0{SEQUENCE_DIGITS}d}.{purpose}.json"


def parse_snapshot_key(prefix: str, key: str) -> tuple[int, SnapshotPurpose] | None:
    """``(sequence, purpose)`` of a snapshot key under ``prefix``, None for any other key."""
    if not key.startswith(prefix) or not key.endswith(".json"):
        return None
    digits, _, purpose = key[len(prefix) : -len(".json")].partition(".")
    if len(digits) != SEQUENCE_DIGITS or not digits.isascii() or not digits.isdigit():
        return None
    try:
        return int(digits), SnapshotPurpose(purpose)
    except ValueError:
        return None


def state_key(group_id: str, state_hash: str) -> str:
    """State documents are content-addressed by the ``stateHash`` a snapshot signs."""
    if not is_sha256_ref(state_hash):
        raise ValueError(f"not a sha256: reference: {state_hash!r}")
    return f"{_group_prefix(group_id)}snapshot-states/{state_hash[len('sha256:') :]}.json"


def compactions_prefix(group_id: str) -> str:
    return _group_prefix(group_id) + "compactions/"


def compaction_key(group_id: str, through_sequence: int) -> str:
    """The record of one compaction: the oldest online sequence and the snapshot behind it."""
    return f"{compactions_prefix(group_id)}{through_sequence:0{SEQUENCE_DIGITS}d}.json"


def content_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- references -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotReference:
    """Where a signed snapshot is and which bytes it must be (what ``CURSOR_TOO_OLD`` carries).

    ``snapshot_hash`` is the SHA-256 of the stored snapshot bytes (the error's
    ``snapshotArtifactHash``). A reference is a pointer, not proof: the snapshot it names is
    verified on restore.
    """

    group_id: str
    key: str
    through_sequence: int
    purpose: SnapshotPurpose
    snapshot_hash: str

    def to_json(self) -> Json:
        return {
            "key": self.key,
            "throughSequence": self.through_sequence,
            "purpose": self.purpose.value,
            "snapshotHash": self.snapshot_hash,
        }

    @classmethod
    def from_json(cls, group_id: str, value: Mapping[str, Any]) -> SnapshotReference:
        try:
            reference = cls(
                group_id,
                str(value["key"]),
                int(value["throughSequence"]),
                SnapshotPurpose(value["purpose"]),
                str(value["snapshotHash"]),
            )
        except (KeyError, TypeError, ValueError):
            raise SnapshotError(
                "malformed", "not a snapshot reference", group_id=group_id
            ) from None
        if not is_sha256_ref(reference.snapshot_hash):
            raise SnapshotError("malformed", "snapshot hash", group_id=group_id)
        expected = snapshot_key(group_id, reference.through_sequence, reference.purpose)
        if reference.key != expected:
            raise SnapshotError(
                "malformed", "the key does not name the snapshot", group_id=group_id
            )
        return reference

    @classmethod
    def from_error(cls, error: MwpError) -> SnapshotReference:
        """The reference a ``CURSOR_TOO_OLD`` error carries (``details.snapshot``)."""
        details = error.details or {}
        snapshot = details.get("snapshot")
        if error.code is not ErrorCode.CURSOR_TOO_OLD or not isinstance(snapshot, Mapping):
            raise SnapshotError(
                "no-snapshot",
                "the error carries no snapshot reference",
                group_id=error.group_id,
                code=ErrorCode.CURSOR_TOO_OLD,
            )
        if error.group_id is None:
            raise SnapshotError("malformed", "the error names no Group")
        reference = cls.from_json(error.group_id, snapshot)
        if error.snapshot_artifact_hash not in (None, reference.snapshot_hash):
            raise SnapshotError(
                "malformed", "two different snapshot hashes", group_id=error.group_id
            )
        return reference


# --- building -------------------------------------------------------------------------------


def _derived_id(*parts: object) -> str:
    return f"urn:uuid:{uuid.uuid5(_ID_NAMESPACE, '|'.join(str(p) for p in parts))}"


def state_document(
    group_id: str,
    through_sequence: int,
    head_hash: str,
    purpose: SnapshotPurpose,
    authority_state: Mapping[str, Any],
    archive: Mapping[str, Any] | None = None,
) -> Json:
    """The document a snapshot's ``stateHash`` commits to (see the module docstring)."""
    document: Json = {
        "format": STATE_FORMAT,
        "groupId": group_id,
        "throughSequence": through_sequence,
        "headSigningHash": head_hash,
        "purpose": purpose.value,
        "authority": dict(authority_state),
    }
    if archive is not None:
        document["archive"] = dict(archive)
    return document


def build_snapshot(
    *,
    group_id: str,
    through_sequence: int,
    event_ids: Iterable[str],
    state_bytes: bytes,
    head_hash: str,
    purpose: SnapshotPurpose,
    created_by: Principal,
    created_at: str,
    policy_entries: Iterable[Mapping[str, Any]] = (),
) -> Json:
    """An unsigned Group Snapshot over the state document ``state_bytes`` (its JCS bytes)."""
    if created_by.type != "service":
        raise SnapshotError(
            "bad-request", "a Group Snapshot is created by a service", group_id=group_id
        )
    ids = list(event_ids)
    if len(ids) != through_sequence:
        raise SnapshotError(
            "bad-request", f"{len(ids)} Event IDs for {through_sequence} entries", group_id=group_id
        )
    snapshot_id = _derived_id("snapshot", group_id, through_sequence, purpose.value)
    own_entry: Json = {
        "entryId": _derived_id("snapshot-decision", group_id, through_sequence, purpose.value),
        "decision": f"group.snapshot.{purpose.value}",
        "actor": created_by.to_json(),
        "occurredAt": created_at,
        "details": {
            "purpose": purpose.value,
            "throughSequence": through_sequence,
            "headSigningHash": head_hash,
            "stateFormat": STATE_FORMAT,
        },
    }
    return {
        "snapshotId": snapshot_id,
        "groupId": group_id,
        "throughSequence": through_sequence,
        "eventIds": ids,
        "stateHash": content_hash(state_bytes),
        "policyLog": [own_entry, *(dict(e) for e in policy_entries)],
        "createdBy": created_by.to_json(),
        "createdAt": created_at,
    }


def sign_snapshot(unsigned: Mapping[str, Any], key_id: str, key: SigningKey) -> bytes:
    """Sign under the Group Snapshot profile, check the schema, return the stored JCS bytes."""
    from mwp.core.models import DocumentInvalid, validate_document

    signed = sign(unsigned, SNAPSHOT_PROFILE, key_id, key)
    try:
        validate_document(_PROFILE.schema, signed)
    except DocumentInvalid as exc:
        raise SnapshotError("malformed", f"schema: {exc.reason}") from None
    return canonicalize(signed)


def canonical_state(document: Mapping[str, Any]) -> bytes:
    try:
        return canonicalize(document)
    except JcsDataModelError as exc:
        raise SnapshotError("malformed", f"the state is not JCS: {exc}") from None


# --- checking -------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifiedSnapshot:
    """A snapshot whose signature, schema, bytes and self-consistency were checked."""

    document: Json
    data: bytes
    signing_hash: str
    group_id: str
    through_sequence: int
    purpose: SnapshotPurpose
    head_hash: str
    state_hash: str
    event_ids: tuple[str, ...]
    created_by: Principal

    @property
    def cursor(self) -> Cursor:
        """Where a subscriber restored from this snapshot resumes: after its sequence."""
        return Cursor(self.group_id, self.through_sequence, self.head_hash)


def verify_snapshot(
    data: bytes,
    evidence: RegistryEvidence,
    *,
    group_id: str,
    expected_hash: str | None = None,
    through_sequence: int | None = None,
    purpose: SnapshotPurpose | None = None,
    authority: Principal | None = None,
) -> VerifiedSnapshot:
    """Check stored snapshot bytes: the referenced hash, six-stage verification, canonical
    bytes, the Group, the signer and the snapshot decision entry. Raises :class:`SnapshotError`.
    """

    def refuse(reason: str, detail: str = "") -> SnapshotError:
        return SnapshotError(reason, detail, group_id=group_id)

    if expected_hash is not None and content_hash(data) != expected_hash:
        raise refuse("content-hash", "the stored bytes are not the referenced snapshot")
    try:
        document = parse_bytes(data)
        verified = verify_value(document, _PROFILE, evidence)
    except JsonSyntaxError as exc:
        raise refuse("malformed", str(exc)) from None
    except VerificationError as exc:
        raise refuse("signature", f"{exc.code.value} at stage {exc.stage}") from None
    if canonicalize(verified.document) != data:
        raise refuse("not-canonical")
    doc = verified.document
    if doc["groupId"] != group_id:
        raise refuse("wrong-group", doc["groupId"])
    if authority is not None and verified.principal != authority:
        raise refuse("wrong-authority", verified.principal.id)
    through = doc["throughSequence"]
    if through_sequence is not None and through != through_sequence:
        raise refuse("malformed", f"throughSequence {through}, expected {through_sequence}")
    if len(doc["eventIds"]) != through:
        raise refuse("malformed", "eventIds does not list every Event through the sequence")
    own = doc["policyLog"][0]
    details = own.get("details", {})
    try:
        found_purpose = SnapshotPurpose(details.get("purpose"))
    except ValueError:
        raise refuse("malformed", "no snapshot decision entry") from None
    head = details.get("headSigningHash")
    if (
        own.get("decision") != f"group.snapshot.{found_purpose.value}"
        or details.get("throughSequence") != through
        or details.get("stateFormat") != STATE_FORMAT
        or not is_sha256_ref(head)
    ):
        raise refuse("malformed", "the snapshot decision entry does not describe it")
    if purpose is not None and found_purpose is not purpose:
        raise refuse("malformed", f"a {found_purpose} snapshot, expected {purpose}")
    assert isinstance(head, str)
    return VerifiedSnapshot(
        document=doc,
        data=data,
        signing_hash=verified.signing_hash,
        group_id=group_id,
        through_sequence=through,
        purpose=found_purpose,
        head_hash=head,
        state_hash=doc["stateHash"],
        event_ids=tuple(doc["eventIds"]),
        created_by=verified.principal,
    )


def check_state(snapshot: VerifiedSnapshot, data: bytes) -> Json:
    """The state document the snapshot commits to, checked against it."""

    def refuse(reason: str, detail: str = "") -> SnapshotError:
        return SnapshotError(reason, detail, group_id=snapshot.group_id)

    if content_hash(data) != snapshot.state_hash:
        raise refuse("state-hash", "the state document is not the one the snapshot signs")
    try:
        state = parse_bytes(data)
    except JsonSyntaxError as exc:
        raise refuse("malformed", f"state: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise refuse("malformed", f"the state is not {STATE_FORMAT}")
    expected = {
        "groupId": snapshot.group_id,
        "throughSequence": snapshot.through_sequence,
        "headSigningHash": snapshot.head_hash,
        "purpose": snapshot.purpose.value,
    }
    for member, value in expected.items():
        if state.get(member) != value:
            raise refuse("state-mismatch", member)
    if not isinstance(state.get("authority"), dict):
        raise refuse("malformed", "the state holds no Group Authority state")
    if snapshot.purpose is SnapshotPurpose.ARCHIVAL and not isinstance(state.get("archive"), dict):
        raise refuse("malformed", "an archival state holds no archive record")
    return state


# --- the archive record ---------------------------------------------------------------------


def _signed_approval(event: Mapping[str, Any]) -> Json:
    """For an Event carrying a signed Approval (``mission.approved`` from the ledger rules
    on): its ID and signature and the signing hash of the Command that carried it."""
    payload = event.get("payload")
    approval = payload.get("approval") if isinstance(payload, Mapping) else None
    if not isinstance(approval, Mapping) or "signature" not in approval:
        return {}
    return {
        "approvalId": approval["approvalId"],
        "approvalSignature": approval["signature"],
        "commandHash": event["commandHash"],
    }


def _override_use(event: Mapping[str, Any]) -> Json:
    """A Cooperation Override Grant's issuance or consumption: the grant, the exceeded policy
    and, once consumed, the accepted Event it admitted."""
    payload = event.get("payload")
    if not isinstance(payload, Mapping):
        return {}
    if event["kind"] == "policy.cooperation_override.granted":
        return {"grantId": payload["grantId"], "policyName": payload["policyName"]}
    if event["kind"] == OVERRIDE_CONSUMED:
        return {
            "grantId": payload["cooperationOverrideGrantId"],
            "policyName": payload["policyName"],
            "acceptedEventId": payload["acceptedEventId"],
        }
    return {}


@dataclass
class ArchiveProjection:
    """Decisions, approvals and Artifact references gathered while replaying a Group's log."""

    decisions: list[Json] = field(default_factory=list)
    approvals: list[Json] = field(default_factory=list)
    policy_entries: list[Json] = field(default_factory=list)
    _artifacts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event["kind"]
        where: Json = {
            "eventId": event["eventId"],
            "sequence": event["sequence"],
            "kind": kind,
            "actor": event["actor"],
            "occurredAt": event["occurredAt"],
        }
        if "workItemId" in event:
            where["workItemId"] = event["workItemId"]
        if kind in DECISION_KINDS:
            self.decisions.append(where)
        if kind in APPROVAL_KINDS:
            payload = event.get("payload", {})
            approval = payload.get("approval", payload) if isinstance(payload, Mapping) else {}
            self.approvals.append({**where, "approval": approval})
        if kind in POLICY_KINDS:
            self.policy_entries.append(
                {
                    "entryId": _derived_id("policy", event["eventId"]),
                    "decision": kind,
                    "actor": event["actor"],
                    "occurredAt": event["occurredAt"],
                    "details": {
                        "eventId": event["eventId"],
                        "sequence": event["sequence"],
                        **_signed_approval(event),
                        **_override_use(event),
                    },
                }
            )
        for artifact in _artifact_hashes(event.get("payload")):
            seen = self._artifacts.setdefault(artifact, [])
            if event["eventId"] not in seen:
                seen.append(event["eventId"])

    def artifacts(self) -> list[Json]:
        return [
            {"contentHash": digest, "eventIds": events}
            for digest, events in sorted(self._artifacts.items())
        ]

    def record(self, mission: Json, work_items: list[Json]) -> Json:
        return {
            "mission": mission,
            "workItems": work_items,
            "decisions": self.decisions,
            "approvals": self.approvals,
            "artifacts": self.artifacts(),
        }


def _artifact_hashes(value: Any) -> list[str]:
    """Every Artifact content hash a payload names (``artifactHashes``, ``contentHash``)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for member, inner in item.items():
                if member == "artifactHashes" and isinstance(inner, list):
                    found.extend(h for h in inner if is_sha256_ref(h))
                elif member == "contentHash" and is_sha256_ref(inner):
                    found.append(inner)
                else:
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
    return found
