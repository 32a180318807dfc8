"""TLS for the gateway: TLS 1.3 only (spec 17.1), and a development CA for `mwp gateway`.

:func:`development_certificates` creates, once per folder, a CA and a server certificate it
signs (ECDSA P-256), with every private key written owner-only (0600) and never overwritten.
An operator passes real certificates instead (``--certfile/--keyfile``); agents trust the CA's
certificate (``ca.pem``) as their trust anchor.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mwp.core.wire.jcs import sha256_ref

CLAUSES: tuple[str, ...] = ("MWP-EVT-008",)

# The development certificates' folder under a state folder (`mwp gateway`, `mwp dev`).
DEVELOPMENT_FOLDER = "gateway-tls"
CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
SERVER_CERT = "server.pem"
SERVER_KEY = "server-key.pem"

# Development certificates outlive any dev session, and stay well short of what clients
# refuse as too long-lived for a server certificate.
CA_DAYS = 3650
SERVER_DAYS = 397


@dataclass(frozen=True)
class CertificatePaths:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def development_certificates(
    folder: Path, hostnames: Sequence[str] = ("localhost", "127.0.0.1", "::1")
) -> CertificatePaths:
    """The folder's development CA and server certificate, created on first use."""
    paths = CertificatePaths(folder / CA_CERT, folder / SERVER_CERT, folder / SERVER_KEY)
    if paths.ca_cert.exists() and paths.server_cert.exists() and paths.server_key.exists():
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC) - timedelta(minutes=5)  # tolerate a peer's clock running behind
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "MWP development gateway CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=SERVER_DAYS))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hostnames]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(folder / CA_KEY, _pem_key(ca_key))
    _write_private(paths.server_key, _pem_key(server_key))
    _write_public(paths.server_cert, server_cert.public_bytes(serialization.Encoding.PEM))
    _write_public(paths.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    return paths


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start (never widened by the umask, never briefly readable) and
    # never overwritten: an existing key is somebody's.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _write_public(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def server_context(certfile: Path, keyfile: Path) -> ssl.SSLContext:
    """A server context that speaks TLS 1.3 and nothing older."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.maximum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(certfile, keyfile)
    return context


def client_context(cafile: Path | None = None) -> ssl.SSLContext:
    """A client context for the gateway: TLS 1.3 only, the server verified against ``cafile``
    (or the system's trust store), host name checked."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    return context


def certificate_hash(der: bytes) -> str:
    """The ``sha256:`` hash of a certificate's DER bytes: what a HELLO response is bound to."""
    return sha256_ref(der)


def certificate_hash_of_file(certfile: Path) -> str:
    """The hash of the first (leaf) certificate of a PEM file."""
    certificate = x509.load_pem_x509_certificate(certfile.read_bytes())
    return certificate_hash(certificate.public_bytes(serialization.Encoding.DER))
