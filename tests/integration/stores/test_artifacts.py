"""Content-addressed Artifacts on a local folder and on a real SeaweedFS server: hash checked on
every read, signed manifests with every member the schema requires, provenance queries."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from mwp.core.errors import ErrorCode
from mwp.core.trust.registry import Principal, RegistryEvidence
from mwp.core.trust.signed_document import VerificationError
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.stores.artifacts import (
    MANIFEST_PREFIX,
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactStore,
    ManifestRefused,
    StoredContent,
    content_key,
    hex_of,
    new_manifest,
    sign_manifest,
)
from mwp.stores.objects import ObjectStore, iter_keys
from tests.event_log_samples import ORG, binding
from tests.integration.s3_fixture import overwrite
from tests.protocol_root import protocol_root

MIB = 1024 * 1024
PRODUCER = Principal("agent", "urn:mwp:agent:writer")
PRODUCER_KEY_ID = "urn:mwp:key:agent:writer:1"
PRODUCER_KEY = SigningKey(bytes(range(7, 39)))
OTHER_AGENT_KEY_ID = "urn:mwp:key:agent:other:1"
OTHER_AGENT_KEY = SigningKey(bytes(range(9, 41)))
EVIDENCE = RegistryEvidence.from_bindings(
    ORG,
    [
        binding(PRODUCER_KEY_ID, PRODUCER, PRODUCER_KEY),
        binding(OTHER_AGENT_KEY_ID, Principal("agent", "urn:mwp:agent:other"), OTHER_AGENT_KEY),
    ],
)


@pytest.fixture
def artifacts(object_store: ObjectStore, tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(object_store, spool_dir=tmp_path)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_of(content: StoredContent, *sources: str, **changes: Any) -> dict[str, Any]:
    unsigned = new_manifest(
        content,
        artifact_id=f"urn:mwp:artifact:{hex_of(content.content_hash)[:16]}",
        media_type="text/markdown",
        schema_uri="urn:mwp:schema:report",
        producer_agent_id=PRODUCER.id,
        agent_card_version=1,
        capabilities=[{"id": "mwp.dev.writer", "version": "1.0.0"}],
        mission_id="urn:mwp:mission:m1",
        group_id="urn:mwp:group:g1",
        work_item_id="urn:mwp:work-item:w1",
        created_at="2026-11-29T10:00:00Z",
        classification="confidential",
        source_hashes=sources,
        tool_versions=[{"name": "pandoc", "version": "3.1"}],
        model_versions=[{"provider": "example", "model": "writer", "version": "2026-01"}],
    )
    unsigned.update(changes)
    return sign_manifest(unsigned, PRODUCER_KEY_ID, PRODUCER_KEY)


# --- content --------------------------------------------------------------------------------


def test_content_is_stored_by_its_hash_and_read_back_verified(artifacts: ArtifactStore) -> None:
    stored = artifacts.put(b"# Report\n")
    assert stored.content_hash == _sha(b"# Report\n")
    assert (stored.size_bytes, stored.created) == (9, True)
    assert stored.uri == artifacts.store.uri(content_key(stored.content_hash))
    assert artifacts.store.get("artifacts/sha256/" + hex_of(stored.content_hash)) == b"# Report\n"
    assert artifacts.get(stored.content_hash) == b"# Report\n"
    assert artifacts.exists(stored.content_hash)
    assert artifacts.put(b"# Report\n").created is False


def test_large_content_streams_in_parts(artifacts: ArtifactStore, tmp_path: Path) -> None:
    chunks = [bytes([n]) * MIB for n in range(12)]  # spooled to a file, several S3 parts
    body = b"".join(chunks)
    stored = artifacts.put_stream(iter(chunks))
    assert (stored.content_hash, stored.size_bytes, stored.created) == (_sha(body), len(body), True)
    known = artifacts.put_stream(iter(chunks), content_hash=stored.content_hash)
    assert (known.created, known.size_bytes) == (False, len(body))
    target = tmp_path / "copy.bin"
    assert artifacts.copy_to(stored.content_hash, target) == len(body)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == hex_of(stored.content_hash)
    with artifacts.open(stored.content_hash) as handle:
        assert handle.read() == body


def test_streamed_content_with_its_declared_hash(artifacts: ArtifactStore) -> None:
    body = b"declared " * 1000
    stored = artifacts.put_stream(iter([body[:10], body[10:]]), content_hash=_sha(body))
    assert (stored.created, stored.size_bytes) == (True, len(body))
    with pytest.raises(ArtifactIntegrityError) as raised:
        artifacts.put_stream(iter([b"something else"]), content_hash=_sha(b"not this"))
    assert raised.value.reason == "declared-hash-mismatch"
    assert not artifacts.exists(_sha(b"not this"))


def test_missing_content_is_not_found(artifacts: ArtifactStore, tmp_path: Path) -> None:
    with pytest.raises(ArtifactNotFound):
        artifacts.get(_sha(b"never stored"))
    with pytest.raises(ArtifactNotFound):
        artifacts.copy_to(_sha(b"never stored"), tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError):
        artifacts.get("sha256:ABC")


def test_tampered_content_raises_instead_of_returning_bytes(
    artifacts: ArtifactStore, object_store: ObjectStore, tmp_path: Path
) -> None:
    stored = artifacts.put(b"the original")
    overwrite(object_store, content_key(stored.content_hash), b"the forgery!")
    with pytest.raises(ArtifactIntegrityError) as raised:
        artifacts.get(stored.content_hash)
    error = raised.value
    assert error.code is ErrorCode.PROTOCOL_VIOLATION and not error.retryable
    assert error.details == {
        "contentHash": stored.content_hash,
        "reason": "content-hash-mismatch",
    }
    assert b"forgery" not in str(error.to_wire("2026-11-29T10:00:00Z")).encode()
    target = tmp_path / "out.bin"
    with pytest.raises(ArtifactIntegrityError):
        artifacts.copy_to(stored.content_hash, target)
    assert not target.exists() and list(tmp_path.glob(".artifact-*")) == []
    with pytest.raises(ArtifactIntegrityError):
        artifacts.open(stored.content_hash)
    with pytest.raises(ArtifactIntegrityError) as raised:
        artifacts.put(b"the original")  # storing it again does not hide the forgery
    assert raised.value.reason == "stored-object-tampered"


# --- manifests ------------------------------------------------------------------------------


def test_a_manifest_has_every_member_the_schema_requires(artifacts: ArtifactStore) -> None:
    schema = json.loads((protocol_root() / "schemas" / "artifact.schema.json").read_text())
    manifest = manifest_of(artifacts.put(b"content"))
    assert set(schema["required"]) <= set(manifest)
    assert manifest["signature"]["keyId"] == PRODUCER_KEY_ID


def test_a_published_manifest_is_verified_and_stored_once(artifacts: ArtifactStore) -> None:
    content = artifacts.put(b"report v1")
    manifest = manifest_of(content)
    published = artifacts.publish(manifest, EVIDENCE)
    assert published.created and published.manifest == manifest
    assert artifacts.publish(manifest, EVIDENCE).created is False
    assert artifacts.manifests(content.content_hash) == [manifest]
    assert artifacts.manifests(content.content_hash, EVIDENCE) == [manifest]
    key = f"{MANIFEST_PREFIX}{hex_of(content.content_hash)}/{hex_of(published.signing_hash)}.json"
    assert artifacts.store.get(key) == canonicalize(manifest)


def test_manifests_that_do_not_verify_are_refused(artifacts: ArtifactStore) -> None:
    content = artifacts.put(b"report v1")
    manifest = manifest_of(content)
    altered = {**manifest, "classification": "public"}
    with pytest.raises(VerificationError) as raised:
        artifacts.publish(altered, EVIDENCE)
    assert raised.value.code is ErrorCode.AUTH_INVALID_SIGNATURE
    unsigned = {k: v for k, v in manifest.items() if k != "signature"}
    with pytest.raises(VerificationError) as raised:
        artifacts.publish(unsigned, EVIDENCE)
    assert raised.value.code is ErrorCode.SCHEMA_VALIDATION_FAILED
    from mwp.core.trust.signed_document import sign

    by_another_agent = sign(unsigned, "artifact", OTHER_AGENT_KEY_ID, OTHER_AGENT_KEY)
    with pytest.raises(VerificationError) as raised:
        artifacts.publish(by_another_agent, EVIDENCE)
    assert (raised.value.code, raised.value.reason) == (
        ErrorCode.AUTH_INVALID_SIGNATURE,
        "signer-binding",
    )
    assert artifacts.manifests(content.content_hash) == []


def test_manifests_must_describe_stored_content(artifacts: ArtifactStore) -> None:
    stored = artifacts.put(b"12345")
    absent = StoredContent(_sha(b"absent"), 6, "urn:x:absent", True)
    cases = [
        (manifest_of(absent), "content-missing"),
        (manifest_of(stored, sizeBytes=6), "size-mismatch"),
        (manifest_of(stored, _sha(b"unknown source")), "source-missing"),
        (manifest_of(stored, stored.content_hash), "provenance-cycle"),
    ]
    for manifest, reason in cases:
        with pytest.raises(ManifestRefused) as raised:
            artifacts.publish(manifest, EVIDENCE)
        assert raised.value.reason == reason
        assert raised.value.code is ErrorCode.INVALID_COMMAND
    assert artifacts.manifests(stored.content_hash) == []
    assert artifacts.derived(stored.content_hash) == []


def test_provenance_answers_sources_and_derived_artifacts(artifacts: ArtifactStore) -> None:
    data = artifacts.put(b"raw data")
    chart = artifacts.put(b"chart")
    report = artifacts.put(b"report")
    artifacts.publish(manifest_of(data), EVIDENCE)
    artifacts.publish(manifest_of(chart, data.content_hash), EVIDENCE)
    artifacts.publish(manifest_of(report, data.content_hash, chart.content_hash), EVIDENCE)
    assert artifacts.sources(report.content_hash) == sorted([data.content_hash, chart.content_hash])
    assert artifacts.sources(chart.content_hash) == [data.content_hash]
    assert artifacts.sources(data.content_hash) == []
    assert sorted(artifacts.derived(data.content_hash)) == sorted(
        [chart.content_hash, report.content_hash]
    )
    assert artifacts.derived(chart.content_hash) == [report.content_hash]
    assert artifacts.derived(report.content_hash) == []
    # A second manifest of the same content adds its sources.
    notes = artifacts.put(b"notes")
    artifacts.publish(
        manifest_of(report, notes.content_hash, artifactId="urn:mwp:artifact:report-2"), EVIDENCE
    )
    assert len(artifacts.manifests(report.content_hash)) == 2
    assert notes.content_hash in artifacts.sources(report.content_hash)
    # Provenance stays acyclic: the raw data cannot derive from the report.
    with pytest.raises(ManifestRefused) as raised:
        artifacts.publish(
            manifest_of(data, report.content_hash, artifactId="urn:mwp:artifact:loop"), EVIDENCE
        )
    assert raised.value.reason == "provenance-cycle"


def test_a_tampered_manifest_is_detected_on_read(
    artifacts: ArtifactStore, object_store: ObjectStore
) -> None:
    content = artifacts.put(b"report")
    artifacts.publish(manifest_of(content), EVIDENCE)
    prefix = f"{MANIFEST_PREFIX}{hex_of(content.content_hash)}/"
    (key,) = list(iter_keys(object_store, prefix))
    document = json.loads(object_store.get(key) or b"")
    document["classification"] = "public"
    overwrite(object_store, key, canonicalize(document))
    with pytest.raises(ArtifactIntegrityError) as raised:
        artifacts.manifests(content.content_hash)
    assert raised.value.reason == "manifest-tampered"
    with pytest.raises(VerificationError):
        artifacts.manifests(content.content_hash, EVIDENCE)
