"""Runner for the Admission bundle: 5 cases, 30 evaluations (spec 6.4, 22).

Every evaluation reruns the real six-stage verification, then first admission or historical
replay through :mod:`mwp.core.trust.admission`. The manifest's ``trustedContext``,
``lookup`` and ``append`` members are test-harness metadata; :class:`ManifestAdmissionLog`
turns them into the typed results a deployed Admission Log would return, and records any call
the manifest does not allow (an append during replay, trusted context requested after a found
record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mwp.conformance import bundle
from mwp.conformance.result import BundleResult
from mwp.core.trust.admission import (
    AdmissionError,
    AppendCommitted,
    AppendExisting,
    AppendResult,
    LogFailed,
    LogFailure,
    LookupAbsent,
    LookupFound,
    LookupResult,
    TrustedContext,
    TrustedContextUnavailable,
    admit_first,
    record_schema_violation,
    verify_historical,
)
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import VerificationError, VerifiedDocument, verify
from mwp.core.wire.jcs import sha256_ref
from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

MANIFEST = "admission/manifest.json"
CRYPTOGRAPHY_MANIFEST = "cryptography/manifest.json"
RECORD_SCHEMA = "schemas/first-admission-record.schema.json"
REGISTRY_SCHEMA = "cryptography/registry-fixture.schema.json"
# Any occurredAt will do: the wire form is only inspected for a leaked reason.
_WIRE_PROBE_TIME = "2026-01-01T00:00:00Z"

_LOG_FAILURES: dict[str, LogFailure] = {
    "unauthenticated": LogFailure.UNAUTHENTICATED,
    "integrity-failed": LogFailure.INTEGRITY_FAILED,
    "unavailable": LogFailure.UNAVAILABLE,
    "indeterminate": LogFailure.INDETERMINATE,
    "conflict": LogFailure.CONFLICT,
}


def run(root: Path) -> BundleResult:
    result = BundleResult("admission")
    manifest = bundle.load_manifest(root, MANIFEST, result)
    if manifest is None:
        return result
    _check_declarations(manifest, result)
    covered = _check_cryptography_pin(root, manifest, result)
    seen: set[str] = set()
    for case in _list(manifest.get("cases")):
        for evaluation in _list(case.get("evaluations") if isinstance(case, dict) else None):
            name = f"{case['id']}/{evaluation.get('id')}" if isinstance(evaluation, dict) else "?"
            if name in seen:  # each evaluation counts exactly once
                result.fail(name, "evaluation id is repeated")
                continue
            seen.add(name)
            try:
                problems = _fixture_problems(root, evaluation, covered)
                if problems:
                    result.fail(name, "; ".join(problems))
                    continue
                expected, actual = _evaluate(root, evaluation)
            except (bundle.BundleError, KeyError, TypeError, ValueError) as exc:
                result.fail(name, f"cannot evaluate: {type(exc).__name__}: {exc}")
                continue
            result.record(name, expected, actual)
    return result


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


# --- bundle integrity -----------------------------------------------------------------------


def _check_declarations(manifest: dict[str, Any], result: BundleResult) -> None:
    """The manifest must name the stage, wire code and fixture Schemas this runner assumes."""
    declared = (
        manifest.get("semanticStage"),
        manifest.get("wireCode"),
        manifest.get("fixtureSchemas"),
    )
    ours = (
        "admission",
        "AUTH_INVALID_SIGNATURE",
        {"record": RECORD_SCHEMA, "registry": REGISTRY_SCHEMA},
    )
    if declared != ours:
        result.fail(f"{MANIFEST} declarations", f"declares {declared}, runner expects {ours}")


def _check_cryptography_pin(
    root: Path, manifest: dict[str, Any], result: BundleResult
) -> dict[str, dict[str, Any]]:
    """Check the pinned cryptography digest; return the artifact entries it vouches for.

    The Admission bundle reuses cryptography documents and Registries without declaring them
    itself, so those files are trusted only through this pin and the entries it covers.
    """
    pinned = manifest.get("cryptography")
    pin = pinned.get("artifactDigest") if isinstance(pinned, dict) else None
    try:
        crypto = bundle.read_manifest(root, CRYPTOGRAPHY_MANIFEST)
        recomputed = bundle.artifact_digest(crypto)
    except bundle.BundleError as exc:
        result.fail(f"{CRYPTOGRAPHY_MANIFEST} pin", str(exc))
        return {}
    declared = crypto.get("artifactDigest")
    if not (pin == declared == recomputed):
        result.fail(
            f"{CRYPTOGRAPHY_MANIFEST} pin",
            f"pinned {pin}, manifest declares {declared}, content hashes to {recomputed}",
        )
    covered: dict[str, dict[str, Any]] = {}
    for source in (crypto, manifest):
        for entry in _list(source.get("artifacts")):
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                covered[entry["path"]] = entry
    return covered


def _fixture_problems(
    root: Path, evaluation: dict[str, Any], covered: dict[str, dict[str, Any]]
) -> list[str]:
    """Everything wrong with the files one evaluation reads, before it runs."""
    problems: list[str] = []
    paths = [evaluation["document"], evaluation["registry"]]
    records = [
        outcome["record"]
        for outcome in (evaluation["lookup"], evaluation["append"])
        if isinstance(outcome, dict) and "record" in outcome
    ]
    expected_record = evaluation["expect"].get("record")
    paths += records + ([expected_record] if expected_record else [])
    for path in dict.fromkeys(paths):
        entry = covered.get(path)
        if entry is None:
            problems.append(f"{path} is not a digest-protected artifact")
            continue
        problem = bundle.check_artifact(root, entry)
        if problem is not None:
            problems.append(problem)
    if problems:
        return problems
    schemas = bundle.load_schemas(root)
    registry = bundle.read_json(root, evaluation["registry"])
    problems += [f"registry fixture {e}" for e in schemas.errors(REGISTRY_SCHEMA, registry)]
    for path in records:
        # The core's record check must agree with the normative Schema on every fixture,
        # including the deliberately invalid ones.
        try:
            value = parse_bytes(bundle.read_bytes(root, path))
        except JsonSyntaxError as exc:
            problems.append(f"{path} is not strict JSON: {exc}")
            continue
        normative = not schemas.errors(RECORD_SCHEMA, value)
        ours = record_schema_violation(value) is None
        if normative != ours:
            problems.append(f"{path}: Schema says valid={normative}, core says valid={ours}")
    if expected_record is not None:
        value = bundle.read_json(root, expected_record)
        problems += [f"{expected_record} {e}" for e in schemas.errors(RECORD_SCHEMA, value)]
    return problems


# --- one evaluation -------------------------------------------------------------------------


def _evaluate(root: Path, evaluation: dict[str, Any]) -> tuple[str, str]:
    expect = evaluation["expect"]
    if expect["stage"] == "complete":
        expected = f"complete wireCode=None record={expect['record']}"
    else:
        expected = f"{expect['stage']} wireCode={expect['wireCode']} reason={expect['reason']}"

    data = bundle.read_bytes(root, evaluation["document"])
    registry = bundle.read_json(root, evaluation["registry"])
    try:
        verified = verify(data, evaluation["profileId"], registry)
    except VerificationError as exc:
        return expected, f"{exc.stage} wireCode={exc.code.value} reason={exc.reason}"

    harness = ManifestAdmissionLog(root, evaluation["lookup"], evaluation["append"])
    context = ManifestTrustedContext(evaluation["trustedContext"])
    try:
        if evaluation["mode"] == "first-admission":
            record = admit_first(verified, harness, context)
        elif evaluation["mode"] == "historical-replay":
            record = verify_historical(verified, harness)
        else:
            raise ValueError(f"unknown mode {evaluation['mode']!r}")
    except AdmissionError as exc:
        actual = f"{exc.stage} wireCode={exc.code.value} reason={exc.reason.value}"
        if exc.reason.value in str(exc.to_wire(_WIRE_PROBE_TIME)):
            actual += " (wire error reveals the reason)"
    else:
        if expect["stage"] == "complete" and record.raw == bundle.read_bytes(
            root, expect["record"]
        ):
            actual = f"complete wireCode=None record={expect['record']}"
        else:
            actual = f"complete wireCode=None record={sha256_ref(record.raw)}"
    # The declared orchestration must be the one that ran: no outcome left unused.
    if evaluation["append"] is not None and harness.appends == 0:
        harness.violations.append("declared append outcome was never used")
    if evaluation["trustedContext"] is not None and not context.requested:
        context.violations.append("declared trusted context was never requested")
    violations = harness.violations + context.violations
    if violations:
        actual += " (harness: " + "; ".join(violations) + ")"
    return expected, actual


@dataclass
class ManifestTrustedContext:
    """The manifest's ``trustedContext``; asking for it when it is null is a violation."""

    value: dict[str, Any] | None
    violations: list[str] = field(default_factory=list)
    requested: bool = False

    def __call__(self, verified: VerifiedDocument) -> TrustedContext | TrustedContextUnavailable:
        self.requested = True
        if self.value is None:
            self.violations.append("trusted context requested but the manifest gives none")
            return TrustedContextUnavailable("not in the manifest")
        return TrustedContext(
            admission_record_id=self.value["admissionRecordId"],
            trusted_accepted_at=self.value["trustedAcceptedAt"],
            accepted_by=_principal(self.value["acceptedBy"]),
        )


