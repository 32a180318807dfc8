"""Strict Ed25519 for the Signed Document Verification Profile (spec 6.4).

Point checks use libsodium (PyNaCl); the final equation uses OpenSSL (``cryptography``).
Both points are proven prime-order first, so the cofactored and cofactorless equations agree.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from nacl.bindings import crypto_core_ed25519_is_valid_point

CLAUSES: tuple[str, ...] = ("MWP-SDV-003", "MWP-SDV-005", "MWP-SDV-006")

# Prime order of the base point.
L = 2**252 + 27742317777372353535851937790883648493
# The canonical encoding of the identity point (x = 0, y = 1, sign bit clear).
IDENTITY = b"\x01" + b"\x00" * 31


def is_valid_public_key(encoded: bytes) -> bool:
    """32 bytes, canonical, on the curve, not the identity, in the prime-order subgroup.

    libsodium's check rejects non-canonical y, off-curve points, every small-order point
    (the identity among them, in any sign-bit spelling) and points outside the main subgroup.
    """
    return len(encoded) == 32 and _is_valid_point(encoded)


@lru_cache(maxsize=4096)
def _is_valid_point(encoded: bytes) -> bool:
    return bool(crypto_core_ed25519_is_valid_point(encoded))


def signature_encoding_fault(signature: bytes) -> str | None:
    """Why a 64-byte signature's ``R || S`` is not strictly encoded, or None (stage 3)."""
    if len(signature) != 64:
        return "signature-length"
    r_enc, s_enc = signature[:32], signature[32:]
    if int.from_bytes(s_enc, "little") >= L:
        return "signature-s-out-of-range"
    # The identity is allowed for R; any other small-order or mixed-order R is not.
    if r_enc != IDENTITY and not crypto_core_ed25519_is_valid_point(r_enc):
        return "signature-r-invalid"
    return None


@lru_cache(maxsize=4096)
def _public_key(encoded: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(encoded)


def verify_equation(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Pure Ed25519 verification of ``message`` (stage 6)."""
    try:
        _public_key(public_key).verify(signature, message)
    except InvalidSignature:
        return False
    return True


class SigningKey:
    """An Ed25519 private key from its 32-byte RFC 8032 seed."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("an Ed25519 seed is 32 bytes")
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.public_key: bytes = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @classmethod
    def generate(cls) -> SigningKey:
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        key = Ed25519PrivateKey.generate()
        seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(seed)

    def seed(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        return self._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)
