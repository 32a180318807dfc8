"""Sign-then-verify for every profile, and one-byte tampering (spec 6.4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.trust.signed_document import (
    PROFILES,
    FreshnessWindow,
    VerificationError,
    check_command_freshness,
    sign,
    signing_hash,
    verify,
)
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes
from mwp.core.wire.values import b64url_encode, parse_timestamp
from tests.protocol_root import protocol_root

ORG = "urn:example:organization:test"
VALID = "cryptography/vectors/signed-documents/valid"
DOCUMENTS = {
    "agent-card": "agent-card.json",
    "approval": "approval.json",
    "artifact": "artifact.json",
    "command": "command.json",
    "context-package": "context-package.json",
    "event": "event.json",
    "evidence": "evidence.json",
    "extension-profile": "extension-profile.json",
    "group-snapshot": "group-snapshot.json",
}
SERVICE = Principal("service", "urn:example:service:registry")


def _signer(profile_id: str, document: dict[str, Any]) -> Principal:
    profile = PROFILES[profile_id]
    if profile.signer_rule == "service-principal":
        return SERVICE
    value: Any = document
    for member in profile.signer_path:
        value = value[member]
    if profile.signer_rule == "agent-id":
        return Principal("agent", value)
    return Principal(value["type"], value["id"])


def _signed(profile_id: str) -> tuple[dict[str, Any], RegistryEvidence, SigningKey]:
    """The bundle's valid document for ``profile_id``, re-signed by a fresh key of ours."""
    document = parse_bytes((protocol_root() / VALID / DOCUMENTS[profile_id]).read_bytes())
    key = SigningKey.generate()
    key_id = f"urn:example:key:{profile_id}"
    binding = KeyBinding(
        key_id,
        _signer(profile_id, document),
        "Ed25519",
        key.public_key,
        parse_timestamp("2000-01-01T00:00:00Z"),
        (),
    )
    registry = RegistryEvidence.from_bindings(ORG, [binding])
    return sign(document, profile_id, key_id, key), registry, key


@pytest.mark.parametrize("profile_id", sorted(PROFILES))
def test_sign_then_verify_every_profile(profile_id: str) -> None:
    document, registry, _ = _signed(profile_id)
    verified = verify(canonicalize(document), profile_id, registry)
    assert verified.signing_hash == signing_hash(document)
    assert verified.organization_id == ORG
    assert verified.protected_time == document[PROFILES[profile_id].time_member]


@pytest.mark.parametrize("profile_id", sorted(PROFILES))
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_one_byte_change_to_protected_content_fails(
    profile_id: str, data: st.DataObject
) -> None:
    document, registry, _ = _signed_cached(profile_id)
    unsigned = {k: v for k, v in document.items() if k != "signature"}
    original = canonicalize(unsigned)
    position = data.draw(st.integers(0, len(original) - 1))
    replacement = data.draw(st.integers(0, 255).filter(lambda b: b != original[position]))
    mutated = original[:position] + bytes([replacement]) + original[position + 1 :]
    try:
        value = parse_bytes(mutated)
    except JsonSyntaxError:
        return  # not JSON any more: stage 1 rejects it (proved in test_jcs)
    if not isinstance(value, dict) or canonicalize_or_none(value) == original:
        return
    value["signature"] = document["signature"]
    try:
        tampered = canonicalize(value)
    except ValueError:
        return
    with pytest.raises(VerificationError):
        verify(tampered, profile_id, registry)


def canonicalize_or_none(value: Any) -> bytes | None:
    try:
        return canonicalize(value)
    except ValueError:
        return None


_CACHE: dict[str, tuple[dict[str, Any], RegistryEvidence, SigningKey]] = {}


def _signed_cached(profile_id: str) -> tuple[dict[str, Any], RegistryEvidence, SigningKey]:
    if profile_id not in _CACHE:
        _CACHE[profile_id] = _signed(profile_id)
    return _CACHE[profile_id]


