"""Signed Document codec (spec 6.4): sign, and verify in the six normative stages.

Each stage either passes or raises :class:`VerificationError` carrying the wire code for its
class of failure and a protected :class:`Diagnostic` (stage and stable reason). The wire
message is the same for every reason of a code, so a caller learns nothing about which check
failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import (
    KeyBinding,
    KeyValidity,
    Principal,
    RegistryEvidence,
    RegistryEvidenceError,
)
from mwp.core.wire.ed25519 import SigningKey, signature_encoding_fault, verify_equation
from mwp.core.wire.jcs import JcsDataModelError, canonicalize, sha256_ref
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes
from mwp.core.wire.values import ValueRuleError, b64url_decode, b64url_encode, parse_timestamp

CLAUSES: tuple[str, ...] = (
    "MWP-ADM-013",
    "MWP-SDV-001",
    "MWP-SDV-002",
    "MWP-SDV-006",
    "MWP-SDV-013",
    "MWP-SDV-015",
    "MWP-SDV-016",
    "MWP-SDV-017",
    "MWP-SDV-018",
    "MWP-SDV-019",
)

# Normative semantic stages, in order (the cryptography bundle's names).
STAGES = (
    "parse",
    "schema",
    "signature-envelope",
    "key-resolution",
    "canonicalization",
    "signature",
)


@dataclass(frozen=True)
class Profile:
    """One row of the Verification Profile: where the signed time is and who must sign."""

    profile_id: str
    schema: str
    time_member: str
    signer_rule: str  # "principal-object" | "agent-id" | "service-principal"
    signer_path: tuple[str, ...] = ()


PROFILES: dict[str, Profile] = {
    p.profile_id: p
    for p in (
        Profile("agent-card", "agent-card.schema.json", "issuedAt", "service-principal"),
        Profile(
            "approval", "approval.schema.json", "occurredAt", "principal-object", ("approver",)
        ),
        Profile(
            "artifact", "artifact.schema.json", "createdAt", "agent-id", ("producer", "agentId")
        ),
        Profile("command", "command.schema.json", "issuedAt", "principal-object", ("actor",)),
        Profile(
            "context-package",
            "context-package.schema.json",
            "generatedAt",
            "principal-object",
            ("generatedBy",),
        ),
        Profile("event", "event.schema.json", "occurredAt", "principal-object", ("acceptedBy",)),
        Profile(
            "evidence", "evidence.schema.json", "createdAt", "principal-object", ("generatedBy",)
        ),
        Profile(
            "extension-profile",
            "extension-profile.schema.json",
            "approvedAt",
            "principal-object",
            ("approvedBy",),
        ),
        Profile(
            "group-snapshot",
            "group-snapshot.schema.json",
            "createdAt",
            "principal-object",
            ("createdBy",),
        ),
    )
}

SchemaCheck = Callable[[str, Any], None]


class VerificationError(MwpError):
    """Verification stopped at ``stage``; the wire code never says why."""

    def __init__(self, code: ErrorCode, stage: str, reason: str) -> None:
        super().__init__(code, diagnostic=Diagnostic(stage, reason))

    @property
    def stage(self) -> str:
        assert self.diagnostic is not None
        return self.diagnostic.stage

    @property
    def reason(self) -> str:
        assert self.diagnostic is not None
        return self.diagnostic.reason


@dataclass(frozen=True)
class VerifiedDocument:
    """What six-stage verification established about one Signed Document."""

    profile_id: str  # also the First-Admission Record's documentKind
    document: dict[str, Any]
    organization_id: str
    signing_bytes: bytes
    signing_hash: str
    key_id: str
    principal: Principal
    protected_time: str
    key_validity: KeyValidity
    signature: bytes


def _models_schema_check(schema: str, value: Any) -> None:
    from mwp.core.models import validate_document

    validate_document(schema, value)


def _fail(code: ErrorCode, stage: str, reason: str) -> VerificationError:
    return VerificationError(code, stage, reason)


def verify(
    data: bytes,
    profile_id: str,
    registry: RegistryEvidence | Mapping[str, Any],
    *,
    schema_check: SchemaCheck | None = None,
) -> VerifiedDocument:
    """Verify one Signed Document's exact bytes.

    ``registry`` is validated evidence, or raw Registry evidence JSON that is validated at
    stage 4 (so a fault in it is classified there, never earlier).
    """
    profile = PROFILES[profile_id]
    # Stage 1: exactly one strict UTF-8 JSON value.
    try:
        document = parse_bytes(data)
    except JsonSyntaxError as exc:
        raise _fail(ErrorCode.PROTOCOL_VIOLATION, "parse", f"json: {exc}") from None
    return verify_value(document, profile, registry, schema_check=schema_check)


def verify_value(
    document: Any,
    profile: Profile,
    registry: RegistryEvidence | Mapping[str, Any],
    *,
    schema_check: SchemaCheck | None = None,
) -> VerifiedDocument:
    """Stages 2 to 6 on an already strictly parsed value."""
    # Stage 2: the normative schema, including the signature envelope and algorithm.
    try:
        (schema_check or _models_schema_check)(profile.schema, document)
    except ValueError as exc:
        raise _fail(ErrorCode.SCHEMA_VALIDATION_FAILED, "schema", f"schema: {exc}") from None
    if not isinstance(document, dict):  # the schema check guarantees this; keep mypy honest
        raise _fail(ErrorCode.SCHEMA_VALIDATION_FAILED, "schema", "not an object")

    envelope = document["signature"]
    protected = document[profile.time_member]
    try:
        protected_time = parse_timestamp(protected)
    except (TypeError, ValueRuleError):
        raise _fail(ErrorCode.SCHEMA_VALIDATION_FAILED, "schema", "timestamp-profile") from None

    # Stage 3: the envelope is bound back to the protected content.
    if not protected.endswith("Z"):
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "signature-envelope", "protected-time-not-z")
    if envelope["createdAt"] != protected:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "signature-envelope", "created-at-mismatch")
    signer = _expected_signer(profile, document)
    try:
        signature = b64url_decode(envelope["value"])
    except ValueRuleError:
        raise _fail(
            ErrorCode.AUTH_INVALID_SIGNATURE, "signature-envelope", "signature-encoding"
        ) from None
    fault = signature_encoding_fault(signature)
    if fault is not None:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "signature-envelope", fault)

    # Stage 4: complete Registry evidence first, then the pinned key under the signer rule.
    try:
        evidence = (
            registry
            if isinstance(registry, RegistryEvidence)
            else RegistryEvidence.from_json(registry)
        )
        binding = evidence.resolve(envelope["keyId"])
    except RegistryEvidenceError as exc:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "key-resolution", exc.reason) from None
    if not _signer_matches(profile, signer, binding):
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "key-resolution", "signer-binding")
    validity = binding.validity()
    if not validity.contains(protected_time):
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "key-resolution", "key-interval")

    # Stage 5: JCS of everything but the top-level signature member.
    unsigned = {k: v for k, v in document.items() if k != "signature"}
    try:
        signing_bytes = canonicalize(unsigned)
    except JcsDataModelError as exc:
        raise _fail(ErrorCode.PROTOCOL_VIOLATION, "canonicalization", f"jcs: {exc}") from None

    # Stage 6: the Ed25519 equation.
    if not verify_equation(binding.public_key, signature, signing_bytes):
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "signature", "equation")
    return VerifiedDocument(
        profile_id=profile.profile_id,
        document=document,
        organization_id=evidence.organization_id,
        signing_bytes=signing_bytes,
        signing_hash=sha256_ref(signing_bytes),
        key_id=binding.key_id,
        principal=binding.principal,
        protected_time=protected,
        key_validity=validity,
        signature=signature,
    )


def _lookup(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for member in path:
        value = value[member]
    return value


def _expected_signer(profile: Profile, document: Mapping[str, Any]) -> Principal | None:
    """The exact Principal the profile names, or None for "any service" (Agent Cards)."""
    if profile.signer_rule == "service-principal":
        return None
    named = _lookup(document, profile.signer_path)
    if profile.signer_rule == "agent-id":
        return Principal("agent", named)
    return Principal(named["type"], named["id"])


def _signer_matches(profile: Profile, signer: Principal | None, binding: KeyBinding) -> bool:
    if signer is None:
        # Agent Cards: any Organization service key here; whether that service may issue
        # cards for the Organization is an authorization question after verification.
        return binding.principal.type == "service"
    return binding.principal == signer


def sign(
    document: Mapping[str, Any], profile_id: str, key_id: str, key: SigningKey
) -> dict[str, Any]:
    """Return ``document`` with a fresh top-level signature envelope.

    The protected signed time must already be set in its UTC ``Z`` spelling; the envelope's
    ``createdAt`` copies it byte for byte.
    """
    profile = PROFILES[profile_id]
    protected = document[profile.time_member]
    if not isinstance(protected, str) or not protected.endswith("Z"):
        raise ValueError(f"{profile.time_member} must be an RFC 3339 UTC time ending in Z")
    parse_timestamp(protected)
    unsigned = {k: v for k, v in document.items() if k != "signature"}
    value = b64url_encode(key.sign(canonicalize(unsigned)))
    envelope = {"algorithm": "Ed25519", "keyId": key_id, "createdAt": protected, "value": value}
    return {**unsigned, "signature": envelope}


def signing_hash(document: Mapping[str, Any]) -> str:
    """The signing hash of a document: SHA-256 of JCS without its top-level signature."""
    return sha256_ref(canonicalize({k: v for k, v in document.items() if k != "signature"}))


@dataclass(frozen=True)
class FreshnessWindow:
    """The Organization's bounded window for a newly presented Command's ``issuedAt``."""

    max_age_seconds: int = 300
    max_skew_seconds: int = 30


def check_command_freshness(
    verified: VerifiedDocument, now: str, window: FreshnessWindow = FreshnessWindow()
) -> None:
    """Refuse a newly presented Command issued too long ago or too far in the future.

    ``now`` is the Authority's trusted clock as a protocol timestamp. Separate from, and after,
    the six stages; never applied to historical replay.
    """
    if verified.profile_id != "command":
        raise ValueError("freshness applies to Commands only")
    check_issued_at(verified.protected_time, now, window)


def check_issued_at(
    issued_at: str,
    now: str,
    window: FreshnessWindow = FreshnessWindow(),
    *,
    not_before: str = "",
) -> None:
    """The freshness check on a Command's ``issuedAt`` (already bound to its signature's
    ``createdAt`` by the six stages). ``not_before``, when set, narrows the window further:
    a Command issued up to the skew allowance after that instant is refused too."""
    try:
        issued = parse_timestamp(issued_at).instant
    except ValueError:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "freshness", "issued-at-malformed") from None
    current = parse_timestamp(now).instant
    age = (current.seconds - issued.seconds) + (current.fraction - issued.fraction)
    if age > window.max_age_seconds:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "freshness", "issued-too-long-ago")
    if -age > window.max_skew_seconds:
        raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "freshness", "issued-in-the-future")
    if not_before:
        floor = parse_timestamp(not_before).instant
        after = (issued.seconds - floor.seconds) + (issued.fraction - floor.fraction)
        if after <= window.max_skew_seconds:
            raise _fail(ErrorCode.AUTH_INVALID_SIGNATURE, "freshness", "issued-before-horizon")
