"""Small workflows that stand in for future Group Authorities in integration tests.

Kept apart from the test modules so the workflow sandbox imports nothing but this file.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mwp.contracts.organization import (
        SIGNAL_REGISTRY_CHANGED,
        SIGNAL_SUBSCRIBE,
        SIGNAL_UNSUBSCRIBE,
        organization_workflow_id,
    )
    from mwp.core.organization.service import RegistrySubscription


@workflow.defn
class RegistrySubscriberProbe:
    """Subscribes to an Organization's registry and keeps the newest notice, as a
    MissionWorkflow will."""

    @workflow.init
    def __init__(self, organization_id: str) -> None:
        self._subscription = RegistrySubscription(organization_id)
        self._received = 0
        self._done = False

    @workflow.run
    async def run(self, organization_id: str) -> int:
        registry = workflow.get_external_workflow_handle(organization_workflow_id(organization_id))
        await registry.signal(SIGNAL_SUBSCRIBE, workflow.info().workflow_id)
        await workflow.wait_condition(lambda: self._done)
        await registry.signal(SIGNAL_UNSUBSCRIBE, workflow.info().workflow_id)
        return self._received

    @workflow.signal(name=SIGNAL_REGISTRY_CHANGED)
    def registry_changed(self, notice: dict[str, Any]) -> None:
        self._received += 1
        self._subscription.offer(notice)

    @workflow.signal
    def finish(self) -> None:
        self._done = True

    @workflow.query
    def seen(self) -> dict[str, Any]:
        subscription = self._subscription
        evidence = subscription.evidence
        return {
            "received": self._received,
            "revision": subscription.revision,
            "sessionEpochs": subscription.notice.session_epochs if subscription.notice else {},
            "keyIds": sorted(evidence.bindings) if evidence else [],
        }
