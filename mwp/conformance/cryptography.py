"""Runner for the cryptography bundle: 22 cases, 62 evaluations (spec 6.4, 22)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mwp.conformance import bundle
from mwp.conformance.result import BundleResult
from mwp.core.trust.signed_document import PROFILES, VerificationError, sign, verify
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.strict_json import parse_bytes
from mwp.core.wire.values import b64url_decode, b64url_encode

MANIFEST = "cryptography/manifest.json"


def run(root: Path) -> BundleResult:
    result = BundleResult("cryptography")
    manifest = bundle.load_manifest(root, MANIFEST, result)
    if manifest is None:
        return result
    _check_profiles(manifest, result)
    for case in manifest["cases"]:
        for index, evaluation in enumerate(case["evaluations"]):
            name = f"{case['id']}[{index}]"
            if evaluation.get("fault"):
                name += f" {evaluation['fault']['id']}"
            elif evaluation.get("profileId"):
                name += f" {evaluation['profileId']}"
            try:
                expected, actual = _evaluate(root, case["kind"], evaluation)
            except (OSError, ValueError, KeyError) as exc:
                result.fail(name, f"cannot evaluate: {exc}")
                continue
            result.record(name, expected, actual)
    return result


def _check_profiles(manifest: dict[str, Any], result: BundleResult) -> None:
    """The bundle's profile table must be the one this codec implements."""
    for row in manifest["profiles"]:
        ours = PROFILES.get(row["profileId"])
        signer = row["expectedSigner"]
        theirs = (
            row["schema"],
            row["protectedTimePointer"],
            signer["rule"],
            signer.get("pointer") or signer.get("idPointer"),
        )
        if ours is None or theirs != (
            f"schemas/{ours.schema}",
            f"/{ours.time_member}",
            ours.signer_rule,
            "/" + "/".join(ours.signer_path) if ours.signer_path else None,
        ):
            result.fail(f"profile {row['profileId']}", "profile table differs from the codec")


def _evaluate(root: Path, kind: str, evaluation: dict[str, Any]) -> tuple[str, str]:
    if kind == "canonicalization":
        value = parse_bytes(bundle.read(root, evaluation["input"]))
        produced = canonicalize(value)
        wanted = bundle.read(root, evaluation["expectedJcs"])
        ok = produced == wanted and sha256_ref(produced) == evaluation["sha256"]
        return "complete", "complete" if ok else "canonical bytes differ"

    expect = evaluation["expect"]
    expected = f"{expect['stage']}/{expect['wireCode']}"
    registry = parse_bytes(bundle.read(root, evaluation["registry"]))
    bundle.validate_fixture(root, "cryptography/registry-fixture.schema.json", registry)
    signing_key = None
    if evaluation.get("signingKey"):
        signing_key = parse_bytes(bundle.read(root, evaluation["signingKey"]))
        bundle.validate_fixture(root, "cryptography/signing-key-fixture.schema.json", signing_key)
    data = bundle.read(root, evaluation["document"])
    try:
        verified = verify(data, evaluation["profileId"], registry)
    except VerificationError as exc:
        return expected, f"{exc.stage}/{exc.code.value}"
    actual = "complete/None"
    facts = expect.get("verified")
    if facts is not None:
        problems = []
        if verified.key_id != facts["keyId"]:
            problems.append("keyId")
        if verified.principal.to_json() != facts["principal"]:
            problems.append("principal")
        if verified.protected_time != facts["protectedTime"]:
            problems.append("protectedTime")
        if verified.signing_bytes != bundle.read(root, facts["signingBytes"]):
            problems.append("signingBytes")
        if verified.signing_hash != facts["signingHash"]:
            problems.append("signingHash")
        if b64url_encode(verified.signature) != facts["signature"]:
            problems.append("signature")
        if sha256_ref(canonicalize(verified.document)) != facts["signedDocumentHash"]:
            problems.append("signedDocumentHash")
        if signing_key is not None and not _resigns(verified.document, evaluation, signing_key):
            problems.append("re-signing with the fixture seed")
        if problems:
            actual = "complete with wrong " + ", ".join(problems)
    return expected, actual


def _resigns(document: dict[str, Any], evaluation: dict[str, Any], fixture: Any) -> bool:
    """Ed25519 is deterministic: our signer must reproduce the vector's exact signature."""
    key = SigningKey(b64url_decode(fixture["seed"]))
    if b64url_encode(key.public_key) != fixture["publicKey"]:
        return False
    resigned = sign(document, evaluation["profileId"], fixture["keyId"], key)
    return bool(resigned["signature"] == document["signature"])
