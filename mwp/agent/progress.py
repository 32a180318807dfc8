"""Structured progress, blocking and submissions, and the owner Commands that carry them (pure).

Progress is a phase, the milestones done, the next checkpoint, the blockers, a revised
completion estimate and Evidence references (MWP-WRK-016). There is no percentage member and
none is accepted: a "45%" in a phase or milestone, or a ``percent``-like member in a parsed
progress object, is refused with ``INVALID_COMMAND``.

A :class:`Submission` maps Evidence to the Work Contract's acceptance criteria: every
criterion covered, no unknown criterion, Evidence IDs unique (else ``INVALID_COMMAND`` with
``details.uncoveredCriteria`` / ``unknownCriteria`` / ``duplicateEvidenceIds``), the same
rule the Group Authority applies to ``work.submit``, checked before anything is sent.

The builders return :class:`OwnerCommand` values (kind, WorkItem, payload) whose payloads are
exactly those of ``docs/commands.md``; the core has no ``work.progress`` kind: progress goes
with an Execution Lease renewal (``ext.missionweaveprotocol.core.execution_lease_renew``), a
checkpoint or a block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.wire.values import format_utc, is_identifier, is_profile_timestamp, is_sha256_ref

CLAUSES: tuple[str, ...] = ("MWP-WRK-016", "MWP-WRK-017")

WORK_CHECKPOINT = "work.checkpoint"
WORK_BLOCK = "work.block"
WORK_SUBMIT = "work.submit"
WORK_FAIL = "work.fail"
LEASE_RENEW = "ext.missionweaveprotocol.core.execution_lease_renew"
EVIDENCE_RESULTS = ("passed", "failed", "inconclusive")

_PERCENT = re.compile(r"\d\s*%|%\s*\d|\bper\s*cent\b|\bpercent", re.IGNORECASE)
_CRITERION = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}")
_PROGRESS_MEMBERS = {
    "currentPhase",
    "completedMilestones",
    "nextCheckpoint",
    "blockers",
    "updatedCompletionEstimate",
    "evidenceIds",
}

Json = dict[str, Any]


def _invalid(message: str, **details: Any) -> MwpError:
    return MwpError(ErrorCode.INVALID_COMMAND, message, retryable=False, details=details)


def _text(value: Any, member: str, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise _invalid(f"{member} must be non-blank text of at most {max_length}", member=member)
    if _PERCENT.search(value):
        raise _invalid(
            f"{member} states a percentage; progress is phases and milestones, not percent",
            member=member,
            reason="percentage",
        )
    return value


def _timestamp(value: str | datetime, member: str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise _invalid(f"{member} must be timezone-aware", member=member)
        return format_utc(value)
    if not isinstance(value, str) or not is_profile_timestamp(value):
        raise _invalid(f"{member} must be a protocol timestamp", member=member)
    return value


@dataclass(frozen=True)
class Progress:
    """Structured progress of one WorkItem (spec 11.4). No percentages, by construction."""

    phase: str
    milestones: Sequence[str]
    next_checkpoint: str
    blockers: Sequence[str] = ()
    revised_estimate: str | datetime = ""
    evidence_refs: Sequence[str] = ()

    def __post_init__(self) -> None:
        _text(self.phase, "progress.currentPhase", 500)
        if isinstance(self.milestones, str) or isinstance(self.blockers, str):
            raise _invalid("milestones and blockers are lists of text", member="progress")
        for name in ("milestones", "blockers", "evidence_refs"):
            value = getattr(self, name)
            if not isinstance(value, str):
                object.__setattr__(self, name, tuple(value))
        for m in self.milestones:
            _text(m, "progress.completedMilestones", 500)
        _text(self.next_checkpoint, "progress.nextCheckpoint", 500)
        for b in self.blockers:
            _text(b, "progress.blockers", 2000)
        object.__setattr__(
            self, "revised_estimate", _timestamp(self.revised_estimate, "progress.estimate")
        )
        refs = list(self.evidence_refs)
        if isinstance(self.evidence_refs, str) or not all(
            isinstance(r, str) and is_identifier(r) for r in refs
        ):
            raise _invalid("evidence_refs must be Evidence IDs", member="progress.evidenceIds")
        if len(set(refs)) != len(refs):
            raise _invalid("evidence_refs must be unique", member="progress.evidenceIds")

    def to_json(self) -> Json:
        """The work-item ``progress`` object as the Group Authority reads it."""
        return {
            "currentPhase": self.phase,
            "completedMilestones": list(self.milestones),
            "nextCheckpoint": self.next_checkpoint,
            "blockers": list(self.blockers),
            "updatedCompletionEstimate": self.revised_estimate,
            "evidenceIds": list(self.evidence_refs),
        }

    @classmethod
    def from_json(cls, value: Any) -> Progress:
        """Parse a wire progress object; unknown members (``percentComplete``...) are refused."""
        if not isinstance(value, Mapping):
            raise _invalid("progress must be an object", member="progress")
        unknown = sorted(set(value) - _PROGRESS_MEMBERS)
        if unknown:
            reason = "percentage" if any(_PERCENT.search(k) for k in unknown) else "unknown"
            raise _invalid("progress has unknown members", unknownMembers=unknown, reason=reason)
        missing = sorted(_PROGRESS_MEMBERS - set(value))
        if missing:
            raise _invalid("progress lacks members", missingMembers=missing)
        return cls(
            value["currentPhase"],
            tuple(value["completedMilestones"]),
            value["nextCheckpoint"],
            tuple(value["blockers"]),
            value["updatedCompletionEstimate"],
            tuple(value["evidenceIds"]),
        )


@dataclass(frozen=True)
class EvidenceItem:
    """One Evidence entry of a submission: its ID, the criteria it proves, and its result."""

    evidence_id: str
    criterion_ids: Sequence[str]
    result: str | None = "passed"

    def __post_init__(self) -> None:
        if not isinstance(self.evidence_id, str) or not is_identifier(self.evidence_id):
            raise _invalid("evidenceId must be an identifier", member="evidence.evidenceId")
        if not isinstance(self.criterion_ids, str):
            object.__setattr__(self, "criterion_ids", tuple(self.criterion_ids))
        ids = list(self.criterion_ids)
        if isinstance(self.criterion_ids, str) or not ids:
            raise _invalid("criterionIds must be a non-empty list", evidenceId=self.evidence_id)
        if not all(isinstance(c, str) and _CRITERION.fullmatch(c) for c in ids):
            raise _invalid("criterionIds are malformed", evidenceId=self.evidence_id)
        if len(set(ids)) != len(ids):
            raise _invalid("criterionIds must be unique", evidenceId=self.evidence_id)
        if self.result is not None and self.result not in EVIDENCE_RESULTS:
            raise _invalid("Evidence result is not passed/failed/inconclusive", member="result")

    @classmethod
    def from_document(cls, evidence: Mapping[str, Any]) -> EvidenceItem:
        """The submission entry of a full (``evidence.schema.json``) Evidence document."""
        return cls(evidence["evidenceId"], tuple(evidence["criterionIds"]), evidence["result"])

    def to_json(self) -> Json:
        entry: Json = {"evidenceId": self.evidence_id, "criterionIds": list(self.criterion_ids)}
        if self.result is not None:
            entry["result"] = self.result
        return entry


@dataclass(frozen=True)
class Submission:
    """What a capability returns: the Artifacts it produced and Evidence per criterion."""

    artifact_hashes: Sequence[str]
    evidence: Sequence[EvidenceItem]
    details: Mapping[str, Any] = field(default_factory=dict)  # kept locally, never sent

    def __post_init__(self) -> None:
        object.__setattr__(self, "artifact_hashes", tuple(self.artifact_hashes))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        hashes = list(self.artifact_hashes)
        if not hashes or not all(isinstance(h, str) and is_sha256_ref(h) for h in hashes):
            raise _invalid("a submission needs sha256: Artifact hashes", member="artifactHashes")
        if len(set(hashes)) != len(hashes):
            raise _invalid("Artifact hashes must be unique", member="artifactHashes")
        if not self.evidence:
            raise _invalid("a submission needs Evidence", member="evidence")

    def check(self, contract: Mapping[str, Any]) -> None:
        """Refuse (``INVALID_COMMAND``) Evidence that does not map onto ``contract``'s criteria."""
        known = [c["criterionId"] for c in contract["acceptanceCriteria"]]
        ids = [e.evidence_id for e in self.evidence]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise _invalid("Evidence IDs must be unique", duplicateEvidenceIds=duplicates)
        named = {c for e in self.evidence for c in e.criterion_ids}
        unknown = sorted(named - set(known))
        if unknown:
            raise _invalid("Evidence names criteria the contract lacks", unknownCriteria=unknown)
        uncovered = [c for c in known if c not in named]
        if uncovered:
            raise _invalid("every acceptance criterion needs Evidence", uncoveredCriteria=uncovered)


