"""The cryptography bundle: 22 cases, 62 evaluations, through the real codec (spec 6.4, 22)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import mwp.core.trust.signed_document as codec
from mwp.conformance import cryptography
from mwp.core.trust import registry as registry_module


def _mismatched(result: cryptography.BundleResult) -> set[str]:
    return {m.evaluation for m in result.mismatches}


def test_cryptography_bundle_passes_every_evaluation(protocol_root_path: Path) -> None:
    result = cryptography.run(protocol_root_path)
    assert result.mismatches == []
    assert (result.passed, result.total) == (62, 62)


def test_accepting_any_r_encoding_fails_the_envelope_evaluations(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec, "signature_encoding_fault", lambda signature: None)
    failed = _mismatched(cryptography.run(protocol_root_path))
    assert any("signature-r-mixed-order" in name for name in failed)
    assert any("signature-s-out-of-range" in name for name in failed)


def test_skipping_public_key_point_checks_fails_key_resolution_evaluations(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "is_valid_public_key", lambda key: len(key) == 32)
    failed = _mismatched(cryptography.run(protocol_root_path))
    for fault in ("public-key-small-order", "public-key-mixed-order", "public-key-identity"):
        assert any(fault in name for name in failed), fault


def test_ignoring_created_at_binding_is_caught(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = codec.verify_value

    def lenient(document: object, profile: codec.Profile, *args: object, **kw: object) -> object:
        if isinstance(document, dict) and "signature" in document:
            time = document[profile.time_member]
            document = {**document, "signature": {**document["signature"], "createdAt": time}}
        return original(document, profile, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(codec, "verify_value", lenient)
    monkeypatch.setattr(cryptography, "verify", codec.verify)
    failed = _mismatched(cryptography.run(protocol_root_path))
    assert any("protected-time-created-at-mismatch" in name for name in failed)


def test_a_wrong_expectation_is_reported(protocol_root_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "mwp-0.1"
    shutil.copytree(protocol_root_path, copy)
    manifest_path = copy / "cryptography/manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["cases"][1]["evaluations"][0]["expect"]["stage"] = "signature"
    manifest_path.write_text(json.dumps(manifest, indent=2))
    result = cryptography.run(copy)
    assert not result.ok
    assert result.mismatches  # the digest breaks, and the changed evaluation disagrees


def test_a_tampered_signing_bytes_file_is_caught(protocol_root_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "mwp-0.1"
    shutil.copytree(protocol_root_path, copy)
    target = copy / "cryptography/vectors/canonicalization/command.signing.jcs"
    target.write_bytes(target.read_bytes().replace(b"0.1", b"0.2", 1))
    assert not cryptography.run(copy).ok