def test_wire_errors_do_not_reveal_the_failing_check() -> None:
    document, registry, _ = _signed("command")
    wrong_time = {
        **document,
        "signature": {**document["signature"], "createdAt": "2000-01-01T00:00:00Z"},
    }
    wrong_key = {
        **document,
        "signature": {**document["signature"], "keyId": "urn:example:key:none"},
    }
    errors = []
    for candidate in (wrong_time, wrong_key):
        with pytest.raises(VerificationError) as info:
            verify(canonicalize(candidate), "command", registry)
        errors.append(info.value)
    assert [e.code for e in errors] == [ErrorCode.AUTH_INVALID_SIGNATURE] * 2
    assert {e.stage for e in errors} == {"signature-envelope", "key-resolution"}
    wires = [e.to_wire("2026-01-01T00:00:00Z") for e in errors]
    assert wires[0] == wires[1]  # identical on the wire, distinct in the protected diagnostic
    assert "diagnostic" not in wires[0]


def test_key_outside_its_interval_is_rejected_at_key_resolution() -> None:
    document, registry, key = _signed("command")
    binding = next(iter(registry.bindings.values()))
    late = KeyBinding(
        binding.key_id,
        binding.principal,
        "Ed25519",
        key.public_key,
        parse_timestamp("2100-01-01T00:00:00Z"),
        (),
    )
    with pytest.raises(VerificationError) as info:
        verify(canonicalize(document), "command", RegistryEvidence.from_bindings(ORG, [late]))
    assert (info.value.stage, info.value.reason) == ("key-resolution", "key-interval")


def test_signer_must_be_the_named_principal() -> None:
    document, registry, _ = _signed("command")
    other = {**document, "actor": {"type": "agent", "id": "urn:example:agent:someone-else"}}
    resigned = {**other, "signature": document["signature"]}
    with pytest.raises(VerificationError) as info:
        verify(canonicalize(resigned), "command", registry)
    assert info.value.stage == "key-resolution"


def test_sign_refuses_a_non_utc_protected_time(tmp_path: Path) -> None:
    document, _, key = _signed("command")
    with pytest.raises(ValueError):
        sign({**document, "issuedAt": "2026-07-15T00:00:00+01:00"}, "command", "urn:k:1", key)


@pytest.mark.parametrize(
    ("now", "fresh"),
    [
        ("2026-07-15T00:00:00Z", True),
        ("2026-07-15T00:05:00Z", True),
        ("2026-07-15T00:05:00.000000001Z", False),
        ("2026-07-14T23:59:30Z", True),
        ("2026-07-14T23:59:29.999Z", False),
    ],
)
def test_command_freshness_window_is_bounded(now: str, fresh: bool) -> None:
    document, registry, _ = _signed("command")
    verified = verify(canonicalize({**document}), "command", registry)
    assert verified.protected_time == "2026-07-15T00:00:00Z"
    window = FreshnessWindow(max_age_seconds=300, max_skew_seconds=30)
    if fresh:
        check_command_freshness(verified, now, window)
    else:
        with pytest.raises(VerificationError) as info:
            check_command_freshness(verified, now, window)
        assert info.value.code == ErrorCode.AUTH_INVALID_SIGNATURE
        assert info.value.stage == "freshness"


def test_a_signature_over_the_envelope_minus_value_is_not_v01() -> None:
    """A signature that protects the envelope metadata is a different wire revision."""
    document, registry, key = _signed("command")
    envelope = {k: v for k, v in document["signature"].items() if k != "value"}
    unsigned = {k: v for k, v in document.items() if k != "signature"}
    future_bytes = canonicalize({**unsigned, "signature": envelope})
    future = {**unsigned, "signature": {**envelope, "value": b64url_encode(key.sign(future_bytes))}}
    with pytest.raises(VerificationError) as info:
        verify(canonicalize(future), "command", registry)
    assert info.value.stage == "signature"