@dataclass(frozen=True)
class OwnerCommand:
    """An unsigned owner Command: sign it with ``Identity.command(kind, payload, ...)``."""

    kind: str
    work_item_id: str
    payload: Json


def _owner(ownership_epoch: int, lease_id: str) -> Json:
    if type(ownership_epoch) is not int or ownership_epoch < 1:
        raise _invalid("ownershipEpoch must be a positive integer", member="ownershipEpoch")
    if not isinstance(lease_id, str) or not is_identifier(lease_id):
        raise _invalid("leaseId must be an identifier", member="leaseId")
    return {"ownershipEpoch": ownership_epoch, "leaseId": lease_id}


def _seconds(value: int, member: str, maximum: int) -> int:
    if type(value) is not int or not 1 <= value <= maximum:
        raise _invalid(f"{member} must be whole seconds from 1 to {maximum}", member=member)
    return value


def progress_command(
    work_item_id: str,
    *,
    ownership_epoch: int,
    lease_id: str,
    progress: Progress | None = None,
    lease_seconds: int | None = None,
) -> OwnerCommand:
    """Report progress with an Execution Lease renewal (the core has no ``work.progress``)."""
    payload = _owner(ownership_epoch, lease_id)
    if lease_seconds is not None:
        payload["leaseSeconds"] = _seconds(lease_seconds, "leaseSeconds", 3600)
    if progress is not None:
        payload["progress"] = progress.to_json()
    return OwnerCommand(LEASE_RENEW, work_item_id, payload)


