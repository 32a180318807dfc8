"""The structural conformance bundle: 58 schema vectors, each judged twice (spec section 22).

A vector passes only when both the bundle's own JSON Schema (Draft 2020-12, `format` asserted)
and the project's models reach the manifest's verdict, so the models cannot drift from the
normative schemas unnoticed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mwp.conformance.bundle import (
    BundleError,
    SchemaSet,
    content_digest,
    load_schemas,
    read_bytes,
    read_json,
)
from mwp.conformance.result import BundleResult
from mwp.core.wire.strict_json import JsonSyntaxError, JsonValue, parse_bytes

MANIFEST = "conformance/manifest.json"
SCHEMA_DIR = "schemas"
EXPECTED_VALID, EXPECTED_INVALID = 27, 31  # the counts spec section 22 fixes

# conformance/manifest.json carries no digest of its own; its README asks implementations to
# record the pinned source and a content digest. This digest covers the manifest, every vector
# it names and every normative schema (see `pinned_paths`), so any edited byte is reported.
PINNED_SOURCE = (
    "github.com/missionweaveprotocol/missionweaveprotocol@f7e70a72c76bbeb5014c186cd820aac2112f0dde"
)
PINNED_CONTENT_DIGEST = "sha256:9ffcc64c09d35c9a7c4e143dfcbac5c47ced9bf9a32e3037c8388ce0fa448053"

# Returns None when the document is valid, else why not; raises only when it cannot decide.
ModelCheck = Callable[[str, JsonValue], str | None]

_DETAIL_LIMIT = 240


class ModelsUnavailableError(RuntimeError):
    """The project's models could not be loaded, so no model verdict can be reached."""


@dataclass(frozen=True)
class Vector:
    name: str
    schema: str
    instance: str
    valid: bool


@dataclass(frozen=True)
class Verdict:
    valid: bool | None  # None: the check could not reach a verdict
    detail: str = ""

    def describe(self) -> str:
        word = "error" if self.valid is None else "valid" if self.valid else "invalid"
        return f"{word} ({_shorten(self.detail)})" if self.detail else word


def schema_name(schema_path: str) -> str:
    """The name `mwp.core.models.validate_document` takes: the schema's file name."""
    return PurePosixPath(schema_path).name


def project_model_check() -> ModelCheck:
    """`mwp.core.models.validate_document`, adapted to a verdict.

    Imported by name at run time so this runner loads (and reports a clear failure) even
    while the models package is incomplete.
    """
    models = importlib.import_module("mwp.core.models")
    validate = models.validate_document
    invalid: type[Exception] = models.DocumentInvalid

    def check(name: str, value: JsonValue) -> str | None:
        try:
            validate(name, value)
        except invalid as exc:
            return str(exc) or type(exc).__name__
        return None

    return check


def load_vectors(root: Path) -> tuple[list[Vector], list[tuple[str, str]]]:
    """The manifest's vectors and `(where, problem)` for every malformed entry."""
    manifest = read_json(root, MANIFEST)
    if not isinstance(manifest, list):
        raise BundleError(f"{MANIFEST} is not a JSON array")
    vectors: list[Vector] = []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, entry in enumerate(manifest):
        where = f"{MANIFEST} entry {index}"
        if not isinstance(entry, dict) or set(entry) != {"name", "schema", "instance", "valid"}:
            problems.append((where, "entry must have exactly name, schema, instance, valid"))
            continue
        name, schema, instance, valid = (
            entry["name"],
            entry["schema"],
            entry["instance"],
            entry["valid"],
        )
        if not (
            isinstance(name, str)
            and isinstance(schema, str)
            and isinstance(instance, str)
            and isinstance(valid, bool)
        ):
            problems.append((where, "entry has a member of the wrong type"))
            continue
        if name in seen:
            problems.append((where, f"duplicate vector name {name!r}"))
            continue
        seen.add(name)
        vectors.append(Vector(name, schema, instance, valid))
    return vectors, problems


