"""The signed Artifact manifest: content by hash and reference, never inline."""

from __future__ import annotations

from typing import Annotated

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    CapabilityRef,
    Classification,
    Extensions,
    Identifier,
    MediaType,
    NonEmptyList,
    PositiveInteger,
    SafeInteger,
    Sha256,
    Signature,
    Timestamp,
    UniqueList,
    Uri,
    text,
)

Name = Annotated[str, text(1, 200)]


class Producer(WireModel):
    agent_id: Identifier
    agent_card_version: PositiveInteger
    capabilities: NonEmptyList[CapabilityRef]


class ToolVersion(WireModel):
    name: Name
    version: Name


class ModelVersion(WireModel):
    provider: Name
    model: Name
    version: Name


class Artifact(WireModel):
    artifact_id: Identifier
    content_hash: Sha256
    uri: Uri
    size_bytes: SafeInteger
    media_type: MediaType
    schema_uri: Uri
    producer: Producer
    mission_id: Identifier
    group_id: Identifier
    work_item_id: Identifier
    source_artifact_hashes: UniqueList[Sha256]
    tool_versions: list[ToolVersion]
    model_versions: list[ModelVersion]
    classification: Classification
    created_at: Timestamp
    extensions: Extensions | None = None
    signature: Signature
