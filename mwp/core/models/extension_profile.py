"""Signed Extension Profiles: governed additions that never override core invariants."""

from __future__ import annotations

from typing import Annotated

from mwp.core.models._base import WireModel
from mwp.core.models.common import (
    Actor,
    CapabilityRef,
    ExtensionKind,
    FalseConst,
    Identifier,
    SemVer,
    Sha256,
    Signature,
    Timestamp,
    UniqueList,
    Uri,
    text,
)


class ExtensionProfile(WireModel):
    profile_uri: Identifier
    name: Annotated[str, text(1, 200)]
    version: SemVer
    schema_uri: Uri
    schema_hash: Sha256
    required_capabilities: list[CapabilityRef]
    critical: bool
    command_kinds: UniqueList[ExtensionKind]
    event_kinds: UniqueList[ExtensionKind]
    overrides_core_invariants: FalseConst
    approved_by: Actor
    approved_at: Timestamp
    signature: Signature
