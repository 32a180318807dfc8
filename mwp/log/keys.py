"""The Group Authorities' signing keys, held by the authority worker (never by a workflow).

Every accepted Event is signed by its Group Authority (``acceptedBy``) when it is mirrored into
the Group Event log. One key per Organization's Group Authority Principal lives in a keyring
folder the authority worker reads (``.mwp/authority-keys`` in the embedded stack). An
Organization is provisioned once: the key is created there and its binding registered with
the Organization's registry, so every verifier finds it in the Registry evidence.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mwp.client import ClientError, Identity, KeyStore, OrganizationRegistryClient
from mwp.core.trust.registry import Principal

AUTHORITY_KEYS_DIR = "authority-keys"


class AuthorityKeyring:
    """Group Authority identities by Principal ID, one 0600 key file each."""

    def __init__(self, directory: Path) -> None:
        self.keys = KeyStore(directory)

    @classmethod
    def in_state_dir(cls, state_dir: Path) -> AuthorityKeyring:
        return cls(state_dir / AUTHORITY_KEYS_DIR)

    @property
    def directory(self) -> Path:
        return self.keys.directory

    @staticmethod
    def name(principal_id: str) -> str:
        # Principal IDs are URIs; key file names are plain, so name them by hash.
        return "authority-" + hashlib.sha256(principal_id.encode()).hexdigest()[:32]

    def get(self, principal_id: str) -> Identity | None:
        name = self.name(principal_id)
        if not self.keys.exists(name):
            return None
        identity = self.keys.load(name)
        if identity.principal.id != principal_id:
            raise ClientError(f"key file {name} holds {identity.principal.id}, not {principal_id}")
        return identity

    def ensure(self, principal: Principal) -> Identity:
        """The Principal's identity, created (and saved) on first use."""
        found = self.get(principal.id)
        if found is not None:
            return found
        identity = Identity.generate(principal)
        try:
            self.keys.save(self.name(principal.id), identity)
        except ClientError:  # created concurrently: use that one
            loaded = self.get(principal.id)
            assert loaded is not None
            return loaded
        return identity


async def provision_group_authority(
    registry: OrganizationRegistryClient, keyring: AuthorityKeyring, principal: Principal
) -> Identity:
    """Make sure the Organization's Group Authority can sign its Events: a key in the
    worker's keyring whose binding the registry holds. Idempotent."""
    identity = keyring.ensure(principal)
    evidence = await registry.evidence_json()
    known = {binding["keyId"] for binding in evidence.get("bindings", [])}
    if identity.key_id not in known:
        await registry.register_binding(identity)
    return identity
