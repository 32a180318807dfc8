"""Builders for well-formed Mission content: Work Contracts, selection bases, Evidence.

Used by the demo, the benchmarks and the tests, so each builds complete, schema-valid protocol
objects the same way instead of repeating them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mwp.core.wire.jcs import sha256_ref

if TYPE_CHECKING:
    from mwp.client import Identity
    from mwp.stores.artifacts import ArtifactStore

CAPABILITY = {"id": "mwp.dev.general", "version": "1.0.0"}


def definition_of_done(*criteria: str) -> list[dict[str, Any]]:
    return [
        {
            "criterionId": f"done-{index}",
            "description": text,
            "evidenceRequired": ["deterministic_test"],
        }
        for index, text in enumerate(criteria or ("The requested work is delivered.",), 1)
    ]


def mission_budget() -> dict[str, Any]:
    return {"currency": "USD", "financialLimit": 1000, "toolCallLimit": 100_000}


def work_contract(
    goal: str,
    *,
    deadline: str,
    dependencies: Sequence[str] = (),
    capability: dict[str, str] = CAPABILITY,
    criteria: Sequence[str] = ("The deliverable passes its checks.",),
    version: int = 1,
) -> dict[str, Any]:
    """A complete Work Contract (spec 10.1) for ``goal``."""
    return {
        "contractVersion": version,
        "goal": goal,
        "requiredDeliverables": [
            {
                "deliverableId": "result",
                "description": f"The result of: {goal}",
                "mediaType": "text/plain",
                "schema": "urn:mwp:schema:text",
            }
        ],
        "acceptanceCriteria": [
            {
                "criterionId": f"criterion-{index}",
                "description": text,
                "evidenceRequired": ["deterministic_test"],
            }
            for index, text in enumerate(criteria, 1)
        ],
        "inputArtifacts": [],
        "dependencyWorkItemIds": list(dependencies),
        "allowedResources": [{"resource": "urn:mwp:resource:workspace", "operations": ["read"]}],
        "requiredCapabilities": [dict(capability)],
        "deadline": deadline,
        "requestedUrgency": "normal",
        "businessImpact": "Part of the Mission's definition of done.",
        "retryPolicy": {
            "maxAttempts": 3,
            "backoff": "exponential",
            "maxDelay": "PT5M",
            "retryableFailures": ["TRANSIENT_TOOL_FAILURE"],
        },
        "budget": {"currency": "USD", "financialLimit": 10, "toolCallLimit": 100},
        "sideEffectRisk": "none",
        "executionApproval": "not_required",
    }


def selection_basis(available_at: str, capability: dict[str, str] = CAPABILITY) -> dict[str, Any]:
    """Why a candidate was chosen: structured facts only (MWP-WRK-006)."""
    return {
        "requiredCapabilities": [dict(capability)],
        "verifiedMatches": [dict(capability)],
        "authorizationEligible": True,
        "availabilityEstimate": available_at,
        "expectedCost": 1,
        "reliabilityEvidence": [],
        "policyRulesApplied": ["org.default.assignment"],
    }


def result_content(work_item_id: str, text: str) -> bytes:
    """The bytes of a WorkItem's result in these scenarios."""
    return f"{work_item_id}\n{text}".encode()


def result_artifact_hash(work_item_id: str, text: str) -> str:
    """The content hash of :func:`result_content`."""
    return sha256_ref(result_content(work_item_id, text))


def result_manifest(
    producer: Identity,
    *,
    mission_id: str,
    group_id: str,
    work_item_id: str,
    text: str,
    created_at: str,
    store: ArtifactStore | None = None,
    capability: dict[str, str] = CAPABILITY,
) -> dict[str, Any]:
    """The producer-signed manifest of the result Artifact of ``work_item_id``. With a
    ``store`` the content is stored there first (its URI is the store's); without, the URI
    names the content hash only."""
    from mwp.stores.artifacts import StoredContent, new_manifest, sign_manifest

    data = result_content(work_item_id, text)
    if store is not None:
        content = store.put(data)
    else:
        digest = sha256_ref(data)
        content = StoredContent(digest, len(data), f"urn:mwp:artifact:{digest[7:]}", False)
    manifest = new_manifest(
        content,
        media_type="text/plain",
        schema_uri="urn:mwp:schema:text",
        producer_agent_id=producer.principal.id,
        agent_card_version=1,
        capabilities=[capability],
        mission_id=mission_id,
        group_id=group_id,
        work_item_id=work_item_id,
        created_at=created_at,
    )
    return sign_manifest(manifest, producer.key_id, producer.key)


def evidence_for(contract: dict[str, Any], work_item_id: str) -> list[dict[str, Any]]:
    """Evidence covering every acceptance criterion of ``contract``."""
    return [
        {
            "evidenceId": f"{work_item_id}:evidence:{criterion['criterionId']}",
            "criterionIds": [criterion["criterionId"]],
            "result": "passed",
        }
        for criterion in contract["acceptanceCriteria"]
    ]
