"""The authority worker's sealing activities (local activities of the authority workflows).

A workflow holds no private key and learns nothing it could trust from its own input or
signals, so the worker that runs it answers two questions: which key binding seals this
Organization's messages (``service_key``), and the sealed form of a message it sends
(``seal_message``); it also signs the Evidence the Group Authority writes (``sign_evidence``).
All read the worker's authority keyring, where the Group Authority keys
live (:mod:`mwp.log.keys`); a missing key is created there, as provisioning would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from mwp.activities.evidence import SIGN_EVIDENCE, EvidenceSigningRequest, sign_records
from mwp.contracts.messages import SEAL_MESSAGE, SERVICE_KEY, SealRequest
from mwp.core.trust.registry import Principal
from mwp.core.trust.service_message import seal
from mwp.log.keys import AuthorityKeyring


class ServiceSealer:
    """The two activities, bound to the worker's authority keyring."""

    def __init__(self, keyring: AuthorityKeyring) -> None:
        self.keyring = keyring

    @activity.defn(name=SERVICE_KEY)
    async def service_key(self, principal_id: str) -> dict[str, Any]:
        """The binding (``keyId``, ``publicKey``, ...) the worker seals ``principal_id``'s
        messages with."""
        identity = await asyncio.to_thread(self.keyring.ensure, Principal("service", principal_id))
        return identity.binding()

    @activity.defn(name=SEAL_MESSAGE)
    async def seal_message(self, request: SealRequest) -> dict[str, Any]:
        # The key file is read off the event loop; signing itself takes microseconds.
        identity = await asyncio.to_thread(
            self.keyring.ensure, Principal("service", request.signer_id)
        )
        return seal(
            request.message_type,
            sender=request.sender,
            recipient=request.recipient,
            sent_at=request.sent_at,
            body=request.body,
            key_id=identity.key_id,
            key=identity.key,
        )

    @activity.defn(name=SIGN_EVIDENCE)
    async def sign_evidence(self, request: EvidenceSigningRequest) -> dict[str, dict[str, Any]]:
        """The records signed with the Group Authority's key (mwp.activities.evidence)."""
        identity = await asyncio.to_thread(
            self.keyring.ensure, Principal("service", request.signer_id)
        )
        return sign_records(request.records, identity.key_id, identity.key)

    @property
    def activities(self) -> list[Any]:
        return [self.service_key, self.seal_message, self.sign_evidence]
