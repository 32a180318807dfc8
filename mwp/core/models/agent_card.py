"""The signed Agent Card: who an Agent is, how to reach it, its keys and capabilities."""

from __future__ import annotations

from typing import Annotated, Literal

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    CapabilityId,
    Extensions,
    Identifier,
    JsonObject,
    NonEmptyList,
    NonEmptyUniqueList,
    PositiveInteger,
    ProtocolVersion,
    PublicKey,
    SemVer,
    Sha256,
    Signature,
    Timestamp,
    Uri,
    predicate,
    text,
)
from mwp.core.wire.values import is_absolute_uri


def _is_wss_uri(value: str) -> bool:
    return value.startswith("wss://") and is_absolute_uri(value)


class Endpoint(WireModel):
    transport: Literal["wss"]
    uri: Annotated[str, predicate(_is_wss_uri, "wss URI")]


class Capability(WireModel):
    """A capability with the hashes of its input and output schemas pinned."""

    id: CapabilityId
    version: SemVer
    input_schema: Uri
    input_schema_hash: Sha256
    output_schema: Uri
    output_schema_hash: Sha256
    constraints: JsonObject
    verified_evidence: NonEmptyUniqueList[Identifier]


class AgentCard(WireModel):
    agent_id: Identifier
    organization_id: Identifier
    card_version: PositiveInteger
    display_name: Annotated[str, text(1, 200)]
    description: Annotated[str, text(0, 4000)] | None = None
    owner: Actor
    status: Literal["active", "deprecated", "revoked"]
    protocol_versions: NonEmptyUniqueList[ProtocolVersion]
    endpoints: NonEmptyList[Endpoint]
    public_keys: NonEmptyList[PublicKey]
    capabilities: NonEmptyList[Capability]
    max_concurrency: PositiveInteger
    issued_at: Timestamp
    valid_until: Timestamp | None = None
    extensions: Extensions | None = None
    signature: Signature
