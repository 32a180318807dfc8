"""HELLO: the challenge-response that authenticates an Agent on one connection (spec 6.3).

Pure decisions, no I/O: the server supplies randomness, its clock, the Organization's Registry
evidence and Session Epochs, and does what the decisions say.

1. ``client_init`` names the Agent, its key and a client nonce: :func:`issue_challenge`
   answers with a fresh server nonce and challenge, remembered as one connection's
   :class:`PendingChallenge` (single use, expiring after ``challenge_seconds``).
2. ``client_response`` carries an Ed25519 signature over the :func:`transcript`: the JCS
   bytes of both nonces, the challenge, the Agent, its key, the selected version and the hash
   of the TLS certificate the client saw. So a response is bound to this connection's
   challenge (a replay elsewhere, or again here, names another challenge or none) and to the
   server the client verified (a relay presenting another certificate gets a response that
   does not verify). :func:`verify_response` checks it with the signed-document codec's
   strict Ed25519 rules and Registry key resolution: the key must be the Agent's own, valid
   now (not revoked, not expired).
3. :func:`accept` opens the :class:`Session`: the Session Epoch the Registry just issued and
   a random session token that expires ``session_seconds`` after the HELLO or the Agent's
   latest PING (:meth:`Session.prolong`: a live Agent keeps its Session, and so its leases,
   without a new HELLO, which would issue a new Session Epoch). :meth:`Session.check` is
   the check every later frame passes: the token has not expired, and no newer Session Epoch
   has fenced this one.

Every refusal is a typed :class:`~mwp.core.errors.MwpError`; the wire message is the same for
every reason of a code (the reason stays in the protected diagnostic).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from mwp import PROTOCOL_VERSION
from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.models.websocket_frame import HelloClientInit, HelloClientResponse
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence, RegistryEvidenceError
from mwp.core.trust.signed_document import VerificationError
from mwp.core.wire.ed25519 import SigningKey, signature_encoding_fault, verify_equation
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import (
    ValueRuleError,
    b64url_decode,
    b64url_encode,
    format_utc,
    parse_timestamp,
)

CLAUSES: tuple[str, ...] = ("MWP-IDN-007", "MWP-IDN-008")

# Domain separation: these bytes can never be mistaken for a signed document's (those are JCS
# objects without this member) nor for another binding's transcript.
TRANSCRIPT_CONTEXT: Final = "urn:missionweave-temporal:gateway:hello-transcript:1"
NONCE_BYTES: Final = 32
MIN_CLIENT_NONCE_BYTES: Final = 16


@dataclass(frozen=True)
class HelloPolicy:
    challenge_seconds: int = 30  # how long a challenge may be answered
    session_seconds: int = 900  # a session's lifetime after HELLO or the Agent's last PING


@dataclass(frozen=True)
class PendingChallenge:
    """What one connection's server asked; consumed by the first response, whatever it says."""

    agent_id: str
    key_id: str
    client_nonce: str
    server_nonce: str
    challenge: str
    selected_version: str
    server_certificate: str
    expires_at: datetime


@dataclass(eq=False)
class Session:
    """An authenticated connection's session. ``expires_at`` moves on with each of the
    Agent's PINGs (:meth:`prolong`): a session lives while its Agent shows it is alive."""

    agent_id: str
    key_id: str
    session_epoch: int
    token: str
    expires_at: datetime

    @property
    def principal(self) -> Principal:
        return Principal("agent", self.agent_id)

    def prolong(self, now: datetime, policy: HelloPolicy) -> None:
        """The Agent proved it is alive (a PING of the live session): the session lasts
        ``session_seconds`` from now."""
        self.expires_at = max(self.expires_at, now + timedelta(seconds=policy.session_seconds))

    def check(self, now: datetime, current_epoch: int | None) -> None:
        """Refuse a frame of an expired session, or of one a newer Session Epoch fenced."""
        if now >= self.expires_at:
            raise MwpError(
                ErrorCode.AUTH_REQUIRED,
                "The session has expired; authenticate again with HELLO.",
                diagnostic=Diagnostic("session", "token-expired"),
            )
        if current_epoch is None or current_epoch != self.session_epoch:
            raise MwpError(
                ErrorCode.AUTH_STALE_SESSION,
                "A newer session of this Agent has fenced this one.",
                details={} if current_epoch is None else {"currentSessionEpoch": current_epoch},
                diagnostic=Diagnostic("session", "epoch-fenced"),
            )


def transcript(
    *,
    selected_version: str,
    agent_id: str,
    key_id: str,
    client_nonce: str,
    server_nonce: str,
    challenge: str,
    server_certificate: str,
) -> bytes:
    """The canonical challenge transcript both sides sign and verify (JCS bytes)."""
    return canonicalize(
        {
            "context": TRANSCRIPT_CONTEXT,
            "selectedVersion": selected_version,
            "agentId": agent_id,
            "keyId": key_id,
            "clientNonce": client_nonce,
            "serverNonce": server_nonce,
            "challenge": challenge,
            "serverCertificate": server_certificate,
        }
    )


