"""Real keys for the harness's principals, and the shell's path from wire bytes to a decision.

The harness signs with a dummy value because the core never verifies signatures; tests of the
door go through ``verify`` first, as the MissionWorkflow does, so they sign for real.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mwp.core.group import Envelope
from mwp.core.trust.registry import KeyBinding, Principal, RegistryEvidence
from mwp.core.trust.signed_document import sign, verify
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import parse_timestamp
from tests.unit.group.harness import COORD, COORD2, DELEGATE, OWNER, SERVICE, W1, W2, W3

ORG = "urn:example:organization:door"
PRINCIPALS = (OWNER, COORD, COORD2, W1, W2, W3, DELEGATE, SERVICE)


def key_id(principal: Principal) -> str:
    """The key ID the harness names in its dummy signatures."""
    return "urn:example:key:" + principal.id.rsplit(":", 1)[-1]


def _key(principal: Principal) -> SigningKey:
    return SigningKey(hashlib.sha256(principal.id.encode()).digest())


KEYS = {p.id: _key(p) for p in PRINCIPALS}
EVIDENCE = RegistryEvidence.from_bindings(
    ORG,
    [
        KeyBinding(
            key_id(p),
            p,
            "Ed25519",
            KEYS[p.id].public_key,
            parse_timestamp("2020-01-01T00:00:00Z"),
            (),
        )
        for p in PRINCIPALS
    ],
)


def signed(command: dict[str, Any]) -> dict[str, Any]:
    """``command`` signed by its actor's key."""
    actor = command["actor"]["id"]
    return sign(command, "command", key_id(Principal(command["actor"]["type"], actor)), KEYS[actor])


def wire(command: dict[str, Any]) -> bytes:
    return canonicalize(signed(command))


def admit(data: bytes) -> Envelope:
    """What the shell does before the Authority decides: verify, then hash the whole Command."""
    verified = verify(data, "command", EVIDENCE)
    return Envelope(
        verified.document,
        verified.signing_hash,
        sha256_ref(canonicalize(verified.document)),
        verified,
    )
