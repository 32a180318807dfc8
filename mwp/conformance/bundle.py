"""Shared access to the protocol bundle: files, integrity data and the normative JSON Schemas.

Every runner reads the bundle through these helpers so that path handling, strict parsing,
digest rules and schema resolution are decided once (spec sections 2, 21 and 22).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from mwp.conformance.result import BundleResult
from mwp.core.wire.jcs import JcsDataModelError, canonicalize, sha256_ref
from mwp.core.wire.strict_json import JsonSyntaxError, JsonValue, parse_bytes

# Where each bundle's schemas live; every file matching these globs is registered by its $id.
SCHEMA_GLOBS: tuple[str, ...] = (
    "schemas/*.schema.json",
    "cryptography/*.schema.json",
    "admission/*.schema.json",
)


class BundleError(ValueError):
    """The bundle itself is unusable: a file is missing, unreadable, malformed or misplaced."""


class FixtureError(BundleError):
    """A bundle fixture does not conform to the Schema its manifest names for it."""


class FormatAssertionError(RuntimeError):
    """jsonschema would silently skip a `format` the protocol requires to be asserted."""


# --------------------------------------------------------------------------- files


def locate(root: Path, relative: str) -> Path:
    """The file named by a bundle-relative POSIX path, refusing anything that leaves the root."""
    posix = PurePosixPath(relative)
    if (
        not relative
        or "\\" in relative
        or posix.is_absolute()
        or any(part in ("", ".", "..") for part in relative.split("/"))
    ):
        raise BundleError(f"{relative!r} is not a plain bundle-relative path")
    path = root.joinpath(*posix.parts)
    # A symlink could still point outside the bundle; compare the resolved locations.
    if not path.resolve().is_relative_to(root.resolve()):
        raise BundleError(f"{relative!r} resolves outside the bundle root")
    if not path.is_file():
        raise BundleError(f"{relative} is missing")
    return path


def read_bytes(root: Path, relative: str) -> bytes:
    path = locate(root, relative)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(f"{relative} cannot be read: {exc.strerror}") from exc


read = read_bytes


def read_json(root: Path, relative: str) -> JsonValue:
    """Strictly parse a bundle file (duplicate members, BOM and trailing data are errors)."""
    try:
        return parse_bytes(read_bytes(root, relative))
    except JsonSyntaxError as exc:
        raise BundleError(f"{relative} is not strict JSON: {exc}") from exc


def read_manifest(root: Path, relative: str) -> dict[str, JsonValue]:
    value = read_json(root, relative)
    if not isinstance(value, dict):
        raise BundleError(f"{relative} is not a JSON object")
    return value


# --------------------------------------------------------------------------- integrity


def artifact_digest(manifest: Mapping[str, JsonValue]) -> str:
    """`sha256:` of the RFC 8785 form of the manifest without its top-level artifactDigest."""
    body = {key: value for key, value in manifest.items() if key != "artifactDigest"}
    try:
        return sha256_ref(canonicalize(body))
    except JcsDataModelError as exc:
        raise BundleError(f"manifest is outside the JCS data model: {exc}") from exc


def check_artifact_digest(manifest: Mapping[str, JsonValue]) -> str | None:
    """None when the declared artifactDigest matches, else what is wrong."""
    declared = manifest.get("artifactDigest")
    if not isinstance(declared, str):
        return "manifest declares no artifactDigest"
    actual = artifact_digest(manifest)
    if declared != actual:
        return f"artifactDigest is {declared}, content hashes to {actual}"
    return None


def file_entry(root: Path, relative: str) -> dict[str, JsonValue]:
    """The `{path, byteLength, sha256}` record of a file's exact bytes."""
    data = read_bytes(root, relative)
    return {"path": relative, "byteLength": len(data), "sha256": sha256_ref(data)}


def check_artifact(root: Path, entry: JsonValue) -> str | None:
    """None when a declared artifact's exact bytes have the declared length and sha256."""
    if not isinstance(entry, dict):
        return "artifact entry is not an object"
    path, length, digest = entry.get("path"), entry.get("byteLength"), entry.get("sha256")
    if not isinstance(path, str) or not isinstance(digest, str):
        return "artifact entry lacks a path or sha256"
    if not isinstance(length, int) or isinstance(length, bool):
        return "byteLength is not an integer"
    try:
        actual = file_entry(root, path)
    except BundleError as exc:
        return str(exc)
    problems = []
    if actual["byteLength"] != length:
        problems.append(f"byteLength is {actual['byteLength']}, declared {length}")
    if actual["sha256"] != digest:
        problems.append(f"sha256 is {actual['sha256']}, declared {digest}")
    return "; ".join(problems) if problems else None


def check_artifacts(root: Path, manifest: Mapping[str, JsonValue]) -> list[tuple[str, str]]:
    """`(path, problem)` for every declared artifact that does not match its bytes."""
    entries = manifest.get("artifacts")
    if not isinstance(entries, list):
        return [("artifacts", "manifest declares no artifacts list")]
    problems: list[tuple[str, str]] = []
    for index, entry in enumerate(entries):
        problem = check_artifact(root, entry)
        if problem is not None:
            where = entry.get("path") if isinstance(entry, dict) else None
            problems.append((where if isinstance(where, str) else f"artifacts[{index}]", problem))
    return problems