def issue_challenge(
    init: HelloClientInit,
    *,
    server_nonce: bytes,
    challenge: bytes,
    server_certificate: str,
    now: datetime,
    policy: HelloPolicy = HelloPolicy(),
) -> PendingChallenge:
    """The challenge answering ``init`` (``server_nonce`` and ``challenge`` are fresh random)."""
    # The schema admits this protocol version only: a client offering none of it was
    # refused (UNSUPPORTED_VERSION) when its frame was read.
    if len(b64url_decode(init.client_nonce)) < MIN_CLIENT_NONCE_BYTES:
        raise MwpError(
            ErrorCode.PROTOCOL_VIOLATION,
            f"The client nonce must hold at least {MIN_CLIENT_NONCE_BYTES} random bytes.",
            diagnostic=Diagnostic("hello", "client-nonce-too-short"),
        )
    return PendingChallenge(
        agent_id=init.agent_id,
        key_id=init.key_id,
        client_nonce=init.client_nonce,
        server_nonce=b64url_encode(server_nonce),
        challenge=b64url_encode(challenge),
        selected_version=PROTOCOL_VERSION,
        server_certificate=server_certificate,
        expires_at=now + timedelta(seconds=policy.challenge_seconds),
    )


def challenge_frame(pending: PendingChallenge, frame_id: str) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": frame_id,
        "frameType": "HELLO",
        "phase": "server_challenge",
        "selectedVersion": pending.selected_version,
        "clientNonce": pending.client_nonce,
        "serverNonce": pending.server_nonce,
        "challenge": pending.challenge,
    }


def _refuse(stage: str, reason: str) -> VerificationError:
    return VerificationError(ErrorCode.AUTH_INVALID_SIGNATURE, stage, reason)


def verify_response(
    pending: PendingChallenge | None,
    response: HelloClientResponse,
    evidence: RegistryEvidence,
    now: datetime,
) -> KeyBinding:
    """The Agent's key binding if ``response`` answers ``pending``; else ``AUTH_INVALID_SIGNATURE``.

    ``pending`` is None when this connection has no unanswered challenge (never asked, or
    already answered once): a response then can only be a replay.
    """
    if pending is None:
        raise _refuse("challenge", "no-pending-challenge")
    asked = (pending.agent_id, pending.key_id, pending.client_nonce, pending.server_nonce)
    answered = (response.agent_id, response.key_id, response.client_nonce, response.server_nonce)
    if answered != asked:
        raise _refuse("challenge", "not-this-challenge")
    if now >= pending.expires_at:
        raise _refuse("challenge", "challenge-expired")
    try:
        binding = evidence.resolve(response.key_id)
    except RegistryEvidenceError as exc:
        raise _refuse("key-resolution", exc.reason) from None
    if binding.principal != Principal("agent", response.agent_id):
        raise _refuse("key-resolution", "signer-binding")
    if not binding.validity().contains(parse_timestamp(format_utc(now))):
        raise _refuse("key-resolution", "key-interval")  # revoked, expired or not yet valid
    try:
        signature = b64url_decode(response.challenge_signature)
    except ValueRuleError:
        raise _refuse("signature-envelope", "signature-encoding") from None
    fault = signature_encoding_fault(signature)
    if fault is not None:
        raise _refuse("signature-envelope", fault)
    message = transcript(
        selected_version=pending.selected_version,
        agent_id=pending.agent_id,
        key_id=pending.key_id,
        client_nonce=pending.client_nonce,
        server_nonce=pending.server_nonce,
        challenge=pending.challenge,
        server_certificate=pending.server_certificate,
    )
    if not verify_equation(binding.public_key, signature, message):
        raise _refuse("signature", "equation")
    return binding


def accept(
    pending: PendingChallenge,
    *,
    session_epoch: int,
    token: bytes,
    now: datetime,
    policy: HelloPolicy = HelloPolicy(),
) -> Session:
    """The session a verified response opens, under the Session Epoch just issued."""
    return Session(
        agent_id=pending.agent_id,
        key_id=pending.key_id,
        session_epoch=session_epoch,
        token=b64url_encode(token),
        expires_at=now + timedelta(seconds=policy.session_seconds),
    )


def accept_frame(session: Session, frame_id: str) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": frame_id,
        "frameType": "HELLO",
        "phase": "server_accept",
        "selectedVersion": PROTOCOL_VERSION,
        "sessionToken": session.token,
        "sessionEpoch": session.session_epoch,
        "expiresAt": format_utc(session.expires_at),
    }


# --- the client's side -----------------------------------------------------------------------


def init_frame(agent_id: str, key_id: str, client_nonce: bytes, frame_id: str) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": frame_id,
        "frameType": "HELLO",
        "phase": "client_init",
        "agentId": agent_id,
        "keyId": key_id,
        "clientNonce": b64url_encode(client_nonce),
        "supportedVersions": [PROTOCOL_VERSION],
    }


def response_frame(
    init: dict[str, Any],
    challenge: dict[str, Any],
    key: SigningKey,
    server_certificate: str,
    frame_id: str,
) -> dict[str, Any]:
    """The ``client_response`` to ``challenge``, signed with the Agent's key over the
    transcript of what this client sent and saw (``server_certificate``: the hash of the TLS
    certificate it verified)."""
    message = transcript(
        selected_version=challenge["selectedVersion"],
        agent_id=init["agentId"],
        key_id=init["keyId"],
        client_nonce=init["clientNonce"],
        server_nonce=challenge["serverNonce"],
        challenge=challenge["challenge"],
        server_certificate=server_certificate,
    )
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "frameId": frame_id,
        "frameType": "HELLO",
        "phase": "client_response",
        "agentId": init["agentId"],
        "keyId": init["keyId"],
        "clientNonce": init["clientNonce"],
        "serverNonce": challenge["serverNonce"],
        "challengeSignature": b64url_encode(key.sign(message)),
    }
