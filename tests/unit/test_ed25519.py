"""Strict Ed25519 encodings (spec 6.4: public keys at stage 4, R and S at stage 3)."""

from __future__ import annotations

import pytest

from mwp.core.wire.ed25519 import (
    IDENTITY,
    L,
    SigningKey,
    is_valid_public_key,
    signature_encoding_fault,
    verify_equation,
)
from mwp.core.wire.values import b64url_decode

P = 2**255 - 19
SMALL_ORDER_NON_IDENTITY = bytes.fromhex(
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
)
MIXED_ORDER = b64url_decode("lZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZk")
NEGATIVE_ZERO_IDENTITY = IDENTITY[:31] + b"\x80"
Y_EQUALS_P = P.to_bytes(32, "little")
OFF_CURVE = (2).to_bytes(32, "little")


def test_generated_keys_are_valid() -> None:
    assert is_valid_public_key(SigningKey.generate().public_key)


@pytest.mark.parametrize(
    "encoded",
    [
        IDENTITY,
        NEGATIVE_ZERO_IDENTITY,
        SMALL_ORDER_NON_IDENTITY,
        MIXED_ORDER,
        Y_EQUALS_P,
        OFF_CURVE,
        b"\x00" * 31,
    ],
)
def test_bad_public_keys_are_rejected(encoded: bytes) -> None:
    assert not is_valid_public_key(encoded)


def _signature() -> tuple[bytes, bytes, bytes]:
    key = SigningKey.generate()
    return key.public_key, key.sign(b"message"), b"message"


def test_a_real_signature_is_strictly_encoded_and_verifies() -> None:
    public, signature, message = _signature()
    assert signature_encoding_fault(signature) is None
    assert verify_equation(public, signature, message)
    assert not verify_equation(public, signature, message + b"!")


def test_identity_r_is_permitted_at_stage_3_but_fails_the_equation() -> None:
    public, signature, message = _signature()
    forged = IDENTITY + signature[32:]
    assert signature_encoding_fault(forged) is None
    assert not verify_equation(public, forged, message)


@pytest.mark.parametrize(
    "r", [NEGATIVE_ZERO_IDENTITY, SMALL_ORDER_NON_IDENTITY, MIXED_ORDER, Y_EQUALS_P, OFF_CURVE]
)
def test_bad_r_encodings_are_rejected(r: bytes) -> None:
    _, signature, _ = _signature()
    assert signature_encoding_fault(r + signature[32:]) == "signature-r-invalid"


def test_s_must_be_below_l_and_is_never_reduced() -> None:
    _, signature, _ = _signature()
    s = int.from_bytes(signature[32:], "little")
    assert signature_encoding_fault(signature[:32] + (s + L).to_bytes(32, "little")) is not None
    assert signature_encoding_fault(signature[:32] + L.to_bytes(32, "little")) is not None
    assert signature_encoding_fault(signature[:32] + (L - 1).to_bytes(32, "little")) is None


def test_signature_length_is_exactly_64() -> None:
    _, signature, _ = _signature()
    assert signature_encoding_fault(signature[:63]) == "signature-length"
    assert signature_encoding_fault(signature + b"\x00") == "signature-length"


def test_seed_round_trip() -> None:
    key = SigningKey.generate()
    assert SigningKey(key.seed()).public_key == key.public_key
