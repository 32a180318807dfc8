"""Content-addressed Artifacts with signed manifests and provenance, on any object store.

Layout (every object written once):

* ``artifacts/sha256/<hex>``: the content, named by its SHA-256;
* ``artifacts/manifests/<content hex>/<manifest signing-hash hex>.json``: each signed manifest
  of that content, as JCS bytes (one content may be published by several manifests);
* ``artifacts/derived/<source hex>/<derived hex>``: an empty marker per provenance edge,
  written for each source a verified manifest names, so "derived from" needs no scan.

The content hash is checked on every read: a tampered object raises
:class:`ArtifactIntegrityError` and its bytes are never handed out (large reads go to a
temporary file first and appear only once verified). A mutable URI is never the identity:
the manifest's ``uri`` says where to fetch, ``contentHash`` what must arrive.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mwp.core.errors import ErrorCode, MwpError
from mwp.core.trust.registry import RegistryEvidence
from mwp.core.trust.signed_document import VerifiedDocument, sign, signing_hash, verify
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize
from mwp.stores.objects import CHUNK_SIZE, DigestMismatch, ObjectConflict, ObjectStore, iter_keys

CLAUSES: tuple[str, ...] = ("MWP-WRK-024",)

CONTENT_PREFIX = "artifacts/sha256/"
MANIFEST_PREFIX = "artifacts/manifests/"
DERIVED_PREFIX = "artifacts/derived/"
# Bodies up to this size are spooled in memory while their hash is not yet known.
SPOOL_IN_MEMORY = 8 * 1024 * 1024
_HASH = re.compile(r"sha256:([0-9a-f]{64})")


class ArtifactIntegrityError(MwpError):
    """Stored or offered bytes do not match their content hash; nothing was returned."""

    def __init__(self, content_hash: str, reason: str) -> None:
        super().__init__(
            ErrorCode.PROTOCOL_VIOLATION,
            f"Artifact {content_hash} failed its integrity check: {reason}",
            retryable=False,
            details={"contentHash": content_hash, "reason": reason},
        )
        self.content_hash = content_hash
        self.reason = reason


class ArtifactNotFound(LookupError):  # noqa: N818 (reads like the condition it is)
    def __init__(self, content_hash: str) -> None:
        super().__init__(f"no Artifact content {content_hash}")
        self.content_hash = content_hash


class ManifestRefused(MwpError):  # noqa: N818
    """A manifest that cannot be published (it was verified, but does not fit the store)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(
            ErrorCode.INVALID_COMMAND,
            f"Artifact manifest refused: {detail}",
            retryable=False,
            details={"reason": reason},
        )
        self.reason = reason


def hex_of(content_hash: str) -> str:
    match = _HASH.fullmatch(content_hash)
    if match is None:
        raise ValueError(f"not a sha256: reference: {content_hash!r}")
    return match.group(1)


def content_key(content_hash: str) -> str:
    return CONTENT_PREFIX + hex_of(content_hash)


@dataclass(frozen=True)
class StoredContent:
    content_hash: str
    size_bytes: int
    uri: str
    created: bool  # False: the same content was already stored


@dataclass(frozen=True)
class PublishedManifest:
    manifest: dict[str, Any]
    signing_hash: str
    created: bool


# --- manifests (pure) -----------------------------------------------------------------------


def default_artifact_id(content_hash: str) -> str:
    """An Artifact ID named after its content, for producers that have no ID scheme."""
    return f"urn:mwp:artifact:{content_hash.removeprefix('sha256:')[:32]}"


def new_manifest(
    content: StoredContent,
    *,
    media_type: str,
    schema_uri: str,
    producer_agent_id: str,
    agent_card_version: int,
    capabilities: Sequence[Mapping[str, str]],
    mission_id: str,
    group_id: str,
    work_item_id: str,
    created_at: str,
    classification: str = "internal",
    source_hashes: Sequence[str] = (),
    tool_versions: Sequence[Mapping[str, str]] = (),
    model_versions: Sequence[Mapping[str, str]] = (),
    artifact_id: str | None = None,
) -> dict[str, Any]:
    """An unsigned manifest of stored content with every member the schema requires (the
    Artifact ID defaults to :func:`default_artifact_id`)."""
    return {
        "artifactId": artifact_id or default_artifact_id(content.content_hash),
        "contentHash": content.content_hash,
        "uri": content.uri,
        "sizeBytes": content.size_bytes,
        "mediaType": media_type,
        "schemaUri": schema_uri,
        "producer": {
            "agentId": producer_agent_id,
            "agentCardVersion": agent_card_version,
            "capabilities": [dict(c) for c in capabilities],
        },
        "missionId": mission_id,
        "groupId": group_id,
        "workItemId": work_item_id,
        "sourceArtifactHashes": list(dict.fromkeys(source_hashes)),
        "toolVersions": [dict(t) for t in tool_versions],
        "modelVersions": [dict(m) for m in model_versions],
        "classification": classification,
        "createdAt": created_at,
    }