class ManifestAdmissionLog:
    """An Admission Log whose answers are the manifest's ``lookup`` and ``append`` outcomes."""

    def __init__(self, root: Path, lookup: dict[str, Any], append: dict[str, Any] | None) -> None:
        self._root = root
        self._lookup = lookup
        self._append = append
        self.violations: list[str] = []
        self.lookups = 0
        self.appends = 0

    def lookup(self, organization_id: str, signing_hash: str) -> LookupResult:
        self.lookups += 1
        if self.lookups > 1:
            self.violations.append("looked up more than once")
        status = self._lookup["status"]
        if status == "found":
            return LookupFound(
                bundle.read_bytes(self._root, self._lookup["record"]),
                _principal(self._lookup["authenticatedService"]),
            )
        if status == "authoritative-absence":
            return LookupAbsent()
        return LogFailed(_LOG_FAILURES[status], "manifest outcome")

    def append_or_return_existing(
        self, organization_id: str, signing_hash: str, candidate: bytes
    ) -> AppendResult:
        self.appends += 1
        if self._append is None:
            self.violations.append("append called but the manifest gives no append outcome")
            return LogFailed(LogFailure.INDETERMINATE, "not in the manifest")
        if self.appends > 1:
            self.violations.append("appended more than once")
        status = self._append["status"]
        if status in ("committed", "existing"):
            record = bundle.read_bytes(self._root, self._append["record"])
            # A committed record is the candidate we offered: check candidate preparation.
            if status == "committed" and parse_bytes(record) != parse_bytes(candidate):
                self.violations.append("candidate differs from the committed record")
            service = _principal(self._append["authenticatedService"])
            if status == "committed":
                return AppendCommitted(record, service)
            return AppendExisting(record, service)
        return LogFailed(_LOG_FAILURES[status], "manifest outcome")


def _principal(value: dict[str, Any]) -> Principal:
    return Principal(value["type"], value["id"])
