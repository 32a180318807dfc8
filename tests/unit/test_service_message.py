"""Sealed service messages: a message opens only for its recipient, type and trusted key."""

from __future__ import annotations

from typing import Any

import pytest

from mwp.core.trust.service_message import (
    MessageRefusedError,
    RefusalRecord,
    TrustedKey,
    open_sealed,
    seal,
)
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.values import b64url_encode

KEY = SigningKey.generate()
TRUSTED = TrustedKey("urn:mwp:key:authority", KEY.public_key)


def sealed(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "sender": "mwp-mission/parent",
        "recipient": "mwp-mission/child",
        "sent_at": "2026-12-01T10:00:00Z",
        "body": {"eventId": "urn:uuid:1"},
        "key_id": TRUSTED.key_id,
        "key": KEY,
    }
    args.update(changes)
    return seal("parent-closed", **args)


def opened(value: object, **expect: Any) -> Any:
    args: dict[str, Any] = {"message_type": "parent-closed", "recipient": "mwp-mission/child"}
    args.update(expect)
    return open_sealed(value, TRUSTED, **args)


def reason(value: object, **expect: Any) -> str:
    with pytest.raises(MessageRefusedError) as refused:
        opened(value, **expect)
    return refused.value.reason


def test_a_sealed_message_opens_for_its_recipient() -> None:
    message = opened(sealed(), senders=frozenset({"mwp-mission/parent"}))
    assert message.body == {"eventId": "urn:uuid:1"}
    assert (message.sender, message.recipient) == ("mwp-mission/parent", "mwp-mission/child")


def test_anything_else_is_refused_with_a_stable_reason() -> None:
    good = sealed()
    assert reason({"eventId": "urn:uuid:1"}) == "unsealed"
    assert reason("urn:uuid:1") == "unsealed"
    assert reason({**good, "extra": 1}) == "unsealed"
    assert reason(sealed(key=SigningKey.generate(), key_id="urn:mwp:key:other")) == "untrusted-key"
    assert reason(sealed(key=SigningKey.generate())) == "bad-signature"
    assert reason({**good, "body": {"eventId": "urn:uuid:2"}}) == "bad-signature"
    assert reason({**good, "signature": {**good["signature"], "algorithm": "RS256"}}) == (
        "bad-signature-envelope"
    )
    short = {**good["signature"], "value": b64url_encode(b"x" * 10)}
    assert reason({**good, "signature": short}) == "bad-signature"
    assert reason(good, message_type="child-settled") == "wrong-type"
    assert reason(good, recipient="mwp-mission/other") == "wrong-recipient"
    assert reason(good, senders=frozenset({"mwp-mission/another"})) == "wrong-sender"
    assert reason({**good, "body": {"n": float("nan")}}) == "not-canonicalizable"


def test_refusals_are_counted_by_type_and_reason_and_survive_json() -> None:
    record = RefusalRecord.empty()
    for _ in range(25):
        record.add("parent-closed", "unsealed", "2026-12-01T10:00:00Z")
    record.add("child-settled", "malformed", "2026-12-01T10:00:01Z")
    again = RefusalRecord.from_json(record.to_json())
    assert again.counts == {"parent-closed:unsealed": 25, "child-settled:malformed": 1}
    assert again.total == 26 and len(again.latest) == RefusalRecord.KEPT
