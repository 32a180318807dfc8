"""The structural runner and the shared bundle helpers, on the real bundle and tampered copies."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import types
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from mwp.conformance import bundle, structural
from mwp.conformance.result import BundleResult
from mwp.core.wire.jcs import sha256_ref
from mwp.core.wire.strict_json import JsonValue, parse_bytes

SCHEMA_BASE = "https://missionweaveprotocol.dev/schemas/0.1/"
CRYPTO_MANIFEST = "cryptography/manifest.json"
ADMISSION_MANIFEST = "admission/manifest.json"


# --------------------------------------------------------------------------- helpers


def copy_bundle(source: Path, target: Path) -> Path:
    """A writable copy (the shared bundle is read-only and copytree would keep its modes)."""
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    return target


@pytest.fixture
def bundle_copy(protocol_root_path: Path, tmp_path: Path) -> Path:
    return copy_bundle(protocol_root_path, tmp_path / "mwp-0.1")


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def rewrite_manifest(root: Path, change: str, valid: bool) -> None:
    path = root / structural.MANIFEST
    entries = json.loads(path.read_bytes())
    [entry] = [entry for entry in entries if entry["name"] == change]
    entry["valid"] = valid
    path.write_text(json.dumps(entries, indent=2))


def schema_stand_in(root: Path) -> structural.ModelCheck:
    """A model check that agrees with the bundle schema, for tests about the runner itself."""
    schemas = bundle.load_schemas(root)

    def check(name: str, value: JsonValue) -> str | None:
        errors = schemas.errors(f"schemas/{name}", value)
        return errors[0] if errors else None

    return check


def require_project_models() -> None:
    structural.project_model_check()  # must import: the model verdict is half of each vector


def mismatches_by_name(result: BundleResult) -> dict[str, tuple[str, str]]:
    return {m.evaluation: (m.expected, m.actual) for m in result.mismatches}


def valid_command(root: Path) -> dict[str, JsonValue]:
    value = parse_bytes((root / "conformance/vectors/valid/command.json").read_bytes())
    assert isinstance(value, dict)
    return value


# --------------------------------------------------------------------------- the real bundle


def test_all_58_vectors_pass_both_verdicts(protocol_root_path: Path) -> None:
    require_project_models()
    result = structural.run(protocol_root_path)
    assert result.mismatches == []
    assert (result.passed, result.total) == (58, 58)


def test_schema_verdict_alone_matches_all_58(protocol_root_path: Path) -> None:
    vectors, problems = structural.load_vectors(protocol_root_path)
    assert problems == []
    assert (len(vectors), sum(v.valid for v in vectors)) == (58, 27)
    schemas = bundle.load_schemas(protocol_root_path)
    wrong = []
    for vector in vectors:
        instance = parse_bytes((protocol_root_path / vector.instance).read_bytes())
        verdict = structural.schema_verdict(schemas, vector, instance)
        if verdict.valid is not vector.valid:
            wrong.append((vector.name, verdict.describe()))
    assert wrong == []


def test_runner_passes_with_models_that_agree_with_the_schemas(protocol_root_path: Path) -> None:
    # Also proves the pinned content digest matches the shared bundle.
    result = structural.run(protocol_root_path, model_check=schema_stand_in(protocol_root_path))
    assert result.mismatches == []
    assert (result.passed, result.total) == (58, 58)


def test_models_are_asked_by_schema_file_name() -> None:
    assert structural.schema_name("schemas/work-item.schema.json") == "work-item.schema.json"


def test_project_models_are_adapted_to_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    class DocumentInvalid(ValueError):  # noqa: N818 (the name mwp.core.models exports)
        pass

    def validate_document(schema_name: str, value: JsonValue) -> object:
        if schema_name == "broken":
            raise LookupError("no such model")
        if value != {"ok": True}:
            raise DocumentInvalid(f"{schema_name}: not ok")
        return value

    fake = types.ModuleType("mwp.core.models")
    fake.validate_document = validate_document  # type: ignore[attr-defined]
    fake.DocumentInvalid = DocumentInvalid  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mwp.core.models", fake)
    check = structural.project_model_check()
    assert check("lease.schema.json", {"ok": True}) is None
    assert check("lease.schema.json", {"ok": False}) == "lease.schema.json: not ok"
    with pytest.raises(LookupError):  # not a verdict: the runner reports it as an error
        check("broken", {})


def test_registry_holds_every_schema_by_id(protocol_root_path: Path) -> None:
    schemas = bundle.load_schemas(protocol_root_path)
    files = sorted(p.name for p in (protocol_root_path / "schemas").glob("*.schema.json"))
    assert len(files) == 22
    for name in files:
        assert schemas.ids_by_path[f"schemas/{name}"] == SCHEMA_BASE + name
        assert schemas.registry.contents(SCHEMA_BASE + name)["$id"] == SCHEMA_BASE + name
    for fixture in (
        "cryptography/registry-fixture.schema.json",
        "cryptography/signing-key-fixture.schema.json",
        "cryptography/manifest.schema.json",
        "admission/manifest.schema.json",
    ):
        assert fixture in schemas.ids_by_path
    assert len(schemas.ids_by_path) == 26
    # Paths and $ids name the same validator.
    command_id = SCHEMA_BASE + "command.schema.json"
    assert schemas.validator("schemas/command.schema.json") is schemas.validator(command_id)


# --------------------------------------------------------------------------- format assertion


def test_uri_and_date_time_formats_are_asserted(protocol_root_path: Path) -> None:
    schemas = bundle.load_schemas(protocol_root_path)
    uri = schemas.validator_for({"type": "string", "format": "uri"})
    assert not uri.is_valid("relative/reference")
    assert not uri.is_valid("urn:bad%zz")
    assert uri.is_valid("urn:example:ok")
    timestamp = schemas.validator_for({"$ref": SCHEMA_BASE + "common.schema.json#/$defs/timestamp"})
    assert not timestamp.is_valid("2026-02-30T00:00:00Z")
    assert not timestamp.is_valid("2026-07-15 00:00:00Z")
    assert timestamp.is_valid("2026-07-15T00:00:00Z")


def test_normative_schemas_reject_values_only_format_catches(protocol_root_path: Path) -> None:
    """The same documents pass when `format` is a mere annotation: assertion is what rejects."""
    schemas = bundle.load_schemas(protocol_root_path)
    command_id = SCHEMA_BASE + "command.schema.json"
    annotating = Draft202012Validator(
        schemas.registry.contents(command_id), registry=schemas.registry
    )
    good = valid_command(protocol_root_path)
    assert schemas.errors(command_id, good) == []

    bad_uri = copy.deepcopy(good)
    bad_uri["actionId"] = "urn:bad%zz"  # passes the id pattern; only `format: uri` rejects it
    bad_time = copy.deepcopy(good)
    bad_time["issuedAt"] = "2026-02-30T00:00:00Z"  # no such day
    for document, member in ((bad_uri, "actionId"), (bad_time, "issuedAt")):
        assert annotating.is_valid(document)
        errors = schemas.errors(command_id, document)
        assert errors and all(member in error for error in errors), errors


def test_missing_format_support_is_refused() -> None:
    # What jsonschema would have if rfc3986-validator were absent: no `uri` checker at all.
    with pytest.raises(bundle.FormatAssertionError, match="uri"):
        bundle._require_format_assertion(FormatChecker(formats=("date-time",)))
    bundle._require_format_assertion(bundle.format_checker())


# --------------------------------------------------------------------------- able to fail


def test_wrong_expectation_is_a_named_mismatch(bundle_copy: Path) -> None:
    rewrite_manifest(bundle_copy, "valid Mission", valid=False)
    result = structural.run(bundle_copy, model_check=schema_stand_in(bundle_copy))
    found = mismatches_by_name(result)
    key = "valid Mission (conformance/vectors/valid/mission.json)"
    assert found[key] == ("invalid", "schema verdict valid; model verdict valid")
    # Editing the manifest also breaks the pin and the 27/31 split; each is reported.
    assert "structural content digest" in found
    assert "conformance/manifest.json vector counts" in found
    assert not result.ok
    assert result.passed == 57


def test_only_the_disagreeing_verdict_is_named(protocol_root_path: Path) -> None:
    def accepts_everything(name: str, value: JsonValue) -> str | None:
        return None

    result = structural.run(protocol_root_path, model_check=accepts_everything)
    assert (result.passed, result.total) == (27, 58)
    assert len(result.mismatches) == 31
    for mismatch in result.mismatches:
        assert mismatch.expected == "invalid"
        assert mismatch.actual == "model verdict valid"


def test_a_crashing_model_is_reported_not_raised(protocol_root_path: Path) -> None:
    def crashes(name: str, value: JsonValue) -> str | None:
        raise KeyError(name)

    result = structural.run(protocol_root_path, model_check=crashes)
    assert (result.passed, result.total) == (0, 58)
    assert all(m.actual.startswith("model verdict error (KeyError") for m in result.mismatches)


def test_bytes_that_are_not_strict_json_are_invalid_for_both(bundle_copy: Path) -> None:
    path = bundle_copy / "conformance/vectors/valid/command.json"
    path.write_bytes(path.read_bytes().replace(b"{", b'{"protocolVersion": "0.1",', 1))
    seen: list[JsonValue] = []
    stand_in = schema_stand_in(bundle_copy)

    def recording(name: str, value: JsonValue) -> str | None:
        seen.append(value)
        return stand_in(name, value)

    result = structural.run(bundle_copy, model_check=recording)
    expected, actual = mismatches_by_name(result)[
        "valid command envelope (conformance/vectors/valid/command.json)"
    ]
    assert expected == "valid"
    assert actual.startswith("schema verdict invalid (not strict JSON: duplicate member")
    assert "; model verdict invalid (not strict JSON" in actual
    assert len(seen) == 57  # the models never see a document that failed strict parsing


def test_tampered_vector_breaks_the_pin(bundle_copy: Path) -> None:
    path = bundle_copy / "conformance/vectors/valid/mission.json"
    path.write_bytes(path.read_bytes() + b"\n")  # still the same valid document
    result = structural.run(bundle_copy, model_check=schema_stand_in(bundle_copy))
    assert result.passed == 58
    [mismatch] = result.mismatches
    assert mismatch.evaluation == "structural content digest"
    assert structural.PINNED_CONTENT_DIGEST in mismatch.actual
    assert not result.ok


def test_missing_vector_file_is_reported(bundle_copy: Path) -> None:
    os.remove(bundle_copy / "conformance/vectors/invalid/event-zero-sequence.json")
    result = structural.run(bundle_copy, model_check=schema_stand_in(bundle_copy))
    found = mismatches_by_name(result)
    key = "invalid Event sequence zero (conformance/vectors/invalid/event-zero-sequence.json)"
    assert "is missing" in found[key][1]
    assert "structural content digest" in found
    assert result.passed == 57


def test_unreadable_manifest_fails_the_bundle(bundle_copy: Path) -> None:
    (bundle_copy / structural.MANIFEST).write_bytes(b"[] []")
    result = structural.run(bundle_copy, model_check=schema_stand_in(bundle_copy))
    [mismatch] = result.mismatches
    assert "not strict JSON" in mismatch.actual
    assert not result.ok


# --------------------------------------------------------------------------- digests and artifacts


@pytest.mark.parametrize("manifest", [CRYPTO_MANIFEST, ADMISSION_MANIFEST])
def test_real_manifests_are_intact(protocol_root_path: Path, manifest: str) -> None:
    result = BundleResult("probe")
    loaded = bundle.load_manifest(protocol_root_path, manifest, result)
    assert loaded is not None
    assert result.mismatches == []
    assert bundle.artifact_digest(loaded) == loaded["artifactDigest"]


def test_admission_pins_the_unchanged_cryptography_manifest(protocol_root_path: Path) -> None:
    admission = bundle.read_manifest(protocol_root_path, ADMISSION_MANIFEST)
    crypto = bundle.read_manifest(protocol_root_path, CRYPTO_MANIFEST)
    pin = admission["cryptography"]
    assert isinstance(pin, dict)
    assert pin["artifactDigest"] == bundle.artifact_digest(crypto) == crypto["artifactDigest"]


def test_artifact_digest_removes_only_the_top_level_member() -> None:
    manifest: dict[str, JsonValue] = {
        "b": [1, 2.5],
        "artifactDigest": "sha256:ignored",
        "a": {"artifactDigest": "kept"},
    }
    expected = sha256_ref(b'{"a":{"artifactDigest":"kept"},"b":[1,2.5]}')
    assert bundle.artifact_digest(manifest) == expected


def test_flipped_artifact_byte_is_reported(bundle_copy: Path) -> None:
    flip_byte(bundle_copy / "cryptography/keys/registry-valid.json", 100)
    result = BundleResult("probe")
    assert bundle.load_manifest(bundle_copy, CRYPTO_MANIFEST, result) is not None
    [mismatch] = result.mismatches
    assert mismatch.evaluation == "artifact cryptography/keys/registry-valid.json"
    assert mismatch.actual.startswith("sha256 is sha256:")
    assert "byteLength" not in mismatch.actual


def test_truncated_and_missing_artifacts_are_reported(bundle_copy: Path) -> None:
    path = bundle_copy / "admission/records/valid/command.json"
    path.write_bytes(path.read_bytes()[:-1])
    os.remove(bundle_copy / "admission/registries/registry-later-revocation.json")
    result = BundleResult("probe")
    bundle.load_manifest(bundle_copy, ADMISSION_MANIFEST, result)
    found = mismatches_by_name(result)
    assert set(found) == {
        "artifact admission/records/valid/command.json",
        "artifact admission/registries/registry-later-revocation.json",
    }
    assert "byteLength is" in found["artifact admission/records/valid/command.json"][1]
    assert "is missing" in found["artifact admission/registries/registry-later-revocation.json"][1]


def test_edited_manifest_content_breaks_the_artifact_digest(bundle_copy: Path) -> None:
    path = bundle_copy / CRYPTO_MANIFEST
    manifest = json.loads(path.read_bytes())
    manifest["cases"][:2] = manifest["cases"][1::-1]  # order is content: same cases, swapped
    path.write_text(json.dumps(manifest))
    result = BundleResult("probe")
    bundle.load_manifest(bundle_copy, CRYPTO_MANIFEST, result)
    assert [m.evaluation for m in result.mismatches] == [f"{CRYPTO_MANIFEST} artifactDigest"]


def test_reformatting_a_manifest_keeps_its_digest(bundle_copy: Path) -> None:
    # The digest is over the JCS form, so whitespace and member order are not content.
    path = bundle_copy / CRYPTO_MANIFEST
    manifest = json.loads(path.read_bytes())
    path.write_text(json.dumps(dict(reversed(manifest.items())), indent=7))
    result = BundleResult("probe")
    bundle.load_manifest(bundle_copy, CRYPTO_MANIFEST, result)
    assert result.mismatches == []


def test_manifest_with_duplicate_members_is_unusable(bundle_copy: Path) -> None:
    path = bundle_copy / CRYPTO_MANIFEST
    path.write_bytes(path.read_bytes().replace(b"{", b'{"manifestVersion": 1,', 1))
    result = BundleResult("probe")
    assert bundle.load_manifest(bundle_copy, CRYPTO_MANIFEST, result) is None
    assert "duplicate member" in result.mismatches[0].actual


# --------------------------------------------------------------------------- files and schemas


@pytest.mark.parametrize("relative", ["../PIN.json", "/etc/passwd", "schemas//x", "a\\b", "", "."])
def test_paths_cannot_leave_the_bundle(protocol_root_path: Path, relative: str) -> None:
    with pytest.raises(bundle.BundleError, match="not a plain bundle-relative path"):
        bundle.locate(protocol_root_path, relative)


def test_symlink_out_of_the_bundle_is_refused(bundle_copy: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (bundle_copy / "schemas/link.json").symlink_to(outside)
    with pytest.raises(bundle.BundleError, match="outside the bundle root"):
        bundle.read_bytes(bundle_copy, "schemas/link.json")


def test_fixtures_are_validated_against_their_schema(protocol_root_path: Path) -> None:
    schema = "cryptography/registry-fixture.schema.json"
    registry = bundle.read_json(protocol_root_path, "cryptography/keys/registry-valid.json")
    bundle.validate_fixture(protocol_root_path, schema, registry)
    with pytest.raises(bundle.FixtureError, match="does not conform"):
        bundle.validate_fixture(protocol_root_path, schema, {"unexpected": True})


def test_duplicate_schema_id_is_refused(bundle_copy: Path) -> None:
    shutil.copyfile(
        bundle_copy / "schemas/lease.schema.json", bundle_copy / "schemas/lease-copy.schema.json"
    )
    with pytest.raises(bundle.BundleError, match="repeats the \\$id"):
        bundle.load_schemas(bundle_copy)
