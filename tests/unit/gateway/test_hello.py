"""HELLO's pure decisions: challenge, response verification, session checks (spec 6.3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mwp.client import Identity
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.models import validate_document
from mwp.core.models.websocket_frame import HelloClientInit, HelloClientResponse
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.wire.values import format_utc
from mwp.gateway.frames import read_frame
from mwp.gateway.hello import (
    HelloPolicy,
    PendingChallenge,
    accept,
    accept_frame,
    challenge_frame,
    init_frame,
    issue_challenge,
    response_frame,
    transcript,
    verify_response,
)
from mwp.gateway.tls import certificate_hash

ORG = "urn:mwp:organization:acme"
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
CERT = certificate_hash(b"the server certificate")
POLICY = HelloPolicy(challenge_seconds=30, session_seconds=60)


def agent(name: str) -> Identity:
    return Identity.generate(
        Principal("agent", f"urn:mwp:agent:{name}"), valid_from="2026-01-01T00:00:00Z"
    )


def evidence(*identities: Identity, revoked: dict[str, str] | None = None) -> RegistryEvidence:
    revoked = revoked or {}
    bindings = []
    for identity in identities:
        history = []
        if identity.key_id in revoked:
            history.append(
                {
                    "sequence": 1,
                    "recordedAt": revoked[identity.key_id],
                    "revokedAt": revoked[identity.key_id],
                }
            )
        bindings.append({**identity.binding(), "validityHistory": history})
    return RegistryEvidence.from_json({"organizationId": ORG, "bindings": bindings})


def model(frame: dict[str, Any], cls: type) -> Any:
    validated = validate_document("websocket-frame.schema.json", frame)
    inner = validated.root  # type: ignore[attr-defined]
    assert isinstance(inner, cls)
    return inner


def handshake(
    ada: Identity, *, cert: str = CERT, signer: Identity | None = None, now: datetime = NOW
) -> tuple[PendingChallenge, HelloClientResponse]:
    init = init_frame(ada.principal.id, ada.key_id, b"c" * 32, "urn:uuid:0000-init")
    pending = issue_challenge(
        model(init, HelloClientInit),
        server_nonce=b"s" * 32,
        challenge=b"x" * 32,
        server_certificate=CERT,
        now=now,
        policy=POLICY,
    )
    challenge = challenge_frame(pending, "urn:uuid:0000-challenge")
    response = response_frame(init, challenge, (signer or ada).key, cert, "urn:uuid:0000-response")
    return pending, model(response, HelloClientResponse)


def refusal(call: Any) -> MwpError:
    with pytest.raises(MwpError) as caught:
        call()
    return caught.value


def test_a_response_over_this_challenge_opens_a_session() -> None:
    ada = agent("ada")
    pending, response = handshake(ada)
    binding = verify_response(pending, response, evidence(ada), NOW + timedelta(seconds=5))
    assert binding.principal == Principal("agent", ada.principal.id)
    session = accept(pending, session_epoch=7, token=b"t" * 32, now=NOW, policy=POLICY)
    frame = accept_frame(session, "urn:uuid:0000-accept")
    validate_document("websocket-frame.schema.json", frame)
    assert frame["sessionEpoch"] == 7 and frame["expiresAt"] == format_utc(
        NOW + timedelta(seconds=60)
    )
    session.check(NOW + timedelta(seconds=59), 7)


def test_every_frame_of_the_handshake_conforms_to_the_schema() -> None:
    ada = agent("ada")
    pending, _ = handshake(ada)
    validate_document("websocket-frame.schema.json", challenge_frame(pending, "urn:uuid:1"))


def test_a_forged_signature_is_refused() -> None:
    ada, mallory = agent("ada"), agent("mallory")
    pending, response = handshake(ada, signer=mallory)
    error = refusal(lambda: verify_response(pending, response, evidence(ada, mallory), NOW))
    assert error.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert error.diagnostic == Diagnostic("signature", "equation")


def test_a_response_is_bound_to_the_certificate_the_client_saw() -> None:
    ada = agent("ada")
    pending, relayed = handshake(ada, cert=certificate_hash(b"a relay's certificate"))
    error = refusal(lambda: verify_response(pending, relayed, evidence(ada), NOW))
    assert error.diagnostic == Diagnostic("signature", "equation")


def test_a_replayed_response_is_refused() -> None:
    ada = agent("ada")
    old_pending, old_response = handshake(ada)
    # Another connection's challenge (other nonces): the old response does not answer it.
    fresh = PendingChallenge(**{**old_pending.__dict__, "server_nonce": "bmV3LW5vbmNl"})
    error = refusal(lambda: verify_response(fresh, old_response, evidence(ada), NOW))
    assert error.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert error.diagnostic == Diagnostic("challenge", "not-this-challenge")
    # Same connection, challenge already answered: nothing pending.
    again = refusal(lambda: verify_response(None, old_response, evidence(ada), NOW))
    assert again.diagnostic == Diagnostic("challenge", "no-pending-challenge")


def test_a_late_response_is_refused() -> None:
    ada = agent("ada")
    pending, response = handshake(ada)
    late = NOW + timedelta(seconds=POLICY.challenge_seconds)
    error = refusal(lambda: verify_response(pending, response, evidence(ada), late))
    assert error.diagnostic == Diagnostic("challenge", "challenge-expired")


def test_an_unknown_key_is_refused() -> None:
    ada, other = agent("ada"), agent("other")
    pending, response = handshake(ada)
    error = refusal(lambda: verify_response(pending, response, evidence(other), NOW))
    assert error.code == ErrorCode.AUTH_INVALID_SIGNATURE
    assert error.diagnostic == Diagnostic("key-resolution", "unknown-key")


def test_a_revoked_key_is_refused_from_its_revocation_on() -> None:
    ada = agent("ada")
    pending, response = handshake(ada)
    revoked = evidence(ada, revoked={ada.key_id: format_utc(NOW - timedelta(seconds=1))})
    error = refusal(lambda: verify_response(pending, response, revoked, NOW))
    assert error.diagnostic == Diagnostic("key-resolution", "key-interval")
    later = evidence(ada, revoked={ada.key_id: format_utc(NOW + timedelta(seconds=1))})
    verify_response(pending, response, later, NOW)


def test_another_principals_key_is_refused() -> None:
    ada = agent("ada")
    bob = agent("bob")
    # Bob's key, Ada's name: signed by Bob's key, so only the binding check can catch it.
    init = init_frame(ada.principal.id, bob.key_id, b"c" * 32, "urn:uuid:0000-init")
    pending = issue_challenge(
        model(init, HelloClientInit),
        server_nonce=b"s" * 32,
        challenge=b"x" * 32,
        server_certificate=CERT,
        now=NOW,
    )
    response = response_frame(
        init, challenge_frame(pending, "urn:uuid:1"), bob.key, CERT, "urn:uuid:2"
    )
    error = refusal(
        lambda: verify_response(
            pending, model(response, HelloClientResponse), evidence(ada, bob), NOW
        )
    )
    assert error.diagnostic == Diagnostic("key-resolution", "signer-binding")


def test_every_refusal_reason_has_the_same_wire_message() -> None:
    ada, mallory = agent("ada"), agent("mallory")
    pending, forged = handshake(ada, signer=mallory)
    _, replayed = handshake(ada)
    messages = {
        refusal(lambda: verify_response(pending, forged, evidence(ada), NOW)).message,
        refusal(lambda: verify_response(None, replayed, evidence(ada), NOW)).message,
        refusal(lambda: verify_response(pending, forged, evidence(mallory), NOW)).message,
    }
    assert len(messages) == 1


def test_a_client_without_this_protocol_version_is_refused() -> None:
    ada = agent("ada")
    init = init_frame(ada.principal.id, ada.key_id, b"c" * 32, "urn:uuid:1")
    for other in ({**init, "supportedVersions": ["0.2"]}, {**init, "protocolVersion": "0.2"}):
        error = refusal(lambda other=other: read_frame(json.dumps(other)))
        assert error.code == ErrorCode.UNSUPPORTED_VERSION
    # Offering it among others is fine for the version, not for this schema (0.1 only).
    mixed = {**init, "supportedVersions": ["0.1", "0.2"]}
    assert refusal(lambda: read_frame(json.dumps(mixed))).code == (
        ErrorCode.SCHEMA_VALIDATION_FAILED
    )


def test_a_short_client_nonce_is_refused() -> None:
    ada = agent("ada")
    init = init_frame(ada.principal.id, ada.key_id, b"c" * 8, "urn:uuid:1")
    error = refusal(
        lambda: issue_challenge(
            model(init, HelloClientInit),
            server_nonce=b"s" * 32,
            challenge=b"x" * 32,
            server_certificate=CERT,
            now=NOW,
        )
    )
    assert error.code == ErrorCode.PROTOCOL_VIOLATION


def test_a_session_expires_and_a_newer_epoch_fences_it() -> None:
    ada = agent("ada")
    pending, _ = handshake(ada)
    session = accept(pending, session_epoch=3, token=b"t" * 32, now=NOW, policy=POLICY)
    expired = refusal(lambda: session.check(NOW + timedelta(seconds=60), 3))
    assert expired.code == ErrorCode.AUTH_REQUIRED
    fenced = refusal(lambda: session.check(NOW, 4))
    assert fenced.code == ErrorCode.AUTH_STALE_SESSION
    unknown = refusal(lambda: session.check(NOW, None))
    assert unknown.code == ErrorCode.AUTH_STALE_SESSION


def test_the_transcript_is_canonical_and_separates_every_member() -> None:
    members = {
        "selected_version": "0.1",
        "agent_id": "urn:a",
        "key_id": "urn:k",
        "client_nonce": "YQ",
        "server_nonce": "Yg",
        "challenge": "Yw",
        "server_certificate": CERT,
    }
    base = transcript(**members)
    assert base.startswith(b'{"agentId":"urn:a","challenge":"Yw"')
    for name in members:
        assert transcript(**{**members, name: members[name] + "x"}) != base