def checkpoint_command(
    work_item_id: str,
    *,
    ownership_epoch: int,
    lease_id: str,
    progress: Progress,
    checkpoint_ref: str | None = None,
) -> OwnerCommand:
    """``work.checkpoint``: durable progress that releases the lease (a safe preemption point)."""
    payload = _owner(ownership_epoch, lease_id)
    payload["progress"] = progress.to_json()
    if checkpoint_ref is not None:
        if not (is_sha256_ref(checkpoint_ref) or is_identifier(checkpoint_ref)):
            raise _invalid("checkpointRef must be an ID or sha256:", member="checkpointRef")
        payload["checkpointRef"] = checkpoint_ref
    return OwnerCommand(WORK_CHECKPOINT, work_item_id, payload)


def block_command(
    work_item_id: str,
    *,
    ownership_epoch: int,
    lease_id: str,
    required_resolution: str,
    progress: Progress | None = None,
    blocked_lease_seconds: int | None = None,
) -> OwnerCommand:
    """``work.block`` with the resolution the owner needs (MWP-WRK-017)."""
    if not isinstance(required_resolution, str) or not required_resolution.strip():
        raise _invalid("requiredResolution must be non-blank text", member="requiredResolution")
    payload = _owner(ownership_epoch, lease_id)
    payload["requiredResolution"] = required_resolution
    if blocked_lease_seconds is not None:
        payload["blockedLeaseSeconds"] = _seconds(
            blocked_lease_seconds, "blockedLeaseSeconds", 604800
        )
    if progress is not None:
        payload["progress"] = progress.to_json()
    return OwnerCommand(WORK_BLOCK, work_item_id, payload)


def submit_command(
    work_item_id: str,
    *,
    ownership_epoch: int,
    lease_id: str,
    submission: Submission,
    contract: Mapping[str, Any],
) -> OwnerCommand:
    """``work.submit``, after checking the Evidence against ``contract``'s criteria."""
    submission.check(contract)
    payload = _owner(ownership_epoch, lease_id)
    payload["artifactHashes"] = list(submission.artifact_hashes)
    payload["evidence"] = [e.to_json() for e in submission.evidence]
    return OwnerCommand(WORK_SUBMIT, work_item_id, payload)
