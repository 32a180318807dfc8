"""Sealed service messages: what one authority-zone workflow tells another, signed.

Temporal does not say who sent a signal: anyone who reaches the namespace can send one. So a
message from one workflow to another (a Registry notice, a child Mission's report, a parent's
closure, an approval notice, a WorkItem's transition or timer) is a small document sealed with
the sending service's Ed25519 key, and the receiver opens it against the key binding it trusts
before using a byte of it. The document names its type, its sender and its recipient
(workflow IDs), so a message sealed for one workflow is refused by every other; replays are
the receiver's to refuse (each body carries what makes it monotonic or idempotent).

Sealing needs the private key, so it runs in an activity; opening is pure and runs in the
workflow. Refusals are :class:`MessageRefusedError` with a stable reason for the operator's record;
they never carry the message's content.

This is the product's own document, not an MWP Signed Document: the signature covers the JCS
form of everything but ``signature``, as in spec 6.4, and the envelope names its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from mwp.core.wire.ed25519 import SigningKey, verify_equation
from mwp.core.wire.jcs import JcsDataModelError, canonicalize
from mwp.core.wire.values import ValueRuleError, b64url_decode, b64url_encode

FORMAT: Final = "mwp-service-message/1"
# Larger messages are refused before their signature is checked (a notice of an Organization
# with thousands of bindings stays well below; Temporal refuses payloads over 2 MiB anyway).
MAX_MESSAGE_BYTES: Final = 1_500_000

_MEMBERS: Final = frozenset({"format", "type", "from", "to", "sentAt", "body", "signature"})


class MessageRefusedError(Exception):
    """A message that is not what its receiver may act on; ``reason`` is stable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TrustedKey:
    """The key a receiver accepts a message type from: its ID and raw public key."""

    key_id: str
    public_key: bytes

    @classmethod
    def from_binding(cls, binding: Mapping[str, Any]) -> TrustedKey:
        """From a signing-key binding's JSON (``keyId``, ``publicKey`` base64url)."""
        return cls(str(binding["keyId"]), b64url_decode(str(binding["publicKey"])))


def seal(
    message_type: str,
    *,
    sender: str,
    recipient: str,
    sent_at: str,
    body: Mapping[str, Any],
    key_id: str,
    key: SigningKey,
) -> dict[str, Any]:
    """The sealed document for ``body``, from workflow ``sender`` to workflow ``recipient``."""
    unsigned = {
        "format": FORMAT,
        "type": message_type,
        "from": sender,
        "to": recipient,
        "sentAt": sent_at,
        "body": dict(body),
    }
    value = b64url_encode(key.sign(canonicalize(unsigned)))
    return {**unsigned, "signature": {"algorithm": "Ed25519", "keyId": key_id, "value": value}}


@dataclass(frozen=True)
class OpenedMessage:
    message_type: str
    sender: str
    recipient: str
    sent_at: str
    body: dict[str, Any]


def open_sealed(
    value: object,
    trusted: TrustedKey,
    *,
    message_type: str,
    recipient: str,
    senders: frozenset[str] | None = None,
) -> OpenedMessage:
    """Check ``value`` is a ``message_type`` message sealed by ``trusted`` for ``recipient``
    (and, if ``senders`` is given, from one of them); its content, or :class:`MessageRefusedError`.
    """
    if not isinstance(value, dict):
        raise MessageRefusedError("unsealed")
    if set(value) != _MEMBERS or value.get("format") != FORMAT:
        raise MessageRefusedError("unsealed")
    signature = value["signature"]
    if (
        not isinstance(signature, dict)
        or set(signature) != {"algorithm", "keyId", "value"}
        or signature["algorithm"] != "Ed25519"
        or not isinstance(signature["value"], str)
    ):
        raise MessageRefusedError("bad-signature-envelope")
    if signature["keyId"] != trusted.key_id:
        raise MessageRefusedError("untrusted-key")
    unsigned = {k: v for k, v in value.items() if k != "signature"}
    try:
        signed_bytes = canonicalize(unsigned)
        raw_signature = b64url_decode(signature["value"])
    except (JcsDataModelError, ValueRuleError, TypeError, ValueError):
        raise MessageRefusedError("not-canonicalizable") from None
    if len(signed_bytes) > MAX_MESSAGE_BYTES:
        raise MessageRefusedError("too-large")
    if len(raw_signature) != 64 or not verify_equation(
        trusted.public_key, raw_signature, signed_bytes
    ):
        raise MessageRefusedError("bad-signature")
    # Authentic from here on: what is left is whether it is meant for this receiver.
    if value["type"] != message_type:
        raise MessageRefusedError("wrong-type")
    if value["to"] != recipient:
        raise MessageRefusedError("wrong-recipient")
    if senders is not None and value["from"] not in senders:
        raise MessageRefusedError("wrong-sender")
    body = value["body"]
    if not isinstance(body, dict) or not all(
        isinstance(value[k], str) for k in ("from", "to", "sentAt")
    ):
        raise MessageRefusedError("malformed")
    return OpenedMessage(value["type"], value["from"], value["to"], value["sentAt"], body)


@dataclass
class RefusalRecord:
    """What a workflow keeps about the messages it refused: counts by type and reason, and
    the latest few (type, reason, time), for its details and a query."""

    counts: dict[str, int]
    latest: list[dict[str, str]]

    KEPT: ClassVar[int] = 20

    @classmethod
    def empty(cls) -> RefusalRecord:
        return cls({}, [])

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> RefusalRecord:
        if not value:
            return cls.empty()
        return cls(dict(value.get("counts", {})), list(value.get("latest", [])))

    def add(self, message_type: str, reason: str, at: str) -> None:
        key = f"{message_type}:{reason}"
        self.counts[key] = self.counts.get(key, 0) + 1
        self.latest.append({"type": message_type, "reason": reason, "at": at})
        del self.latest[: -self.KEPT]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "latest": list(self.latest), "total": self.total}
