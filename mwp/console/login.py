"""Logging a human into the Approval console: a challenge they sign in their own browser.

The console never sees a private key. It hands out a single-use challenge naming the human,
the key they claim and this console, the browser signs its JCS bytes with the human's key
(WebCrypto, from their key file), and :meth:`Logins.answer` checks the signature against the
Organization's Registry evidence as the gateway's HELLO does: the key must be that human's own,
valid now. A login is a random session token, kept only here, that expires after
``session_seconds``. Every refusal is ``AUTH_INVALID_SIGNATURE`` or ``AUTH_REQUIRED``, with
the reason in the protected diagnostic.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.trust.registry import Principal, RegistryEvidence, RegistryEvidenceError
from mwp.core.wire.ed25519 import signature_encoding_fault, verify_equation
from mwp.core.wire.jcs import canonicalize
from mwp.core.wire.values import ValueRuleError, b64url_decode, format_utc, parse_timestamp

PURPOSE: Final = "mwp-console-login/1"
CHALLENGE_SECONDS: Final = 120
SESSION_SECONDS: Final = 8 * 3600
PENDING_LIMIT: Final = 1000  # unanswered challenges kept at most (the oldest go first)


def _refuse(
    reason: str, code: ErrorCode = ErrorCode.AUTH_INVALID_SIGNATURE, message: str | None = None
) -> MwpError:
    return MwpError(code, message, diagnostic=Diagnostic("console-login", reason))


@dataclass(frozen=True)
class Login:
    """A logged-in human."""

    principal: Principal
    key_id: str
    expires_at: datetime


@dataclass
class Logins:
    """Pending challenges and open logins of one console process."""

    console: str  # the console's origin, part of what is signed
    session_seconds: int = SESSION_SECONDS
    pending: dict[str, tuple[dict[str, Any], datetime]] = field(default_factory=dict)
    sessions: dict[str, Login] = field(default_factory=dict)

    def challenge(self, human_id: str, key_id: str, now: datetime) -> dict[str, Any]:
        """The transcript the human signs: single use, valid for CHALLENGE_SECONDS."""
        if not human_id or not key_id:
            raise _refuse("no-principal", ErrorCode.AUTH_REQUIRED)
        challenge_id = secrets.token_urlsafe(18)
        transcript: dict[str, Any] = {
            "purpose": PURPOSE,
            "challengeId": challenge_id,
            "nonce": secrets.token_urlsafe(32),
            "principal": {"type": "human", "id": human_id},
            "keyId": key_id,
            "console": self.console,
            "issuedAt": format_utc(now),
        }
        while len(self.pending) >= PENDING_LIMIT:
            self.pending.pop(next(iter(self.pending)))
        expires = now + timedelta(seconds=CHALLENGE_SECONDS)
        self.pending[challenge_id] = (transcript, expires)
        return transcript

    def answer(
        self, challenge_id: str, signature: str, evidence: RegistryEvidence, now: datetime
    ) -> tuple[str, Login]:
        """A new session token and its Login, if ``signature`` answers that challenge."""
        pending = self.pending.pop(challenge_id, None)  # single use, answered or not
        if pending is None:
            raise _refuse("no-such-challenge")
        transcript, expires = pending
        if now >= expires:
            raise _refuse("challenge-expired")
        principal = Principal("human", transcript["principal"]["id"])
        try:
            binding = evidence.resolve(transcript["keyId"])
        except RegistryEvidenceError as exc:
            raise _refuse(exc.reason) from None
        if binding.principal != principal:
            raise _refuse("signer-binding")
        if not binding.validity().contains(parse_timestamp(format_utc(now))):
            raise _refuse("key-interval")
        try:
            raw = b64url_decode(signature)
        except (ValueRuleError, TypeError):
            raise _refuse("signature-encoding") from None
        if signature_encoding_fault(raw) is not None:
            raise _refuse("signature-encoding")
        if not verify_equation(binding.public_key, raw, canonicalize(transcript)):
            raise _refuse("signature")
        token = secrets.token_urlsafe(32)
        login = Login(principal, transcript["keyId"], now + timedelta(seconds=self.session_seconds))
        self.sessions[token] = login
        for stale in [t for t, s in self.sessions.items() if s.expires_at <= now]:
            del self.sessions[stale]
        return token, login

    def who(self, token: str | None, now: datetime) -> Login:
        """The human a session token belongs to; ``AUTH_REQUIRED`` if none (or expired)."""
        login = self.sessions.get(token or "")
        if login is None or login.expires_at <= now:
            raise _refuse("no-session", ErrorCode.AUTH_REQUIRED, "Log in first.")
        return login

    def logout(self, token: str | None) -> None:
        self.sessions.pop(token or "", None)
