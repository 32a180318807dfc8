"""The Admission bundle (5 cases, 30 evaluations) through the real six-stage verification,
and proof that the runner notices a damaged bundle or a broken admission rule."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mwp.conformance import admission as runner
from mwp.conformance import bundle
from mwp.core.trust import admission
from mwp.core.trust.registry import KeyValidity, Principal

MANIFEST = "admission/manifest.json"


def test_admission_bundle_passes_every_evaluation(protocol_root_path: Path) -> None:
    result = runner.run(protocol_root_path)
    assert result.name == "admission"
    assert result.mismatches == []
    assert (result.passed, result.total) == (30, 30)
    assert result.ok


def test_bundle_shape_is_the_declared_contract(protocol_root_path: Path) -> None:
    manifest = json.loads((protocol_root_path / MANIFEST).read_bytes())
    evaluations = [e for case in manifest["cases"] for e in case["evaluations"]]
    assert len(manifest["cases"]) == 5 and len(evaluations) == 30
    assert len({e["id"] for e in evaluations}) == 30
    stages = [e["expect"]["stage"] for e in evaluations]
    assert (stages.count("complete"), stages.count("admission")) == (12, 18)


@pytest.fixture
def bundle_copy(tmp_path: Path, protocol_root_path: Path) -> Iterator[Path]:
    root = tmp_path / "mwp-0.1"
    shutil.copytree(protocol_root_path, root)
    yield root


def _rewrite_manifest(root: Path, change: Any) -> None:
    """Edit the manifest and re-seal its artifactDigest, so only the edit itself is judged."""
    path = root / MANIFEST
    manifest = json.loads(path.read_bytes())
    change(manifest)
    manifest["artifactDigest"] = bundle.artifact_digest(manifest)
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))


def _failed_checks(root: Path) -> list[str]:
    result = runner.run(root)
    assert not result.ok
    return [m.evaluation for m in result.mismatches]


def test_a_tampered_record_file_is_caught(bundle_copy: Path) -> None:
    path = bundle_copy / "admission/records/valid/command.json"
    path.write_bytes(path.read_bytes().replace(b"00:05:00Z", b"00:06:00Z"))
    failed = _failed_checks(bundle_copy)
    assert "artifact admission/records/valid/command.json" in failed
    # Every evaluation that reads the file refuses to run on it rather than passing.
    assert any(name.endswith("/first-admission.command") for name in failed)


def test_an_edited_manifest_breaks_the_artifact_digest(bundle_copy: Path) -> None:
    path = bundle_copy / MANIFEST
    path.write_bytes(path.read_bytes().replace(b'"record-missing"', b'"record-conflict"'))
    assert f"{MANIFEST} artifactDigest" in _failed_checks(bundle_copy)


def test_a_wrong_cryptography_pin_is_caught(bundle_copy: Path) -> None:
    def repin(manifest: dict[str, Any]) -> None:
        manifest["cryptography"]["artifactDigest"] = "sha256:" + "0" * 64

    _rewrite_manifest(bundle_copy, repin)
    assert "cryptography/manifest.json pin" in _failed_checks(bundle_copy)


def test_a_tampered_cryptography_document_is_caught(bundle_copy: Path) -> None:
    path = bundle_copy / "cryptography/vectors/signed-documents/valid/command.json"
    path.write_bytes(path.read_bytes() + b" ")
    failed = _failed_checks(bundle_copy)
    assert any(name.endswith("/historical-record-missing") for name in failed)


def test_a_wrong_expectation_is_reported_as_a_mismatch(bundle_copy: Path) -> None:
    def expect_other_reason(manifest: dict[str, Any]) -> None:
        for case in manifest["cases"]:
            for evaluation in case["evaluations"]:
                if evaluation["id"] == "conflicting-record":
                    evaluation["expect"]["reason"] = "log-unavailable"

    _rewrite_manifest(bundle_copy, expect_other_reason)
    result = runner.run(bundle_copy)
    assert [m.evaluation for m in result.mismatches] == [
        "reject.admission.failure-matrix/conflicting-record"
    ]
    assert result.total == 30


# --- the evaluations depend on the rules they claim to test ---------------------------------


def _mismatched(root: Path) -> set[str]:
    return {m.evaluation.rsplit("/", 1)[1] for m in runner.run(root).mismatches}


def test_ignoring_the_key_interval_fails_the_boundary_evaluations(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(KeyValidity, "contains", lambda self, moment: True)
    # The six stages use the same interval, so only evaluations whose document is in range
    # anyway and whose trusted time is out of range can show the difference.
    assert {
        "trusted-time-before-valid-from",
        "trusted-time-equal-valid-until",
        "trusted-time-after-valid-until",
        "trusted-time-equal-revoked-at",
        "trusted-time-after-revoked-at",
    } <= _mismatched(protocol_root_path)


def test_skipping_record_validation_fails_the_mismatch_evaluations(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def schema_only(verified: Any, data: bytes, service: Any) -> admission.FirstAdmissionRecord:
        return admission.parse_record(data)

    monkeypatch.setattr(admission, "validate_record", schema_only)
    assert {
        "signing-hash-mismatch",
        "key-id-mismatch",
        "principal-mismatch",
        "organization-mismatch",
        "document-kind-mismatch",
    } <= _mismatched(protocol_root_path)


def test_treating_the_event_as_its_own_record_is_caught(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admission, "_is_unsigned_content_of", lambda value, verified: False)
    assert "event-self-anchoring" in _mismatched(protocol_root_path)


def test_a_historical_replay_that_appends_is_caught(
    protocol_root_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def admits_anew(verified: Any, log: Any) -> admission.FirstAdmissionRecord:
        context = admission.TrustedContext(
            "urn:example:r:new", "2026-07-15T00:05:00Z", Principal("service", "urn:x:y")
        )
        return admission.admit_first(verified, log, lambda _: context)

    monkeypatch.setattr(runner, "verify_historical", admits_anew)
    assert "historical-record-missing" in _mismatched(protocol_root_path)