def sign_manifest(manifest: Mapping[str, Any], key_id: str, key: SigningKey) -> dict[str, Any]:
    """Sign as the producing Agent (the Artifact profile's signer is ``producer.agentId``)."""
    from mwp.core.models import validate_document

    signed = sign(manifest, "artifact", key_id, key)
    validate_document("artifact.schema.json", signed)
    return signed


# --- the store ------------------------------------------------------------------------------


class ArtifactStore:
    """Artifacts in ``store`` (a folder or S3), verified on every read."""

    def __init__(self, store: ObjectStore, *, spool_dir: Path | None = None) -> None:
        self.store = store
        self._spool_dir = None if spool_dir is None else str(spool_dir)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.store!r})"

    def uri(self, content_hash: str) -> str:
        return self.store.uri(content_key(content_hash))

    def exists(self, content_hash: str) -> bool:
        return self.store.exists(content_key(content_hash))

    # --- content ---

    def put(self, data: bytes) -> StoredContent:
        content_hash = "sha256:" + hashlib.sha256(data).hexdigest()
        try:
            created = self.store.put_if_absent(content_key(content_hash), data)
        except ObjectConflict:
            raise ArtifactIntegrityError(content_hash, "stored-object-tampered") from None
        return StoredContent(content_hash, len(data), self.uri(content_hash), created)

    def put_stream(
        self, chunks: Iterable[bytes], *, content_hash: str | None = None
    ) -> StoredContent:
        """Store a body given as chunks, never holding it all in memory.

        With ``content_hash`` the body streams straight to its key and is committed only if
        it has that hash. Without, it is spooled (memory, then a temporary file) while hashed.
        """
        if content_hash is not None:
            size = 0

            def counted() -> Iterator[bytes]:
                nonlocal size
                for chunk in chunks:
                    size += len(chunk)
                    yield chunk

            created = self._put_known(content_hash, counted())
            if not created:  # nothing was read when the content was already there
                size = self._verified_size(content_hash)
            return StoredContent(content_hash, size, self.uri(content_hash), created)
        with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY, dir=self._spool_dir) as spool:
            digest = hashlib.sha256()
            size = 0
            for chunk in chunks:
                digest.update(chunk)
                spool.write(chunk)
                size += len(chunk)
            content_hash = "sha256:" + digest.hexdigest()
            spool.seek(0)
            created = self._put_known(content_hash, _chunks(spool))
        return StoredContent(content_hash, size, self.uri(content_hash), created)

    def _put_known(self, content_hash: str, chunks: Iterable[bytes]) -> bool:
        try:
            return self.store.put_stream_if_absent(
                content_key(content_hash), chunks, expect_sha256=hex_of(content_hash)
            )
        except DigestMismatch:
            raise ArtifactIntegrityError(content_hash, "declared-hash-mismatch") from None
        except ObjectConflict:
            raise ArtifactIntegrityError(content_hash, "stored-object-tampered") from None

    def get(self, content_hash: str) -> bytes:
        """The content, verified against its hash (ArtifactIntegrityError if it is not)."""
        data = self.store.get(content_key(content_hash))
        if data is None:
            raise ArtifactNotFound(content_hash)
        if "sha256:" + hashlib.sha256(data).hexdigest() != content_hash:
            raise ArtifactIntegrityError(content_hash, "content-hash-mismatch")
        return data

    def copy_to(self, content_hash: str, destination: Path) -> int:
        """Stream the content into ``destination``, which appears only once verified."""
        destination = Path(destination)
        fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=".artifact-")
        try:
            with os.fdopen(fd, "wb") as handle:
                size = self._stream_verified(content_hash, handle)
            os.replace(tmp_name, destination)
            return size
        finally:
            Path(tmp_name).unlink(missing_ok=True)

    def open(self, content_hash: str) -> IO[bytes]:
        """A verified copy of the content to read at leisure (memory or a temporary file)."""
        # Handed to the caller, who closes it: no context manager here.
        spool: IO[bytes] = tempfile.SpooledTemporaryFile(  # noqa: SIM115
            SPOOL_IN_MEMORY, dir=self._spool_dir
        )
        try:
            self._stream_verified(content_hash, spool)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    def _stream_verified(self, content_hash: str, sink: IO[bytes]) -> int:
        expected = hex_of(content_hash)
        chunks = self.store.open_stream(content_key(content_hash))
        if chunks is None:
            raise ArtifactNotFound(content_hash)
        digest = hashlib.sha256()
        size = 0
        for chunk in chunks:
            digest.update(chunk)
            sink.write(chunk)
            size += len(chunk)
        if digest.hexdigest() != expected:
            raise ArtifactIntegrityError(content_hash, "content-hash-mismatch")
        return size

    def _verified_size(self, content_hash: str) -> int:
        with open(os.devnull, "wb") as sink:
            return self._stream_verified(content_hash, sink)

    # --- manifests and provenance ---

    def publish(self, manifest: Mapping[str, Any], evidence: RegistryEvidence) -> PublishedManifest:
        """Verify a signed manifest (six stages, the producer's key) and record it.

        Its content must be stored, with the declared hash and size; every source must be
        stored, and none may derive from this content (provenance stays acyclic). Idempotent.
        """
        verified: VerifiedDocument = verify(canonicalize(manifest), "artifact", evidence)
        document = verified.document
        content_hash = document["contentHash"]
        if not self.exists(content_hash):
            raise ManifestRefused("content-missing", f"{content_hash} is not stored")
        size = self._verified_size(content_hash)
        if size != document["sizeBytes"]:
            raise ManifestRefused("size-mismatch", f"{content_hash} has {size} bytes")
        sources = document["sourceArtifactHashes"]
        for source in sources:
            if not self.exists(source):
                raise ManifestRefused("source-missing", f"source {source} is not stored")
        if content_hash in sources or set(sources) & self._descendants(content_hash):
            raise ManifestRefused("provenance-cycle", f"{content_hash} would derive from itself")
        content_hex = hex_of(content_hash)
        for source in sources:  # edges first: each stems from a manifest that verified
            self.store.put_if_absent(f"{DERIVED_PREFIX}{hex_of(source)}/{content_hex}", b"")
        key = f"{MANIFEST_PREFIX}{content_hex}/{hex_of(verified.signing_hash)}.json"
        created = self.store.put_if_absent(key, canonicalize(document))
        return PublishedManifest(document, verified.signing_hash, created)

    def manifests(
        self, content_hash: str, evidence: RegistryEvidence | None = None
    ) -> list[dict[str, Any]]:
        """Every manifest of the content; each checked against its key (and, with
        ``evidence``, verified in six stages)."""
        prefix = f"{MANIFEST_PREFIX}{hex_of(content_hash)}/"
        found = []
        for key in iter_keys(self.store, prefix):
            data = self.store.get(key)
            if data is None:
                continue
            if evidence is not None:
                document = verify(data, "artifact", evidence).document
            else:
                from mwp.core.wire.strict_json import JsonSyntaxError, parse_bytes

                try:
                    document = parse_bytes(data)
                except JsonSyntaxError:
                    raise ArtifactIntegrityError(content_hash, "manifest-unreadable") from None
            named = "sha256:" + key[len(prefix) : -len(".json")]
            if (
                not isinstance(document, dict)
                or document.get("contentHash") != content_hash
                or signing_hash(document) != named
            ):
                raise ArtifactIntegrityError(content_hash, "manifest-tampered")
            found.append(document)
        return found

    def sources(self, content_hash: str) -> list[str]:
        """The Artifacts this one was derived from (by any of its manifests)."""
        named = (s for m in self.manifests(content_hash) for s in m["sourceArtifactHashes"])
        return sorted(set(named))

    def derived(self, content_hash: str) -> list[str]:
        """The Artifacts whose manifests name this one as a source."""
        prefix = f"{DERIVED_PREFIX}{hex_of(content_hash)}/"
        return ["sha256:" + key[len(prefix) :] for key in iter_keys(self.store, prefix)]

    def _descendants(self, content_hash: str) -> set[str]:
        seen: set[str] = set()
        frontier = [content_hash]
        while frontier:
            for child in self.derived(frontier.pop()):
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
        return seen


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK_SIZE):
        yield chunk
