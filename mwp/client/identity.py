"""Signing identities (a Principal, a key ID, its private key), the key store of a state
folder, and Agent Cards."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mwp import PROTOCOL_VERSION
from mwp.core.trust.registry import Principal
from mwp.core.trust.signed_document import sign
from mwp.core.wire.ed25519 import SigningKey
from mwp.core.wire.jcs import canonicalize, sha256_ref
from mwp.core.wire.values import b64url_decode, b64url_encode, format_utc

KEY_FILE_FORMAT = "mwp-signing-identity/1"
_KEY_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")


class ClientError(RuntimeError):
    """The client could not do what was asked (no server, no such workflow, bad key file)."""


def utc_now() -> str:
    """The current time as a protocol timestamp (whole seconds, ``Z``)."""
    return format_utc(datetime.now(UTC).replace(microsecond=0))


def new_id() -> str:
    return f"urn:uuid:{uuid.uuid4()}"


def wire_text(document: Mapping[str, Any]) -> str:
    """The exact JSON text sent for a Signed Document (its JCS form, which is strict JSON)."""
    return canonicalize(document).decode("utf-8")


# --- signing identities ---------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Identity:
    """Who signs: a Principal, one of its key IDs and the private key. Never printed."""

    principal: Principal
    key_id: str
    key: SigningKey
    valid_from: str

    @classmethod
    def generate(
        cls, principal: Principal, *, key_id: str | None = None, valid_from: str | None = None
    ) -> Identity:
        """A fresh key; its key ID is new (key IDs are never reused)."""
        name = re.sub(r"[^a-z0-9-]", "-", principal.id.rsplit(":", 1)[-1].lower())
        key_id = key_id or f"urn:mwp:key:{principal.type}:{name}:{uuid.uuid4().hex[:12]}"
        return cls(principal, key_id, SigningKey.generate(), valid_from or utc_now())

    def __repr__(self) -> str:
        return f"Identity({self.principal.type} {self.principal.id}, key {self.key_id})"

    @property
    def public_key(self) -> str:
        return b64url_encode(self.key.public_key)

    def binding(self) -> dict[str, Any]:
        """The signing-key binding to register: ``{keyId, principal, algorithm, ...}``."""
        return {
            "keyId": self.key_id,
            "principal": self.principal.to_json(),
            "algorithm": "Ed25519",
            "publicKey": self.public_key,
            "validFrom": self.valid_from,
        }

    def public_key_entry(self) -> dict[str, Any]:
        """This key as an Agent Card ``publicKeys`` entry."""
        return {k: v for k, v in self.binding().items() if k != "principal"}

    def sign(self, document: Mapping[str, Any], profile_id: str) -> dict[str, Any]:
        return sign(document, profile_id, self.key_id, self.key)

    def command(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        group_id: str | None = None,
        session_epoch: int | None = None,
        membership_epoch: int | None = None,
        coordinator_epoch: int | None = None,
        conversation_id: str | None = None,
        work_item_id: str | None = None,
        expected_revision: int | None = None,
        correlation_id: str | None = None,
        caused_by_event_id: str | None = None,
        action_id: str | None = None,
        issued_at: str | None = None,
        extensions: Mapping[str, Any] | None = None,
        cooperation_override_grant_id: str | None = None,
    ) -> dict[str, Any]:
        """A signed Command by this identity (absent options are omitted, never invented)."""
        optional = {
            "sessionEpoch": session_epoch,
            "membershipEpoch": membership_epoch,
            "coordinatorEpoch": coordinator_epoch,
            "groupId": group_id,
            "conversationId": conversation_id,
            "workItemId": work_item_id,
            "expectedRevision": expected_revision,
            "causedByEventId": caused_by_event_id,
            "cooperationOverrideGrantId": cooperation_override_grant_id,
            "extensions": dict(extensions) if extensions is not None else None,
        }
        command: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "actionId": action_id or new_id(),
            "actor": self.principal.to_json(),
            "kind": kind,
            "correlationId": correlation_id or new_id(),
            "issuedAt": issued_at or utc_now(),
            "payload": dict(payload),
            **{k: v for k, v in optional.items() if v is not None},
        }
        return self.sign(command, "command")

    # --- key files --------------------------------------------------------------------------

    def to_key_file(self) -> dict[str, Any]:
        return {
            "format": KEY_FILE_FORMAT,
            **self.binding(),
            "seed": b64url_encode(self.key.seed()),
        }

    @classmethod
    def from_key_file(cls, value: Mapping[str, Any]) -> Identity:
        if value.get("format") != KEY_FILE_FORMAT:
            raise ClientError("not an MWP signing identity file")
        key = SigningKey(b64url_decode(value["seed"]))
        if b64url_encode(key.public_key) != value["publicKey"]:
            raise ClientError("the key file's seed does not match its public key")
        return cls(Principal.from_json(value["principal"]), value["keyId"], key, value["validFrom"])

    def save(self, path: Path, *, overwrite: bool = False) -> None:
        """Write a 0600 key file (created exclusively unless ``overwrite``).

        The file appears whole or not at all: another process (``mwp dev`` and ``mwp
        registry init`` both make sure the Group Authority key exists) never reads a
        half-written key. It is written aside, then linked into place, which fails if the
        name exists, or renamed over it when ``overwrite``."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, aside = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                os.fchmod(handle.fileno(), 0o600)
                json.dump(self.to_key_file(), handle, indent=2)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            if overwrite:
                os.replace(aside, path)
            else:
                os.link(aside, path)  # FileExistsError if the name is taken
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(aside)

    @classmethod
    def load(cls, path: Path) -> Identity:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise ClientError(f"no key file {path}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ClientError(f"{path} is readable by others; run: chmod 600 {path}")
        return cls.from_key_file(json.loads(path.read_text()))


class KeyStore:
    """Named key files in one folder (``.mwp/keys/<name>.json``, mode 0600)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> KeyStore:
        return cls(state_dir / "keys")

    def path(self, name: str) -> Path:
        if not _KEY_NAME.fullmatch(name):
            raise ClientError(f"invalid key name {name!r} (use a-z, 0-9, '.', '_' and '-')")
        return self.directory / f"{name}.json"

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def save(self, name: str, identity: Identity, *, overwrite: bool = False) -> Path:
        path = self.path(name)
        try:
            identity.save(path, overwrite=overwrite)
        except FileExistsError:
            raise ClientError(f"key file {path} already exists") from None
        return path

    def load(self, name: str) -> Identity:
        return Identity.load(self.path(name))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.json"))


# --- Agent Cards ----------------------------------------------------------------------------

_ANY_OBJECT_SCHEMA = {"type": "object"}


def dev_capability(capability_id: str, version: str = "1.0.0") -> dict[str, Any]:
    """A capability declaration accepting and returning any JSON object (development only)."""
    schema_hash = sha256_ref(canonicalize(_ANY_OBJECT_SCHEMA))
    return {
        "id": capability_id,
        "version": version,
        "inputSchema": "urn:mwp:schema:any-object",
        "inputSchemaHash": schema_hash,
        "outputSchema": "urn:mwp:schema:any-object",
        "outputSchemaHash": schema_hash,
        "constraints": {},
        "verifiedEvidence": ["urn:mwp:evidence:development-registration"],
    }


def agent_card(
    agent: Identity,
    *,
    organization_id: str,
    owner: Principal,
    display_name: str,
    capabilities: Sequence[Mapping[str, Any]],
    card_version: int = 1,
    max_concurrency: int = 1,
    endpoint: str | None = None,
    issued_at: str | None = None,
) -> dict[str, Any]:
    """An unsigned Agent Card for ``agent`` (the Organization's registry service signs it)."""
    name = agent.principal.id.rsplit(":", 1)[-1]
    return {
        "agentId": agent.principal.id,
        "organizationId": organization_id,
        "cardVersion": card_version,
        "displayName": display_name,
        "owner": owner.to_json(),
        "status": "active",
        "protocolVersions": [PROTOCOL_VERSION],
        "endpoints": [{"transport": "wss", "uri": endpoint or f"wss://{name}.agents.invalid/mwp"}],
        "publicKeys": [agent.public_key_entry()],
        "capabilities": [dict(c) for c in capabilities],
        "maxConcurrency": max_concurrency,
        "issuedAt": issued_at or utc_now(),
    }