def pinned_paths(root: Path, vectors: list[Vector]) -> list[str]:
    """Every file the structural verdicts depend on."""
    schemas = [
        path.relative_to(root).as_posix() for path in (root / SCHEMA_DIR).glob("*.schema.json")
    ]
    return [MANIFEST, *schemas, *(vector.instance for vector in vectors)]


def schema_verdict(schemas: SchemaSet, vector: Vector, instance: JsonValue) -> Verdict:
    try:
        errors = schemas.errors(vector.schema, instance)
    except BundleError as exc:
        return Verdict(None, str(exc))
    return Verdict(not errors, errors[0] if errors else "")


def model_verdict(check: ModelCheck, vector: Vector, instance: JsonValue) -> Verdict:
    try:
        reason = check(schema_name(vector.schema), instance)
    except ModelsUnavailableError as exc:
        return Verdict(None, str(exc))
    except Exception as exc:  # a crash is not a verdict; report it instead of aborting the run
        return Verdict(None, f"{type(exc).__name__}: {exc}")
    return Verdict(reason is None, reason or "")


def run(root: Path, *, model_check: ModelCheck | None = None) -> BundleResult:
    """Run every structural vector under `root`; `model_check` replaces the project's models."""
    result = BundleResult("structural")
    try:
        vectors, problems = load_vectors(root)
    except BundleError as exc:
        result.fail(MANIFEST, str(exc))
        return result
    try:
        schemas = load_schemas(root)
    except BundleError as exc:
        result.fail("bundle schemas", str(exc))
        return result
    for where, problem in problems:
        result.fail(where, problem)
    _check_counts(result, vectors)
    _check_pin(result, root, vectors)

    if model_check is None:
        try:
            model_check = project_model_check()
        except (ImportError, AttributeError) as exc:
            model_check = _unavailable(f"project models unavailable: {type(exc).__name__}: {exc}")

    for vector in vectors:
        _evaluate(result, root, schemas, model_check, vector)
    return result


def _evaluate(
    result: BundleResult, root: Path, schemas: SchemaSet, check: ModelCheck, vector: Vector
) -> None:
    evaluation = f"{vector.name} ({vector.instance})"
    expected = "valid" if vector.valid else "invalid"
    try:
        data = read_bytes(root, vector.instance)
    except BundleError as exc:
        result.fail(evaluation, str(exc))
        return
    try:
        instance = parse_bytes(data)
    except JsonSyntaxError as exc:
        # Bytes that are not strict JSON are no document at all: invalid for both judges.
        rejected = Verdict(False, f"not strict JSON: {exc}")
        verdicts = {"schema": rejected, "model": rejected}
    else:
        verdicts = {
            "schema": schema_verdict(schemas, vector, instance),
            "model": model_verdict(check, vector, instance),
        }
    wrong = [
        f"{judge} verdict {verdict.describe()}"
        for judge, verdict in verdicts.items()
        if verdict.valid is not vector.valid
    ]
    result.record(evaluation, expected, "; ".join(wrong) if wrong else expected)


def _check_counts(result: BundleResult, vectors: list[Vector]) -> None:
    valid = sum(vector.valid for vector in vectors)
    counts = (valid, len(vectors) - valid)
    if counts != (EXPECTED_VALID, EXPECTED_INVALID):
        result.fail(
            f"{MANIFEST} vector counts",
            f"{counts[0]} valid and {counts[1]} invalid, "
            f"expected {EXPECTED_VALID} and {EXPECTED_INVALID}",
        )


def _check_pin(result: BundleResult, root: Path, vectors: list[Vector]) -> None:
    try:
        digest = content_digest(root, pinned_paths(root, vectors))
    except BundleError as exc:
        result.fail("structural content digest", str(exc))
        return
    if digest != PINNED_CONTENT_DIGEST:
        result.fail(
            "structural content digest",
            f"{digest} differs from the pinned {PINNED_CONTENT_DIGEST} ({PINNED_SOURCE})",
        )


def _unavailable(message: str) -> ModelCheck:
    def check(name: str, value: JsonValue) -> str | None:
        raise ModelsUnavailableError(message)

    return check


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."