def load_manifest(root: Path, relative: str, result: BundleResult) -> dict[str, JsonValue] | None:
    """Load a digest-protected manifest and record every integrity problem in `result`.

    Checks, in order: strict JSON, its own `$schema`, `artifactDigest`, then each declared
    artifact's exact bytes (spec 22). Returns None only when the manifest cannot be used at
    all; after a recorded integrity failure the caller may still run its evaluations, since
    the bundle already counts as failed and the extra detail helps.
    """
    try:
        manifest = read_manifest(root, relative)
    except BundleError as exc:
        result.fail(relative, str(exc))
        return None
    schema_id = manifest.get("$schema")
    if not isinstance(schema_id, str):
        result.fail(f"{relative} schema", "declares no $schema")
    else:
        try:
            errors = load_schemas(root).errors(schema_id, manifest)
        except BundleError as exc:
            errors = [str(exc)]
        for error in errors:
            result.fail(f"{relative} schema", error)
    try:
        digest_problem = check_artifact_digest(manifest)
    except BundleError as exc:
        digest_problem = str(exc)
    if digest_problem is not None:
        result.fail(f"{relative} artifactDigest", digest_problem)
    for path, problem in check_artifacts(root, manifest):
        result.fail(f"artifact {path}", problem)
    return manifest


def content_digest(root: Path, paths: Iterable[str]) -> str:
    """A single digest over the exact bytes of several files, for bundles without their own.

    It hashes the JCS form of the sorted `{path, byteLength, sha256}` records, the same record
    shape the digest-protected manifests use, so one value pins every listed file.
    """
    entries = [file_entry(root, path) for path in sorted(set(paths))]
    return sha256_ref(canonicalize(entries))


# --------------------------------------------------------------------------- schemas


def _require_format_assertion(checker: FormatChecker) -> None:
    # jsonschema registers `uri` and `date-time` only when their optional validator packages
    # import; without them the keyword silently becomes an annotation, which the protocol forbids.
    samples = {
        "uri": ("urn:example:ok", "relative/reference"),
        "date-time": ("2026-07-15T00:00:00Z", "2026-02-30T00:00:00Z"),
    }
    for name, (good, bad) in samples.items():
        if name not in checker.checkers or checker.conforms(bad, name):
            raise FormatAssertionError(
                f"format {name!r} is not asserted; install rfc3986-validator and "
                "rfc3339-validator (jsonschema[format-nongpl])"
            )
        if not checker.conforms(good, name):
            raise FormatAssertionError(f"format {name!r} rejects a valid value {good!r}")


def format_checker() -> FormatChecker:
    """The Draft 2020-12 format checker, after proving `uri` and `date-time` are asserted."""
    checker: FormatChecker = Draft202012Validator.FORMAT_CHECKER
    _require_format_assertion(checker)
    return checker


@dataclass(frozen=True)
class SchemaSet:
    """Every schema of one bundle root, registered by $id, and validators built from them."""

    registry: Registry[Any]
    ids_by_path: Mapping[str, str]
    checker: FormatChecker
    _validators: dict[str, Validator] = field(default_factory=dict, compare=False, repr=False)

    def schema_id(self, schema: str) -> str:
        """The $id for a bundle-relative schema path or an $id."""
        if schema in self.ids_by_path:
            return self.ids_by_path[schema]
        if schema in self.ids_by_path.values():
            return schema
        raise BundleError(f"no registered schema {schema!r}")

    def validator(self, schema: str) -> Validator:
        """A Draft 2020-12 validator, with format assertion, for a schema path or $id."""
        schema_id = self.schema_id(schema)
        cached = self._validators.get(schema_id)
        if cached is None:
            cached = self.validator_for(self.registry.contents(schema_id))
            self._validators[schema_id] = cached
        return cached

    def validator_for(self, contents: Mapping[str, JsonValue]) -> Validator:
        """A validator for an ad-hoc schema (e.g. a `$ref` into a bundle schema's `$defs`)."""
        return Draft202012Validator(contents, registry=self.registry, format_checker=self.checker)

    def errors(self, schema: str, instance: JsonValue) -> list[str]:
        """Readable schema violations of `instance`; empty when it is valid."""
        try:
            found = sorted(
                self.validator(schema).iter_errors(instance), key=lambda error: error.json_path
            )
        except Unresolvable as exc:
            raise BundleError(f"{schema}: unresolvable reference {exc}") from exc
        return [f"{error.json_path}: {error.message}" for error in found]


def validate_fixture(root: Path, schema: str, value: JsonValue) -> None:
    """Raise FixtureError unless `value` conforms to the named bundle Schema (path or $id)."""
    errors = load_schemas(root).errors(schema, value)
    if errors:
        raise FixtureError(f"fixture does not conform to {schema}: {'; '.join(errors[:3])}")


def load_schemas(root: Path) -> SchemaSet:
    """The bundle's schemas, built once per root (the bundle is read-only while we run)."""
    return _load_schemas(root.resolve())


@functools.lru_cache(maxsize=16)
def _load_schemas(root: Path) -> SchemaSet:
    checker = format_checker()
    resources: list[tuple[str, Resource[Any]]] = []
    ids_by_path: dict[str, str] = {}
    paths = sorted(
        path.relative_to(root).as_posix() for pattern in SCHEMA_GLOBS for path in root.glob(pattern)
    )
    for relative in paths:
        contents = read_json(root, relative)
        if not isinstance(contents, dict) or not isinstance(contents.get("$id"), str):
            raise BundleError(f"{relative} has no $id")
        schema_id = contents["$id"]
        if schema_id in ids_by_path.values():
            raise BundleError(f"{relative} repeats the $id {schema_id}")
        try:
            Draft202012Validator.check_schema(contents)
        except SchemaError as exc:
            raise BundleError(
                f"{relative} is not a valid Draft 2020-12 schema: {exc.message}"
            ) from exc
        # Force Draft 2020-12 semantics rather than trusting each file's own $schema.
        resources.append((schema_id, DRAFT202012.create_resource(contents)))
        ids_by_path[relative] = schema_id
    registry: Registry[Any] = Registry().with_resources(resources).crawl()
    return SchemaSet(registry=registry, ids_by_path=ids_by_path, checker=checker)
