"""Signing the Evidence the Group Authority writes (a local activity of MissionWorkflow).

The pure core builds a ``mission.terminate``'s failure Evidence but holds no key; the
workflow has the records signed here, on the authority worker (:mod:`mwp.activities.seal`
registers the activity, with the keyring the mirror signs Events with), then hands them back
to the decision. Ed25519 is deterministic and the records carry the decision's time, so a
retry signs them to the same bytes. This module is import-light: the workflow reads its
request type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mwp.core.trust.signed_document import sign
from mwp.core.wire.ed25519 import SigningKey

CLAUSES: tuple[str, ...] = ("MWP-WRK-003",)  # the failure Evidence, signed

SIGN_EVIDENCE = "sign_evidence"


@dataclass
class EvidenceSigningRequest:
    signer_id: str  # the Group Authority service Principal (each record's generatedBy)
    records: dict[str, dict[str, Any]]  # WorkItem ID -> unsigned Evidence


def sign_records(
    records: Mapping[str, Mapping[str, Any]], key_id: str, key: SigningKey
) -> dict[str, dict[str, Any]]:
    """Each record with its signature envelope (evidence profile: ``createdAt`` is signed)."""
    return {item: sign(record, "evidence", key_id, key) for item, record in records.items()}
