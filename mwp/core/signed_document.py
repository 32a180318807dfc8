"""Signed Document codec (spec 6.4): sign, and verify in the six normative stages.

INTERFACE DRAFT: being implemented now; the public names below are stable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mwp.core.errors import Diagnostic, ErrorCode, MwpError
from mwp.core.registry import KeyValidity, Principal, RegistryEvidence

# Normative semantic stages, in order (spec 6.4; the cryptography bundle's names).
STAGES = ("parse", "schema", "signature-envelope", "key-resolution", "canonicalization",
          "signature")


class VerificationError(MwpError):
    """Verification stopped at ``diagnostic.stage``; the wire code never says why."""

    def __init__(self, code: ErrorCode, stage: str, reason: str) -> None:
        super().__init__(code, diagnostic=Diagnostic(stage, reason))

    @property
    def stage(self) -> str:
        assert self.diagnostic is not None
        return self.diagnostic.stage


@dataclass(frozen=True)
class VerifiedDocument:
    """What six-stage verification established about one Signed Document."""

    profile_id: str  # "command", "event", ... (the document kind of a First-Admission Record)
    document: dict[str, Any]
    organization_id: str
    signing_bytes: bytes
    signing_hash: str
    key_id: str
    principal: Principal
    protected_time: str
    key_validity: KeyValidity


def verify(data: bytes, profile_id: str, registry: RegistryEvidence) -> VerifiedDocument:
    raise NotImplementedError
