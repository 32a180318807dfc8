"""First admission and historical trust of verified Signed Documents (spec 6.4).

Admission is a semantic layer *after* the six cryptographic stages: it never changes the
signing bytes, the signing hash, key resolution or the signature result. It anchors one
verified document to one First-Admission Record held by the Organization's Admission Log,
keyed by ``(organizationId, signingHash)``.

The log is reached only through :class:`AdmissionLog`, whose answers are typed results. The
core trusts nothing else: a record's bytes never authenticate themselves, and no boolean from a
caller can stand in for a typed log result. Every failure raises :class:`AdmissionError`, which
is ``AUTH_INVALID_SIGNATURE`` on the wire and keeps the stage (``admission``) and a stable
reason only in its protected diagnostic.

Pure: no I/O, no clock, no Temporal. Trusted acceptance time comes from the caller's
:data:`TrustedContextSource`, and only when the log has authoritatively said "absent".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeAlias

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import VerifiedDocument
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes
from mwp.core.wire.values import (
    Timestamp,
    ValueRuleError,
    is_identifier,
    is_sha256_ref,
    parse_timestamp,
)

CLAUSES: tuple[str, ...] = (
    "MWP-ADM-001",
    "MWP-ADM-002",
    "MWP-ADM-004",
    "MWP-ADM-005",
    "MWP-ADM-006",
    "MWP-ADM-007",
    "MWP-ADM-008",
    "MWP-ADM-009",
    "MWP-ADM-010",
    "MWP-ADM-011",
    "MWP-ADM-012",
)

ADMISSION_STAGE = "admission"
PROTOCOL_VERSION = "0.1"

# The Signed Document kinds a record may anchor; equal to the verification profile IDs.
DOCUMENT_KINDS: frozenset[str] = frozenset(
    {
        "agent-card",
        "approval",
        "artifact",
        "command",
        "context-package",
        "event",
        "evidence",
        "extension-profile",
        "group-snapshot",
    }
)
_PRINCIPAL_TYPES = frozenset({"agent", "human", "service"})
_RECORD_FIELDS = frozenset(
    {
        "protocolVersion",
        "admissionRecordId",
        "organizationId",
        "documentKind",
        "signingHash",
        "keyId",
        "principal",
        "trustedAcceptedAt",
        "acceptedBy",
    }
)


class AdmissionReason(StrEnum):
    """Stable protected-diagnostic reasons. Never sent on the wire.

    The first twelve are the Admission bundle's vocabulary; the rest name failure points of
    this implementation that the bundle does not exercise.
    """

    RECORD_MISSING = "record-missing"
    RECORD_BINDING_MISMATCH = "record-binding-mismatch"
    TRUSTED_TIME_OUTSIDE_KEY_INTERVAL = "trusted-time-outside-key-interval"
    MALFORMED_TRUSTED_TIME = "malformed-trusted-time"
    RECORD_CONFLICT = "record-conflict"
    RECORD_SCHEMA_INVALID = "record-schema-invalid"
    LOG_AUTHENTICATION_FAILED = "log-authentication-failed"
    APPEND_INTEGRITY_NOT_ESTABLISHED = "append-integrity-not-established"
    LOG_UNAVAILABLE = "log-unavailable"
    LOG_INDETERMINATE = "log-indeterminate"
    COMMIT_FAILED = "commit-failed"
    EVENT_SELF_ANCHORING = "event-self-anchoring"
    RECORD_UNPARSEABLE = "record-unparseable"
    ACCEPTING_SERVICE_MISMATCH = "accepting-service-mismatch"
    LOG_WRITE_UNAUTHORIZED = "log-write-unauthorized"
    TRUSTED_CONTEXT_UNAVAILABLE = "trusted-context-unavailable"
    CANDIDATE_INVALID = "candidate-invalid"


class AdmissionError(MwpError):
    """Admission or historical trust failed; the wire only ever sees AUTH_INVALID_SIGNATURE."""

    def __init__(self, reason: AdmissionReason) -> None:
        super().__init__(
            ErrorCode.AUTH_INVALID_SIGNATURE,
            diagnostic=Diagnostic(ADMISSION_STAGE, AdmissionReason(reason).value),
        )
        self.reason = AdmissionReason(reason)

    @property
    def stage(self) -> str:
        return ADMISSION_STAGE


# --- the Admission Log interface ------------------------------------------------------------


class LogFailure(StrEnum):
    """Typed ways an Admission Log operation can fail. Every one fails admission closed."""

    UNAUTHENTICATED = "unauthenticated"
    UNAUTHORIZED = "unauthorized"  # authenticated, but not allowed to write this record
    INTEGRITY_FAILED = "integrity-failed"
    UNAVAILABLE = "unavailable"
    INDETERMINATE = "indeterminate"
    CONFLICT = "conflict"
    COMMIT_FAILED = "commit-failed"


@dataclass(frozen=True)
class LookupFound:
    """The log holds a record for the key; ``authenticated_service`` wrote it."""

    record: bytes
    authenticated_service: Principal


@dataclass(frozen=True)
class LookupAbsent:
    """The log authoritatively holds no record for the key."""


@dataclass(frozen=True)
class LogFailed:
    failure: LogFailure
    detail: str = ""  # operator-facing only; never reaches the wire


@dataclass(frozen=True)
class AppendCommitted:
    """The candidate was durably committed; ``record`` is what the log now holds."""

    record: bytes
    authenticated_service: Principal


@dataclass(frozen=True)
class AppendExisting:
    """A compatible record already held the key; nothing was appended."""

    record: bytes
    authenticated_service: Principal


LookupResult: TypeAlias = LookupFound | LookupAbsent | LogFailed
AppendResult: TypeAlias = AppendCommitted | AppendExisting | LogFailed


class AdmissionLog(Protocol):
    """One Organization's authoritative Admission Log, keyed by (organizationId, signingHash).

    Implementations authenticate the calling service, restrict writes to authorized services,
    keep the log append-only, and report every outcome as a typed result.
    """

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult: ...

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult: ...


# --- trusted acceptance context -------------------------------------------------------------


@dataclass(frozen=True)
class TrustedContext:
    """What the Organization asserts at first admission; the timestamp is kept as received."""

    admission_record_id: str
    trusted_accepted_at: str
    accepted_by: Principal


@dataclass(frozen=True)
class TrustedContextUnavailable:
    detail: str = ""


# Called only after the log authoritatively reports absence: the Organization's trusted clock
# and record-ID issuer, never the document's own claims.
TrustedContextSource: TypeAlias = Callable[
    [VerifiedDocument], TrustedContext | TrustedContextUnavailable
]


# --- the record -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstAdmissionRecord:
    """A schema-valid First-Admission Record and the exact bytes it was read from."""

    admission_record_id: str
    organization_id: str
    document_kind: str
    signing_hash: str
    key_id: str
    principal: Principal
    trusted_accepted_at: Timestamp  # lexical spelling retained in ``.text``
    accepted_by: Principal
    raw: bytes

    @property
    def protocol_version(self) -> str:
        return PROTOCOL_VERSION

    @property
    def logical_key(self) -> tuple[str, str]:
        return (self.organization_id, self.signing_hash)

    def to_json(self) -> dict[str, Any]:
        return record_json(
            admission_record_id=self.admission_record_id,
            organization_id=self.organization_id,
            document_kind=self.document_kind,
            signing_hash=self.signing_hash,
            key_id=self.key_id,
            principal=self.principal,
            trusted_accepted_at=self.trusted_accepted_at.text,
            accepted_by=self.accepted_by,
        )

    def binds_same_document(self, other: FirstAdmissionRecord) -> bool:
        """Same logical key and same kind, key and Principal: a compatible retry, not a conflict.

        ``admissionRecordId`` and ``trustedAcceptedAt`` may legitimately differ between a
        concurrent winner and a losing candidate.
        """
        return (
            self.logical_key == other.logical_key
            and self.document_kind == other.document_kind
            and self.key_id == other.key_id
            and self.principal == other.principal
        )


def record_json(
    *,
    admission_record_id: str,
    organization_id: str,
    document_kind: str,
    signing_hash: str,
    key_id: str,
    principal: Principal,
    trusted_accepted_at: str,
    accepted_by: Principal,
) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "admissionRecordId": admission_record_id,
        "organizationId": organization_id,
        "documentKind": document_kind,
        "signingHash": signing_hash,
        "keyId": key_id,
        "principal": principal.to_json(),
        "trustedAcceptedAt": trusted_accepted_at,
        "acceptedBy": accepted_by.to_json(),
    }


def record_schema_violation(value: object) -> str | None:
    """Why ``value`` breaks the First-Admission Record schema, or None when it conforms.

    A dedicated check so the core needs no schema files; the conformance runner cross-checks
    it against the normative JSON Schema on every record fixture.
    """
    if not isinstance(value, dict):
        return "record is not an object"
    keys = set(value)
    if keys != _RECORD_FIELDS:
        missing, extra = sorted(_RECORD_FIELDS - keys), sorted(keys - _RECORD_FIELDS)
        return f"record members differ (missing {missing}, unexpected {extra})"
    if not _is_str(value["protocolVersion"], PROTOCOL_VERSION):
        return "protocolVersion"
    for name in ("admissionRecordId", "organizationId", "keyId"):
        if not _is_identifier(value[name]):
            return name
    if not (isinstance(value["documentKind"], str) and value["documentKind"] in DOCUMENT_KINDS):
        return "documentKind"
    if not (isinstance(value["signingHash"], str) and is_sha256_ref(value["signingHash"])):
        return "signingHash"
    if _principal(value["principal"]) is None:
        return "principal"
    accepted_by = _principal(value["acceptedBy"])
    if accepted_by is None or accepted_by.type != "service":
        return "acceptedBy"
    if not isinstance(value["trustedAcceptedAt"], str):
        return "trustedAcceptedAt"
    try:
        parse_timestamp(value["trustedAcceptedAt"])
    except ValueRuleError:
        return "trustedAcceptedAt"
    return None


def parse_record(data: bytes) -> FirstAdmissionRecord:
    """Strictly parse and schema-check record bytes (no binding or trust checks)."""
    value = _parse_json(data)
    return _record_from_value(value, data)


def _parse_json(data: bytes) -> Any:
    if not isinstance(data, bytes):
        raise AdmissionError(AdmissionReason.LOG_INDETERMINATE)
    try:
        return parse_bytes(data)
    except JsonSyntaxError as exc:
        raise AdmissionError(AdmissionReason.RECORD_UNPARSEABLE) from exc


def _record_from_value(value: Any, data: bytes) -> FirstAdmissionRecord:
    if record_schema_violation(value) is not None:
        raise AdmissionError(AdmissionReason.RECORD_SCHEMA_INVALID)
    principal = _principal(value["principal"])
    accepted_by = _principal(value["acceptedBy"])
    assert principal is not None and accepted_by is not None  # guaranteed by the schema check
    return FirstAdmissionRecord(
        admission_record_id=value["admissionRecordId"],
        organization_id=value["organizationId"],
        document_kind=value["documentKind"],
        signing_hash=value["signingHash"],
        key_id=value["keyId"],
        principal=principal,
        trusted_accepted_at=parse_timestamp(value["trustedAcceptedAt"]),
        accepted_by=accepted_by,
        raw=data,
    )


def _is_str(value: object, expected: str) -> bool:
    return isinstance(value, str) and value == expected


def _is_identifier(value: object) -> bool:
    return isinstance(value, str) and is_identifier(value)


def _principal(value: object) -> Principal | None:
    if not isinstance(value, dict) or set(value) != {"type", "id"}:
        return None
    kind, ident = value["type"], value["id"]
    if not (isinstance(kind, str) and kind in _PRINCIPAL_TYPES and _is_identifier(ident)):
        return None
    assert isinstance(ident, str)
    return Principal(kind, ident)


# --- validation -----------------------------------------------------------------------------


def validate_record(
    verified: VerifiedDocument, data: bytes, authenticated_service: Principal
) -> FirstAdmissionRecord:
    """Accept ``data`` as the First-Admission Record of ``verified``, or raise.

    ``authenticated_service`` must come from a successful typed log result.
    """
    value = _parse_json(data)
    # Checked before the schema so the refusal names the real problem: the Event's own bytes
    # are offered as its anchor, which its signature can never authenticate.
    if verified.profile_id == "event" and _is_unsigned_content_of(value, verified):
        raise AdmissionError(AdmissionReason.EVENT_SELF_ANCHORING)
    record = _record_from_value(value, data)
    if (
        record.organization_id != verified.organization_id
        or record.document_kind != verified.profile_id
        or record.signing_hash != verified.signing_hash
        or record.key_id != verified.key_id
        or record.principal != verified.principal
    ):
        raise AdmissionError(AdmissionReason.RECORD_BINDING_MISMATCH)
    if not (
        isinstance(authenticated_service, Principal) and authenticated_service.type == "service"
    ):
        raise AdmissionError(AdmissionReason.LOG_AUTHENTICATION_FAILED)
    if record.accepted_by != authenticated_service:
        raise AdmissionError(AdmissionReason.ACCEPTING_SERVICE_MISMATCH)
    # Evaluated independently of the protected signed time, which stage 4 already checked:
    # a signer cannot backdate its way past expiry or revocation.
    if not verified.key_validity.contains(record.trusted_accepted_at):
        raise AdmissionError(AdmissionReason.TRUSTED_TIME_OUTSIDE_KEY_INTERVAL)
    return record


def _is_unsigned_content_of(value: Any, verified: VerifiedDocument) -> bool:
    """Whether ``value`` is the verified document itself (with or without its signature)."""
    if not isinstance(value, dict):
        return False
    unsigned = {name: member for name, member in value.items() if name != "signature"}
    try:
        return canonicalize(unsigned) == verified.signing_bytes
    except JcsDataModelError:
        return False


def prepare_candidate(verified: VerifiedDocument, context: TrustedContext) -> bytes:
    """Canonical bytes of the candidate record; admits nothing by itself."""
    try:
        trusted_at = parse_timestamp(context.trusted_accepted_at)
    except (ValueRuleError, TypeError) as exc:
        raise AdmissionError(AdmissionReason.MALFORMED_TRUSTED_TIME) from exc
    if not verified.key_validity.contains(trusted_at):
        raise AdmissionError(AdmissionReason.TRUSTED_TIME_OUTSIDE_KEY_INTERVAL)
    value = record_json(
        admission_record_id=context.admission_record_id,
        organization_id=verified.organization_id,
        document_kind=verified.profile_id,
        signing_hash=verified.signing_hash,
        key_id=verified.key_id,
        principal=verified.principal,
        trusted_accepted_at=trusted_at.text,
        accepted_by=context.accepted_by,
    )
    try:
        if record_schema_violation(value) is not None:
            raise AdmissionError(AdmissionReason.CANDIDATE_INVALID)
        return canonicalize(value)
    except (JcsDataModelError, AttributeError) as exc:
        raise AdmissionError(AdmissionReason.CANDIDATE_INVALID) from exc


# --- the two admission paths ----------------------------------------------------------------

_FAILURE_REASONS: dict[LogFailure, AdmissionReason] = {
    LogFailure.UNAUTHENTICATED: AdmissionReason.LOG_AUTHENTICATION_FAILED,
    LogFailure.UNAUTHORIZED: AdmissionReason.LOG_WRITE_UNAUTHORIZED,
    LogFailure.INTEGRITY_FAILED: AdmissionReason.APPEND_INTEGRITY_NOT_ESTABLISHED,
    LogFailure.UNAVAILABLE: AdmissionReason.LOG_UNAVAILABLE,
    LogFailure.INDETERMINATE: AdmissionReason.LOG_INDETERMINATE,
    LogFailure.CONFLICT: AdmissionReason.RECORD_CONFLICT,
    LogFailure.COMMIT_FAILED: AdmissionReason.COMMIT_FAILED,
}


def _failed(result: LogFailed) -> AdmissionError:
    reason = (
        _FAILURE_REASONS.get(result.failure) if isinstance(result.failure, LogFailure) else None
    )
    return AdmissionError(reason or AdmissionReason.LOG_INDETERMINATE)


def _lookup(verified: VerifiedDocument, log: AdmissionLog) -> LookupFound | None:
    """The found record, or None on authoritative absence; every other answer raises."""
    try:
        result = log.lookup(verified.organization_id, verified.signing_hash)
    except Exception as exc:  # an adapter that cannot answer has not said "absent"
        raise AdmissionError(AdmissionReason.LOG_INDETERMINATE) from exc
    # Exact types only: anything else (a bool, a dict, a look-alike) is not a log answer.
    if type(result) is LookupFound:
        return result
    if type(result) is LookupAbsent:
        return None
    if type(result) is LogFailed:
        raise _failed(result)
    raise AdmissionError(AdmissionReason.LOG_INDETERMINATE)


def admit_first(
    verified: VerifiedDocument, log: AdmissionLog, trusted_context: TrustedContextSource
) -> FirstAdmissionRecord:
    """First admission of a newly presented, six-stage-verified document.

    The caller must have verified against Registry evidence that is current for a new
    decision. A compatible record already in the log is returned without appending.
    """
    found = _lookup(verified, log)
    if found is not None:
        return validate_record(verified, found.record, found.authenticated_service)
    try:
        context = trusted_context(verified)
    except Exception as exc:
        raise AdmissionError(AdmissionReason.TRUSTED_CONTEXT_UNAVAILABLE) from exc
    if type(context) is not TrustedContext:
        raise AdmissionError(AdmissionReason.TRUSTED_CONTEXT_UNAVAILABLE)
    candidate = prepare_candidate(verified, context)
    try:
        result = log.append_or_return_existing(
            verified.organization_id, verified.signing_hash, candidate
        )
    except Exception as exc:  # the append may or may not have happened
        raise AdmissionError(AdmissionReason.LOG_INDETERMINATE) from exc
    if type(result) is AppendCommitted or type(result) is AppendExisting:
        # The log's answer, not our candidate, is what must pass every rule.
        return validate_record(verified, result.record, result.authenticated_service)
    if type(result) is LogFailed:
        raise _failed(result)
    raise AdmissionError(AdmissionReason.LOG_INDETERMINATE)


def verify_historical(verified: VerifiedDocument, log: AdmissionLog) -> FirstAdmissionRecord:
    """Historical replay: the document must already be anchored; nothing is ever appended.

    The caller must have re-verified against authoritative historical Registry evidence
    whose validity history covers the protected signed time.
    """
    found = _lookup(verified, log)
    if found is None:
        raise AdmissionError(AdmissionReason.RECORD_MISSING)
    return validate_record(verified, found.record, found.authenticated_service)


# --- an in-process log ----------------------------------------------------------------------


class InMemoryAdmissionLog:
    """An Admission Log held in memory, for tests and single-threaded embedding.

    The calling service is fixed at construction (in-process, so authenticated by
    construction); ``may_append`` models a service that may read but not write.
    """

    def __init__(self, service: Principal, *, may_append: bool = True) -> None:
        self._service = service
        self._may_append = may_append
        self._records: dict[tuple[str, str], tuple[bytes, Principal]] = {}
        self._record_ids: dict[str, tuple[str, str]] = {}

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        held = self._records.get((organization_id, signing_hash))
        if held is None:
            return LookupAbsent()
        return LookupFound(held[0], held[1])

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult:
        if not self._may_append:
            return LogFailed(LogFailure.UNAUTHORIZED, "service may not append")
        decision = decide_append(
            organization_id,
            signing_hash,
            candidate,
            writer=self._service,
            existing=self._existing(organization_id, signing_hash),
            record_id_key=lambda record_id: self._record_ids.get(record_id),
        )
        if isinstance(decision, FirstAdmissionRecord):
            key = (organization_id, signing_hash)
            self._records[key] = (decision.raw, self._service)
            self._record_ids[decision.admission_record_id] = key
            return AppendCommitted(decision.raw, self._service)
        return decision

    def _existing(self, organization_id: str, signing_hash: str) -> HeldRecord | None:
        held = self._records.get((organization_id, signing_hash))
        return None if held is None else HeldRecord(held[0], held[1])

    def __len__(self) -> int:
        return len(self._records)


@dataclass(frozen=True)
class HeldRecord:
    """A record already stored under a logical key, with the service that wrote it."""

    record: bytes
    writer: Principal


def decide_append(
    organization_id: str,
    signing_hash: str,
    candidate: bytes,
    *,
    writer: Principal,
    existing: HeldRecord | None,
    record_id_key: Callable[[str], tuple[str, str] | None],
) -> FirstAdmissionRecord | AppendExisting | LogFailed:
    """The append-or-return-existing rule shared by every log implementation.

    Returns the parsed candidate when it should be committed, the existing record when a
    compatible one already holds the key, or a typed failure. Callers run it and the commit
    inside one atomic section.
    """
    try:
        proposed = parse_record(candidate)
    except AdmissionError as exc:
        return LogFailed(LogFailure.COMMIT_FAILED, f"candidate rejected: {exc.reason}")
    if proposed.logical_key != (organization_id, signing_hash):
        return LogFailed(LogFailure.COMMIT_FAILED, "candidate is not for this logical key")
    if proposed.accepted_by != writer:
        # A service may only write records that name itself as the accepting service.
        return LogFailed(LogFailure.UNAUTHORIZED, "acceptedBy is not the authenticated writer")
    if existing is not None:
        try:
            held = parse_record(existing.record)
        except AdmissionError:
            return LogFailed(LogFailure.INTEGRITY_FAILED, "stored record no longer parses")
        if held.binds_same_document(proposed):
            return AppendExisting(existing.record, existing.writer)
        return LogFailed(LogFailure.CONFLICT, "key holds a record for another binding")
    owner = record_id_key(proposed.admission_record_id)
    if owner is not None and owner != proposed.logical_key:
        return LogFailed(LogFailure.CONFLICT, "admissionRecordId already names another key")
    return proposed
